import Foundation
import JobRunner
import Logging
import NIOPosix
import PostgresNIO
import Synchronization

/// Wakes an idle worker as soon as a job is enqueued, instead of at its next poll: every
/// enqueue sends `NOTIFY lifecycle_jobs` (delivered when its transaction commits), and one
/// connection per store LISTENs. Polling stays as the fallback (jobs whose backoff or
/// delay runs out, leases that expire, a listening connection that is down), so a lost
/// notification costs latency, never a job.
final class JobNotifications: Sendable {
    static let channel = "lifecycle_jobs"

    private let configuration: PostgresConnection.Configuration
    private let logger: Logger
    private let waiters = IdleWaiters()
    private let state = Mutex(State())

    private struct State {
        var listener: Task<Void, Never>?
        var lastFailure: Date?
        var connection: PostgresConnection?
        var isShutDown = false
    }

    init(configuration: PostgresConnection.Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Opens the listening connection if it is not open; returns once LISTEN is in place
    /// (or failed: then waits fall back to polling, and a later wait tries again).
    func start() async {
        await startListener()?.value
    }

    /// Starts the listener unless it runs, or failed less than `retryDelay` ago; returns a
    /// task that ends once LISTEN is in place or the attempt failed, or nil if none started.
    private func startListener() -> Task<Void, Never>? {
        state.withLock { state in
            guard !state.isShutDown, state.listener == nil else { return nil }
            if let lastFailure = state.lastFailure, Date().timeIntervalSince(lastFailure) < Self.retryDelay { return nil }
            let (stream, continuation) = AsyncStream<Void>.makeStream()
            state.listener = Task { [weak self] in
                await self?.listen(onReady: { continuation.yield(); continuation.finish() })
                continuation.finish()
                self?.listenerEnded()
            }
            return Task { for await _ in stream { break } }
        }
    }

    /// A listener that stopped (connection lost, server gone) is started again by a later
    /// wait, at most this often, so an unreachable server is not dialled on every poll.
    private static let retryDelay: TimeInterval = 5

    private func listenerEnded() {
        state.withLock { state in
            state.listener = nil
            state.lastFailure = state.isShutDown ? nil : Date()
        }
    }

    /// Returns when a job was enqueued since the last wait returned, or after `timeout`
    /// seconds, or when the calling task is cancelled. One waiter at a time per store is
    /// what a worker makes; with several, a notification that lands while one waits and
    /// another is between its empty claim and its wait reaches only the first, and the
    /// second finds the job at its next poll.
    func wait(timeout: TimeInterval) async {
        // A listener that is down is reconnected in the background: this wait polls meanwhile.
        _ = startListener()
        await waiters.wait(timeout: timeout)
    }

    func shutdown() {
        let (task, open): (Task<Void, Never>?, PostgresConnection?) = state.withLock { state in
            state.isShutDown = true
            return (state.listener, state.connection)
        }
        task?.cancel()
        // Ends the notification sequence the listener is reading.
        open.map { connection in connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
        waiters.releaseEveryone()
    }

    private func wakeEveryone() { waiters.wakeEveryone() }

    private func listen(onReady: @escaping @Sendable () -> Void) async {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: 0, logger: logger
            ).get()
        } catch {
            logger.debug("cannot open the connection that listens for new jobs; polling instead", metadata: ["error": "\(String(reflecting: error))"])
            onReady()
            return
        }
        let stillWanted = state.withLock { state in
            state.connection = connection
            return !state.isShutDown
        }
        defer {
            state.withLock { $0.connection = nil }
            connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
        }
        guard stillWanted else {
            onReady()
            return
        }
        do {
            try await connection.listen(on: Self.channel) { notifications in
                onReady()
                // Work enqueued before LISTEN took effect sent its notification to nobody.
                wakeEveryone()
                for try await _ in notifications {
                    wakeEveryone()
                }
            }
        } catch {
            if !Task.isCancelled {
                logger.debug("listening for new jobs stopped; polling until it is back", metadata: ["error": "\(String(reflecting: error))"])
            }
            onReady()
        }
    }
}
