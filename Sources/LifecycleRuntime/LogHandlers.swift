import Foundation
import JobRunner
import Lifecycle
import Logging
import Synchronization

/// How log lines look and where they go, set once per process (swift-log allows one
/// bootstrap): `write` gets each finished line, newline included.
public enum LifecycleLogging {
    public enum Format: String, CaseIterable, Sendable { case text, json }

    private static let done = Mutex(false)

    /// Whether `name` is a swift-log level (trace … critical).
    public static func isLevel(_ name: String) -> Bool { Logger.Level(rawValue: name) != nil }

    public static func bootstrapOnce(format: Format, level name: String, write: @escaping @Sendable (String) -> Void) {
        let level = Logger.Level(rawValue: name) ?? .info
        done.withLock { done in
            guard !done else { return }
            done = true
            LoggingSystem.bootstrap { label in
                switch format {
                case .text: TextLogHandler(label: label, logLevel: level, write: write)
                case .json: JSONLogHandler(label: label, logLevel: level, write: write)
                }
            }
        }
    }
}

/// Human-readable log lines on stderr: `2026-01-01T03:00:00Z info lifecycle.worker: job finished job=12`.
public struct TextLogHandler: LogHandler {
    let label: String
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    let write: @Sendable (String) -> Void

    public init(label: String, logLevel: Logger.Level, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.logLevel = logLevel
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Values in a log line often come from outside (a refused import value, an error
    /// quoting a file): control characters are escaped, so one event is always one line
    /// and no value can forge another.
    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let fields = merged.sorted { $0.key < $1.key }
            .map { "\(TextRules.escapingControls($0.key))=\(TextRules.escapingControls("\($0.value)"))" }.joined(separator: " ")
        let message = TextRules.escapingControls("\(event.message)")
        let line = "\(ISO8601.format(Date())) \(event.level) \(label): \(message)\(fields.isEmpty ? "" : " " + fields)\n"
        write(line)
    }
}

/// One JSON object per line on stderr, for log shippers (`--log-format json`).
public struct JSONLogHandler: LogHandler {
    let label: String
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    let write: @Sendable (String) -> Void

    public init(label: String, logLevel: Logger.Level, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.logLevel = logLevel
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object: [String: JSONValue] = [:]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { _, new in new }) {
            object[key] = Self.json(value)
        }
        object["ts"] = .string(ISO8601.format(Date()))
        object["level"] = .string("\(event.level)")
        object["logger"] = .string(label)
        object["msg"] = .string("\(event.message)")
        if let line = try? JobJSON.encode(object) { write(line + "\n") }
    }

    /// Numbers stay numbers and booleans booleans (`"job": 12`, not `"12"`), so a log
    /// query can compare them; nested metadata stays nested.
    static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text): return .string(text)
        case .stringConvertible(let convertible):
            switch convertible {
            case let flag as Bool: return .bool(flag)
            case let number as any BinaryInteger: return .number(Double(number))
            case let number as any BinaryFloatingPoint: return .number(Double(number))
            default: return .string(convertible.description)
            }
        case .array(let items): return .array(items.map(json))
        case .dictionary(let members): return .object(members.mapValues(json))
        }
    }
}
