import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

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
    /// Whether `query(prepared:)` may send named prepared statements.
    let preparedStatements: PreparedStatementUse?
    /// Writes sent with `executeDeferred` whose outcome is not yet known.
    private let deferred = DeferredWrites()

    /// Runs one statement and returns its rows. Values go in as bind parameters
    /// through `PostgresQuery`'s interpolation, never into the SQL text.
    @discardableResult
    public func query(_ query: PostgresQuery, file: String = #fileID, line: Int = #line) throws -> [PostgresRow] {
        try result(query, file: file, line: line).rows
    }

    /// Runs one statement that runs often (a claim's, the done-marks') as a named prepared
    /// statement: parsed and planned once per connection, then only bound and run. Where the
    /// store does not send them (the URL turned them off, or a pooler refused one), it goes
    /// as the same text and binds unnamed.
    ///
    /// postgres-nio runs prepared statements only from async code, so the statement goes
    /// through a task while this thread waits for its answer, as for any other statement:
    /// a hop to the cooperative pool and back, a few microseconds against the tenths of a
    /// millisecond the server spends planning the statement anew.
    @discardableResult
    func query<Statement: PostgresPreparedStatement>(
        prepared statement: Statement, file: String = #fileID, line: Int = #line
    ) throws -> [PostgresRow] where Statement.Row == PostgresRow {
        guard let preparedStatements, preparedStatements.usable else {
            return try query(PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings()), file: file, line: line)
        }
        sendRows()
        let connection = self.connection
        let logger = self.logger
        let answer = connection.eventLoop.makePromise(of: [PostgresRow].self)
        answer.completeWithTask {
            var rows: [PostgresRow] = []
            for try await row in try await connection.execute(statement, logger: logger, file: file, line: line) {
                rows.append(row)
            }
            return rows
        }
        let preparedBefore = preparedStatements.isPrepared(Statement.name, on: connection.id)
        do {
            let rows = try answerOrClosed(answer.futureResult)
            if !preparedBefore { preparedStatements.notePrepared(Statement.name, on: connection.id) }
            return rows
        } catch {
            let failure = PostgresStoreError.from(error, location: location, doing: "query at \(file):\(line)")
            if PostgresStore.preparedStatementRefused(failure) {
                // Nothing of this transaction stays: it is rolled back and runs again with
                // plain statements. The connection is kept, as nothing prepares on it again.
                preparedStatements.refuse(failure, logger: logger)
                deferred.runAgainPlain()
            } else if !preparedBefore {
                // postgres-nio keeps a failed preparation as the statement's state on the
                // connection and answers every later run there with the same error. A run of
                // a statement prepared before (a deadlock, a timeout) leaves nothing behind.
                deferred.dropConnection()
            }
            try settleDeferred()
            throw failure
        }
    }

    /// Adds one row to `table` without a statement of its own: rows added one after another
    /// to the same table and columns (the steps of many jobs sharing a group commit) go
    /// as one multi-row INSERT, sent before the transaction's next statement or its commit.
    /// postgres-nio sends a connection's statements one at a time, each waiting for the
    /// last one's answer, so a row per statement costs a round trip to the server each;
    /// this costs one for them all. `values` appends exactly one bind per column, in order.
    /// Its failure fails the transaction, as an `executeDeferred` write's does. `table` and
    /// `columns` are names from code, never from input: they go into the SQL text.
    public func insertDeferred(
        into table: String, columns: [String], file: String = #fileID, line: Int = #line,
        values: @escaping @Sendable (inout PostgresBindings) -> Void
    ) {
        precondition(!columns.isEmpty, "insertDeferred into \(table) at \(file):\(line) names no column")
        deferred.addRow(RowInsert(table: table, columns: columns, values: values, place: "\(file):\(line)"))
    }

    /// Runs one statement and returns how many rows it changed.
    @discardableResult
    public func execute(_ query: PostgresQuery, file: String = #fileID, line: Int = #line) throws -> Int {
        try result(query, file: file, line: line).metadata.rows ?? 0
    }

    /// Runs one statement, giving up on its answer after `limit`. Rows `insertDeferred`
    /// holds are not sent first: this ends a transaction that failed (its ROLLBACK).
    func execute(_ query: PostgresQuery, within limit: TimeAmount, file: String = #fileID, line: Int = #line) throws {
        let location = self.location
        let eventLoop = connection.eventLoop
        let answer = eventLoop.makePromise(of: PostgresQueryResult.self)
        let timeout = eventLoop.scheduleTask(in: limit) {
            answer.fail(PostgresStoreError.unavailable(
                "\(location): the server did not answer within \(limit.nanoseconds / 1_000_000_000) s (query at \(file):\(line))"))
        }
        connection.query(query, logger: logger, file: file, line: line).cascade(to: answer)
        defer { timeout.cancel() }
        do {
            _ = try answerOrClosed(answer.futureResult)
        } catch {
            throw PostgresStoreError.from(error, location: location, doing: "query at \(file):\(line)")
        }
    }

    /// Sends a write whose result nothing here needs, without waiting for it: the connection
    /// runs it in order with this transaction's other statements, and this thread goes on
    /// (one thread wake-up fewer per statement). Its failure fails the transaction: the next
    /// statement that waits, or the commit, throws its error.
    public func executeDeferred(_ query: PostgresQuery, file: String = #fileID, line: Int = #line) {
        sendRows()
        deferred.add(connection.query(query, logger: logger, file: file, line: line), at: "\(file):\(line)")
    }

    /// Sends the rows `insertDeferred` holds, one statement per run of rows for the same
    /// table and columns, ahead of whatever this transaction sends next.
    private func sendRows() {
        for run in deferred.takeRows() {
            // PostgreSQL takes at most 65,535 binds a statement.
            let perStatement = 65_535 / run[0].columns.count
            for start in stride(from: 0, to: run.count, by: perStatement) {
                let rows = run[start..<min(start + perStatement, run.count)]
                let query = RowInsert.statement(rows)
                deferred.add(connection.query(query, logger: logger), at: rows.first!.place)
            }
        }
    }

    /// Waits for the deferred writes; throws the first one's error.
    func settleDeferred() throws {
        sendRows()
        for (future, place) in deferred.takeAll() {
            do {
                _ = try answerOrClosed(future)
            } catch {
                throw PostgresStoreError.from(error, location: location, doing: "query at \(place)")
            }
        }
    }

    /// Waits for the deferred writes and forgets their outcome: the savepoint they were
    /// sent in is being rolled back.
    func discardDeferred() {
        _ = deferred.takeRows()
        for (future, _) in deferred.takeAll() { _ = try? answerOrClosed(future) }
    }

    private func result(_ query: PostgresQuery, file: String, line: Int) throws -> PostgresQueryResult {
        sendRows()
        do {
            return try answerOrClosed(connection.query(query, logger: logger, file: file, line: line))
        } catch {
            // A deferred write that failed aborted the transaction: its error says why, where
            // this statement's would only say that the transaction is aborted.
            try settleDeferred()
            throw PostgresStoreError.from(error, location: location, doing: "query at \(file):\(line)")
        }
    }

    /// Waits for a statement's answer, or until its connection is closed. A statement queued
    /// behind another one (a deferred BEGIN) on a connection the server cuts at that moment
    /// is sometimes never failed by the driver: its wait would last for ever, and a worker
    /// would hang after a failover instead of reconnecting.
    private func answerOrClosed<T: Sendable>(_ future: EventLoopFuture<T>) throws -> T {
        let answered = DispatchSemaphore(value: 0)
        let answer = Answer<T>()
        future.whenComplete { result in
            answer.result = result
            answered.signal()
        }
        while answered.wait(timeout: .now() + .seconds(1)) == .timedOut {
            // Closed and still unanswered after a further second: no answer can come now.
            if connection.isClosed, answered.wait(timeout: .now() + .seconds(1)) == .timedOut {
                throw PostgresStoreError.unavailable("\(location): the server closed the connection before answering")
            }
        }
        guard let result = answer.result else { preconditionFailure("answered without a result") }
        return try result.get()
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
    /// connection is still fit for another transaction, and whether the transaction failed
    /// only because the server refused a prepared statement, so that it can run again.
    static func run<T>(
        on connection: PostgresConnection, location: String, logger: Logger, readOnly: Bool,
        preparedStatements: PreparedStatementUse?, _ body: (PostgresTransaction) throws -> T
    ) -> (Result<T, any Error>, reusable: Bool, runAgainPlain: Bool) {
        let tx = PostgresTransaction(
            connection: connection, location: location, logger: logger, isReadOnly: readOnly, preparedStatements: preparedStatements)
        let (outcome, reusable) = tx.run(body)
        let failed = if case .failure = outcome { true } else { false }
        return (outcome, reusable && !tx.deferred.dropsConnection, failed && tx.deferred.runsAgainPlain)
    }

    private func run<T>(_ body: (PostgresTransaction) throws -> T) -> (Result<T, any Error>, reusable: Bool) {
        let tx = self
        // Sent ahead of the body's first statement rather than waited for: one round trip
        // and one thread wake-up fewer per transaction. BEGIN fails only with its connection,
        // and then so does that statement (or the commit), with BEGIN's error.
        // A read sees one snapshot throughout, as a SQLite read transaction does.
        tx.executeDeferred(isReadOnly ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN")
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
            // A connection the server has closed has nothing to roll back. Nor does a
            // connection that does not answer a ROLLBACK within a while (seen after the
            // server cut it mid-transaction: the statement was queued and never failed):
            // closing it ends the transaction on the server as surely.
            guard !connection.isClosed else { return (outcome, false) }
            do {
                try tx.execute("ROLLBACK", within: .seconds(30))
                return (outcome, true)
            } catch {
                // A connection whose transaction state is unknown must not be reused.
                connection.close().whenComplete { _ in }
                return (outcome, false)
            }
        }
    }
}

/// A row `insertDeferred` holds until its statement is sent.
struct RowInsert: Sendable {
    let table: String
    let columns: [String]
    let values: @Sendable (inout PostgresBindings) -> Void
    let place: String

    /// Whether `other` can go in the same INSERT as this row.
    func sharesStatement(with other: RowInsert) -> Bool { table == other.table && columns == other.columns }

    /// One INSERT of `rows`, all for the same table and columns.
    static func statement(_ rows: ArraySlice<RowInsert>) -> PostgresQuery {
        let first = rows.first!
        let width = first.columns.count
        var bindings = PostgresBindings(capacity: rows.count * width)
        var tuples: [String] = []
        tuples.reserveCapacity(rows.count)
        for (index, row) in rows.enumerated() {
            row.values(&bindings)
            precondition(bindings.count == (index + 1) * width, "insertDeferred into \(first.table) at \(row.place): \(width) columns, not as many values")
            tuples.append("(" + (1...width).map { "$\(index * width + $0)" }.joined(separator: ", ") + ")")
        }
        let sql = "INSERT INTO \(first.table) (\(first.columns.joined(separator: ", "))) VALUES " + tuples.joined(separator: ", ")
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }
}

/// The deferred writes of one transaction, in the order they were sent, and the rows
/// waiting to be sent.
final class DeferredWrites: Sendable {
    private let state = Mutex(State())

    private struct State {
        var writes: [(EventLoopFuture<PostgresQueryResult>, String)] = []
        var rows: [[RowInsert]] = []
        var mustDrop = false
        var refusedPrepared = false
    }

    func addRow(_ row: RowInsert) {
        state.withLock { state in
            if let last = state.rows.last?.last, last.sharesStatement(with: row) {
                state.rows[state.rows.count - 1].append(row)
            } else {
                state.rows.append([row])
            }
        }
    }

    /// The waiting rows in runs that share a statement, in the order they were added.
    func takeRows() -> [[RowInsert]] {
        state.withLock { state in
            defer { state.rows = [] }
            return state.rows
        }
    }

    /// The connection is not to be used again after this transaction.
    func dropConnection() { state.withLock { $0.mustDrop = true } }
    var dropsConnection: Bool { state.withLock { $0.mustDrop } }
    /// The server refused a prepared statement: the transaction may run again, plain.
    func runAgainPlain() { state.withLock { $0.refusedPrepared = true } }
    var runsAgainPlain: Bool { state.withLock { $0.refusedPrepared } }

    func add(_ write: EventLoopFuture<PostgresQueryResult>, at place: String) {
        state.withLock { $0.writes.append((write, place)) }
    }

    func takeAll() -> [(EventLoopFuture<PostgresQueryResult>, String)] {
        state.withLock { state in
            defer { state.writes = [] }
            return state.writes
        }
    }
}

/// A statement's result, written before the semaphore is signalled and read after the wait.
// Unchecked: the semaphore orders the write and the read, and the compiler cannot see it.
private final class Answer<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
