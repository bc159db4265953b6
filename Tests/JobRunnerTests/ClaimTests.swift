import Foundation
import GRDB
import JobRunner
@testable import PostgresBackend
import PostgresNIO
import PostgresTesting
@testable import SQLiteBackend
import Testing

@Suite struct ClaimTests {
    /// One claim over several kinds takes the oldest due jobs first, each kind up to its
    /// quota, and none of a paused kind or of one not yet due.
    @Test(arguments: Backend.allCases)
    func aClaimTakesTheOldestDueJobsOfEachKindUpToItsQuota(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let (a, b, paused) = ("test.a", "test.b", "test.paused")
            var byOffset: [Int: JobID] = [:]
            // Enqueued newest first, so id order and time order disagree.
            for (kind, offset) in [(a, 7), (b, 6), (a, 5), (b, 4), (a, 3), (b, 2), (a, 1), (paused, 0), (a, 20)] {
                let request = EnqueueRequest(kind: kind, payload: "{}", runAt: epoch.addingTimeInterval(Double(offset)))
                byOffset[offset] = try await enqueue(store, request, now: epoch).job.id
            }
            _ = try await store.pause(kind: paused, by: "test", reason: nil, now: epoch)
            let claimed = try await store.claim(
                quota: [a: 2, b: 3, paused: 5], leases: [a: 60, b: 60, paused: 60], owner: "A", now: epoch.addingTimeInterval(10.1234))
            #expect(claimed.map(\.record.id) == [1, 2, 3, 4, 6].map { byOffset[$0]! })
            #expect(claimed.allSatisfy { $0.record.state == .running && $0.record.leaseOwner == "A" })
            // What the claim hands back is the row as stored, dates to the millisecond included.
            for job in claimed { #expect(try await store.job(id: job.record.id) == job.record) }
        }
        try await check(try await backend.makeStore())
    }

    /// SQLite prepares its batch statements for powers of two and fills the rest with rows
    /// that change nothing; a batch of any size (growing and shrinking, odd and even)
    /// claims, rescues, marks and finishes exactly its own jobs, once each, and a mark whose
    /// lease is not its owner's writes nothing.
    @Test(arguments: Backend.allCases)
    func batchesOfEverySizeTouchOnlyTheirOwnJobs(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            for size in [1, 2, 3, 5, 7, 8, 9, 17, 33, 6, 4, 513] {
                let kind = "test.size\(size)"
                let requests = Array(repeating: EnqueueRequest(kind: kind, payload: "{}"), count: size + 3)
                let ids = try await store.write { tx in try store.enqueue(many: requests, policy: JobPolicy(), now: epoch, in: tx) }.map(\.id)
                let claimed = try await store.claim(quota: [kind: size], leases: [kind: 60], owner: "A", now: epoch)
                #expect(claimed.map(\.record.id) == Array(ids.prefix(size)), "size \(size)")
                #expect(claimed.allSatisfy { $0.record.attempt == 1 }, "size \(size)")
                // A step that does not finish each job; one more mark names a job of the
                // batch but another owner.
                let firstMarks = claimed.map { StepMark(jobID: $0.record.id, step: "first", output: "1", finishesJob: false, owner: "A", now: epoch) }
                    + [StepMark(jobID: ids[0], step: "stranger", output: nil, finishesJob: true, owner: "B", now: epoch)]
                let firstResults = try await store.write { tx in try store.markStepsDone(firstMarks, in: tx) }
                #expect(firstResults == Array(repeating: false, count: size) + [nil], "size \(size)")
                // Owner A is lost: C rescues the jobs, each with its finished step, and
                // finishes them (the first job with one step more, so the count is odd).
                let rescued = try await store.claim(quota: [kind: size], leases: [kind: 60], owner: "C", now: epoch.addingTimeInterval(61))
                // Rescues come oldest lease first; these leases all ran out at the same moment.
                #expect(rescued.map(\.record.id).sorted() == Array(ids.prefix(size)), "size \(size)")
                #expect(rescued.allSatisfy { $0.record.attempt == 2 && $0.finishedSteps == ["first": "1"] }, "size \(size)")
                let lastMarks = [StepMark(jobID: ids[0], step: "middle", output: nil, finishesJob: false, owner: "C", now: epoch)]
                    + rescued.map { StepMark(jobID: $0.record.id, step: "last", output: nil, finishesJob: true, owner: "C", now: epoch) }
                let lastResults = try await store.write { tx in try store.markStepsDone(lastMarks, in: tx) }
                #expect(lastResults == Array(repeating: false, count: size + 1), "size \(size)")
                for id in ids.prefix(size) {
                    #expect(try await store.job(id: id)?.state == .succeeded, "size \(size)")
                    let expected = id == ids[0] ? ["first", "last", "middle"] : ["first", "last"]
                    #expect(try await store.steps(of: id).map(\.step).sorted() == expected, "size \(size)")
                }
                for id in ids.dropFirst(size) {
                    #expect(try await store.job(id: id)?.state == .queued, "size \(size)")
                    #expect(try await store.steps(of: id).isEmpty, "size \(size)")
                }
            }
        }
        try await check(try await backend.makeStore())
    }

    /// SQLite tests an IN list of three or more constants in an index's condition or a CHECK
    /// by building a temporary b-tree each time, twice for each row a claim or a finish
    /// changes: the job table's tests on the state are comparisons (v10), and the CHECK
    /// still refuses a state lifecycle does not know.
    @Test func theJobTablesStateTestsAreComparisonsAndStillRefuseAnUnknownState() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("state-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: directory + "/test.sqlite")
        let texts = try await store.read { tx in
            try String.fetchAll(tx.db, sql: "SELECT sql FROM sqlite_master WHERE tbl_name = 'lifecycle_jobs' AND sql IS NOT NULL")
        }
        let longInList = /IN\s*\(\s*'[^']*'\s*,\s*'[^']*'\s*,/
        #expect(texts.count == 6)
        for text in texts { #expect(text.firstMatch(of: longInList) == nil, "\(text)") }
        await #expect {
            try await store.write { tx in
                try tx.db.execute(sql: """
                    INSERT INTO lifecycle_jobs (kind, state, max_attempts, run_at, created_at, updated_at)
                    VALUES ('test.a', 'paused', 1, '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000')
                    """)
            }
        } throws: { error in
            (error as? DatabaseError)?.resultCode == .SQLITE_CONSTRAINT && "\(error)".contains("CHECK constraint failed")
        }
    }

    /// A claimed row holding a date lifecycle cannot read (written into the file by hand)
    /// fails the claim with the job and column named, instead of stopping the process, and
    /// leaves every job as it was: the claim's transaction is rolled back whole.
    @Test func aClaimedRowWithAnUnreadableDateFailsTheClaimAndChangesNothing() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("unreadable-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: directory + "/test.sqlite")
        let requests = (0..<3).map { _ in EnqueueRequest(kind: "test.a", payload: "{}") }
        let enqueued = try await store.write { tx in try store.enqueue(many: requests, policy: JobPolicy(), now: epoch, in: tx) }
        let damaged = enqueued[1].id
        try await store.write { tx in
            try tx.db.execute(sql: "UPDATE lifecycle_jobs SET created_at = 'last tuesday' WHERE id = ?", arguments: [damaged])
        }
        await #expect {
            try await store.claim(quota: ["test.a": 3], leases: ["test.a": 60], owner: "A", now: epoch)
        } throws: { error in
            "\(error)".contains("job \(damaged) has created_at \"last tuesday\"")
        }
        // Read as text: GRDB's decoding of the damaged row would stop the test process.
        let rows = try await store.read { tx in
            try Row.fetchAll(tx.db, sql: "SELECT state, attempt, lease_owner FROM lifecycle_jobs ORDER BY id").map { row in
                "\(row["state"] as String) \(row["attempt"] as Int) \(row["lease_owner"] as String? ?? "none")"
            }
        }
        #expect(rows == ["queued 0 none", "queued 0 none", "queued 0 none"])
    }

    /// The claim's lookups read the queue in index order and stop at their limit. Without
    /// the index names SQLite's planner chose the (kind, state) index, then read and sorted
    /// every queued job of the kind on each claim. Checked with planner statistics present
    /// too (an operator may run ANALYZE), over a queue with finished and waiting jobs.
    @Test func theClaimReadsTheQueueInIndexOrderWithoutSorting() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("claim-plan-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: directory + "/test.sqlite")
        let requests = (0..<400).map { EnqueueRequest(kind: $0 % 2 == 0 ? "test.a" : "test.b", payload: "{}") }
        let enqueued = try await store.write { tx in try store.enqueue(many: requests, policy: JobPolicy(), now: epoch, in: tx) }
        let claimed = try await store.claim(quota: ["test.a": 100, "test.b": 100], leases: ["test.a": 60, "test.b": 60], owner: "A", now: epoch)
        #expect(claimed.count == 200)
        for job in claimed.prefix(150) {
            try await store.write { tx in try store.markSucceeded(jobID: job.record.id, owner: "A", now: epoch, in: tx) }
        }
        #expect(enqueued.count == 400)

        let queue = try DatabaseQueue(path: directory + "/test.sqlite")
        for analysed in [false, true] {
            if analysed { try await queue.write { db in try db.execute(sql: "ANALYZE") } }
            let plans = try await queue.read { db in
                // Unbound parameters are NULL, which leaves the plan as it is.
                try [SQLiteStore.dueOfKindSQL, SQLiteStore.expiredLeasesSQL(kinds: 2)].map { sql in
                    let nulls = StatementArguments([String?](repeating: nil, count: sql.filter { $0 == "?" }.count))
                    return try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: nulls).map { $0["detail"] as String }
                }
            }
            #expect(plans[0].contains { $0.contains("USING INDEX lifecycle_jobs_ready (kind=? AND run_at<?)") }, "\(plans[0])")
            #expect(plans[1].contains { $0.contains("USING INDEX lifecycle_jobs_leased (lease_expires_at<?)") }, "\(plans[1])")
            for plan in plans {
                #expect(!plan.contains { $0.contains("TEMP B-TREE") || $0.hasPrefix("SCAN") }, "analysed: \(analysed), \(plan)")
            }
        }
    }

    /// A job changes state when it is claimed and when it finishes, and SQLite rewrites every
    /// index whose columns or condition name the state: only the claim's own two lookups and
    /// the count by kind and state may. The unique key's lookup, which keeps a key unique
    /// among live jobs, still uses an index.
    @Test func onlyTheClaimsLookupsAndTheCountsIndexesNameAJobsState() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("job-indexes-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: directory + "/test.sqlite")
        let (naming, plan) = try await store.read { tx in
            let indexes = try Row.fetchAll(
                tx.db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'lifecycle_jobs' AND sql IS NOT NULL")
            let naming = indexes.filter { ($0["sql"] as String).contains("state") }.map { $0["name"] as String }.sorted()
            let plan = try Row.fetchAll(tx.db, sql: "EXPLAIN QUERY PLAN " + SQLiteStore.liveJobSQL, arguments: ["key"]).map { $0["detail"] as String }
            return (naming, plan)
        }
        #expect(naming == ["lifecycle_jobs_kind_state_settled", "lifecycle_jobs_leased", "lifecycle_jobs_ready"])
        #expect(plan.contains { $0.contains("USING INDEX lifecycle_jobs_unique_key (unique_key=?)") }, "\(plan)")
    }

    /// The counts by kind and state (metrics, the dashboard) see every state of every kind,
    /// on SQLite from three indexes rather than one over every job.
    @Test(arguments: Backend.allCases)
    func theCountsByKindAndStateSeeEveryState(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            var expected: [JobCountKey: Int] = [:]
            for (kind, perState) in [("test.a", 1), ("test.b", 2)] {
                // Each job ends in the state of its group: claimed, then finished as its state says.
                let ids = try await store.write { tx in
                    try store.enqueue(many: Array(repeating: EnqueueRequest(kind: kind, payload: "{}"), count: perState * 6), policy: JobPolicy(), now: epoch, in: tx)
                }.map(\.id)
                let claimed = try await store.claim(quota: [kind: perState * 5], leases: [kind: 60], owner: "A", now: epoch)
                #expect(claimed.map(\.record.id) == Array(ids.prefix(perState * 5)))
                let groups = stride(from: 0, to: perState * 5, by: perState).map { Array(claimed[$0..<($0 + perState)].map(\.record.id)) }
                for id in groups[0] {
                    try await store.write { tx in try store.markSucceeded(jobID: id, owner: "A", now: epoch, in: tx) }
                }
                for id in groups[1] {
                    #expect(try await store.markFailed(jobID: id, owner: "A", error: "x", retryAt: epoch.addingTimeInterval(60), now: epoch) == .retrying)
                }
                for id in groups[2] {
                    #expect(try await store.markFailed(jobID: id, owner: "A", error: "x", retryAt: nil, now: epoch) == .dead)
                }
                for id in groups[3] { try await store.markCancelled(jobID: id, owner: "A", reason: nil, now: epoch) }
                for (state, count) in [(JobState.queued, perState), (.running, perState), (.retrying, perState), (.succeeded, perState), (.dead, perState), (.cancelled, perState)] {
                    expected[JobCountKey(kind: kind, state: state)] = count
                }
            }
            #expect(try await store.countByKindAndState() == expected)
        }
        try await check(try await backend.makeStore())
    }

    /// Each of SQLite's three count queries reads only its index, in its order.
    @Test func theCountsReadOnlyTheirIndexes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("count-plan-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: directory + "/test.sqlite")
        let plans = try await store.read { tx in
            try [SQLiteStore.settledCountsSQL, SQLiteStore.waitingCountsSQL, SQLiteStore.runningCountsSQL].map { sql in
                try Row.fetchAll(tx.db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String }
            }
        }
        #expect(plans[0] == ["SCAN lifecycle_jobs USING COVERING INDEX lifecycle_jobs_kind_state_settled"], "\(plans[0])")
        #expect(plans[1] == ["SCAN lifecycle_jobs USING COVERING INDEX lifecycle_jobs_ready"], "\(plans[1])")
        // Running jobs are few (what the workers hold): read through the lease index, then grouped.
        #expect(plans[2].first == "SCAN lifecycle_jobs USING INDEX lifecycle_jobs_leased", "\(plans[2])")
    }

    /// On PostgreSQL a group commit's done-marks and a claim's look-up of finished steps find
    /// each job by its id, however long the queue. Joined on the ids, the planner read every
    /// running job's entry in an index full of dead ones mid-drain, or every live job's in
    /// the unique-key index, or the whole steps table: milliseconds per statement with
    /// 20,000 queued. The claim's due and rescued jobs come from their indexes. Checked with
    /// statistics taken mid-drain, for plans made for the values and for any values alike.
    @Test func theMarksAndTheClaimsStepsLookupFindEachJobByItsID() async throws {
        let store = try await ThrowawayPostgres.makeStore()
        let requests = (0..<3_000).map { _ in EnqueueRequest(kind: "test.a", payload: "{}") }
        _ = try await store.write { tx in try store.enqueue(many: requests, policy: JobPolicy(), now: epoch, in: tx) }
        let finished = try await store.claim(quota: ["test.a": 2_500], leases: ["test.a": 60], owner: "A", now: epoch)
        let marks = finished.map { StepMark(jobID: $0.record.id, step: "only", output: nil, finishesJob: true, owner: "A", now: epoch) }
        #expect(try await store.write { tx in try store.markStepsDone(marks, in: tx) }.allSatisfy { $0 == false })
        let running = try await store.claim(quota: ["test.a": 100], leases: ["test.a": 60], owner: "A", now: epoch)
        #expect(running.count == 100)
        // EXPLAIN EXECUTE takes no bind parameters: the values go in as literals, which the
        // statements' own binds are in the worker (ids, fixed words, the test's epoch).
        let ids = running.map { String($0.record.id) }.joined(separator: ",")
        func array(_ value: String, _ type: String) -> String {
            "ARRAY[" + Array(repeating: value, count: running.count).joined(separator: ",") + "]::\(type)[]"
        }
        let markArguments = [
            "ARRAY[\(ids)]::int8[]", array("'first'", "text"), array("''", "text"), array("false", "bool"), array("false", "bool"),
            array("'A'", "text"), array("'2026-01-01T00:00:00Z'", "timestamptz"),
        ]
        let statements = [
            (name: "marks", sql: MarkStepsStatement.sql, arguments: markArguments),
            (name: "steps", sql: FinishedStepsStatement.sql, arguments: ["ARRAY[\(ids)]::int8[]"]),
            (name: "ready", sql: ReadyJobsStatement.sql, arguments: ["ARRAY['test.a']", "ARRAY[64::int8]", "'2026-01-01T00:00:00Z'"]),
            (name: "rescue", sql: RescueStatement.sql, arguments: ["'2026-01-01T00:00:00Z'", "ARRAY['test.a']", "ARRAY[]::int8[]", "64"]),
            (name: "lease", sql: LeaseJobsStatement.sql, arguments: ["'A'", "'2026-01-01T00:00:00Z'", "ARRAY[\(ids)]::int8[]", array("60", "float8")]),
        ]
        // Both statements go as prepared statements: PostgreSQL plans them for their values
        // (a custom plan) for five runs, then may keep a plan for any values (a generic one).
        // Both must find each job by its id.
        for mode in ["force_custom_plan", "force_generic_plan"] {
            let plans = try await store.write { tx in
                try tx.execute("ANALYZE lifecycle.jobs")
                try tx.execute("ANALYZE lifecycle.job_steps")
                try tx.execute(PostgresQuery(unsafeSQL: "SET LOCAL plan_cache_mode = \(mode)"))
                return try statements.map { statement in
                    // The lease runs under the claim's own setting (see `claim`); without it, 100 ids among
                    // 3,000 rows plan as a read of the whole table.
                    if statement.name == "lease" { try tx.execute("SET LOCAL random_page_cost = 1.1") }
                    try tx.execute(PostgresQuery(unsafeSQL: "PREPARE plan_\(statement.name) AS " + statement.sql))
                    let plan = try tx.query(PostgresQuery(
                        unsafeSQL: "EXPLAIN EXECUTE plan_\(statement.name)(\(statement.arguments.joined(separator: ", ")))"))
                        .map { try $0.decode(String.self) }
                    try tx.execute(PostgresQuery(unsafeSQL: "DEALLOCATE plan_\(statement.name)"))
                    return plan
                }
            }
            // The fence's part of the marks' plan: what it reads of the jobs table.
            let isCTE = { (line: String) in line.trimmingCharacters(in: .whitespaces).hasPrefix("CTE ") }
            let fence = plans[0].drop { !($0.contains("CTE fence") && isCTE($0)) }.dropFirst().prefix { !isCTE($0) }
            let jobReads = fence.filter { $0.contains(" on jobs") }
            #expect(!jobReads.isEmpty && jobReads.allSatisfy { $0.contains("Index Scan using jobs_pkey on jobs") }, "\(mode): \(plans[0].joined(separator: "\n"))")
            let stepsPlan = plans[1].joined(separator: "\n")
            #expect(!stepsPlan.contains("Seq Scan") && stepsPlan.contains("job_steps_pkey"), "\(mode): \(stepsPlan)")
            // The claim's due jobs come in run_at order from the ready index, its rescues from
            // the (small) index of leased jobs.
            let jobScans = { (plan: [String]) in plan.filter { $0.contains(" on jobs") && $0.contains("Scan") } }
            #expect(jobScans(plans[2]).allSatisfy { $0.contains("using jobs_ready") } && !jobScans(plans[2]).isEmpty, "\(mode): \(plans[2].joined(separator: "\n"))")
            #expect(jobScans(plans[3]).allSatisfy { $0.contains("using jobs_leased") } && !jobScans(plans[3]).isEmpty, "\(mode): \(plans[3].joined(separator: "\n"))")
            // The lease finds each claimed job by its id.
            #expect(jobScans(plans[4]).allSatisfy { $0.contains("using jobs_pkey") } && !jobScans(plans[4]).isEmpty, "\(mode): \(plans[4].joined(separator: "\n"))")
        }
    }
}
