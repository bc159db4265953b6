import Foundation
import JobRunner
import PostgresBackend
import PostgresTesting
import Testing

/// Every behaviour runs against both backends: the runner promises the same on each.
struct RunnerSemanticsTests {
    @Test(arguments: Backend.allCases)
    func enqueueWithUniqueKeyReturnsTheLiveJob(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let first = try await enqueue(store, EnqueueRequest(kind: "runner.noop", uniqueKey: "k"), now: epoch)
            let second = try await enqueue(store, EnqueueRequest(kind: "runner.noop", uniqueKey: "k"), now: epoch)
            #expect(first.created)
            #expect(!second.created)
            #expect(second.job.id == first.job.id)

            // Once the job has finished, the key is free for a new job.
            let clock = ManualTimeSource(epoch)
            let worker = Worker(store: store, registry: JobRegistry([ProbeJobs.noop(store: store)]), policies: PolicyBook(), clock: clock)
            let summary = try await worker.drain()
            #expect(summary.succeeded == 1)
            let third = try await enqueue(store, EnqueueRequest(kind: "runner.noop", uniqueKey: "k"), now: epoch)
            #expect(third.created)
            #expect(third.job.id != first.job.id)
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func failedAttemptsBackOffExponentiallyThenTheJobIsDead(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let clock = ManualTimeSource(epoch)
            var policy = JobPolicy()
            policy.maxAttempts = 3
            policy.backoffBase = 10
            policy.backoffCap = 15
            var policies = PolicyBook()
            policies.setPolicy(policy, for: ProbeJobs.probeKind)
            let job = try await enqueue(
                store, EnqueueRequest(kind: ProbeJobs.probeKind, payload: try probePayload(failAttempts: 99)), policy: policy, now: epoch
            ).job
            let worker = Worker(store: store, registry: JobRegistry([ProbeJobs.probe(store: store)]), policies: policies, clock: clock)

            var summary = try await worker.drain()
            #expect(summary.retrying == 1)
            var record = try #require(try await store.job(id: job.id))
            #expect(record.state == .retrying)
            #expect(record.attempt == 1)
            // Equal jitter: between half and all of base · 2^(attempt-1).
            #expect(record.runAt >= epoch.addingTimeInterval(5) && record.runAt <= epoch.addingTimeInterval(10))
            #expect(record.lastError?.contains("induced on attempt 1") == true)

            // Not due yet: nothing runs.
            summary = try await worker.drain()
            #expect(summary.processed == 0)

            clock.set(record.runAt)
            summary = try await worker.drain()
            #expect(summary.retrying == 1)
            record = try #require(try await store.job(id: job.id))
            #expect(record.attempt == 2)
            // Second delay would be 20 s but the cap is 15 s.
            #expect(record.runAt >= clock.now().addingTimeInterval(7.5) && record.runAt <= clock.now().addingTimeInterval(15))

            clock.set(record.runAt)
            summary = try await worker.drain()
            #expect(summary.dead == 1)
            record = try #require(try await store.job(id: job.id))
            #expect(record.state == .dead)
            #expect(record.lastError?.contains("induced on attempt 3") == true)
            // The database-only first step ran once, on the first attempt, and was not repeated by retries.
            #expect(try await store.probeEffectCount(jobID: job.id) == 1)

            // An operator retry gives a fresh budget and resumes after the finished step.
            _ = try await store.retry(jobID: job.id, now: clock.now())
            record = try #require(try await store.job(id: job.id))
            #expect(record.state == .queued)
            #expect(record.attempt == 0)
        }
        try await check(try await backend.makeStore())
    }

    /// A step that runs every attempt and records nothing (a purge's erase, before the
    /// step that verifies it) runs again in the attempt after a failure of the step after
    /// it, and leaves no done-mark.
    @Test(arguments: Backend.allCases)
    func aStepThatRunsEveryAttemptRunsAgainAfterALaterStepFails(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let counts = StepCounts()
            let kind = JobKind<S.Transaction>(name: "runner.every-attempt", steps: [
                JobStep("prepare", external: { _ in
                    counts.lock.withLock { counts.prepared += 1 }
                    return StepResult(output: nil, recorded: false)
                }, runsEveryAttempt: true),
                // By the job's attempt: a batch of database steps may run a step's body again.
                JobStep("finish", database: { context, _ in
                    if context.job.attempt < 2 { throw NotYet() }
                    return StepResult(output: "done")
                }),
            ])
            let clock = ManualTimeSource(epoch)
            let job = try await enqueue(store, EnqueueRequest(kind: "runner.every-attempt"), now: epoch).job
            let worker = Worker(store: store, registry: JobRegistry([kind]), policies: PolicyBook(), clock: clock)
            let first = try await worker.drain()
            #expect(first.retrying == 1, "\(first)")
            #expect(try await store.steps(of: job.id).isEmpty)
            let waiting = try #require(try await store.job(id: job.id))
            clock.set(waiting.runAt)
            #expect(try await worker.drain().succeeded == 1)
            #expect(counts.prepared == 2)
            #expect(try await store.steps(of: job.id).map(\.step) == ["finish"])
        }
        try await check(try await backend.makeStore())
    }

    @Test func retryDelayStaysWithinJitterBoundsAndCap() {
        var policy = JobPolicy()
        policy.backoffBase = 2
        policy.backoffCap = 60
        #expect(policy.retryDelay(afterAttempt: 1, random: 0) == 1)
        #expect(policy.retryDelay(afterAttempt: 1, random: 1) == 2)
        #expect(policy.retryDelay(afterAttempt: 4, random: 1) == 16)
        #expect(policy.retryDelay(afterAttempt: 20, random: 1) == 60)
        #expect(policy.retryDelay(afterAttempt: 20, random: 0) == 30)
    }

    @Test(arguments: Backend.allCases)
    func cancellingAQueuedJobStopsItFromRunning(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let job = try await enqueue(store, EnqueueRequest(kind: ProbeJobs.probeKind, payload: try probePayload()), now: epoch).job
            let cancelled = try await store.cancel(jobID: job.id, now: epoch)
            #expect(cancelled?.state == .cancelled)
            let worker = Worker(store: store, registry: JobRegistry([ProbeJobs.probe(store: store)]), policies: PolicyBook(), clock: ManualTimeSource(epoch))
            #expect(try await worker.drain().processed == 0)
            #expect(try await store.probeEffectCount(jobID: job.id) == 0)
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func cancellingARunningJobStopsItBeforeItsNextStep(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let ran = LockedCounter()
            // The first step asks for the job's own cancellation, as an operator would while it runs.
            let kind = JobKind<S.Transaction>(name: "test.cancellable", steps: [
                JobStep("first", external: { context in
                    _ = try await store.cancel(jobID: context.job.id, now: context.now)
                    ran.increment()
                    return .done
                }),
                JobStep("second", external: { _ in ran.increment(); return .done }),
            ])
            let job = try await enqueue(store, EnqueueRequest(kind: kind.name), now: epoch).job
            let worker = Worker(store: store, registry: JobRegistry([kind]), policies: PolicyBook(), clock: ManualTimeSource(epoch))
            let summary = try await worker.drain()
            #expect(summary.cancelled == 1)
            #expect(ran.value == 1)
            let record = try #require(try await store.job(id: job.id))
            #expect(record.state == .cancelled)
            #expect(try await store.steps(of: job.id).map(\.step) == ["first"])
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func anExpiredLeaseIsRescuedAndResumesAtTheFirstUnfinishedStep(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let clock = ManualTimeSource(epoch)
            let job = try await enqueue(store, EnqueueRequest(kind: ProbeJobs.probeKind, payload: try probePayload()), now: epoch).job

            // Worker A claims the job, finishes its first (database) step, then vanishes.
            let claimed = try await store.claim(quota: [ProbeJobs.probeKind: 1], leases: [ProbeJobs.probeKind: 60], owner: "A", now: epoch)
            #expect(claimed.map(\.record.id) == [job.id])
            try await store.write { tx in
                try store.recordProbeEffect(jobID: job.id, step: "record-start", now: epoch, in: tx)
                try markStepDone(store, job.id, step: "record-start", owner: "A", in: tx)
            }

            // While A's lease holds, nobody else may take the job.
            let worker = Worker(
                store: store, registry: JobRegistry([ProbeJobs.probe(store: store)]), policies: PolicyBook(), clock: clock,
                options: WorkerOptions(owner: "B"))
            clock.advance(by: 30)
            #expect(try await worker.drain().processed == 0)

            clock.advance(by: 31)
            let summary = try await worker.drain()
            #expect(summary.succeeded == 1)
            let record = try #require(try await store.job(id: job.id))
            #expect(record.state == .succeeded)
            #expect(record.attempt == 2)
            #expect(try await store.steps(of: job.id).map(\.step).sorted() == ["hold", "record-finish", "record-start"])
            // record-start ran once (by A); B resumed after it.
            #expect(try await store.probeEffectCount(jobID: job.id) == 2)

            // A comes back and tries to record a step: fenced off, its writes rolled back.
            await #expect(throws: JobRunnerError.self) {
                try await store.write { tx in
                    try store.recordProbeEffect(jobID: job.id, step: "late", now: epoch, in: tx)
                    try markStepDone(store, job.id, step: "late", owner: "A", in: tx)
                }
            }
            #expect(try await store.probeEffectCount(jobID: job.id) == 2)
        }
        try await check(try await backend.makeStore())
    }

    /// A worker whose own job's lease ran out while the job still runs (a stalled heartbeat)
    /// does not rescue that job to itself: a second run beside the first, under the same
    /// owner, would pass the same fence. Another worker may still take it over.
    @Test(arguments: Backend.allCases)
    func aWorkerDoesNotRescueAJobItIsStillRunning(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let clock = ManualTimeSource(epoch)
            let longRuns = LockedCounter()
            let (quickMayFinish, longMayFinish) = (Gate(), Gate())
            // The long job's lease runs out while it runs; the quick job's end makes the worker
            // claim again; the late job, due only after the lease ran out, ends the long one.
            let long = JobKind<S.Transaction>(name: "test.long", steps: [
                JobStep("only", external: { _ in
                    longRuns.increment()
                    clock.advance(by: 120)
                    quickMayFinish.open()
                    await longMayFinish.wait()
                    return .done
                }),
            ])
            let quick = JobKind<S.Transaction>(name: "test.quick", steps: [
                JobStep("only", external: { _ in await quickMayFinish.wait(); return .done }),
            ])
            let late = JobKind<S.Transaction>(name: "test.late", steps: [
                JobStep("only", external: { _ in longMayFinish.open(); return .done }),
            ])
            let longJob = try await enqueue(store, EnqueueRequest(kind: long.name), now: epoch).job
            _ = try await enqueue(store, EnqueueRequest(kind: quick.name), now: epoch)
            _ = try await enqueue(store, EnqueueRequest(kind: late.name, runAt: epoch.addingTimeInterval(100)), now: epoch)
            let worker = Worker(
                store: store, registry: JobRegistry([long, quick, late]), policies: PolicyBook(), clock: clock,
                options: WorkerOptions(concurrency: 4))
            let summary = try await worker.drain()
            #expect(longRuns.value == 1)
            #expect(summary.succeeded == 3)
            let record = try #require(try await store.job(id: longJob.id))
            #expect(record.state == .succeeded)
            #expect(record.attempt == 1)
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func theHeartbeatReportsJobsAnotherWorkerTookOverButNotOnesThatFinished(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let kind = ProbeJobs.probeKind
            var enqueued: [JobID] = []
            for _ in 0..<3 { enqueued.append(try await enqueue(store, EnqueueRequest(kind: kind, payload: try probePayload()), now: epoch).job.id) }
            let ids = enqueued
            let claimed = try await store.claim(quota: [kind: 3], leases: [kind: 60], owner: "A", now: epoch)
            #expect(Set(claimed.map(\.record.id)) == Set(ids))
            // A finishes the first job and hands the second back; the third it holds and then loses.
            try await store.write { tx in try store.markSucceeded(jobID: ids[0], owner: "A", now: epoch, in: tx) }
            try await store.release(jobID: ids[1], owner: "A", now: epoch)
            #expect(try await store.heartbeat(jobIDs: ids, owner: "A", lease: 60, now: epoch.addingTimeInterval(1)) == [])

            let later = epoch.addingTimeInterval(62)
            let rescued = try await store.claim(quota: [kind: 3], leases: [kind: 60], owner: "B", now: later)
            #expect(Set(rescued.map(\.record.id)) == [ids[1], ids[2]])
            // Only the job B now holds was taken over from A; the finished one is just finished.
            #expect(try await store.heartbeat(jobIDs: [ids[0], ids[2]], owner: "A", lease: 60, now: later) == [ids[2]])
            #expect(try await store.heartbeat(jobIDs: [ids[2]], owner: "B", lease: 60, now: later) == [])
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func aRescueOnTheFinalAttemptBuriesTheJob(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let job = try await enqueue(
                store, EnqueueRequest(kind: ProbeJobs.probeKind, payload: try probePayload(), maxAttempts: 1), now: epoch).job
            _ = try await store.claim(quota: [ProbeJobs.probeKind: 1], leases: [ProbeJobs.probeKind: 60], owner: "A", now: epoch)
            let clock = ManualTimeSource(epoch.addingTimeInterval(120))
            let worker = Worker(store: store, registry: JobRegistry([ProbeJobs.probe(store: store)]), policies: PolicyBook(), clock: clock)
            let summary = try await worker.drain()
            #expect(summary.dead == 1)
            let record = try #require(try await store.job(id: job.id))
            #expect(record.state == .dead)
            #expect(record.lastError?.contains("lease expired") == true)
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func aDatabaseStepAndItsDoneMarkCommitTogether(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            // The step writes, then the transaction fails before commit: neither the write nor
            // the mark may survive. It fails throughout its first attempt: a shared transaction
            // given up for it runs it again alone, within the same attempt.
            let kind = JobKind<S.Transaction>(name: "test.atomic", steps: [
                JobStep("write", database: { context, tx in
                    try store.recordProbeEffect(jobID: context.job.id, step: "write", now: context.now, in: tx)
                    if context.job.attempt == 1 { throw InducedRollback() }
                    return .done
                }),
            ])
            let (job, worker, clock) = try await enqueueRetriedAfterASecond(store, kind)
            #expect(try await worker.drain().retrying == 1)
            #expect(try await store.probeEffectCount(jobID: job.id) == 0)
            #expect(try await store.steps(of: job.id).isEmpty)
            clock.advance(by: 2)
            #expect(try await worker.drain().succeeded == 1)
            #expect(try await store.probeEffectCount(jobID: job.id) == 1)
        }
        try await check(try await backend.makeStore())
    }

    /// A job whose cancellation was asked for while its worker held it, and which another
    /// worker then rescued, stops before its next step, as a running job does.
    @Test(arguments: Backend.allCases)
    func aRescuedJobWhoseCancellationWasAskedStopsBeforeItsNextStep(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let sent = LockedCounter()
            let kind = JobKind<S.Transaction>(name: "test.record-then-send", steps: [
                JobStep("record", database: { context, tx in
                    try store.recordProbeEffect(jobID: context.job.id, step: "record", now: context.now, in: tx)
                    return .done
                }),
                JobStep("send", external: { _ in sent.increment(); return .done }),
            ])
            let job = try await enqueue(store, EnqueueRequest(kind: kind.name), now: epoch).job
            // Worker A claims the job and vanishes; its cancellation is asked for while it is held.
            _ = try await store.claim(quota: [kind.name: 1], leases: [kind.name: 60], owner: "A", now: epoch)
            #expect(try await store.cancel(jobID: job.id, now: epoch)?.cancelRequested == true)
            let worker = Worker(
                store: store, registry: JobRegistry([kind]), policies: PolicyBook(), clock: ManualTimeSource(epoch.addingTimeInterval(120)),
                options: WorkerOptions(owner: "B"))
            #expect(try await worker.drain().cancelled == 1)
            #expect(try await store.job(id: job.id)?.state == .cancelled)
            #expect(try await store.steps(of: job.id).isEmpty)
            #expect(try await store.probeEffectCount(jobID: job.id) == 0)
            #expect(sent.value == 0)
        }
        try await check(try await backend.makeStore())
    }

    /// An outside step's done-mark goes in the transaction of the database step after it.
    /// When that step fails, the mark is still written: the next attempt does not do the
    /// outside work again.
    @Test(arguments: Backend.allCases)
    func anOutsideStepIsRecordedWhenTheDatabaseStepAfterItFails(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let uploads = LockedCounter()
            let kind = JobKind<S.Transaction>(name: "test.upload-then-record", steps: [
                JobStep("upload", external: { _ in uploads.increment(); return .done }),
                JobStep("record", database: { context, tx in
                    if context.job.attempt == 1 { throw InducedRollback() }
                    try store.recordProbeEffect(jobID: context.job.id, step: "record", now: context.now, in: tx)
                    return .done
                }),
            ])
            let (job, worker, clock) = try await enqueueRetriedAfterASecond(store, kind)
            #expect(try await worker.drain().retrying == 1)
            #expect(try await store.steps(of: job.id).map(\.step) == ["upload"])
            #expect(try await store.probeEffectCount(jobID: job.id) == 0)
            clock.advance(by: 2)
            #expect(try await worker.drain().succeeded == 1)
            #expect(uploads.value == 1)
            #expect(try await store.probeEffectCount(jobID: job.id) == 1)
            #expect(try await store.steps(of: job.id).map(\.step) == ["upload", "record"])
        }
        try await check(try await backend.makeStore())
    }

    /// A worker told to stop (SIGTERM) while an outside step runs hands the job back after that
    /// step; if the job's cancellation was asked for meanwhile, it is cancelled there instead,
    /// and the database step after the outside one never runs.
    @Test(arguments: Backend.allCases)
    func aShutdownAfterAnOutsideStepStillSeesTheCancellation(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let drain = CancelWhenAttached()
            let (job, worker) = try await uploadCancellingItsJobThenRecord(store) { drain.cancel() }
            let task = Task { try await worker.drain() }
            drain.attach(task)
            #expect(try await task.value.cancelled == 1)
            try await expectCancelledAfterUpload(store, job)
        }
        try await check(try await backend.makeStore())
    }

    /// An outside step's done-mark commits in the transaction of the database step after it:
    /// one commit for the two. One followed by another outside step commits on its own.
    /// Seen on PostgreSQL, where rows written by one transaction share its id (xmin).
    @Test func anOutsideStepsMarkCommitsWithTheDatabaseStepAfterIt() async throws {
        let store = try await ThrowawayPostgres.makeStore()
        let kind = JobKind<PostgresTransaction>(name: "test.four-steps", steps: [
            JobStep("a", external: { _ in .done }),
            JobStep("b", database: { _, _ in .done }),
            JobStep("c", external: { _ in .done }),
            JobStep("d", external: { _ in .done }),
        ])
        let job = try await enqueue(store, EnqueueRequest(kind: kind.name), now: epoch).job
        let worker = Worker(store: store, registry: JobRegistry([kind]), policies: PolicyBook(), clock: ManualTimeSource(epoch))
        #expect(try await worker.drain().succeeded == 1)
        let commits = try await store.read { tx in
            Dictionary(uniqueKeysWithValues: try tx.query("SELECT step, xmin::text FROM lifecycle.job_steps WHERE job_id = \(job.id)").map {
                try $0.decode((String, String).self)
            })
        }
        #expect(commits.count == 4)
        #expect(commits["a"] == commits["b"])
        #expect(Set([commits["b"], commits["c"], commits["d"]]).count == 3)
    }

    /// A cancellation requested while an outside step runs stops the job before the database
    /// step after it takes effect, although that step's transaction carries the outside
    /// step's done-mark.
    @Test(arguments: Backend.allCases)
    func aCancellationDuringAnOutsideStepStopsTheDatabaseStepAfterIt(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let (job, worker) = try await uploadCancellingItsJobThenRecord(store) {}
            #expect(try await worker.drain().cancelled == 1)
            try await expectCancelledAfterUpload(store, job)
        }
        try await check(try await backend.makeStore())
    }

    /// Each job's step enqueues the next: one drain runs the whole chain. The worker claims
    /// while jobs run, so a claim can read the queue just before a job's follow-up commits
    /// and come back empty after that job has ended; that must not end the drain.
    @Test(arguments: Backend.allCases)
    func oneDrainRunsTheJobsItsJobsEnqueue(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let links = 40
            let enqueued = LockedCounter()
            let kind = JobKind<S.Transaction>(name: "test.chain", steps: [
                JobStep("next", database: { context, tx in
                    if enqueued.value < links - 1 {
                        _ = try store.enqueue(EnqueueRequest(kind: "test.chain"), policy: JobPolicy(), now: context.now, in: tx)
                        enqueued.increment()
                    }
                    return .done
                }),
            ])
            var policies = PolicyBook()
            policies.setPolicy(JobPolicy(), for: kind.name)
            _ = try await enqueue(store, EnqueueRequest(kind: kind.name), now: epoch)
            let worker = Worker(store: store, registry: JobRegistry([kind]), policies: policies, clock: ManualTimeSource(epoch))
            #expect(try await worker.drain().succeeded == links)
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func scheduledKindsAreEnqueuedOncePerSlotAcrossWorkers(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            var policy = JobPolicy()
            policy.schedule = try CronSchedule("0 3 * * *")
            var policies = PolicyBook()
            policies.setPolicy(policy, for: ProbeJobs.noopKind)
            let clock = ManualTimeSource(epoch.addingTimeInterval(3 * 3600 + 600))  // 03:10
            let registry = JobRegistry([ProbeJobs.noop(store: store)])
            let workers = (0..<3).map { index in
                Worker(store: store, registry: registry, policies: policies, clock: clock, options: WorkerOptions(owner: "w\(index)"))
            }
            var enqueued = 0
            for worker in workers { enqueued += try await worker.enqueueScheduledJobs().count }
            #expect(enqueued == 1)
            clock.advance(by: 3600)
            #expect(try await workers[0].enqueueScheduledJobs().isEmpty)
            clock.advance(by: 86_400)
            #expect(try await workers[1].enqueueScheduledJobs().count == 1)
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func workersSharingAStoreRunEveryJobExactlyOnce(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let count = 300
            let payload = try probePayload()
            try await store.write { tx in
                for _ in 0..<count {
                    _ = try store.enqueue(EnqueueRequest(kind: ProbeJobs.probeKind, payload: payload), policy: JobPolicy(), now: epoch, in: tx)
                }
            }
            let clock = ManualTimeSource(epoch)
            let registry = JobRegistry([ProbeJobs.probe(store: store)])
            let workers = (0..<4).map { index in
                Worker(store: store, registry: registry, policies: PolicyBook(), clock: clock,
                       options: WorkerOptions(concurrency: 8, owner: "w\(index)"))
            }
            let summaries = try await withThrowingTaskGroup(of: DrainSummary.self) { group in
                for worker in workers { group.addTask { try await worker.drain() } }
                return try await group.reduce(into: [DrainSummary]()) { $0.append($1) }
            }
            #expect(summaries.map(\.succeeded).reduce(0, +) == count)
            #expect(summaries.allSatisfy { $0.leaseLost == 0 && $0.retrying == 0 })
            let jobs = try await store.jobs(matching: JobFilter(limit: count * 2))
            #expect(jobs.count == count)
            #expect(jobs.allSatisfy { $0.state == .succeeded && $0.attempt == 1 })
            for job in jobs.prefix(20) { #expect(try await store.probeEffectCount(jobID: job.id) == 2) }
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func racingEnqueuesOfOneUniqueKeyMakeOneJob(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let outcomes = try await withThrowingTaskGroup(of: EnqueueOutcome.self) { group in
                for _ in 0..<16 {
                    group.addTask { try await enqueue(store, EnqueueRequest(kind: ProbeJobs.noopKind, uniqueKey: "race"), now: epoch) }
                }
                return try await group.reduce(into: [EnqueueOutcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter(\.created).count == 1)
            #expect(Set(outcomes.map(\.job.id)).count == 1)
            #expect(try await store.jobs(matching: JobFilter(uniqueKey: "race")).count == 1)
        }
        try await check(try await backend.makeStore())
    }

    /// One job of `kind`, enqueued, and a worker on a manual clock that retries it one
    /// second after a failed attempt.
    private func enqueueRetriedAfterASecond<S: JobStore>(
        _ store: S, _ kind: JobKind<S.Transaction>
    ) async throws -> (JobRecord, Worker<S>, ManualTimeSource) {
        var policy = JobPolicy()
        policy.backoffBase = 1
        policy.backoffCap = 1
        var policies = PolicyBook()
        policies.setPolicy(policy, for: kind.name)
        let job = try await enqueue(store, EnqueueRequest(kind: kind.name), now: epoch).job
        let clock = ManualTimeSource(epoch)
        return (job, Worker(store: store, registry: JobRegistry([kind]), policies: policies, clock: clock), clock)
    }

    /// A job whose outside step ("upload") asks for the job's own cancellation, as an
    /// operator would while it runs, then calls `meanwhile`; its database step ("record")
    /// leaves a probe row. Returns the enqueued job and a worker for it.
    private func uploadCancellingItsJobThenRecord<S: JobStore>(
        _ store: S, meanwhile: @escaping @Sendable () -> Void
    ) async throws -> (JobRecord, Worker<S>) {
        let kind = JobKind<S.Transaction>(name: "test.cancel-then-record", steps: [
            JobStep("upload", external: { context in
                _ = try await store.cancel(jobID: context.job.id, now: context.now)
                meanwhile()
                return .done
            }),
            JobStep("record", database: { context, tx in
                try store.recordProbeEffect(jobID: context.job.id, step: "record", now: context.now, in: tx)
                return .done
            }),
        ])
        let job = try await enqueue(store, EnqueueRequest(kind: kind.name), now: epoch).job
        return (job, Worker(store: store, registry: JobRegistry([kind]), policies: PolicyBook(), clock: ManualTimeSource(epoch)))
    }

    /// The job ended cancelled after its upload, its database step never in effect.
    private func expectCancelledAfterUpload<S: JobStore>(_ store: S, _ job: JobRecord) async throws {
        #expect(try await store.job(id: job.id)?.state == .cancelled)
        #expect(try await store.probeEffectCount(jobID: job.id) == 0)
        #expect(try await store.steps(of: job.id).map(\.step) == ["upload"])
    }
}

struct InducedRollback: Error {}

/// Opens once; a wait after it opened returns at once.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func open() {
        let released = lock.withLock {
            isOpen = true
            defer { waiting = [] }
            return waiting
        }
        for continuation in released { continuation.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let opened = lock.withLock {
                if !isOpen { waiting.append(continuation) }
                return isOpen
            }
            if opened { continuation.resume() }
        }
    }
}

final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
}

/// Cancels a task once it is attached, whichever comes first: the request or the task.
final class CancelWhenAttached: @unchecked Sendable {
    private let lock = NSLock()
    private var task: Task<DrainSummary, any Error>?
    private var requested = false

    func attach(_ task: Task<DrainSummary, any Error>) {
        lock.withLock {
            self.task = task
            if requested { task.cancel() }
        }
    }

    func cancel() {
        lock.withLock {
            requested = true
            task?.cancel()
        }
    }
}

private struct NotYet: Error {}

/// How often each step of the every-attempt test ran.
private final class StepCounts: @unchecked Sendable {
    let lock = NSLock()
    var prepared = 0
}
