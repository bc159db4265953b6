import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// A small pool of connections for one process. A connection that failed or was
/// closed by the server is dropped, and the next caller opens a fresh one, so a
/// server restart costs the transactions in flight and nothing after.
///
/// Connecting fails fast (a few seconds) with `PostgresStoreError.unavailable`
/// instead of waiting for the server: the CLI reports it, and a long-running
/// worker backs off and tries again.
///
/// Not postgres-nio's `PostgresClient`, measured both ways with the same release build and
/// cluster (six alternating rounds of 20,000 jobs, one worker, 2 cores): no-op drains were
/// even (medians 7,798 here, 7,700 through it), three-step drains 10 % faster here (4,195
/// against 3,800 jobs/s, five rounds of six). It also needs two things built around it:
/// its lease waits for as long as the server cannot be reached, retrying in the background
/// (a command against a closed port was still waiting after 40 s, where this pool exits 69
/// naming the server within `connect_timeout`), and it has no hook to pin each new
/// connection's search_path (`pinSearchPath`). Built (a deadline racing each lease, a pin
/// per new connection id), the three-step drain fell further, to 3,490.
final class ConnectionPool: Sendable {
    private let configuration: PostgresConnection.Configuration
    private let maxConnections: Int
    private let location: String
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        /// Callers waiting for a connection: handed one that was released, or a slot to open their own.
        var waiters: [CheckedContinuation<Next, Never>] = []
        var isShutDown = false
        var nextID = 0
    }

    init(configuration: PostgresConnection.Configuration, maxConnections: Int, location: String, logger: Logger) {
        self.configuration = configuration
        self.maxConnections = max(1, maxConnections)
        self.location = location
        self.logger = logger
    }

    private enum Next {
        case use(PostgresConnection)
        case connect(Int)
    }

    func acquire() async throws -> PostgresConnection {
        // Deciding to wait and joining the waiters happen under one lock: a connection
        // released in between would otherwise go idle while its waiter sleeps on.
        let next: Next = await withCheckedContinuation { continuation in
            let immediate: Next? = state.withLock { state in
                while let connection = state.idle.popLast() {
                    if !connection.isClosed { return .use(connection) }
                    state.open -= 1
                    Self.close(connection)
                }
                if state.open < maxConnections {
                    state.open += 1
                    state.nextID += 1
                    return .connect(state.nextID)
                }
                state.waiters.append(continuation)
                return nil
            }
            if let immediate { continuation.resume(returning: immediate) }
        }
        switch next {
        case .use(let connection): return connection
        case .connect(let id): return try await connect(id: id)
        }
    }

    /// Gives a connection back; `reusable` false (or a closed connection) drops it.
    func release(_ connection: PostgresConnection, reusable: Bool) {
        let keep = reusable && !connection.isClosed
        let handOver: (CheckedContinuation<Next, Never>, Next)? = state.withLock { state in
            if state.isShutDown {
                state.open -= 1
                return nil
            }
            if !state.waiters.isEmpty {
                // The waiter takes over this connection's slot, with this connection if it still works.
                let waiter = state.waiters.removeFirst()
                if keep { return (waiter, .use(connection)) }
                state.nextID += 1
                return (waiter, .connect(state.nextID))
            }
            if keep { state.idle.append(connection) } else { state.open -= 1 }
            return nil
        }
        if let (waiter, next) = handOver {
            waiter.resume(returning: next)
            if !keep { Self.close(connection) }
        } else if !keep || state.withLock({ $0.isShutDown }) {
            Self.close(connection)
        }
    }

    private func connect(id: Int) async throws -> PostgresConnection {
        do {
            let connection = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: id, logger: logger
            ).get()
            do {
                let pinned: EventLoopFuture<PostgresQueryResult> = connection.query(Self.pinSearchPath, logger: logger)
                _ = try await pinned.get()
            } catch {
                Self.close(connection)
                throw error
            }
            return connection
        } catch {
            // Give the slot back, to a waiter if there is one.
            let waiter: (CheckedContinuation<Next, Never>, Int)? = state.withLock { state in
                if !state.waiters.isEmpty {
                    state.nextID += 1
                    return (state.waiters.removeFirst(), state.nextID)
                }
                state.open -= 1
                return nil
            }
            if let (continuation, id) = waiter { continuation.resume(returning: .connect(id)) }
            throw PostgresStoreError.from(error, location: location, doing: "connecting")
        }
    }

    /// The app's tables are found in the connection's current schema (unqualified names,
    /// `current_schema()`), lifecycle's own always as `lifecycle.<name>`. The default
    /// search_path, `"$user", public`, would make the `lifecycle` schema the current one
    /// for a database user named lifecycle (the usual name) as soon as that schema exists,
    /// and the app's tables would be looked for, and created, there. So each connection
    /// keeps the schemas its search_path resolves to when it opens, less `lifecycle`:
    /// one opened before the schema was created does not switch to it afterwards.
    private static let pinSearchPath: PostgresQuery = """
        SELECT set_config('search_path', COALESCE(string_agg(quote_ident(s), ', ' ORDER BY n), ''), false)
        FROM unnest(current_schemas(false)) WITH ORDINALITY AS t(s, n) WHERE s <> 'lifecycle'
        """

    /// Closes the idle connections; connections in use close when they are released.
    func shutdown() {
        let connections: [PostgresConnection] = state.withLock { state in
            state.isShutDown = true
            defer { state.idle = [] }
            state.open -= state.idle.count
            return state.idle
        }
        connections.forEach(Self.close)
    }

    /// postgres-nio asserts that a connection is closed before it is deinitialised:
    /// the completion handler keeps it alive until the close has happened.
    private static func close(_ connection: PostgresConnection) {
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }
}
