import Foundation
import JobRunner
import Lifecycle
import Logging
import NIOCore
import PostgresNIO

/// The backend for many workers on many machines: the job queue and the account
/// data in one PostgreSQL database. Claims use `FOR UPDATE SKIP LOCKED`, unique
/// keys a partial unique index, and every state change a conditional UPDATE, so
/// workers need nothing from each other but the server.
public final class PostgresStore: Sendable {
    public typealias Transaction = PostgresTransaction

    public let server: PostgresLocation
    let pool: ConnectionPool
    let notifications: JobNotifications
    let preparedStatements: PreparedStatementUse
    let logger: Logger

    public var location: String { server.description }

    /// Whether statements that run often still go as named prepared statements: false when
    /// the URL turned them off, or once the server (a pooler in front of it) refused one.
    public var usesPreparedStatements: Bool { preparedStatements.usable }

    /// Connects (failing within seconds when the server is unreachable) and brings
    /// the schema up to date, unless `migrating` is false (a read-only look, such as
    /// checking a data map against an app's database, creates nothing).
    public init(
        _ server: PostgresLocation, logger: Logger = Logger(label: "lifecycle.postgres"), migrating: Bool = true, referenceSchema: Bool = true
    ) async throws {
        self.server = server
        self.logger = logger
        let configuration = try server.connectionConfiguration()
        pool = ConnectionPool(
            configuration: configuration, maxConnections: server.maxConnections,
            location: server.description, logger: logger)
        notifications = JobNotifications(configuration: configuration, logger: logger)
        preparedStatements = PreparedStatementUse(enabled: server.preparedStatements)
        if migrating {
            _ = try await write { tx in try Migrations.migrate(tx, referenceSchema: referenceSchema) }
            if referenceSchema { try await Migrations.ConcurrentIndexes.build(on: self) }
        } else {
            // Reach the server now, so an unreachable one fails here and not half-way.
            _ = try await read { tx in try tx.query("SELECT 1") }
        }
    }

    public convenience init(url: String, logger: Logger = Logger(label: "lifecycle.postgres"), referenceSchema: Bool = true) async throws {
        try await self.init(PostgresLocation(url: url), logger: logger, referenceSchema: referenceSchema)
    }

    deinit {
        notifications.shutdown()
        pool.shutdown()
    }

    /// Closes the idle connections now instead of whenever the last reference goes;
    /// connections still in use close as they are given back.
    public func close() {
        notifications.shutdown()
        pool.shutdown()
    }

    /// Returns the names of the applied migrations.
    @discardableResult
    /// `initialising`: `lifecycle init`, which also takes back what other roles were granted
    /// on lifecycle's schema (OwnSchemaPrivileges).
    public func migrate(referenceSchema: Bool = true, initialising: Bool = false) async throws -> [String] {
        let applied = try await write { tx in try Migrations.migrate(tx, referenceSchema: referenceSchema, initialising: initialising) }
        if referenceSchema { try await Migrations.ConcurrentIndexes.build(on: self) }
        return applied
    }

    public var appliedMigrations: [String] {
        get async throws {
            try await read { tx in try Migrations.applied(tx) }
        }
    }

    /// Runs `body` in one transaction. `body` may run a second time, after a first run that
    /// left nothing behind: the server refused a prepared statement (see `transaction`).
    public func write<T: Sendable>(_ body: @escaping @Sendable (PostgresTransaction) throws -> T) async throws -> T {
        try await transaction(readOnly: false, body)
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (PostgresTransaction) throws -> T) async throws -> T {
        try await transaction(readOnly: true, body)
    }

    /// A transaction whose prepared statement the server refused (a pooler in transaction
    /// mode) left nothing behind: it runs once more, with plain statements from then on,
    /// so a claim or a batch of done-marks that meets the refusal still happens.
    private func transaction<T: Sendable>(readOnly: Bool, _ body: @escaping @Sendable (PostgresTransaction) throws -> T) async throws -> T {
        let (result, runAgainPlain) = try await attempt(readOnly: readOnly, body)
        guard runAgainPlain else { return try result.get() }
        return try await attempt(readOnly: readOnly, body).result.get()
    }

    private func attempt<T: Sendable>(
        readOnly: Bool, _ body: @escaping @Sendable (PostgresTransaction) throws -> T
    ) async throws -> (result: Result<T, any Error>, runAgainPlain: Bool) {
        let connection = try await pool.acquire()
        let location = self.location
        let logger = self.logger
        let preparedStatements = self.preparedStatements
        let result: Result<T, any Error>
        let reusable: Bool
        let runAgainPlain: Bool
        do {
            (result, reusable, runAgainPlain) = try await PostgresTransaction.threads.runIfActive {
                PostgresTransaction.run(
                    on: connection, location: location, logger: logger, readOnly: readOnly,
                    preparedStatements: preparedStatements, body)
            }
        } catch {
            pool.release(connection, reusable: false)
            throw error
        }
        pool.release(connection, reusable: reusable)
        return (result, runAgainPlain)
    }

    /// One statement on a pooled connection outside any explicit transaction, so it commits
    /// by itself: one round trip, and no thread of the transaction pool.
    func autocommit(_ query: PostgresQuery, file: String = #fileID, line: Int = #line) async throws -> [PostgresRow] {
        // A failed statement outside a transaction leaves the connection as it was.
        try await onPooledConnection(file: file, line: line, keepsConnection: { _ in true }) { connection in
            let future: EventLoopFuture<PostgresQueryResult> = connection.query(query, logger: logger, file: file, line: line)
            return try await future.get().rows
        }
    }

    /// Runs `body` on a pooled connection and gives the connection back; after a failure
    /// only if `keepsConnection` says so for that error (and it is still open). Errors come
    /// out as `PostgresStoreError`.
    func onPooledConnection<T>(
        file: String, line: Int, keepsConnection: (PostgresStoreError) -> Bool, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await pool.acquire()
        do {
            let value = try await body(connection)
            pool.release(connection, reusable: true)
            return value
        } catch {
            let failure = PostgresStoreError.from(error, location: location, doing: "query at \(file):\(line)")
            pool.release(connection, reusable: keepsConnection(failure) && !connection.isClosed)
            throw failure
        }
    }
}

extension PostgresStore: LifecycleStore {}

extension PostgresStore {
    /// Whether this database holds a lifecycle installation; changes nothing.
    public var installationState: InstallationState {
        get async throws { try await read { tx in try Migrations.isInstalled(tx) } ? .initialised : .uninitialised }
    }
}
