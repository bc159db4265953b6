import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Whether this store sends named prepared statements. A prepared statement is parsed and
/// planned once per connection, then only bound and run: for the single enqueue that is
/// about a sixth of its time on the server. On by default; off when the URL says
/// `prepared_statements=false`, or for good once the server has refused one (a pooler in
/// transaction mode), so an app behind such a pooler works without knowing to say so.
final class PreparedStatementUse: Sendable {
    private let enabled: Atomic<Bool>

    init(enabled: Bool) {
        self.enabled = Atomic(enabled)
    }

    var usable: Bool { enabled.load(ordering: .relaxed) }

    func refuse(_ error: PostgresStoreError, logger: Logger) {
        guard enabled.exchange(false, ordering: .relaxed) else { return }
        logger.notice(
            "the server refused a prepared statement: plain statements from now on (add prepared_statements=false to the URL to skip the try)",
            metadata: ["error": "\(error.message)"])
    }
}

/// The single enqueue's INSERT (`PostgresStore.insertJob` is the same statement with its
/// values inline, for transactions and for servers without prepared statements). The
/// returned columns are named, not `*`: a connection keeps the statement's row shape, and
/// a column a later migration adds must not change it under a running process.
struct InsertJobStatement: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static let sql = """
        INSERT INTO lifecycle.jobs (kind, payload, unique_key, state, attempt, max_attempts, run_at, created_at, updated_at)
        VALUES ($1, $2, $3, 'queued', 0, $4, $5, $6, $6)
        ON CONFLICT (unique_key) WHERE \(PostgresStore.liveKeyPredicate) DO NOTHING
        RETURNING id, kind, payload, unique_key, state, attempt, max_attempts, run_at, lease_owner, lease_expires_at,
            last_error, cancel_requested, created_at, updated_at, finished_at,
            pg_notify('\(JobNotifications.channel)', '') IS NULL AS notified
        """
    static let bindingDataTypes: [PostgresDataType] = [.text, .text, .text, .int4, .timestamptz, .timestamptz]
    /// Named after its text and parameter types: behind a pooler that keeps statements on its
    /// server connections, a name found there is this very statement, whichever release
    /// prepared it.
    static let name = "lifecycle_insert_job_" + stableHash(sql + "\(bindingDataTypes.map(\.rawValue))")

    let kind: String
    let payload: String
    let uniqueKey: String?
    let maxAttempts: Int32
    let runAt: Date
    let now: Date

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 6)
        bindings.append(kind)
        bindings.append(payload)
        bindings.append(uniqueKey)
        bindings.append(maxAttempts)
        bindings.append(runAt)
        bindings.append(now)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

/// FNV-1a, 64 bits, in hex: the same on every machine and every run, unlike `hashValue`.
func stableHash(_ text: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }
    return String(hash, radix: 16)
}

extension PostgresStore {
    /// A prepared statement on a pooled connection outside any explicit transaction
    /// (postgres-nio prepares it on that connection the first time, then only runs it).
    func autocommit<Statement: PostgresPreparedStatement>(
        _ statement: Statement, file: String = #fileID, line: Int = #line
    ) async throws -> [PostgresRow] where Statement.Row == PostgresRow {
        // postgres-nio keeps a failed preparation as the statement's state on that connection,
        // and answers every later run there with the same error: a statement timeout while
        // preparing would leave the connection unable ever to run it. A refusal is the
        // exception: it turns prepared statements off for good, so nothing runs this one
        // there again, and closing the connection before the server's answer is complete
        // would make a pooler close its server connection, with every other client's
        // statements on it.
        try await onPooledConnection(file: file, line: line, keepsConnection: Self.preparedStatementRefused) { connection in
            var rows: [PostgresRow] = []
            for try await row in try await connection.execute(statement, logger: logger, file: file, line: line) {
                rows.append(row)
            }
            return rows
        }
    }
}
