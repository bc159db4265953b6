import Foundation
import JobRunner
import PostgresNIO

extension JobRecord {
    init(row: PostgresRow) throws {
        let row = row.makeRandomAccess()
        self.init(
            id: try row["id"].decode(Int64.self), kind: try row["kind"].decode(String.self),
            payload: try row["payload"].decode(String.self), uniqueKey: try row["unique_key"].decode(String?.self),
            state: JobState(rawValue: try row["state"].decode(String.self)) ?? .dead,
            attempt: Int(try row["attempt"].decode(Int32.self)), maxAttempts: Int(try row["max_attempts"].decode(Int32.self)),
            runAt: try row["run_at"].decode(Date.self), leaseOwner: try row["lease_owner"].decode(String?.self),
            leaseExpiresAt: try row["lease_expires_at"].decode(Date?.self), lastError: try row["last_error"].decode(String?.self),
            cancelRequested: try row["cancel_requested"].decode(Bool.self), createdAt: try row["created_at"].decode(Date.self),
            updatedAt: try row["updated_at"].decode(Date.self), finishedAt: try row["finished_at"].decode(Date?.self))
    }
}

private let liveStates = ["queued", "running", "retrying"]

extension PostgresStore {
    /// The rows the live-key index holds: an enqueue's ON CONFLICT names the same condition
    /// so that PostgreSQL infers that index (and so must every release still running
    /// against the same database: changing it would fail their enqueues).
    static let liveKeyPredicate = "state IN ('queued','running','retrying')"
}

extension PostgresStore: JobStore {
    /// A savepoint and its release are two round trips per piece of a shared transaction.
    public var savepointsAreCheap: Bool { false }

    /// Two: one fills with pieces while the other waits on its round trips and commit.
    /// Measured with the three-step probe on 2 cores: 1 → 1,664 jobs/s, 2 → 2,416, 5 → 2,076
    /// (more transactions split the pieces into smaller batches, each paying its own
    /// BEGIN, mark statement and commit). Job rows cannot deadlock between the two (marks
    /// lock them in id order, claims and heartbeats skip locked rows); steps that lock the
    /// same account rows in opposite orders can, and then PostgreSQL ends one transaction
    /// after deadlock_timeout and its pieces run again alone: slower, still correct.
    public var concurrentWriteTransactions: Int { 2 }

    public func savepoint<T>(in tx: PostgresTransaction, _ body: () throws -> T) throws -> T {
        // One name serves nested uses too: ROLLBACK TO and RELEASE act on the most recent one.
        // Deferred writes are settled on each side of the savepoint, so each belongs to
        // the piece that sent it and a rolled-back piece's failed write fails nothing else.
        try tx.settleDeferred()
        try tx.execute("SAVEPOINT piece")
        do {
            let result = try body()
            try tx.settleDeferred()
            try tx.execute("RELEASE SAVEPOINT piece")
            return result
        } catch {
            tx.discardDeferred()
            try tx.execute("ROLLBACK TO SAVEPOINT piece")
            try tx.execute("RELEASE SAVEPOINT piece")
            throw error
        }
    }

    public func enqueue(_ request: EnqueueRequest, policy: JobPolicy, now: Date, in tx: PostgresTransaction) throws -> EnqueueOutcome {
        // The live-key index decides races between machines: a losing INSERT waits for the
        // winner's commit, then does nothing, and the SELECT below finds the winner's job.
        // A winner that finished in between frees the key, so try again.
        for _ in 0..<5 {
            if let row = try tx.query(try Self.insertJob(request, policy: policy, now: now)).first {
                return EnqueueOutcome(job: try JobRecord(row: row), created: true)
            }
            if let key = request.uniqueKey, let live = try liveJob(uniqueKey: key, in: tx) {
                return EnqueueOutcome(job: live, created: false)
            }
        }
        throw Self.keptRacing(request)
    }

    /// One job on its own: the INSERT commits by itself, one round trip, where a transaction
    /// would add its BEGIN and COMMIT (what an app pays per request that enqueues). It goes
    /// as a named prepared statement, planned once per connection, unless the URL says
    /// `prepared_statements=false` or the server has already refused one (see
    /// `preparedStatementRefused`).
    public func enqueue(_ request: EnqueueRequest, policy: JobPolicy, now: Date) async throws -> EnqueueOutcome {
        for _ in 0..<5 {
            if let row = try await insertJobAlone(request, policy: policy, now: now) {
                return EnqueueOutcome(job: try JobRecord(row: row), created: true)
            }
            if let key = request.uniqueKey, let row = try await autocommit(Self.liveJob(uniqueKey: key)).first {
                return EnqueueOutcome(job: try JobRecord(row: row), created: false)
            }
        }
        throw Self.keptRacing(request)
    }

    private func insertJobAlone(_ request: EnqueueRequest, policy: JobPolicy, now: Date) async throws -> PostgresRow? {
        if preparedStatements.usable {
            let statement = InsertJobStatement(
                kind: request.kind, payload: request.payload, uniqueKey: request.uniqueKey,
                maxAttempts: try Self.maxAttempts(request, policy: policy), runAt: request.runAt ?? now, now: now)
            do {
                return try await autocommit(statement).first
            } catch let error as PostgresStoreError where Self.preparedStatementRefused(error) {
                // Nothing ran: the statement did not exist (or could not be made) where it was sent.
                preparedStatements.refuse(error, logger: logger)
            } catch let error as PostgresStoreError where error.sqlState == "0A000" {
                // "cached plan must not change result type": a migration changed the table under
                // this connection's statement. Nothing ran, and the connection has been dropped.
            }
        }
        return try await autocommit(try Self.insertJob(request, policy: policy, now: now)).first
    }

    /// A pooler in transaction mode (Supabase's Supavisor on port 6543, PgBouncer before 1.21
    /// or without `max_prepared_statements`) hands each statement to any of its server
    /// connections: one prepared on one of them is missing on another (26000), or one of
    /// that name is there already (42P05). Such a server gets plain statements from then on.
    static func preparedStatementRefused(_ error: PostgresStoreError) -> Bool {
        error.sqlState == "26000" || error.sqlState == "42P05"
    }

    /// The column is an int4: a larger count is refused as the server would refuse it
    /// (22003, out of range), not trapped on in the conversion.
    static func maxAttempts(_ request: EnqueueRequest, policy: JobPolicy) throws -> Int32 {
        let wanted = request.maxAttempts ?? policy.maxAttempts
        guard let attempts = Int32(exactly: wanted) else {
            throw PostgresStoreError.query("max attempts of a \(request.kind) job must be at most \(Int32.max) (got \(wanted))", sqlState: "22003")
        }
        return attempts
    }

    private static func insertJob(_ request: EnqueueRequest, policy: JobPolicy, now: Date) throws -> PostgresQuery {
        let maxAttempts = try Self.maxAttempts(request, policy: policy)
        return """
            INSERT INTO lifecycle.jobs (kind, payload, unique_key, state, attempt, max_attempts, run_at, created_at, updated_at)
            VALUES (\(request.kind), \(request.payload), \(request.uniqueKey), 'queued', 0, \(maxAttempts), \(request.runAt ?? now), \(now), \(now))
            ON CONFLICT (unique_key) WHERE \(unescaped: Self.liveKeyPredicate) DO NOTHING
            RETURNING *, pg_notify(\(JobNotifications.channel), '') IS NULL AS notified
            """
    }

    private static func keptRacing(_ request: EnqueueRequest) -> PostgresStoreError {
        .query("enqueue of \(request.kind) with unique key \(request.uniqueKey ?? "-") kept racing; try again", sqlState: nil)
    }

    public func enqueue(many requests: [EnqueueRequest], policy: JobPolicy, now: Date, in tx: PostgresTransaction) throws -> [EnqueuedJob] {
        var enqueued = [EnqueuedJob?](repeating: nil, count: requests.count)
        var plain: [Int] = []
        for (index, request) in requests.enumerated() {
            if request.uniqueKey != nil {
                let outcome = try enqueue(request, policy: policy, now: now, in: tx)
                enqueued[index] = EnqueuedJob(id: outcome.job.id, created: outcome.created)
            } else {
                plain.append(index)
            }
        }
        // Up to 10,000 rows per statement: arrays of that size stay well inside one message.
        for chunk in stride(from: 0, to: plain.count, by: 10_000).map({ Array(plain[$0..<min($0 + 10_000, plain.count)]) }) {
            let kinds = chunk.map { requests[$0].kind }
            let payloads = chunk.map { requests[$0].payload }
            let attempts = try chunk.map { try Self.maxAttempts(requests[$0], policy: policy) }
            let runAts = chunk.map { requests[$0].runAt ?? now }
            // Ids come from the sequence in row order, so sorted they match the requests.
            let ids = try tx.query("""
                WITH inserted AS (
                    INSERT INTO lifecycle.jobs (kind, payload, state, attempt, max_attempts, run_at, created_at, updated_at)
                    SELECT r.kind, r.payload, 'queued', 0, r.max_attempts, r.run_at, \(now), \(now)
                    FROM unnest(\(kinds)::text[], \(payloads)::text[], \(attempts)::int4[], \(runAts)::timestamptz[])
                         WITH ORDINALITY AS r(kind, payload, max_attempts, run_at, n)
                    ORDER BY r.n
                    RETURNING id
                )
                SELECT id FROM inserted ORDER BY id
                """).map { try $0.decode(Int64.self) }
            guard ids.count == chunk.count else {
                throw PostgresStoreError.query("bulk enqueue stored \(ids.count) of \(chunk.count) jobs", sqlState: nil)
            }
            for (index, id) in zip(chunk, ids) { enqueued[index] = EnqueuedJob(id: id, created: true) }
        }
        if !plain.isEmpty { try notifyWorkers(in: tx) }
        return enqueued.map { $0! }
    }

    public func waitForWork(timeout: TimeInterval) async {
        await notifications.wait(timeout: timeout)
    }

    public func startWatchingForWork() async {
        await notifications.start()
    }

    /// Wakes the idle workers listening on any machine once this transaction commits.
    func notifyWorkers(in tx: PostgresTransaction) throws {
        try tx.query("SELECT pg_notify(\(JobNotifications.channel), '')")
    }

    public func markSucceeded(jobID: JobID, owner: String, now: Date, in tx: PostgresTransaction) throws {
        let changed = try tx.execute("""
            UPDATE lifecycle.jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, finished_at = \(now), updated_at = \(now)
            WHERE id = \(jobID) AND lease_owner = \(owner) AND state = 'running'
            """)
        guard changed == 1 else { throw JobRunnerError.leaseLost(jobID) }
    }

    public func markStepsDone(_ marks: [StepMark], in tx: PostgresTransaction) throws -> [Bool?] {
        guard !marks.isEmpty else { return [] }
        let rows = try tx.query(prepared: MarkStepsStatement(marks: marks))
        // Per owner: a mark of another owner than the job's holds no lease on it.
        var fenced: [String: [JobID: Bool]] = [:]
        for row in rows {
            let (id, owner, cancelRequested) = try row.decode((Int64, String, Bool).self)
            fenced[owner, default: [:]][id] = cancelRequested
        }
        for mark in marks where mark.finishesJob && fenced[mark.owner]?[mark.jobID] != nil {
            guard let reason = mark.stopped else { continue }
            try tx.execute("""
                INSERT INTO lifecycle.unreported_stops (job_id, kind, reason, stopped_at)
                SELECT id, kind, \(reason), \(mark.now) FROM lifecycle.jobs WHERE id = \(mark.jobID)
                """)
        }
        // A finishing mark ends the job, so a cancel request no longer matters to it.
        return marks.map { mark in fenced[mark.owner]?[mark.jobID].map { mark.finishesJob ? false : $0 } }
    }

    public func takeUnreportedStops(kinds: [String]?) async throws -> [UnreportedStop] {
        guard kinds?.isEmpty != true else { return [] }
        return try await write { tx in
            try tx.query("""
                DELETE FROM lifecycle.unreported_stops WHERE \(kinds == nil) OR kind = ANY(\(kinds ?? []))
                RETURNING job_id, kind, reason, stopped_at
                """).map { row in
                let (id, kind, reason, stoppedAt) = try row.decode((Int64, String, String, Date).self)
                return UnreportedStop(jobID: id, kind: kind, reason: reason, stoppedAt: stoppedAt)
            }.sorted { ($0.stoppedAt, $0.jobID) < ($1.stoppedAt, $1.jobID) }
        }
    }

    public func claim(_ request: ClaimRequest) async throws -> [ClaimedJob] {
        try await write { tx in try self.claim(request, in: tx) }
    }

    public func claim(_ request: ClaimRequest, in tx: PostgresTransaction) throws -> [ClaimedJob] {
        let (quota, leases, owner, holding, now) = (request.quota, request.leases, request.owner, request.holding, request.now)
        let wanted = quota.filter { $0.value > 0 }
        guard !wanted.isEmpty else { return [] }
        let kinds = Array(wanted.keys)
        let counts = kinds.map { Int64(wanted[$0]!) }
        let total = counts.reduce(0, +)
        let defaultLease = JobPolicy().lease
        // The claim looks rows up by a batch of ids (the ones it just locked, their steps).
        // On a queue table that filled faster than autovacuum analyses it, the default
        // random_page_cost prices 128 index probes above reading the whole table, which
        // the planner then does, milliseconds per claim; 1.1 is the usual SSD setting.
        tx.executeDeferred("SET LOCAL random_page_cost = 1.1")
        // SKIP LOCKED: rows another worker is claiming right now are passed over,
        // not waited for, so claims on many machines never queue behind each other.
        // Rescue first: a job whose worker died should not wait behind new work.
        let rescued = try tx.query(prepared: RescueStatement(now: now, kinds: kinds, holding: Array(holding), total: total))
        let ready = try tx.query(prepared: ReadyJobsStatement(kinds: kinds, counts: counts, now: now))
        var remaining = wanted
        var claimIDs: [Int64] = []
        var claimLeases: [Double] = []
        var buried: [Int64] = []
        for (row, isRescue) in rescued.map({ ($0, true) }) + ready.map({ ($0, false) }) {
            let (id, kind, attempt, maxAttempts) = try row.decode((Int64, String, Int32, Int32).self)
            guard let left = remaining[kind], left > 0 else { continue }
            remaining[kind] = left - 1
            if isRescue && attempt >= maxAttempts {
                buried.append(id)
            } else {
                claimIDs.append(id)
                claimLeases.append(leases[kind] ?? defaultLease)
            }
        }
        var records: [JobID: JobRecord] = [:]
        if !claimIDs.isEmpty {
            for row in try tx.query(prepared: LeaseJobsStatement(owner: owner, now: now, ids: claimIDs, leases: claimLeases)) {
                let record = try JobRecord(row: row)
                records[record.id] = record
            }
        }
        if !buried.isEmpty {
            for row in try tx.query("""
                UPDATE lifecycle.jobs SET state = 'dead', lease_owner = NULL, lease_expires_at = NULL, finished_at = \(now), updated_at = \(now),
                  last_error = 'worker lost (lease expired) during the final attempt' || COALESCE(' after: ' || last_error, '')
                WHERE id = ANY(\(buried))
                RETURNING *
                """) {
                let record = try JobRecord(row: row)
                records[record.id] = record
            }
        }
        let all = claimIDs + buried
        guard !all.isEmpty else { return [] }
        var steps: [JobID: [String: String?]] = [:]
        for row in try tx.query(prepared: FinishedStepsStatement(jobIDs: claimIDs)) {
            let (jobID, step, output) = try row.decode((Int64, String, String?).self)
            steps[jobID, default: [:]][step] = .some(output)
        }
        return all.compactMap { id in records[id].map { ClaimedJob(record: $0, finishedSteps: steps[id] ?? [:]) } }
    }

    public func heartbeat(jobIDs: [JobID], owner: String, lease: TimeInterval, now: Date) async throws -> Set<JobID> {
        guard !jobIDs.isEmpty else { return [] }
        return try await write { tx in
            // Rows this worker is completing right now are locked by its own completion
            // transaction: skip them rather than wait, so the two never deadlock over
            // rows taken in different orders. They are not taken over either.
            Set(try tx.query("""
                WITH locked AS (
                    SELECT id FROM lifecycle.jobs WHERE id = ANY(\(jobIDs)) AND lease_owner = \(owner) AND state = 'running'
                    ORDER BY id FOR UPDATE SKIP LOCKED
                ), extended AS (
                    UPDATE lifecycle.jobs SET lease_expires_at = \(now.addingTimeInterval(lease)) FROM locked WHERE jobs.id = locked.id
                )
                SELECT id FROM lifecycle.jobs WHERE id = ANY(\(jobIDs)) AND state = 'running' AND lease_owner <> \(owner)
                """).map { try $0.decode(Int64.self) })
        }
    }

    public func markFailed(jobID: JobID, owner: String, error: String, retryAt: Date?, now: Date) async throws -> JobState {
        let message = String(error.prefix(4_000))
        return try await write { tx in
            guard let row = try tx.query("""
                UPDATE lifecycle.jobs SET
                  state = CASE WHEN cancel_requested THEN 'cancelled' WHEN \(retryAt)::timestamptz IS NULL THEN 'dead' ELSE 'retrying' END,
                  run_at = COALESCE(\(retryAt)::timestamptz, run_at), last_error = \(message), lease_owner = NULL, lease_expires_at = NULL,
                  updated_at = \(now),
                  finished_at = CASE WHEN cancel_requested OR \(retryAt)::timestamptz IS NULL THEN \(now) ELSE NULL END
                WHERE id = \(jobID) AND lease_owner = \(owner) AND state = 'running'
                RETURNING state
                """).first
            else { throw JobRunnerError.leaseLost(jobID) }
            return JobState(rawValue: try row.decode(String.self)) ?? .dead
        }
    }

    public func release(jobID: JobID, owner: String, reason: String?, now: Date) async throws {
        let reason = reason.map { String($0.prefix(4_000)) }
        _ = try await write { tx in
            try tx.execute("""
                UPDATE lifecycle.jobs SET state = CASE WHEN attempt <= 1 THEN 'queued' ELSE 'retrying' END, attempt = attempt - 1,
                  lease_owner = NULL, lease_expires_at = NULL, updated_at = \(now), last_error = COALESCE(\(reason), last_error)
                WHERE id = \(jobID) AND lease_owner = \(owner) AND state = 'running'
                """)
            try self.notifyWorkers(in: tx)
        }
    }

    public func markCancelled(jobID: JobID, owner: String, reason: String?, now: Date) async throws {
        _ = try await write { tx in
            try tx.execute("""
                UPDATE lifecycle.jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = \(now), updated_at = \(now),
                    last_error = COALESCE(\(reason), last_error)
                WHERE id = \(jobID) AND lease_owner = \(owner) AND state = 'running'
                """)
        }
    }

    public func cancel(jobID: JobID, now: Date) async throws -> JobRecord? {
        try await write { tx in try self.cancel(jobID: jobID, now: now, in: tx) }
    }

    public func cancel(jobID: JobID, now: Date, in tx: PostgresTransaction) throws -> JobRecord? {
        // The row lock keeps a claim from slipping in between the look and the change.
        guard let row = try tx.query("SELECT * FROM lifecycle.jobs WHERE id = \(jobID) FOR UPDATE").first else { return nil }
        let job = try JobRecord(row: row)
        switch job.state {
        case .queued, .retrying:
            try tx.execute("UPDATE lifecycle.jobs SET state = 'cancelled', finished_at = \(now), updated_at = \(now) WHERE id = \(jobID)")
        case .running:
            try tx.execute("UPDATE lifecycle.jobs SET cancel_requested = TRUE, updated_at = \(now) WHERE id = \(jobID)")
        case .succeeded, .dead, .cancelled:
            return job
        }
        return try self.job(id: jobID, in: tx)
    }

    public func retry(jobID: JobID, now: Date) async throws -> JobRecord? {
        try await write { tx in
            guard let row = try tx.query("SELECT * FROM lifecycle.jobs WHERE id = \(jobID) FOR UPDATE").first else { return nil }
            let job = try JobRecord(row: row)
            switch job.state {
            case .dead, .cancelled:
                if let key = job.uniqueKey, let live = try self.liveJob(uniqueKey: key, in: tx) {
                    throw JobRunnerError.invalidPolicy(
                        "job \(jobID) cannot be retried: job \(live.id) already holds its unique key '\(key)' and is \(live.state.rawValue)")
                }
                try tx.execute("""
                    UPDATE lifecycle.jobs SET state = 'queued', attempt = 0, run_at = \(now), cancel_requested = FALSE, finished_at = NULL, updated_at = \(now)
                    WHERE id = \(jobID)
                    """)
            case .queued, .retrying:
                // "Retry" on a waiting job means: run it now instead of after its backoff.
                try tx.execute("UPDATE lifecycle.jobs SET run_at = \(now), updated_at = \(now) WHERE id = \(jobID)")
            case .running, .succeeded:
                throw JobRunnerError.notRetryable(jobID, job.state)
            }
            try self.notifyWorkers(in: tx)
            return try self.job(id: jobID, in: tx)
        }
    }

    public func job(id: JobID) async throws -> JobRecord? {
        try await read { tx in try self.job(id: id, in: tx) }
    }

    public func job(id: JobID, in tx: PostgresTransaction) throws -> JobRecord? {
        try tx.query("SELECT * FROM lifecycle.jobs WHERE id = \(id)").first.map(JobRecord.init(row:))
    }

    public func liveJob(uniqueKey: String, in tx: PostgresTransaction) throws -> JobRecord? {
        try tx.query(Self.liveJob(uniqueKey: uniqueKey)).first.map(JobRecord.init(row:))
    }

    private static func liveJob(uniqueKey: String) -> PostgresQuery {
        "SELECT * FROM lifecycle.jobs WHERE unique_key = \(uniqueKey) AND state IN ('queued','running','retrying')"
    }

    public func jobs(matching filter: JobFilter) async throws -> [JobRecord] {
        // Empty arrays mean "any": one statement whatever the filter, with every value bound.
        let states = filter.states.map(\.rawValue)
        let kinds = filter.kinds
        let key = filter.uniqueKey
        let limit = filter.limit
        return try await read { tx in
            try tx.query("""
                SELECT * FROM lifecycle.jobs
                WHERE (cardinality(\(states)::text[]) = 0 OR state = ANY(\(states)::text[]))
                  AND (cardinality(\(kinds)::text[]) = 0 OR kind = ANY(\(kinds)::text[]))
                  AND (\(key)::text IS NULL OR unique_key = \(key)::text)
                ORDER BY id DESC LIMIT \(limit)
                """).map(JobRecord.init(row:))
        }
    }

    public func jobsNeedingAttention(kinds: [String], _ scope: AttentionScope, limit: Int) async throws -> [JobRecord] {
        try await read { tx in
            switch scope {
            case .stuck(let now):
                try tx.query("""
                    SELECT * FROM lifecycle.jobs
                    WHERE (state = 'dead' OR ((state IN ('retrying','running') OR (state = 'queued' AND run_at <= \(now)))
                                              AND kind NOT IN (SELECT kind FROM lifecycle.paused_kinds)))
                      AND (cardinality(\(kinds)::text[]) = 0 OR kind = ANY(\(kinds)::text[]))
                    ORDER BY updated_at, id LIMIT \(limit)
                    """).map(JobRecord.init(row:))
            case .overdue(let before):
                try tx.query("""
                    SELECT * FROM lifecycle.jobs
                    WHERE (state = 'dead' OR (((state IN ('queued','retrying') AND run_at < \(before))
                                               OR (state = 'running' AND lease_expires_at < \(before)))
                                              AND kind NOT IN (SELECT kind FROM lifecycle.paused_kinds)))
                      AND (cardinality(\(kinds)::text[]) = 0 OR kind = ANY(\(kinds)::text[]))
                    ORDER BY updated_at, id LIMIT \(limit)
                    """).map(JobRecord.init(row:))
            }
        }
    }

    public func steps(of jobID: JobID) async throws -> [StepRecord] {
        try await read { tx in
            try tx.query("SELECT job_id, step, output, finished_at FROM lifecycle.job_steps WHERE job_id = \(jobID) ORDER BY finished_at, step").map { row in
                let (id, step, output, finishedAt) = try row.decode((Int64, String, String?, Date).self)
                return StepRecord(jobID: id, step: step, output: output, finishedAt: finishedAt)
            }
        }
    }

    public func countDue(kinds: [String], now: Date) async throws -> Int {
        try await read { tx in
            Int(try tx.query("""
                SELECT COUNT(*) FROM lifecycle.jobs
                WHERE ((state IN ('queued','retrying') AND run_at <= \(now)) OR (state = 'running' AND lease_expires_at < \(now)))
                  AND (cardinality(\(kinds)::text[]) = 0 OR kind = ANY(\(kinds)::text[]))
                """).first?.decode(Int64.self) ?? 0)
        }
    }

    public func countByKindAndState() async throws -> [JobCountKey: Int] {
        try await read { tx in
            var counts: [JobCountKey: Int] = [:]
            for row in try tx.query("SELECT kind, state, COUNT(*) FROM lifecycle.jobs GROUP BY kind, state") {
                let (kind, state, count) = try row.decode((String, String, Int64).self)
                if let state = JobState(rawValue: state) { counts[JobCountKey(kind: kind, state: state)] = Int(count) }
            }
            return counts
        }
    }

    public func pause(kind: String, by actor: String, reason: String?, now: Date) async throws -> Bool {
        try await write { tx in
            try tx.query("""
                INSERT INTO lifecycle.paused_kinds (kind, paused_at, paused_by, reason) VALUES (\(kind), \(now), \(actor), \(reason))
                ON CONFLICT (kind) DO NOTHING RETURNING kind
                """).count == 1
        }
    }

    public func resume(kind: String) async throws -> Bool {
        try await write { tx in
            try tx.query("DELETE FROM lifecycle.paused_kinds WHERE kind = \(kind) RETURNING kind").count == 1
        }
    }

    public func pausedKinds() async throws -> [PausedKind] {
        try await read { tx in
            try tx.query("SELECT kind, paused_at, paused_by, reason FROM lifecycle.paused_kinds ORDER BY kind").map { row in
                let (kind, at, by, reason) = try row.decode((String, Date, String, String?).self)
                return PausedKind(kind: kind, pausedAt: at, pausedBy: by, reason: reason)
            }
        }
    }

    public func claimScheduleSlot(name: String, slot: Date, in tx: PostgresTransaction) throws -> Bool {
        // One statement: the row lock on the schedule decides between racing machines.
        try !tx.query("""
            INSERT INTO lifecycle.job_schedules (name, last_slot) VALUES (\(name), \(slot))
            ON CONFLICT (name) DO UPDATE SET last_slot = EXCLUDED.last_slot WHERE job_schedules.last_slot < EXCLUDED.last_slot
            RETURNING name
            """).isEmpty
    }

    public func recordProbeEffect(jobID: JobID, step: String, now: Date, in tx: PostgresTransaction) throws {
        // Nothing reads its result: it goes with the other jobs' rows in this group commit.
        tx.insertDeferred(into: "lifecycle.runner_probe_effects", columns: ["job_id", "step", "recorded_at"]) { row in
            row.append(jobID)
            row.append(step)
            row.append(now)
        }
    }

    public func probeEffectCount(jobID: JobID) async throws -> Int {
        try await read { tx in
            Int(try tx.query("SELECT COUNT(*) FROM lifecycle.runner_probe_effects WHERE job_id = \(jobID)").first?.decode(Int64.self) ?? 0)
        }
    }
}
