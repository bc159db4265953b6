import CLinux
import Dispatch
import Foundation
import GRDB
import JobRunner
import Lifecycle
import Synchronization

/// Wakes an idle worker on this machine as soon as a job is enqueued, from any process,
/// as LISTEN/NOTIFY does on PostgreSQL: a commit that enqueued opens and closes
/// `<database>-wake` for writing (a few microseconds, no data), and a watching worker learns
/// of it from the kernel (inotify's IN_CLOSE_WRITE on the database's folder). Polling stays
/// as the fallback (jobs whose delay or backoff runs out, leases that expire, a folder that
/// cannot be watched), so a missed signal costs latency, never a job.
final class WorkSignal: Sendable {
    /// `<database>-wake`, beside SQLite's own `-wal` and `-shm`.
    let path: String
    private let directory: String
    private let name: String
    private let waiters = IdleWaiters()
    private let queue = DispatchQueue(label: "lifecycle.sqlite.work-signal")
    private let state = Mutex(State())

    private struct State {
        var source: (any DispatchSourceRead)?
        /// Connections whose open transaction will signal at its commit: once each, however
        /// many jobs it enqueues (a sweep enqueues hundreds in one).
        var armed = Set<ObjectIdentifier>()
    }

    init(databasePath: String) {
        path = databasePath + "-wake"
        let parent = PathText.parent(path)
        directory = parent.isEmpty ? "." : parent
        name = (path as NSString).lastPathComponent
    }

    deinit { state.withLock { $0.source?.cancel() } }

    /// After a commit that enqueued: every watching worker wakes. A file that cannot be
    /// opened (a read-only folder) leaves the workers to their poll.
    func signal() {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if descriptor >= 0 { close(descriptor) }
    }

    /// Signals when the connection's open transaction commits (nothing on a rollback).
    func arm(_ db: Database) {
        let connection = ObjectIdentifier(db)
        guard state.withLock({ $0.armed.insert(connection).inserted }) else { return }
        db.afterNextTransaction(
            onCommit: { [weak self] _ in
                guard let self else { return }
                _ = self.state.withLock { $0.armed.remove(connection) }
                self.signal()
            },
            onRollback: { [weak self] _ in
                guard let self else { return }
                _ = self.state.withLock { $0.armed.remove(connection) }
            })
    }

    /// Starts watching, once; false when the kernel refuses (no inotify, too many watches):
    /// waits then poll.
    @discardableResult
    func start() -> Bool {
        state.withLock { state in
            if state.source != nil { return true }
            let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            guard descriptor >= 0 else { return false }
            guard inotify_add_watch(descriptor, directory, UInt32(IN_CLOSE_WRITE)) >= 0 else {
                close(descriptor)
                return false
            }
            let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
            source.setEventHandler { [weak self] in self?.drain(descriptor) }
            source.setCancelHandler { close(descriptor) }
            source.resume()
            state.source = source
            return true
        }
    }

    /// Reads every queued event; wakes the waiters if one of them is the wake file's.
    private func drain(_ descriptor: Int32) {
        var woken = false
        let size = 4_096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        let header = MemoryLayout<inotify_event>.size
        while true {
            let count = read(descriptor, buffer, size)
            guard count > 0 else { break }
            var offset = 0
            while offset + header <= count {
                let event = buffer.load(fromByteOffset: offset, as: inotify_event.self)
                let length = Int(event.len)
                if length > 0, offset + header + length <= count {
                    let bytes = UnsafeRawBufferPointer(start: buffer + offset + header, count: length)
                    let text = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
                    if text == name { woken = true }
                }
                // An overflowed queue lost events, the wake file's perhaps among them.
                if event.mask & UInt32(IN_Q_OVERFLOW) != 0 { woken = true }
                offset += header + length
            }
        }
        if woken { waiters.wakeEveryone() }
    }

    /// Returns when a job was enqueued since the last wait returned, or after `timeout`
    /// seconds, or when the calling task is cancelled.
    func wait(timeout: TimeInterval) async {
        await waiters.wait(timeout: timeout)
    }
}
