import CSQLiteTuning
import Foundation
import GRDB
import JobRunner
import Lifecycle
import Synchronization

/// One open write (or read) transaction on the SQLite file. Only valid inside the
/// closure it was handed to.
public struct SQLiteTransaction {
    public let db: Database
}

public struct SQLiteStoreError: Error, CustomStringConvertible, Sendable {
    private enum Reason: Sendable { case unavailable, damaged, outOfSpace }

    public let message: String
    private let reason: Reason

    public init(message: String) {
        self.init(message, .unavailable)
    }

    private init(_ message: String, _ reason: Reason) {
        self.message = message
        self.reason = reason
    }

    public var description: String { message }

    /// The file is not a database or a page of it is corrupt: an operator must restore it.
    public var isDamaged: Bool { reason == .damaged }
    /// The disk is full or failing: temporary; every step is safe to run again.
    public var isOutOfSpace: Bool { reason == .outOfSpace }

    /// SQLite's word on a failure of the file rather than of a statement, in terms an
    /// operator acts on; nil for every other error (a constraint, a domain refusal).
    public static func classify(_ error: any Error, path: String) -> SQLiteStoreError? {
        if let error = error as? SQLiteStoreError { return error }
        guard let error = error as? DatabaseError else { return nil }
        let detail = error.message ?? "\(error.resultCode)"
        switch error.resultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return .init("""
                the SQLite database \(path) is damaged (\(detail)). Stop every lifecycle process that uses it, keep a \
                copy of the file, then restore it from a backup (or salvage it with `sqlite3 \(path) .recover`)
                """, .damaged)
        case .SQLITE_FULL, .SQLITE_IOERR:
            return .init("""
                writing the SQLite database \(path) failed (\(detail)): the disk is full or failing. Free space and run \
                the same command again; work already committed stays, and nothing is done twice
                """, .outOfSpace)
        default:
            return nil
        }
    }
}

/// The embedded default backend: one SQLite file in WAL mode, shared safely by
/// several workers in one process (GRDB's pool) and by several processes
/// (busy timeout, IMMEDIATE write transactions).
public final class SQLiteStore: LifecycleStore, Sendable {
    public typealias Transaction = SQLiteTransaction

    public let path: String
    let pool: DatabasePool
    /// Every write of this process goes through it: concurrent writers (the steps of
    /// several jobs, a purge's bookkeeping) share one commit instead of paying one each.
    private let writes: TransactionBatcher<SQLiteTransaction>
    /// What wakes an idle worker of any process on this machine when a job is enqueued.
    let workSignal: WorkSignal

    public var location: String { "SQLite file \(path)" }

    /// False for an app's own database: a fresh file gets lifecycle's tables only, not the
    /// reference app's.
    public let referenceSchema: Bool

    /// Set once, before the process's first connection (CSQLiteTuning): with memory
    /// statistics on, every allocation of every connection takes one global mutex.
    private static let memoryStatisticsOff: Int32 = accountlifecycle_sqlite_memory_statistics_off()

    public init(path: String, busyTimeout: TimeInterval = SQLiteStore.defaultBusyTimeout, referenceSchema: Bool = true) throws {
        _ = Self.memoryStatisticsOff
        self.path = path
        self.referenceSchema = referenceSchema
        workSignal = WorkSignal(databasePath: path)
        let directory = PathText.parent(path)
        if !directory.isEmpty {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // The file holds people's personal data: created 0600 whatever the umask. SQLite
        // gives the -wal and -shm files the mode of the database file.
        let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if created >= 0 {
            close(created)
        } else if errno != EEXIST {
            throw SQLiteStoreError(message: "cannot create the SQLite database at \(path): \(String(cString: strerror(errno)))")
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.foreignKeysEnabled = true
        configuration.prepareDatabase { db in
            // NORMAL in WAL mode survives any process crash (SIGKILL included); only
            // an OS crash or power loss can lose the last commits, and every step is
            // written to be safely repeated.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            if !db.configuration.readonly {
                // Each piece of the store's own group commits is a savepoint (the worker's run
                // bare), whose undo pages SQLite otherwise spills to a temporary file beyond
                // 64 KiB: two writes per page
                // touched, as many again as the commit itself. In memory they cost at most
                // the pages one transaction changes; readers keep file-backed sorts.
                try db.execute(sql: "PRAGMA temp_store = MEMORY")
                // The commit that takes the log past this many pages copies it into the file
                // and syncs it, on the one writer thread. A purge or a drain rewrites the same
                // pages (queue rows, index leaves) commit after commit: every 4,000 pages rather
                // than SQLite's 1,000 copies each of them once instead of four times (purges
                // measured 5-8 % faster), for a log of at most about 16 MB.
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 4000")
                // The writer's page cache, 32 MiB rather than SQLite's 2 MB: a purge reads each
                // account's pages to erase them and again to verify them, beside the queue's
                // own; past the cache every page is read back from the OS (a pread and a copy).
                // At most this much, and only as the file's pages are touched.
                try db.execute(sql: "PRAGMA cache_size = -32768")
            }
        }
        let pool: DatabasePool
        do {
            pool = try Self.retryingBusy(timeout: busyTimeout) { try DatabasePool(path: path, configuration: configuration) }
        } catch {
            throw SQLiteStoreError.classify(error, path: path)
                ?? SQLiteStoreError(message: "cannot open the SQLite database at \(path): \(error)")
        }
        self.pool = pool
        writes = TransactionBatcher(
            writerSessions: Self.writerSessions(on: pool), savepoint: { tx, body in try Self.savepoint(in: tx.db, body) })
        do {
            try migrate()
        } catch {
            throw SQLiteStoreError.classify(error, path: path) ?? error
        }
    }

    /// Opening reads the schema, and SQLite can answer that read SQLITE_BUSY at once, not
    /// after the busy timeout, while another process holds the file for a moment: the last
    /// connection of a process that exits copies the log into the file and removes it, and
    /// a process that finds the log of a killed one rebuilds its index. Both take moments,
    /// so a process started alongside others tries again, up to `timeout`, instead of
    /// ending with "database is locked".
    static func retryingBusy<T>(timeout: TimeInterval, _ open: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        var pause = 0.005
        while true {
            do {
                return try open()
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && Date() < deadline {
                Thread.sleep(forTimeInterval: pause)
                pause = min(pause * 2, 0.1)
            }
        }
    }

    /// How long a command waits for another process's hold on the file: a checkpoint, a
    /// write transaction (writers take turns), a log recovery.
    public static let defaultBusyTimeout: TimeInterval = 30

    /// Serialised across processes with a lock file: two processes starting on a
    /// fresh file must not both apply the same migration.
    public func migrate() throws {
        let lockPath = path + ".migrate-lock"
        let descriptor = open(lockPath, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw SQLiteStoreError(message: "cannot create \(lockPath): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        flock(descriptor, LOCK_EX)
        defer { flock(descriptor, LOCK_UN) }
        try Migrations.migrator(referenceSchema: referenceSchema).migrate(pool)
    }

    public var appliedMigrations: [String] {
        get throws { try pool.read { db in try Migrations.migrator.appliedMigrations(db) } }
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) throws -> T) async throws -> T {
        try await writes.run(body)
    }

    public func writeUnshared<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) throws -> T) async throws -> T {
        try await pool.write { db in try body(SQLiteTransaction(db: db)) }
    }

    public var writerSessions: WriterSessions<SQLiteTransaction>? { Self.writerSessions(on: pool) }

    /// GRDB's writer queue runs a session outside any transaction; its transactions are
    /// GRDB's own (`inTransaction`, IMMEDIATE on a pool's writer), as `pool.write` opens them.
    private static func writerSessions(on pool: DatabasePool) -> WriterSessions<SQLiteTransaction> {
        { session in
            pool.asyncWriteWithoutTransaction { db in
                session { body in
                    try db.inTransaction {
                        try body(SQLiteTransaction(db: db))
                        return .commit
                    }
                }
            }
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteTransaction) throws -> T) async throws -> T {
        try await pool.read { db in try body(SQLiteTransaction(db: db)) }
    }

    /// Synchronous access for tools (copy, benchmarks) that are not inside a task.
    public func writeSync<T>(_ body: (SQLiteTransaction) throws -> T) throws -> T {
        try pool.write { db in try body(SQLiteTransaction(db: db)) }
    }

    public func checkpoint() throws {
        try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }
}

// MARK: - Job queue

extension JobRecord {
    /// The columns `init(row:)` reads, in its order: by position, because a claim decodes
    /// a row per job and GRDB's lookup by name compares lowercased names column by column.
    static let sqliteColumns = """
        id, kind, payload, unique_key, state, attempt, max_attempts, run_at, lease_owner, lease_expires_at, \
        last_error, cancel_requested, created_at, updated_at, finished_at
        """

    init(row: Row) throws {
        var dates = StoredDate.Reader()
        try self.init(row: row, dates: &dates)
    }

    /// Reads the row's dates through `dates`, which a batch of rows shares. Each column is
    /// read as a raw value and converted here: a value of the wrong kind (written into the
    /// file by hand) throws `UnreadableJobRow` naming the job and the column, where GRDB's
    /// typed subscripts would stop the process (`jobs show`, `jobs list`, a rescue).
    init(row: Row, dates: inout StoredDate.Reader) throws {
        let idValue: DatabaseValue = row[0]
        guard let id = Int64.fromDatabaseValue(idValue) else { throw UnreadableJobRow(id: 0, column: "id", value: "\(idValue)") }
        func text(_ index: Int, _ name: String) throws -> String? {
            let value: DatabaseValue = row[index]
            if value.isNull { return nil }
            guard let text = String.fromDatabaseValue(value) else { throw UnreadableJobRow(id: id, column: name, value: "\(value)") }
            return text
        }
        func required(_ index: Int, _ name: String) throws -> String {
            guard let text = try text(index, name) else { throw UnreadableJobRow(id: id, column: name, value: "NULL") }
            return text
        }
        func integer(_ index: Int, _ name: String) throws -> Int {
            let value: DatabaseValue = row[index]
            guard let number = Int.fromDatabaseValue(value) else { throw UnreadableJobRow(id: id, column: name, value: "\(value)") }
            return number
        }
        func date(_ index: Int, _ name: String) throws -> Date? {
            let value: DatabaseValue = row[index]
            if value.isNull { return nil }
            // Lifecycle's own format first; GRDB's other date formats (a date alone, a Unix
            // time) as it reads them.
            guard let date = dates.date(value) ?? Date.fromDatabaseValue(value) else {
                throw UnreadableJobRow(id: id, column: name, value: "\(value)")
            }
            return date
        }
        func requiredDate(_ index: Int, _ name: String) throws -> Date {
            guard let date = try date(index, name) else { throw UnreadableJobRow(id: id, column: name, value: "NULL") }
            return date
        }
        self.init(
            id: id, kind: try required(1, "kind"), payload: try required(2, "payload"), uniqueKey: try text(3, "unique_key"),
            state: JobState(rawValue: try required(4, "state")) ?? .dead, attempt: try integer(5, "attempt"),
            maxAttempts: try integer(6, "max_attempts"), runAt: try requiredDate(7, "run_at"), leaseOwner: try text(8, "lease_owner"),
            leaseExpiresAt: try date(9, "lease_expires_at"), lastError: try text(10, "last_error"),
            cancelRequested: try integer(11, "cancel_requested") != 0, createdAt: try requiredDate(12, "created_at"),
            updatedAt: try requiredDate(13, "updated_at"), finishedAt: try date(14, "finished_at"))
    }

    /// The row of `sqliteColumns` that `row` stands on, as `init(row:dates:)` reads it. A
    /// required column that is NULL or a date that is not one (written into the file by
    /// hand) fails the claim with the job named, where GRDB's decoding would stop the process.
    init(statement row: HotStatement, dates: inout StoredDate.Reader) throws {
        let id = row.int64(0)
        func required(_ column: Int32, _ name: String) throws -> String {
            guard let text = row.text(column) else { throw UnreadableJobRow(id: id, column: name, value: "NULL") }
            return text
        }
        func date(_ column: Int32, _ name: String) throws -> Date? {
            if row.isNull(column) { return nil }
            let value = row.value(column)
            guard let date = dates.date(value) else { throw UnreadableJobRow(id: id, column: name, value: "\(value)") }
            return date
        }
        func requiredDate(_ column: Int32, _ name: String) throws -> Date {
            guard let date = try date(column, name) else { throw UnreadableJobRow(id: id, column: name, value: "NULL") }
            return date
        }
        self.init(
            id: id, kind: try required(1, "kind"), payload: try required(2, "payload"), uniqueKey: row.text(3),
            state: JobState(rawValue: try required(4, "state")) ?? .dead, attempt: Int(row.int64(5)), maxAttempts: Int(row.int64(6)),
            runAt: try requiredDate(7, "run_at"), leaseOwner: row.text(8), leaseExpiresAt: try date(9, "lease_expires_at"),
            lastError: row.text(10), cancelRequested: row.int64(11) != 0, createdAt: try requiredDate(12, "created_at"),
            updatedAt: try requiredDate(13, "updated_at"), finishedAt: try date(14, "finished_at"))
    }
}

/// A job's row holds what lifecycle never writes there: edited by hand, or damaged.
public struct UnreadableJobRow: Error, CustomStringConvertible {
    public let id: JobID
    public let column: String
    public let value: String

    public var description: String {
        "job \(id) has \(column) \(value) in lifecycle_jobs, which lifecycle cannot read: correct that column or delete the job's row"
    }
}

extension SQLiteStore {
    /// The worker's group commits run their pieces bare: a piece's SAVEPOINT and RELEASE,
    /// and the undo copy SQLite keeps of each page the piece first touches, cost a drain of
    /// jobs with two database steps a sixth of its rate (16,800 → 20,600 jobs/s measured),
    /// where a failing piece, which then sends the batch round again piece by piece, is rare.
    public var savepointsAreCheap: Bool { false }

    public func savepoint<T>(in tx: SQLiteTransaction, _ body: () throws -> T) throws -> T {
        try Self.savepoint(in: tx.db, body)
    }

    /// Cached statements rather than GRDB's inSavepoint, which parses its SQL anew each
    /// time: the runner opens one savepoint per job step when several share a commit.
    static func savepoint<T>(in db: Database, _ body: () throws -> T) throws -> T {
        try db.cachedStatement(sql: "SAVEPOINT piece").execute()
        do {
            let result = try body()
            try db.cachedStatement(sql: "RELEASE SAVEPOINT piece").execute()
            return result
        } catch {
            try db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT piece").execute()
            try db.cachedStatement(sql: "RELEASE SAVEPOINT piece").execute()
            throw error
        }
    }

    public func enqueue(_ request: EnqueueRequest, policy: JobPolicy, now: Date, in tx: SQLiteTransaction) throws -> EnqueueOutcome {
        if let key = request.uniqueKey, let live = try liveJob(uniqueKey: key, in: tx) {
            return EnqueueOutcome(job: live, created: false)
        }
        try tx.db.cachedStatement(sql: """
                INSERT INTO lifecycle_jobs (kind, payload, unique_key, state, attempt, max_attempts, run_at, created_at, updated_at)
                VALUES (?, ?, ?, 'queued', 0, ?, ?, ?, ?)
                """).execute(arguments: [request.kind, request.payload, request.uniqueKey, request.maxAttempts ?? policy.maxAttempts,
                        request.runAt ?? now, now, now])
        let id = tx.db.lastInsertedRowID
        guard let job = try job(id: id, in: tx) else { throw JobRunnerError.noSuchJob(id) }
        signalWorkers(in: tx)
        return EnqueueOutcome(job: job, created: true)
    }

    /// Wakes the idle workers of this machine once this transaction commits.
    func signalWorkers(in tx: SQLiteTransaction) {
        workSignal.arm(tx.db)
    }

    public func waitForWork(timeout: TimeInterval) async {
        guard workSignal.start() else {
            try? await Task.sleep(nanoseconds: UInt64(max(0, timeout) * 1_000_000_000))
            return
        }
        await workSignal.wait(timeout: timeout)
    }

    public func startWatchingForWork() async {
        workSignal.start()
    }

    public func enqueue(many requests: [EnqueueRequest], policy: JobPolicy, now: Date, in tx: SQLiteTransaction) throws -> [EnqueuedJob] {
        // One cached INSERT per row, without reading each job back: in-process SQLite has
        // no round trip to save, only the per-row work.
        let insert = try tx.db.cachedStatement(sql: """
            INSERT INTO lifecycle_jobs (kind, payload, unique_key, state, attempt, max_attempts, run_at, created_at, updated_at)
            VALUES (?, ?, NULL, 'queued', 0, ?, ?, ?, ?)
            """)
        if !requests.isEmpty { signalWorkers(in: tx) }
        return try requests.map { request in
            if request.uniqueKey != nil {
                let outcome = try enqueue(request, policy: policy, now: now, in: tx)
                return EnqueuedJob(id: outcome.job.id, created: outcome.created)
            }
            try insert.execute(arguments: [request.kind, request.payload, request.maxAttempts ?? policy.maxAttempts, (request.runAt ?? now).stored, now.stored, now.stored])
            return EnqueuedJob(id: tx.db.lastInsertedRowID, created: true)
        }
    }

    // A group commit's statements differ only in how many jobs they carry: their texts are
    // built once per count, not once per commit.
    private static let markFenceSQL = SQLTextByCount { count in
        """
        SELECT id, cancel_requested FROM lifecycle_jobs
        WHERE id IN (\(databaseQuestionMarks(count: count))) AND lease_owner = ? AND state = 'running'
        """
    }
    private static let markStepsSQL = SQLTextByCount { count in
        """
        INSERT INTO lifecycle_job_steps (job_id, step, output, finished_at)
        VALUES \(repeatElement("(?, ?, ?, ?)", count: count).joined(separator: ", "))
        """
    }
    private static let markFinishedSQL = SQLTextByCount { count in
        """
        UPDATE lifecycle_jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
          finished_at = m.column2, updated_at = m.column2
        FROM (VALUES \(repeatElement("(?, ?)", count: count).joined(separator: ", "))) AS m
        WHERE lifecycle_jobs.id = m.column1
        """
    }

    /// A group commit's marks in a few statements instead of three per mark (a fence per
    /// owner, the step rows in power-of-two parts, one finish): the per-statement
    /// work (binding, stepping, resetting) on the one writer thread is what a drain waits on.
    /// A read is fence enough: this runs inside the write transaction, which SQLite
    /// serialises, so no rescue can take a job between the check and the commit. Leaving
    /// the row of a job that is not finishing alone keeps its page out of the commit.
    public func markStepsDone(_ marks: [StepMark], in tx: SQLiteTransaction) throws -> [Bool?] {
        // 4 parameters a row stays far below SQLite's limit of 32,766.
        guard marks.count <= SQLTextByCount.largestBatch else {
            return try SQLTextByCount.batches(of: marks).flatMap { try markStepsDone($0, in: tx) }
        }
        let db = tx.db
        // Per owner: a mark of another owner than the job's holds no lease on it. A worker's
        // marks all have its owner, so the usual case is one look-up table.
        var fencedByOwner: [String: [JobID: Bool]] = [:]
        for (owner, group) in Dictionary(grouping: marks, by: \.owner) {
            let size = SQLTextByCount.batchSize(for: group.count)
            let fence = try HotStatement(db, sql: Self.markFenceSQL(size))
            fence.bind(group.map(\.jobID), paddedTo: size, from: 1)
            fence.bind(owner, at: Int32(size + 1))
            var fenced: [JobID: Bool] = [:]
            while try fence.step() { fenced[fence.int64(0)] = fence.int64(1) != 0 }
            fencedByOwner[owner] = fenced
        }
        let onlyOwner = fencedByOwner.count == 1 ? fencedByOwner.first!.value : nil
        let cancelRequested = { (mark: StepMark) -> Bool? in (onlyOwner ?? fencedByOwner[mark.owner])?[mark.jobID] }
        let written = marks.filter { cancelRequested($0) != nil }
        if !written.isEmpty {
            // A plain INSERT: a second done-mark for the same step fails, and the caller
            // abandons the transaction.
            var start = 0
            for size in SQLTextByCount.insertSizes(for: written.count) {
                let insert = try HotStatement(db, sql: Self.markStepsSQL(size))
                for offset in 0..<size {
                    let mark = written[start + offset]
                    let first = Int32(offset * 4 + 1)
                    insert.bind(mark.jobID, at: first)
                    insert.bind(mark.step, at: first + 1)
                    insert.bind(mark.output, at: first + 2)
                    insert.bind(mark.now, at: first + 3)
                }
                try insert.execute()
                start += size
            }
        }
        let finishing = written.filter(\.finishesJob)
        if !finishing.isEmpty {
            // The rows past the marks stay unbound, NULL, and join no job.
            let finish = try HotStatement(db, sql: Self.markFinishedSQL(SQLTextByCount.batchSize(for: finishing.count)))
            for (offset, mark) in finishing.enumerated() {
                finish.bind(mark.jobID, at: Int32(offset * 2 + 1))
                finish.bind(mark.now, at: Int32(offset * 2 + 2))
            }
            try finish.execute()
            for mark in finishing {
                guard let reason = mark.stopped else { continue }
                try db.cachedStatement(sql: """
                    INSERT INTO lifecycle_unreported_stops (job_id, kind, reason, stopped_at)
                    SELECT id, kind, ?, ? FROM lifecycle_jobs WHERE id = ?
                    """).execute(arguments: [reason, mark.now.stored, mark.jobID])
            }
        }
        // A finishing mark ends the job, so a cancel request no longer matters to it.
        return marks.map { mark in cancelRequested(mark).map { mark.finishesJob ? false : $0 } }
    }

    public func takeUnreportedStops(kinds: [String]?) async throws -> [UnreportedStop] {
        let kindClause = kinds.map { "WHERE kind IN (\($0.map { _ in "?" }.joined(separator: ",")))" } ?? ""
        guard kinds?.isEmpty != true else { return [] }
        return try await pool.write { db in
            let rows = try Row.fetchAll(db, sql: """
                DELETE FROM lifecycle_unreported_stops \(kindClause)
                RETURNING job_id, kind, reason, stopped_at
                """, arguments: StatementArguments(kinds ?? []))
            let columns = ["job_id", "kind", "reason", "stopped_at"]
            return try rows.map { row in
                let checked = CheckedRow(row, table: "lifecycle_unreported_stops", key: "job_id", columns: columns)
                return UnreportedStop(jobID: try checked(0), kind: try checked(1), reason: try checked(2), stoppedAt: try checked(3))
            }.sorted { ($0.stoppedAt, $0.jobID) < ($1.stoppedAt, $1.jobID) }
        }
    }

    public func markSucceeded(jobID: JobID, owner: String, now: Date, in tx: SQLiteTransaction) throws {
        try tx.db.cachedStatement(sql: """
            UPDATE lifecycle_jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, finished_at = ?, updated_at = ?
            WHERE id = ? AND lease_owner = ? AND state = 'running'
            """).execute(arguments: [now.stored, now.stored, jobID, owner])
        guard tx.db.changesCount == 1 else { throw JobRunnerError.leaseLost(jobID) }
    }

    // INDEXED BY in the claim's two lookups: SQLite's planner, without statistics, prefers
    // the (kind, state) index for both, then reads and sorts every row of the kind in that
    // state on each claim, however few it takes (a backlog of 100,000 drained at a third of
    // the rate). Named, an index that cannot serve the query fails the statement instead.

    /// Running jobs of some kinds whose lease ran out, longest expired first.
    static func expiredLeasesSQL(kinds: Int) -> String {
        """
        SELECT id, kind, attempt, max_attempts FROM lifecycle_jobs INDEXED BY lifecycle_jobs_leased
        WHERE state = 'running' AND lease_expires_at < ? AND kind IN (\(databaseQuestionMarks(count: kinds)))
          AND kind NOT IN (SELECT kind FROM lifecycle_paused_kinds)
        ORDER BY lease_expires_at LIMIT ?
        """
    }

    /// A job a claim may take: a row of `expiredLeasesSQL` or `dueOfKindSQL`.
    private struct ClaimCandidate {
        let id: JobID
        let kind: String
        let attempt: Int
        let maxAttempts: Int
        /// Stored text; empty for a rescue, which is not sorted.
        let runAt: String
        let isRescue: Bool

        init(row: HotStatement, isRescue: Bool) {
            id = row.int64(0)
            kind = row.text(1) ?? ""
            attempt = Int(row.int64(2))
            maxAttempts = Int(row.int64(3))
            runAt = isRescue ? "" : row.text(4) ?? ""
            self.isRescue = isRescue
        }
    }

    private static let leaseSQL = SQLTextByCount { count in
        """
        UPDATE lifecycle_jobs SET state = 'running', attempt = attempt + 1, lease_owner = ?, lease_expires_at = ?,
          started_at = COALESCE(started_at, ?), updated_at = ?
        WHERE id IN (\(databaseQuestionMarks(count: count)))
        RETURNING \(JobRecord.sqliteColumns)
        """
    }
    private static let finishedStepsSQL = SQLTextByCount { count in
        "SELECT job_id, step, output FROM lifecycle_job_steps WHERE job_id IN (\(databaseQuestionMarks(count: count)))"
    }

    /// One kind's due jobs, oldest first.
    static let dueOfKindSQL = """
        SELECT id, kind, attempt, max_attempts, run_at FROM lifecycle_jobs INDEXED BY lifecycle_jobs_ready
        WHERE kind = ? AND state IN ('queued','retrying') AND run_at <= ? ORDER BY run_at, id LIMIT ?
        """

    public func claim(_ request: ClaimRequest) async throws -> [ClaimedJob] {
        try await pool.write { db in try self.claim(request, in: SQLiteTransaction(db: db)) }
    }

    public func claim(_ request: ClaimRequest, in tx: SQLiteTransaction) throws -> [ClaimedJob] {
        let (quota, leases, owner, holding, now) = (request.quota, request.leases, request.owner, request.holding, request.now)
        let db = tx.db
        guard !quota.isEmpty else { return [] }
        let kinds = Array(quota.keys)
        let total = quota.values.reduce(0, +)
        let stamp = now.stored
        var remaining = quota
        var claimedIDs: [JobID] = []
        var buried: [JobID] = []
        // Rescue first: a job whose worker died should not wait behind new work.
        var rescued: [ClaimCandidate] = []
        // The caller's own jobs are left out here rather than in the statement, which then
        // stays one prepared statement per kind count; asking for as many more keeps the limit.
        let expired = try HotStatement(db, sql: Self.expiredLeasesSQL(kinds: kinds.count))
        expired.bind(now, at: 1)
        for (offset, kind) in kinds.enumerated() { expired.bind(kind, at: Int32(offset + 2)) }
        expired.bind(total + holding.count, at: Int32(kinds.count + 2))
        while rescued.count < total, try expired.step() {
            let candidate = ClaimCandidate(row: expired, isRescue: true)
            if !holding.contains(candidate.id) { rescued.append(candidate) }
        }
        expired.reset()
        // Each kind's oldest due jobs, read in index order and merged: the same jobs one
        // query over every kind would pick, oldest first, each kind up to its quota.
        let paused = try Set(String.fetchAll(db.cachedStatement(sql: "SELECT kind FROM lifecycle_paused_kinds")))
        let readyOfKind = try HotStatement(db, sql: Self.dueOfKindSQL)
        var ready: [ClaimCandidate] = []
        var kindsWithReadyJobs = 0
        for kind in kinds.sorted() where !paused.contains(kind) {
            let before = ready.count
            readyOfKind.reset()
            readyOfKind.bind(kind, at: 1)
            readyOfKind.bind(now, at: 2)
            readyOfKind.bind(quota[kind] ?? 0, at: 3)
            while try readyOfKind.step() { ready.append(ClaimCandidate(row: readyOfKind, isRescue: false)) }
            if ready.count > before { kindsWithReadyJobs += 1 }
        }
        if kindsWithReadyJobs > 1 {
            // Dates are stored as fixed-width text, so text order is time order.
            ready.sort { a, b in a.runAt != b.runAt ? a.runAt < b.runAt : a.id < b.id }
        }
        var claimedByLease: [TimeInterval: [JobID]] = [:]
        for candidate in rescued + ready {
            let kind = candidate.kind
            guard let left = remaining[kind], left > 0 else { continue }
            let id = candidate.id
            remaining[kind] = left - 1
            if candidate.isRescue && candidate.attempt >= candidate.maxAttempts {
                try db.execute(
                    sql: """
                        UPDATE lifecycle_jobs SET state = 'dead', lease_owner = NULL, lease_expires_at = NULL, finished_at = ?, updated_at = ?,
                          last_error = 'worker lost (lease expired) during the final attempt' || COALESCE(' after: ' || last_error, '')
                        WHERE id = ?
                        """,
                    arguments: [stamp, stamp, id])
                buried.append(id)
                continue
            }
            claimedIDs.append(id)
            claimedByLease[leases[kind] ?? JobPolicy().lease, default: []].append(id)
        }
        let all = claimedIDs + buried
        guard !all.isEmpty else { return [] }
        // One statement per lease length leases the jobs and hands back their rows. The
        // statements are prepared once per batch size and their rows decoded in place:
        // preparing and copying were a third of a no-op drain's claim time.
        var byID: [JobID: JobRecord] = [:]
        byID.reserveCapacity(all.count)
        var dates = StoredDate.Reader()
        for (lease, leaseIDs) in claimedByLease {
            for ids in SQLTextByCount.batches(of: leaseIDs) {
                let size = SQLTextByCount.batchSize(for: ids.count)
                let leasing = try HotStatement(db, sql: Self.leaseSQL(size))
                leasing.bind(owner, at: 1)
                leasing.bind(now.addingTimeInterval(lease), at: 2)
                leasing.bind(now, at: 3)
                leasing.bind(now, at: 4)
                leasing.bind(ids, paddedTo: size, from: 5)
                while try leasing.step() {
                    let record = try JobRecord(statement: leasing, dates: &dates)
                    byID[record.id] = record
                }
            }
        }
        if !buried.isEmpty {
            let rows = try Row.fetchCursor(
                db, sql: "SELECT \(JobRecord.sqliteColumns) FROM lifecycle_jobs WHERE id IN (\(databaseQuestionMarks(count: buried.count)))",
                arguments: StatementArguments(buried))
            while let row = try rows.next() {
                let record = try JobRecord(row: row, dates: &dates)
                byID[record.id] = record
            }
        }
        var steps: [JobID: [String: String?]] = [:]
        for ids in SQLTextByCount.batches(of: all) {
            let size = SQLTextByCount.batchSize(for: ids.count)
            let finishedSteps = try HotStatement(db, sql: Self.finishedStepsSQL(size))
            finishedSteps.bind(ids, paddedTo: size, from: 1)
            while try finishedSteps.step() {
                steps[finishedSteps.int64(0), default: [:]][finishedSteps.text(1) ?? ""] = .some(finishedSteps.text(2))
            }
        }
        return all.compactMap { id in byID[id].map { ClaimedJob(record: $0, finishedSteps: steps[id] ?? [:]) } }
    }

    public func heartbeat(jobIDs: [JobID], owner: String, lease: TimeInterval, now: Date) async throws -> Set<JobID> {
        guard !jobIDs.isEmpty else { return [] }
        return try await pool.write { db in
            try db.execute(
                sql: "UPDATE lifecycle_jobs SET lease_expires_at = ? WHERE id IN (\(databaseQuestionMarks(count: jobIDs.count))) AND lease_owner = ? AND state = 'running'",
                arguments: StatementArguments([now.addingTimeInterval(lease).stored]) + StatementArguments(jobIDs) + [owner])
            return try JobID.fetchSet(
                db,
                sql: "SELECT id FROM lifecycle_jobs WHERE id IN (\(databaseQuestionMarks(count: jobIDs.count))) AND state = 'running' AND lease_owner <> ?",
                arguments: StatementArguments(jobIDs) + [owner])
        }
    }

    public func markFailed(jobID: JobID, owner: String, error: String, retryAt: Date?, now: Date) async throws -> JobState {
        try await pool.write { db in
            guard let row = try Row.fetchOne(
                db,
                sql: """
                    UPDATE lifecycle_jobs SET
                      state = CASE WHEN cancel_requested THEN 'cancelled' WHEN ? IS NULL THEN 'dead' ELSE 'retrying' END,
                      run_at = COALESCE(?, run_at), last_error = ?, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?,
                      finished_at = CASE WHEN cancel_requested OR ? IS NULL THEN ? ELSE NULL END
                    WHERE id = ? AND lease_owner = ? AND state = 'running'
                    RETURNING state
                    """,
                arguments: [retryAt?.stored, retryAt?.stored, String(error.prefix(4_000)), now.stored, retryAt?.stored, now.stored, jobID, owner])
            else { throw JobRunnerError.leaseLost(jobID) }
            return JobState(rawValue: row[0]) ?? .dead
        }
    }

    public func release(jobID: JobID, owner: String, reason: String?, now: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE lifecycle_jobs SET state = CASE WHEN attempt <= 1 THEN 'queued' ELSE 'retrying' END, attempt = attempt - 1,
                      lease_owner = NULL, lease_expires_at = NULL, updated_at = ?, last_error = COALESCE(?, last_error)
                    WHERE id = ? AND lease_owner = ? AND state = 'running'
                    """,
                arguments: [now.stored, reason.map { String($0.prefix(4_000)) }, jobID, owner])
            // Another worker of this machine takes it up at once.
            self.workSignal.arm(db)
        }
    }

    public func markCancelled(jobID: JobID, owner: String, reason: String?, now: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE lifecycle_jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = ?, updated_at = ?,
                        last_error = COALESCE(?, last_error)
                    WHERE id = ? AND lease_owner = ? AND state = 'running'
                    """,
                arguments: [now.stored, now.stored, reason, jobID, owner])
        }
    }

    public func cancel(jobID: JobID, now: Date) async throws -> JobRecord? {
        try await pool.write { db in try self.cancel(jobID: jobID, now: now, in: SQLiteTransaction(db: db)) }
    }

    public func cancel(jobID: JobID, now: Date, in tx: SQLiteTransaction) throws -> JobRecord? {
        guard let job = try job(id: jobID, in: tx) else { return nil }
        switch job.state {
        case .queued, .retrying:
            try tx.db.execute(
                sql: "UPDATE lifecycle_jobs SET state = 'cancelled', finished_at = ?, updated_at = ? WHERE id = ?",
                arguments: [now.stored, now.stored, jobID])
        case .running:
            try tx.db.execute(sql: "UPDATE lifecycle_jobs SET cancel_requested = 1, updated_at = ? WHERE id = ?", arguments: [now.stored, jobID])
        case .succeeded, .dead, .cancelled:
            break
        }
        return try self.job(id: jobID, in: tx)
    }

    public func retry(jobID: JobID, now: Date) async throws -> JobRecord? {
        try await pool.write { db in
            let tx = SQLiteTransaction(db: db)
            guard let job = try self.job(id: jobID, in: tx) else { return nil }
            switch job.state {
            case .dead, .cancelled:
                if let key = job.uniqueKey, let live = try self.liveJob(uniqueKey: key, in: tx) {
                    throw JobRunnerError.invalidPolicy(
                        "job \(jobID) cannot be retried: job \(live.id) already holds its unique key '\(key)' and is \(live.state.rawValue)")
                }
                try db.execute(
                    sql: """
                        UPDATE lifecycle_jobs SET state = 'queued', attempt = 0, run_at = ?, cancel_requested = 0, finished_at = NULL, updated_at = ?
                        WHERE id = ?
                        """,
                    arguments: [now.stored, now.stored, jobID])
            case .queued, .retrying:
                // "Retry" on a waiting job means: run it now instead of after its backoff.
                try db.execute(sql: "UPDATE lifecycle_jobs SET run_at = ?, updated_at = ? WHERE id = ?", arguments: [now.stored, now.stored, jobID])
            case .running, .succeeded:
                throw JobRunnerError.notRetryable(jobID, job.state)
            }
            self.workSignal.arm(db)
            return try self.job(id: jobID, in: tx)
        }
    }

    public func job(id: JobID) async throws -> JobRecord? {
        try await pool.read { db in try self.job(id: id, in: SQLiteTransaction(db: db)) }
    }

    public func job(id: JobID, in tx: SQLiteTransaction) throws -> JobRecord? {
        try Row.fetchOne(tx.db.cachedStatement(sql: "SELECT \(JobRecord.sqliteColumns) FROM lifecycle_jobs WHERE id = ?"), arguments: [id]).map(JobRecord.init(row:))
    }

    /// The live job holding a unique key: what keeps the key unique among live jobs, run
    /// inside the write transaction that would add another (see `v8-unique-key-index-without-state`).
    static let liveJobSQL = "SELECT \(JobRecord.sqliteColumns) FROM lifecycle_jobs WHERE unique_key = ? AND state IN ('queued','running','retrying')"

    public func liveJob(uniqueKey: String, in tx: SQLiteTransaction) throws -> JobRecord? {
        try Row.fetchOne(tx.db.cachedStatement(sql: Self.liveJobSQL), arguments: [uniqueKey]).map(JobRecord.init(row:))
    }

    public func jobs(matching filter: JobFilter) async throws -> [JobRecord] {
        var clauses: [String] = []
        var arguments = StatementArguments()
        if !filter.states.isEmpty {
            clauses.append("state IN (\(databaseQuestionMarks(count: filter.states.count)))")
            arguments += StatementArguments(filter.states.map(\.rawValue))
        }
        if !filter.kinds.isEmpty {
            clauses.append("kind IN (\(databaseQuestionMarks(count: filter.kinds.count)))")
            arguments += StatementArguments(filter.kinds)
        }
        if let key = filter.uniqueKey {
            clauses.append("unique_key = ?")
            arguments += [key]
        }
        let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
        arguments += [filter.limit]
        let sql = "SELECT \(JobRecord.sqliteColumns) FROM lifecycle_jobs \(whereClause) ORDER BY id DESC LIMIT ?"
        let finalArguments = arguments
        return try await pool.read { db in
            try Row.fetchAll(db, sql: sql, arguments: finalArguments).map(JobRecord.init(row:))
        }
    }

    public func jobsNeedingAttention(kinds: [String], _ scope: AttentionScope, limit: Int) async throws -> [JobRecord] {
        let waiting: String
        let instant: Date
        switch scope {
        case .stuck(let now):
            waiting = "state IN ('retrying','running') OR (state = 'queued' AND run_at <= :instant)"
            instant = now
        case .overdue(let before):
            waiting = "(state IN ('queued','retrying') AND run_at < :instant) OR (state = 'running' AND lease_expires_at < :instant)"
            instant = before
        }
        let kindClause = kinds.isEmpty ? "" : "AND kind IN (\(kinds.indices.map { ":k\($0)" }.joined(separator: ",")))"
        var arguments: [String: (any DatabaseValueConvertible)?] = ["instant": instant, "limit": limit]
        for (index, kind) in kinds.enumerated() { arguments["k\(index)"] = kind }
        let sql = """
            SELECT \(JobRecord.sqliteColumns) FROM lifecycle_jobs
            WHERE (state = 'dead' OR ((\(waiting)) AND kind NOT IN (SELECT kind FROM lifecycle_paused_kinds))) \(kindClause)
            ORDER BY updated_at, id LIMIT :limit
            """
        let bound = StatementArguments(arguments)
        return try await pool.read { db in try Row.fetchAll(db, sql: sql, arguments: bound).map(JobRecord.init(row:)) }
    }

    public func steps(of jobID: JobID) async throws -> [StepRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM lifecycle_job_steps WHERE job_id = ? ORDER BY finished_at", arguments: [jobID]
            ).map {
                let r = CheckedRow($0, table: "lifecycle_job_steps", key: "step")
                return StepRecord(jobID: try r("job_id"), step: try r("step"), output: try r("output"), finishedAt: try r("finished_at"))
            }
        }
    }

    public func countDue(kinds: [String], now: Date) async throws -> Int {
        let kindClause = kinds.isEmpty ? "" : "AND kind IN (\(kinds.map { _ in "?" }.joined(separator: ",")))"
        let arguments = StatementArguments([now.stored, now.stored]) + StatementArguments(kinds)
        return try await pool.read { db in
            try Int.fetchOne(db, sql: """
                SELECT COUNT(*) FROM lifecycle_jobs
                WHERE ((state IN ('queued','retrying') AND run_at <= ?) OR (state = 'running' AND lease_expires_at < ?)) \(kindClause)
                """, arguments: arguments) ?? 0
        }
    }

    static let settledCountsSQL = """
        SELECT kind, state, COUNT(*) FROM lifecycle_jobs INDEXED BY lifecycle_jobs_kind_state_settled
        WHERE \(OwnSchema.settledStates) GROUP BY kind, state
        """
    static let waitingCountsSQL = """
        SELECT kind, SUM(state = 'queued'), SUM(state = 'retrying') FROM lifecycle_jobs INDEXED BY lifecycle_jobs_ready
        WHERE state IN ('queued','retrying') GROUP BY kind
        """
    static let runningCountsSQL = """
        SELECT kind, COUNT(*) FROM lifecycle_jobs INDEXED BY lifecycle_jobs_leased WHERE state = 'running' GROUP BY kind
        """

    public func countByKindAndState() async throws -> [JobCountKey: Int] {
        try await pool.read { db in
            // Three counts in one read, each from an index the queue keeps anyway: the states
            // jobs end in from their own, the waiting states from the ready index, running
            // from the lease index (the few jobs workers hold). A state with no jobs is absent.
            var counts: [JobCountKey: Int] = [:]
            for row in try Row.fetchAll(db, sql: Self.settledCountsSQL) {
                if let state = JobState(rawValue: row[1]) { counts[JobCountKey(kind: row[0], state: state)] = row[2] }
            }
            for row in try Row.fetchAll(db, sql: Self.waitingCountsSQL) {
                for (state, count) in [(JobState.queued, row[1] as Int), (.retrying, row[2] as Int)] where count > 0 {
                    counts[JobCountKey(kind: row[0], state: state)] = count
                }
            }
            for row in try Row.fetchAll(db, sql: Self.runningCountsSQL) {
                counts[JobCountKey(kind: row[0], state: .running)] = row[1]
            }
            return counts
        }
    }

    public func pause(kind: String, by actor: String, reason: String?, now: Date) async throws -> Bool {
        try await write { tx in
            try tx.db.execute(
                sql: "INSERT INTO lifecycle_paused_kinds (kind, paused_at, paused_by, reason) VALUES (?, ?, ?, ?) ON CONFLICT(kind) DO NOTHING",
                arguments: [kind, now.stored, actor, reason])
            return tx.db.changesCount == 1
        }
    }

    public func resume(kind: String) async throws -> Bool {
        try await write { tx in
            try tx.db.execute(sql: "DELETE FROM lifecycle_paused_kinds WHERE kind = ?", arguments: [kind])
            return tx.db.changesCount == 1
        }
    }

    public func pausedKinds() async throws -> [PausedKind] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT kind, paused_at, paused_by, reason FROM lifecycle_paused_kinds ORDER BY kind").map {
                let r = CheckedRow($0, table: "lifecycle_paused_kinds", key: "kind")
                return PausedKind(kind: try r("kind"), pausedAt: try r("paused_at"), pausedBy: try r("paused_by"), reason: try r("reason"))
            }
        }
    }

    public func claimScheduleSlot(name: String, slot: Date, in tx: SQLiteTransaction) throws -> Bool {
        if let last = try Date.fetchOne(tx.db, sql: "SELECT last_slot FROM lifecycle_job_schedules WHERE name = ?", arguments: [name]),
           last >= slot {
            return false
        }
        try tx.db.execute(
            sql: "INSERT INTO lifecycle_job_schedules (name, last_slot) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET last_slot = excluded.last_slot",
            arguments: [name, slot])
        return true
    }

    public func recordProbeEffect(jobID: JobID, step: String, now: Date, in tx: SQLiteTransaction) throws {
        // A probe job writes two of these, and the benchmark's three-step jobs are probes.
        let insert = try HotStatement(tx.db, sql: "INSERT INTO lifecycle_runner_probe_effects (job_id, step, recorded_at) VALUES (?, ?, ?)")
        insert.bind(jobID, at: 1)
        insert.bind(step, at: 2)
        insert.bind(now, at: 3)
        try insert.execute()
    }

    public func probeEffectCount(jobID: JobID) async throws -> Int {
        try await pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM lifecycle_runner_probe_effects WHERE job_id = ?", arguments: [jobID]) ?? 0
        }
    }
}

/// An SQL text for each count of rows it carries, built on first use.
///
/// A group commit carries however many marks or jobs arrived, so a statement per exact
/// count meant hundreds of statements to prepare (and cache) in a worker's first seconds:
/// a 20,000-job drain spent 5 % of its writer's time preparing them. Callers ask for
/// `batchSize(for:)` rows instead, a power of two, and fill the rest with rows that change
/// nothing (a repeated id in an IN list, a NULL row in a join), or split an INSERT into
/// such sizes (`insertSizes(for:)`). Longer lists go in parts of `largestBatch`
/// (`batches(of:)`), which also keeps a padded list inside SQLite's 32,766 parameters:
/// at most ten statements of each kind.
final class SQLTextByCount: Sendable {
    static let largestBatch = 512

    /// `items` in parts of at most `largestBatch`.
    static func batches<Item>(of items: [Item]) -> [[Item]] {
        items.count <= largestBatch ? [items]
            : stride(from: 0, to: items.count, by: largestBatch).map { Array(items[$0..<min($0 + largestBatch, items.count)]) }
    }

    /// The smallest power of two that holds `count` rows.
    static func batchSize(for count: Int) -> Int {
        count <= 1 ? 1 : 1 << (Int.bitWidth - (count - 1).leadingZeroBitCount)
    }

    /// `count` as a sum of powers of two, largest first: one INSERT each.
    static func insertSizes(for count: Int) -> [Int] {
        var sizes: [Int] = []
        var left = count
        while left > 0 {
            let size = 1 << (Int.bitWidth - 1 - left.leadingZeroBitCount)
            sizes.append(size)
            left -= size
        }
        return sizes
    }

    private let texts = Mutex<[Int: String]>([:])
    private let build: @Sendable (Int) -> String

    init(_ build: @escaping @Sendable (Int) -> String) { self.build = build }

    func callAsFunction(_ count: Int) -> String {
        texts.withLock { texts in
            if let text = texts[count] { return text }
            let text = build(count)
            texts[count] = text
            return text
        }
    }
}
