import Foundation
import JobRunner
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

    /// Statement names with the connection ids they ran on: prepared there, so a failure of a
    /// later run is the run's alone. Connection ids are never reused within a store.
    private let preparedOn = Mutex<Set<String>>([])

    var usable: Bool { enabled.load(ordering: .relaxed) }

    func isPrepared(_ name: String, on connection: Int) -> Bool { preparedOn.withLock { $0.contains("\(connection) \(name)") } }
    func notePrepared(_ name: String, on connection: Int) { _ = preparedOn.withLock { $0.insert("\(connection) \(name)") } }

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

/// The columns a job row is read with (`JobRecord(row:)`), named rather than `*` in prepared
/// statements: a connection keeps a statement's row shape, and a column a later migration
/// adds must not change it under a running process.
let jobColumns = """
    id, kind, payload, unique_key, state, attempt, max_attempts, run_at, lease_owner, lease_expires_at,
    last_error, cancel_requested, created_at, updated_at, finished_at
    """

/// A prepared statement whose rows are read as they come, named after its text and
/// parameter types (see `InsertJobStatement.name`).
protocol JobQueueStatement: PostgresPreparedStatement where Row == PostgresRow {
    static var namePrefix: String { get }
}

extension JobQueueStatement {
    /// Each statement keeps this in a `static let name`: computed once, not at every run.
    static func nameFromText() -> String { namePrefix + stableHash(sql + "\(bindingDataTypes.map(\.rawValue))") }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    /// `values` as binds, in the order of the statement's parameters.
    static func bindings(_ values: any PostgresEncodable...) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { try bindings.append(value) }
        return bindings
    }
}

/// A group commit's done-marks in one statement (see `PostgresStore.markStepsDone`).
///
/// The fence locks the rows still leased to their owner (in id order, as every other
/// multi-row lock here is taken); a job missing from it lost its lease and gets no mark.
/// The locked rows hold off a rescue until this commits; a lock rather than an update
/// leaves no dead tuple per step. Each row is looked up by its id (a lateral subquery that
/// locks is never flattened into a join): joined, the planner read every running job's
/// entry in an index that churns with each claim and mark (thousands of dead entries
/// mid-drain), or every live job's in the unique-key index, per statement.
struct MarkStepsStatement: JobQueueStatement {
    static let namePrefix = "lifecycle_mark_steps_"
    static let name = nameFromText()
    static let sql = """
        WITH m AS (
            SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::bool[], $5::bool[], $6::text[], $7::timestamptz[])
                AS m(id, step, output, has_output, finishes, owner, at)
        ), fence AS (
            SELECT j.id, f.owner, j.cancel_requested FROM (SELECT DISTINCT id, owner FROM m ORDER BY id) AS f
            CROSS JOIN LATERAL (
                SELECT id, cancel_requested FROM lifecycle.jobs
                WHERE jobs.id = f.id AND jobs.lease_owner = f.owner AND jobs.state = 'running'
                FOR NO KEY UPDATE
            ) AS j
        ), done AS (
            UPDATE lifecycle.jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, finished_at = m.at, updated_at = m.at
            FROM m JOIN fence ON fence.id = m.id AND fence.owner = m.owner
            WHERE jobs.id = m.id AND m.finishes
        ), mark AS (
            INSERT INTO lifecycle.job_steps (job_id, step, output, finished_at)
            SELECT m.id, m.step, CASE WHEN m.has_output THEN m.output END, m.at
            FROM m JOIN fence ON fence.id = m.id AND fence.owner = m.owner
        )
        SELECT id, owner, cancel_requested FROM fence
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8Array, .textArray, .textArray, .boolArray, .boolArray, .textArray, .timestamptzArray]

    let marks: [StepMark]

    func makeBindings() throws -> PostgresBindings {
        try Self.bindings(
            marks.map(\.jobID), marks.map(\.step), marks.map { $0.output ?? "" }, marks.map { $0.output != nil },
            marks.map(\.finishesJob), marks.map(\.owner), marks.map(\.now))
    }
}

/// A claim's first look: running jobs of the wanted kinds whose lease has run out, oldest
/// expiry first, passing over rows another worker is locking (SKIP LOCKED) and the jobs
/// this worker itself still holds.
struct RescueStatement: JobQueueStatement {
    static let namePrefix = "lifecycle_claim_rescue_"
    static let name = nameFromText()
    static let sql = """
        SELECT id, kind, attempt, max_attempts FROM lifecycle.jobs
        WHERE state = 'running' AND lease_expires_at < $1 AND kind = ANY($2::text[])
          AND kind NOT IN (SELECT kind FROM lifecycle.paused_kinds) AND id <> ALL($3::int8[])
        ORDER BY lease_expires_at LIMIT $4
        FOR UPDATE SKIP LOCKED
        """
    static let bindingDataTypes: [PostgresDataType] = [.timestamptz, .textArray, .int8Array, .int8]

    let now: Date
    let kinds: [String]
    let holding: [Int64]
    let total: Int64

    func makeBindings() throws -> PostgresBindings {
        try Self.bindings(now, kinds, holding, total)
    }
}

/// A claim's due jobs: up to each kind's count, in run_at order, passing over rows another
/// worker is locking.
struct ReadyJobsStatement: JobQueueStatement {
    static let namePrefix = "lifecycle_claim_ready_"
    static let name = nameFromText()
    static let sql = """
        SELECT j.id, j.kind, j.attempt, j.max_attempts
        FROM (SELECT * FROM unnest($1::text[], $2::int8[]) AS u(kind, n)
              WHERE u.kind NOT IN (SELECT kind FROM lifecycle.paused_kinds)) AS q
        CROSS JOIN LATERAL (
            SELECT id, kind, attempt, max_attempts, run_at FROM lifecycle.jobs
            WHERE jobs.kind = q.kind AND state IN ('queued','retrying') AND run_at <= $3
            ORDER BY run_at, id LIMIT q.n
            FOR UPDATE SKIP LOCKED
        ) j
        ORDER BY j.run_at, j.id
        """
    static let bindingDataTypes: [PostgresDataType] = [.textArray, .int8Array, .timestamptz]

    let kinds: [String]
    let counts: [Int64]
    let now: Date

    func makeBindings() throws -> PostgresBindings {
        try Self.bindings(kinds, counts, now)
    }
}

/// Leases the claimed jobs to their new owner, each for its kind's lease length.
struct LeaseJobsStatement: JobQueueStatement {
    static let namePrefix = "lifecycle_claim_lease_"
    static let name = nameFromText()
    static let sql = """
        UPDATE lifecycle.jobs SET state = 'running', attempt = attempt + 1, lease_owner = $1,
          lease_expires_at = $2::timestamptz + make_interval(secs => c.lease),
          started_at = COALESCE(started_at, $2), updated_at = $2
        FROM unnest($3::int8[], $4::float8[]) AS c(id, lease)
        WHERE jobs.id = c.id
        RETURNING \(jobColumns.split(separator: ",").map { "jobs." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: ", "))
        """
    static let bindingDataTypes: [PostgresDataType] = [.text, .timestamptz, .int8Array, .float8Array]

    let owner: String
    let now: Date
    let ids: [Int64]
    let leases: [Double]

    func makeBindings() throws -> PostgresBindings {
        try Self.bindings(owner, now, ids, leases)
    }
}

/// The done steps of claimed jobs. Each id's steps are looked up by their index: with
/// `job_id = ANY(…)` or a plain join, a planner whose statistics lag a table that grows
/// by thousands of rows a second reads the whole table instead, milliseconds per claim.
/// OFFSET 0 keeps the subquery from being flattened into such a join.
struct FinishedStepsStatement: JobQueueStatement {
    static let namePrefix = "lifecycle_claim_steps_"
    static let name = nameFromText()
    static let sql = """
        SELECT s.job_id, s.step, s.output FROM unnest($1::int8[]) AS c(id)
        CROSS JOIN LATERAL (SELECT job_id, step, output FROM lifecycle.job_steps WHERE job_id = c.id OFFSET 0) AS s
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8Array]

    let jobIDs: [Int64]

    func makeBindings() throws -> PostgresBindings {
        try Self.bindings(jobIDs)
    }
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
