import Foundation
import JobRunner

enum Terminal {
    static var stdoutIsTTY: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stderrIsTTY: Bool { isatty(STDERR_FILENO) == 1 }

    /// Unbuffered, so results on stdout and messages on stderr keep their order in cron mail and pipes.
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// Set by `--log-format json`: then stderr carries only JSON objects, one per line,
    /// so a log shipper never meets a plain-text line.
    nonisolated(unsafe) static var jsonStderr = false

    static func error(_ message: String) {
        if jsonStderr { return jsonLine(level: "error", message) }
        FileHandle.standardError.write(Data(("error: " + message + "\n").utf8))
    }

    static func note(_ message: String) {
        if jsonStderr { return jsonLine(level: "notice", message) }
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }

    private static func jsonLine(level: String, _ message: String) {
        let object = ["ts": ISO8601.format(Date()), "level": level, "logger": "lifecycle", "msg": message]
        if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
            FileHandle.standardError.write(data + Data("\n".utf8))
        }
    }

    static func printJSON<T: Encodable>(_ value: T) throws {
        line(try JobJSON.encode(value))
    }
}

/// Live progress on a terminal (one line rewritten in place: counts, rate, what is
/// running); plain log lines every few seconds when stdout is not a TTY (cron).
final class ProgressLine: @unchecked Sendable {
    private let lock = NSLock()
    private let live: Bool
    private let label: String
    private let started: Date
    private var lastDraw: Date
    private var count = 0
    private var current = ""
    private let logEvery: TimeInterval
    private let log: (String) -> Void

    init(label: String, logEvery: TimeInterval = 10, log: @escaping (String) -> Void) {
        self.label = label
        self.live = Terminal.stdoutIsTTY && Terminal.stderrIsTTY
        started = Date()
        // A log line is news only once work has run for a while: a run that ends sooner
        // says everything in its summary, not in a "0 done" line at the start.
        lastDraw = live ? .distantPast : started
        self.logEvery = logEvery
        self.log = log
    }

    func update(count newCount: Int? = nil, increment: Int = 0, doing: String? = nil) {
        lock.withLock {
            if let newCount { count = newCount }
            count += increment
            if let doing { current = doing }
            let now = Date()
            let interval = live ? 0.1 : logEvery
            guard now.timeIntervalSince(lastDraw) >= interval else { return }
            lastDraw = now
            let text = render(now)
            if live {
                FileHandle.standardError.write(Data(("\r\u{1B}[2K" + text).utf8))
            } else {
                log(text)
            }
        }
    }

    private func render(_ now: Date) -> String {
        let elapsed = max(now.timeIntervalSince(started), 0.001)
        let rate = Double(count) / elapsed
        let doing = current.isEmpty ? "" : " · \(current)"
        return "\(label): \(count) · \(String(format: "%.1f", rate))/s · \(String(format: "%.1f", elapsed)) s\(doing)"
    }

    func finish() {
        lock.withLock {
            if live { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
        }
    }
}
