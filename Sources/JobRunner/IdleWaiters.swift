import Foundation
import Synchronization

/// Idle workers waiting for work, woken by the backend's notice that a job was enqueued
/// (PostgreSQL's NOTIFY, the SQLite file signal) or by their poll's timeout. A notice that
/// comes while nobody waits is kept: the next wait returns at once, so one that lands
/// between a worker's empty claim and its wait is not slept through.
public final class IdleWaiters: Sendable {
    private let state = Mutex(State())

    private struct State {
        var pending = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        var timers: [UInt64: Task<Void, Never>] = [:]
    }

    public init() {}

    /// Returns at the next notice (or at once for one kept), after `timeout` seconds, or
    /// when the calling task is cancelled.
    public func wait(timeout: TimeInterval) async {
        let id: UInt64 = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = state.withLock { state in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiters[id] = continuation
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
                state.withLock { $0.timers[id] = timer }
            }
        } onCancel: {
            resume(id)
        }
        state.withLock { $0.timers.removeValue(forKey: id) }?.cancel()
    }

    /// A job was enqueued: every waiter returns, or the next wait does.
    public func wakeEveryone() {
        let woken: [CheckedContinuation<Void, Never>] = state.withLock { state in
            if state.waiters.isEmpty { state.pending = true }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        woken.forEach { $0.resume() }
    }

    /// Every waiter returns now, keeping no notice (a shutdown).
    public func releaseEveryone() {
        state.withLock { $0.waiters }.keys.forEach(resume)
    }

    private func resume(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }
}
