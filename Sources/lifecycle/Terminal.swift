import Foundation
import LifecycleRuntime
import Synchronization

/// Everything the CLI writes goes through here: results on stdout, messages and log lines
/// on stderr, and on a terminal one live status line at the bottom of stderr that other
/// lines are written above, never into. `--quiet` holds all of it back and lets it out
/// only when the command fails, so cron mails nothing on success.
enum Terminal {
    static var stdoutIsTTY: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stderrIsTTY: Bool { isatty(STDERR_FILENO) == 1 }

    /// Set by `--log-format json`: then stderr carries only JSON objects, one per line,
    /// so a log shipper never meets a plain-text line.
    nonisolated(unsafe) static var jsonStderr = false

    /// Results, one line each. Unbuffered, so results on stdout and messages on stderr keep
    /// their order in cron mail and pipes.
    static func line(_ text: String) {
        output.write(text + "\n", to: .standardOutput)
    }

    static func error(_ message: String) {
        if jsonStderr { return jsonLine(level: "error", message, urgent: true) }
        output.write("error: " + message + "\n", to: .standardError, urgent: true)
    }

    static func note(_ message: String) {
        if jsonStderr { return jsonLine(level: "notice", message) }
        output.write(message + "\n", to: .standardError)
    }

    /// A log handler's line (ends with a newline).
    static func logLine(_ text: String) {
        output.write(text, to: .standardError)
    }

    private static func jsonLine(level: String, _ message: String, urgent: Bool = false) {
        let object = ["ts": ISO8601.format(Date()), "level": level, "logger": "lifecycle", "msg": message]
        if let line = try? JobJSON.encode(object) { output.write(line + "\n", to: .standardError, urgent: urgent) }
    }

    static func printJSON<T: Encodable>(_ value: T) throws {
        line(try JobJSON.encode(value))
    }

    /// `--quiet`: from now on, hold output back until `release(failed:)`.
    static func beQuiet() { output.holdBack() }

    /// At exit: a failed command lets what it held back out, in order; a successful one drops it.
    static func release(failed: Bool) { output.release(failed: failed) }

    /// The live status line (a terminal only): drawn below everything else, and cleared
    /// before any other line is written, then drawn again under it.
    static func setStatus(_ text: String?) { output.setStatus(text) }

    static let output = Output()
}

/// The one writer of the process' stdout and stderr.
final class Output: Sendable {
    enum Stream { case standardOutput, standardError }

    private let state = Mutex(State())
    /// What `--quiet` keeps at least: the last lines, which say how a failed run ended.
    /// Older ones go a batch at a time, so a long run does not shift the buffer per line.
    private let heldLimit = 2_000

    private struct State {
        var status: String?
        var holding = false
        var held: [(Stream, String)] = []
        var dropped = 0
        /// Streams whose reader has gone (`| head`), or that failed otherwise: nothing more is
        /// written to them, and the command goes on to end with its own status.
        var gone: [Stream] = []

        /// Clears the status line, writes, draws it again.
        mutating func emit(_ text: String, to stream: Stream) {
            if status != nil { raw("\r\u{1B}[2K", to: .standardError) }
            raw(text, to: stream)
            if let status { raw(status, to: .standardError) }
        }

        /// write(2), not FileHandle, whose `write(_: Data)` traps (`try!`) on EPIPE: a reader
        /// that stops early must not crash a purge half-way through its report.
        mutating func raw(_ text: String, to stream: Stream) {
            guard !gone.contains(stream) else { return }
            let descriptor = stream == .standardOutput ? STDOUT_FILENO : STDERR_FILENO
            var text = text
            let complete = text.withUTF8 { bytes -> Bool in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written >= 0 {
                        offset += written
                    } else if errno == EINTR {
                        continue
                    } else if errno == EAGAIN {
                        // A descriptor someone else made non-blocking (a shared terminal): wait until it takes more.
                        var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                        _ = poll(&ready, 1, -1)
                    } else {
                        return false
                    }
                }
                return true
            }
            if !complete { gone.append(stream) }
        }
    }

    func write(_ text: String, to stream: Stream, urgent: Bool = false) {
        state.withLock { state in
            if state.holding && !urgent {
                state.held.append((stream, text))
                if state.held.count >= 2 * heldLimit {
                    state.held.removeFirst(heldLimit)
                    state.dropped += heldLimit
                }
                return
            }
            state.emit(text, to: stream)
        }
    }

    func holdBack() { state.withLock { $0.holding = true } }

    func release(failed: Bool) {
        state.withLock { state in
            state.holding = false
            if failed {
                if state.dropped > 0 { state.emit("(\(state.dropped) earlier line(s) of output not kept)\n", to: .standardError) }
                for (stream, text) in state.held { state.emit(text, to: stream) }
            }
            state.held = []
            state.dropped = 0
        }
    }

    func setStatus(_ text: String?) {
        state.withLock { state in
            guard !state.holding else { return }
            if state.status != nil { state.raw("\r\u{1B}[2K", to: .standardError) }
            state.status = text
            if let text { state.raw(text, to: .standardError) }
        }
    }
}

/// Live progress on a terminal (the status line: count, total, rate, time left, what is
/// running); plain log lines every few seconds when stdout is not a TTY (cron).
final class ProgressLine: Sendable {
    private let live: Bool
    private let label: String
    private let started: Date
    private let state: Mutex<State>
    private let logEvery: TimeInterval
    private let log: @Sendable (String) -> Void

    private struct State {
        var lastDraw: Date
        var count = 0
        var total: Int?
        var current = ""
    }

    init(label: String, total: Int? = nil, logEvery: TimeInterval = 10, log: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.live = Terminal.stdoutIsTTY && Terminal.stderrIsTTY
        started = Date()
        // A log line is news only once work has run for a while: a run that ends sooner
        // says everything in its summary, not in a "0 done" line at the start.
        state = Mutex(State(lastDraw: live ? .distantPast : started, total: total))
        self.logEvery = logEvery
        self.log = log
    }

    /// The total, once it is known (after a sweep, say).
    func setTotal(_ total: Int?) { state.withLock { $0.total = total } }

    func update(count newCount: Int? = nil, increment: Int = 0, doing: String? = nil) {
        let text: String? = state.withLock { state in
            if let newCount { state.count = newCount }
            state.count += increment
            if let doing { state.current = doing }
            let now = Date()
            guard now.timeIntervalSince(state.lastDraw) >= (live ? 0.1 : logEvery) else { return nil }
            state.lastDraw = now
            return render(state, now)
        }
        guard let text else { return }
        if live { Terminal.setStatus(text) } else { log(text) }
    }

    private func render(_ state: State, _ now: Date) -> String {
        let (count, total, current) = (state.count, state.total, state.current)
        let elapsed = max(now.timeIntervalSince(started), 0.001)
        let rate = Double(count) / elapsed
        var text = "\(label): \(count)"
        if let total, total > 0 {
            let shown = max(total, count)
            text += "/\(shown) (\(Int(Double(count) * 100 / Double(shown)))%)"
        }
        text += " · \(String(format: "%.1f", rate))/s · \(Self.duration(elapsed))"
        if let total, total > count, rate > 0 {
            text += " · about \(Self.duration(Double(total - count) / rate)) left"
        }
        if !current.isEmpty { text += " · \(current)" }
        return text
    }

    static func duration(_ seconds: Double) -> String {
        if seconds < 60 { return String(format: "%.0f s", seconds.rounded(.up)) }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return "\(whole / 60) min \(whole % 60) s" }
        return "\(whole / 3600) h \(whole % 3600 / 60) min"
    }

    func finish() {
        if live { Terminal.setStatus(nil) }
    }
}
