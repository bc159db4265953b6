import Foundation
import Logging
import JobRunner
import Lifecycle

/// Human-readable log lines on stderr: `2026-01-01T03:00:00Z info lifecycle.worker: job finished job=12`.
struct TextLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Values in a log line often come from outside (a refused import value, an error
    /// quoting a file): control characters are escaped, so one event is always one line
    /// and no value can forge another.
    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let fields = merged.sorted { $0.key < $1.key }
            .map { "\(TextRules.escapingControls($0.key))=\(TextRules.escapingControls("\($0.value)"))" }.joined(separator: " ")
        let message = TextRules.escapingControls("\(event.message)")
        let line = "\(ISO8601.format(Date())) \(event.level) \(label): \(message)\(fields.isEmpty ? "" : " " + fields)\n"
        Terminal.logLine(line)
    }
}

/// One JSON object per line on stderr, for log shippers (`--log-format json`).
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object: [String: JSONValue] = [:]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { _, new in new }) {
            object[key] = Self.json(value)
        }
        object["ts"] = .string(ISO8601.format(Date()))
        object["level"] = .string("\(event.level)")
        object["logger"] = .string(label)
        object["msg"] = .string("\(event.message)")
        if let line = try? JobJSON.encode(object) { Terminal.logLine(line + "\n") }
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
