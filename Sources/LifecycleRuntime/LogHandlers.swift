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
            LoggingSystem.bootstrap { label in LineLogHandler(label: label, format: format, logLevel: level, write: write) }
        }
    }
}

/// One log event per line, in either format: text for people,
/// `2026-01-01T03:00:00Z info lifecycle.worker: job finished job=12`, or one JSON object
/// for log shippers (`--log-format json`).
public struct LineLogHandler: LogHandler {
    let label: String
    let format: LifecycleLogging.Format
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    let write: @Sendable (String) -> Void

    public init(label: String, format: LifecycleLogging.Format, logLevel: Logger.Level, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.format = format
        self.logLevel = logLevel
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        switch format {
        case .text: write(textLine(event, merged))
        case .json: if let line = jsonLine(event, merged) { write(line) }
        }
    }

    /// Values in a log line often come from outside (a refused import value, an error
    /// quoting a file): control characters are escaped, so one event is always one line
    /// and no value can forge another.
    private func textLine(_ event: LogEvent, _ merged: Logger.Metadata) -> String {
        let fields = merged.sorted { $0.key < $1.key }
            .map { "\(TextRules.escapingControls($0.key))=\(TextRules.escapingControls("\($0.value)"))" }.joined(separator: " ")
        let message = TextRules.escapingControls("\(event.message)")
        return "\(ISO8601.format(Date())) \(event.level) \(label): \(message)\(fields.isEmpty ? "" : " " + fields)\n"
    }

    private func jsonLine(_ event: LogEvent, _ merged: Logger.Metadata) -> String? {
        var object = merged.mapValues(Self.json)
        object["ts"] = .string(ISO8601.format(Date()))
        object["level"] = .string("\(event.level)")
        object["logger"] = .string(label)
        object["msg"] = .string("\(event.message)")
        return (try? JobJSON.encode(object)).map { $0 + "\n" }
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
