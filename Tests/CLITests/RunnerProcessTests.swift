import ChildProcesses
import GRDB
import Foundation
import JobRunner
import SQLiteBackend
import Testing

@Suite(.serialized)
struct RunnerProcessTests {
    @Test func twoProcessesRacingOnTheSameUniqueKeysGetOneJobPerKey() async throws {
        let workspace = try Workspace()
        try await workspace.run(["migrate"])
        let barrier = try OverlapBarrier(in: workspace)
        let racers = try (0..<2).map { _ in
            try workspace.process(["jobs", "probe", "--count", "200", "--unique-key-prefix", "race-"], environment: barrier.environment)
        }
        // Both about to enqueue at once, then let go together: a race, not one run after the other.
        let together = try await barrier.releaseOnceAllArrive(racers.map(\.0))
        for (process, _, _) in racers { await process.exited() }
        #expect(together == 2, "only \(together) of 2 enqueuers were under way at once: the runs did not overlap")
        #expect(racers.allSatisfy { $0.0.terminationStatus == 0 })
        let list = try await workspace.run(["jobs", "list", "--json", "--limit", "1000"])
        let jobs = try ListedJobs.from(list.stdout).jobs
        #expect(jobs.count == 200)
        #expect(Set(jobs.compactMap(\.uniqueKey)).count == 200)
    }

    @Test func aWorkerKilledMidJobIsResumedAtTheUnfinishedStep() async throws {
        let workspace = try Workspace()
        // The hold step stands in for slow outside work; it holds on the first attempt only.
        try await workspace.run(["jobs", "probe", "--hold", "120", "--hold-attempts", "1"])
        let store = try workspace.store()
        let (worker, _, _) = try workspace.process(["worker", "--once"])
        let reachedHold = try await eventually {
            try await store.steps(of: 1).map(\.step) == ["record-start"]
        }
        #expect(reachedHold)
        kill(worker.processIdentifier, SIGKILL)
        await worker.exited()
        #expect(worker.terminationReason == .uncaughtSignal)

        let orphaned = try #require(try await store.job(id: 1))
        #expect(orphaned.state == .running)
        let leaseEnd = try #require(orphaned.leaseExpiresAt)

        // Before the lease runs out nobody takes the job over, and a run says so: exit 75,
        // naming the job and who holds it, rather than green while the work is not done.
        let early = try await workspace.run(["worker", "--once"])
        #expect(early.status == 75)
        #expect(early.stderr.contains("runner.probe job #1 is held by \(orphaned.leaseOwner ?? "?")"), "\(early.stderr)")
        #expect(try await store.job(id: 1)?.state == .running)

        // After it, any worker rescues the job and resumes after the finished step.
        let rescue = try await workspace.run(["worker", "--once"], environment: ["LIFECYCLE_NOW": iso(leaseEnd.addingTimeInterval(5))])
        #expect(rescue.status == 0, "\(rescue.stderr)")
        let finished = try #require(try await store.job(id: 1))
        #expect(finished.state == .succeeded)
        #expect(finished.attempt == 2)
        #expect(try await store.steps(of: 1).map(\.step).sorted() == ["hold", "record-finish", "record-start"])
        // The database-only step's effect exists exactly once, although the job ran twice.
        #expect(try await store.probeEffectCount(jobID: 1) == 2)
    }

    @Test func twoWorkerProcessesDrainAThousandJobsRunningEachOnce() async throws {
        let workspace = try Workspace()
        let enqueue = try await workspace.run(["jobs", "probe", "--count", "1000"])
        #expect(enqueue.status == 0)
        let barrier = try OverlapBarrier(in: workspace)
        let workers = try (0..<2).map { _ in
            try workspace.process(["worker", "--once", "--concurrency", "4"], environment: barrier.environment)
        }
        // Each worker holds claimed jobs at the barrier until both do: they drain side by side.
        let together = try await barrier.releaseOnceAllArrive(workers.map(\.0))
        for (process, _, _) in workers { await process.exited() }
        #expect(together == 2, "only \(together) of 2 workers held jobs at once: the runs did not overlap")
        // A worker that finds nothing left to claim while the other still holds jobs says so (75).
        for (process, _, errors) in workers {
            let stderr = try String(contentsOfFile: errors, encoding: .utf8)
            #expect(process.terminationStatus == 0 || (process.terminationStatus == 75 && stderr.contains(" is held by ")), "\(stderr)")
        }
        #expect(try await workspace.run(["worker", "--once"]).status == 0)

        let store = try workspace.store()
        let probes = try await store.jobs(matching: JobFilter(kinds: [ProbeJobs.probeKind], limit: 2_000))
        #expect(probes.count == 1000)
        #expect(probes.allSatisfy { $0.state == .succeeded })
        // Every job: each of its two database steps took effect exactly once.
        let effects = try store.writeSync { tx in
            try Int.fetchAll(tx.db, sql: "SELECT COUNT(*) FROM \(workspace.ownTable("runner_probe_effects")) GROUP BY job_id")
        }
        #expect(effects.count == 1000)
        #expect(effects.allSatisfy { $0 == 2 })
        let attempts = try store.writeSync { tx in try Int.fetchOne(tx.db, sql: "SELECT MAX(attempt) FROM \(workspace.ownTable("jobs"))") }
        #expect(attempts == 1)
    }

    @Test func workerOnceExitsSeventyFiveWhenJobsAreRetrying() async throws {
        let workspace = try Workspace()
        try await workspace.run(["jobs", "probe", "--fail-attempts", "1"])
        let first = try await workspace.run(["worker", "--once"])
        #expect(first.status == 75)
        #expect(first.stdout.contains("1 retrying"))
        let later = try await workspace.run(["worker", "--once"], environment: ["LIFECYCLE_NOW": iso(Date().addingTimeInterval(3_600))])
        #expect(later.status == 0)
    }

    @Test func operatorsListShowRetryAndCancel() async throws {
        let workspace = try Workspace()
        try await workspace.run(["jobs", "probe", "--count", "2"])
        let cancel = try await workspace.run(["jobs", "cancel", "2"])
        #expect(cancel.status == 0)
        #expect(cancel.stdout.contains("cancelled"))
        let listed = try await workspace.run(["jobs", "list", "--state", "cancelled"])
        #expect(listed.stdout.contains("#2 runner.probe cancelled"))
        #expect(!listed.stdout.contains("#1 "))
        let retried = try await workspace.run(["jobs", "retry", "2"])
        #expect(retried.status == 0)
        #expect(try await workspace.run(["worker", "--once"]).status == 0)
        let shown = try await workspace.run(["jobs", "show", "2", "--json"])
        #expect(shown.stdout.contains("\"state\":\"succeeded\""))
        #expect(shown.stdout.contains("record-finish"))
        let missing = try await workspace.run(["jobs", "show", "999"])
        #expect(missing.status == 65)
        #expect(missing.stderr.contains("no job with id 999"))
        let notANumber = try await workspace.run(["jobs", "retry", "abc"])
        #expect(notANumber.status == 64)
    }

    /// A job row edited by hand into values lifecycle never writes (a date that is none, a
    /// count that is text) is refused with the job and the column named and exit 65, by
    /// every command that reads it, rather than stopping the process.
    @Test func aJobRowEditedByHandIsNamedNotACrash() async throws {
        let workspace = try Workspace()
        try await workspace.run(["jobs", "probe", "--count", "2"])
        let file = try DatabaseQueue(path: workspace.database)
        try await file.write { db in
            try db.execute(sql: "UPDATE lifecycle_jobs SET created_at = 'last tuesday' WHERE id = 1")
            try db.execute(sql: "UPDATE lifecycle_jobs SET attempt = 'several' WHERE id = 2")
        }
        try file.close()
        for (command, named) in [
            (["jobs", "show", "1"], "job 1 has created_at \"last tuesday\""),
            (["jobs", "show", "2", "--json"], "job 2 has attempt \"several\""),
            // Either damaged row, whichever the list reads first.
            (["jobs", "list"], "in lifecycle_jobs, which lifecycle cannot read"),
        ] {
            let result = try await workspace.run(command)
            #expect(result.status == 65, "\(command): \(result.stderr)")
            #expect(result.stderr.contains(named), "\(command): \(result.stderr)")
            #expect(result.stderr.contains("correct that column or delete the job's row"), "\(command)")
        }
        // Mended by hand, it reads again.
        let mended = try DatabaseQueue(path: workspace.database)
        try await mended.write { db in
            try db.execute(sql: "UPDATE lifecycle_jobs SET created_at = updated_at WHERE id = 1")
            try db.execute(sql: "UPDATE lifecycle_jobs SET attempt = 0 WHERE id = 2")
        }
        try mended.close()
        #expect(try await workspace.run(["jobs", "list"]).status == 0)
    }

    @Test func jsonLogsAreOneObjectPerLine() async throws {
        let workspace = try Workspace()
        try await workspace.run(["jobs", "probe", "--fail-attempts", "1"])
        let result = try await workspace.run(["worker", "--once", "--log-format", "json"])
        let lines = result.stderr.split(separator: "\n").filter { !$0.isEmpty }
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["level"] != nil && object?["msg"] != nil, "not a JSON log line: \(line)")
        }
        // Numbers stay numbers, so a log query can compare them.
        let retry = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["msg"] as? String == "attempt failed; will retry" }
        #expect(retry?["job"] as? Int == 1 && retry?["attempt"] as? Int == 1, "\(result.stderr)")
        #expect(retry?["kind"] as? String == "runner.probe")
    }

    @Test func aLongRunningWorkerFinishesItsStepHandsTheJobBackAndExitsOnSIGTERM() async throws {
        let workspace = try Workspace()
        try await workspace.run(["jobs", "probe", "--hold", "3"])
        let store = try workspace.store()
        let (worker, _, log) = try workspace.process(["worker", "--log-level", "debug"])
        // Signalled from the watcher's own thread once the worker says the 3-second hold has
        // started: a poll on the test's busy cooperative threads could see the hold only once
        // it had ended, and "record-start is done" also holds in the instant before the hold
        // begins, when there is no step in flight to finish.
        let signalled = await killProcess(worker, signal: SIGTERM, when: {
            let lines = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return lines.split(separator: "\n").contains { $0.contains("step started") && $0.contains("step=hold") }
        })
        if !signalled { worker.terminate() }
        await worker.exited()
        #expect(signalled, "the worker never started the hold step: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        #expect(worker.terminationStatus == 0)
        // The step in flight finished; the job went back to the queue at once, not after a lease expiry.
        let handedBack = try #require(try await store.job(id: 1))
        #expect(handedBack.state == .queued)
        #expect(handedBack.leaseOwner == nil)
        #expect(try await store.steps(of: 1).map(\.step).sorted() == ["hold", "record-start"])
        #expect(try await workspace.run(["worker", "--once"]).status == 0)
        #expect(try await store.job(id: 1)?.state == .succeeded)
        #expect(try await store.probeEffectCount(jobID: 1) == 2)
    }

    @Test func sigtermWhileTheWorkerClaimsBackToBackExitsZeroAndHoldsNoJob() async throws {
        let workspace = try Workspace()
        let total = 3_000
        #expect(try await workspace.run(["jobs", "probe", "--noop", "--count", "\(total)"]).status == 0)
        let (worker, _, log) = try workspace.process(["worker"])
        // Draining no-op jobs, the loop is in a claim transaction much of the time: a claim
        // cut off by the shutdown used to end the worker with exit 70 instead of a hand-back.
        let signalled = await killProcess(worker, signal: SIGTERM, when: {
            try workspace.integerNow("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE state = 'succeeded'") >= 300
        })
        if !signalled { worker.terminate() }
        await worker.exited()
        #expect(signalled)
        #expect(worker.terminationStatus == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        #expect(try workspace.integerNow("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE state = 'running'") == 0)
        #expect(try workspace.integerNow("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE state = 'succeeded'") < total)
    }

    /// An idle worker polling only every five minutes starts a job another process enqueues
    /// at once: the enqueue's commit signals it (inotify on the database's folder), as
    /// NOTIFY does on PostgreSQL. Without the signal the job would wait for the next poll.
    @Test func anIdleSQLiteWorkerIsWokenByAnEnqueueFromAnotherProcess() async throws {
        let workspace = try Workspace()
        #expect(try await workspace.run(["jobs", "probe", "--noop", "--count", "1"]).status == 0)
        let (worker, _, log) = try workspace.process(["worker", "--kind", "runner.noop", "--poll-interval", "300"])
        let succeeded = "SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = 'runner.noop' AND state = 'succeeded'"
        // The first job is found by the worker's first look; from then on it is idle.
        #expect(try await eventually(timeout: 60) { try workspace.integerNow(succeeded) == 1 }, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        for expected in 2...4 {
            #expect(try await workspace.run(["jobs", "probe", "--noop", "--count", "1"]).status == 0)
            let woken = try await eventually(timeout: 30) { try workspace.integerNow(succeeded) == expected }
            #expect(woken, "job \(expected) did not start before the worker's next poll, five minutes away")
        }
        worker.terminate()
        await worker.exited()
        #expect(worker.terminationStatus == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    @Test func badClockOverrideIsAUsageError() async throws {
        let workspace = try Workspace()
        let result = try await workspace.run(["jobs", "list"], environment: ["LIFECYCLE_NOW": "yesterday"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("LIFECYCLE_NOW"))
    }
}
