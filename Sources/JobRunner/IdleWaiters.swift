import Foundation

/// Idle workers waiting for work, woken by the backend's notice that a job was enqueued
/// (PostgreSQL's NOTIFY, the SQLite file signal) or by their poll's timeout. A notice that
/// comes while nobody waits is kept: the next wait returns at once, so one that lands
/// between a worker's empty claim and its wait is not slept through.
public final class IdleWaiters: @unchecked Sendable {
    private let lock = NSLock()
    private var pending = false
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter: UInt64 = 0
    private var timers: [UInt64: Task<Void, Never>] = [:]

    public init() {}

    /// Returns at the next notice (or at once for one kept), after `timeout` seconds, or
    /// when the calling task is cancelled.
    public func wait(timeout: TimeInterval) async {
        let id: UInt64 = lock.withLock {
            nextWaiter += 1
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = lock.withLock {
                    if pending || Task.isCancelled {
                        pending = false
                        return true
                    }
                    waiters[id] = continuation
                    return false
                }
                if now {
                    continuation.resume()
                    return
                }
                // Started only once the waiter is registered, so the timeout cannot fire
                // into an empty slot and leave the wait to the next notice.
                let timer = Task { [weak self] in
                    try? await Task.sleep(nanoseconds: UInt64(max(0, timeout) * 1_000_000_000))
                    self?.resume(id)
                }
                lock.withLock { timers[id] = timer }
            }
        } onCancel: {
            resume(id)
        }
        lock.withLock { timers.removeValue(forKey: id) }?.cancel()
    }

    /// A job was enqueued: every waiter returns, or the next wait does.
    public func wakeEveryone() {
        let woken: [CheckedContinuation<Void, Never>] = lock.withLock {
            if waiters.isEmpty { pending = true }
            defer { waiters = [:] }
            return Array(waiters.values)
        }
        woken.forEach { $0.resume() }
    }

    /// Every waiter returns now, keeping no notice (a shutdown).
    public func releaseEveryone() {
        lock.withLock { waiters }.keys.forEach(resume)
    }

    private func resume(_ id: UInt64) {
        lock.withLock { waiters.removeValue(forKey: id) }?.resume()
    }
}
