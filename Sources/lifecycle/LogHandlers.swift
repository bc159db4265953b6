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
        FileHandle.standardError.write(Data(line.utf8))
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
        var object: [String: String] = [
            "ts": ISO8601.format(Date()), "level": "\(event.level)", "logger": label, "msg": "\(event.message)",
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { _, new in new }) {
            object[key] = "\(value)"
        }
        if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
            FileHandle.standardError.write(data + Data("\n".utf8))
        }
    }
}
