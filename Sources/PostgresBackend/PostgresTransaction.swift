import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// One open transaction on one connection. Only valid inside the closure it was
/// handed to, which runs on a thread of its own (never an event loop, never the
/// cooperative pool): the synchronous calls below block that thread while the
/// connection's event loop does the I/O.
public struct PostgresTransaction {
    let connection: PostgresConnection
    let location: String
    let logger: Logger
    /// Read transactions take no row locks.
    public let isReadOnly: Bool
    /// Writes sent with `executeDeferred` whose outcome is not yet known.
    private let deferred = DeferredWrites()

    /// Runs one statement and returns its rows. Values go in as bind parameters
    /// through `PostgresQuery`'s interpolation, never into the SQL text.
    @discardableResult
    public func query(_ query: PostgresQuery, file: String = #fileID, line: Int = #line) throws -> [PostgresRow] {
        try result(query, file: file, line: line).rows
    }

    /// Runs one statement and returns how many rows it changed.
    @discardableResult
    public func execute(_ query: PostgresQuery, file: String = #fileID, line: Int = #line) throws -> Int {
        try result(query, file: file, line: line).metadata.rows ?? 0
    }

    /// Sends a write whose result nothing here needs, without waiting for it: the connection
    /// runs it in order with this transaction's other statements, and this thread goes on
    /// (one thread wake-up fewer per statement). Its failure fails the transaction: the next
    /// statement that waits, or the commit, throws its error.
    public func executeDeferred(_ query: PostgresQuery, file: String = #fileID, line: Int = #line) {
        deferred.add(connection.query(query, logger: logger, file: file, line: line), at: "\(file):\(line)")
    }

    /// Waits for the deferred writes; throws the first one's error.
    func settleDeferred() throws {
        for (future, place) in deferred.takeAll() {
            do {
                _ = try future.wait()
            } catch {
                throw PostgresStoreError.from(error, location: location, doing: "query at \(place)")
            }
        }
    }

    /// Waits for the deferred writes and forgets their outcome: the savepoint they were
    /// sent in is being rolled back.
    func discardDeferred() {
        for (future, _) in deferred.takeAll() { _ = try? future.wait() }
    }

    private func result(_ query: PostgresQuery, file: String, line: Int) throws -> PostgresQueryResult {
        do {
            let future: EventLoopFuture<PostgresQueryResult> = connection.query(query, logger: logger, file: file, line: line)
            return try future.wait()
        } catch {
            // A deferred write that failed aborted the transaction: its error says why, where
            // this statement's would only say that the transaction is aborted.
            try settleDeferred()
            throw PostgresStoreError.from(error, location: location, doing: "query at \(file):\(line)")
        }
    }

    /// Threads that run transaction bodies. A body holds its thread for the whole
    /// transaction, including waits for row locks, so there are more threads than
    /// one process uses connections; a body never waits for a thread while
    /// holding a lock, so a busy pool only queues work.
    static let threads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 24)
        pool.start()
        return pool
    }()

    /// BEGIN, the body, COMMIT; ROLLBACK when the body throws. Returns whether the
    /// connection is still fit for another transaction.
    static func run<T>(
        on connection: PostgresConnection, location: String, logger: Logger, readOnly: Bool,
        _ body: (PostgresTransaction) throws -> T
    ) -> (Result<T, any Error>, reusable: Bool) {
        let tx = PostgresTransaction(connection: connection, location: location, logger: logger, isReadOnly: readOnly)
        // Sent ahead of the body's first statement rather than waited for: one round trip
        // and one thread wake-up fewer per transaction. BEGIN fails only with its connection,
        // and then so does that statement (or the commit), with BEGIN's error.
        // A read sees one snapshot throughout, as a SQLite read transaction does.
        tx.executeDeferred(readOnly ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN")
        let outcome: Result<T, any Error>
        do {
            let value = try body(tx)
            try tx.settleDeferred()
            outcome = .success(value)
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .success:
            do {
                try tx.execute("COMMIT")
                return (outcome, true)
            } catch {
                return (.failure(error), !connection.isClosed)
            }
        case .failure:
            do {
                try tx.execute("ROLLBACK")
                return (outcome, true)
            } catch {
                // A connection whose transaction state is unknown must not be reused.
                return (outcome, false)
            }
        }
    }
}

/// The deferred writes of one transaction, in the order they were sent.
final class DeferredWrites: @unchecked Sendable {
    private let lock = NSLock()
    private var writes: [(EventLoopFuture<PostgresQueryResult>, String)] = []

    func add(_ write: EventLoopFuture<PostgresQueryResult>, at place: String) {
        lock.withLock { writes.append((write, place)) }
    }

    func takeAll() -> [(EventLoopFuture<PostgresQueryResult>, String)] {
        lock.withLock {
            defer { writes = [] }
            return writes
        }
    }
}
