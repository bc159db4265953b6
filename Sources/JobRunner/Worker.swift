import Foundation
import Logging
import Synchronization

public struct WorkerOptions: Sendable {
    /// Jobs run at once by this process, across kinds (each kind also has its own policy limit).
    public var concurrency: Int
    /// How often an idle long-running worker looks for due jobs.
    public var pollInterval: TimeInterval
    /// Identifies this worker in leases; unique per process.
    public var owner: String
    /// Restrict this worker to some kinds; nil runs every registered kind.
    public var kinds: Set<String>?
    /// Awaited by each claimed job before its first step, while its lease is kept alive. Nil
    /// in every real use: the process tests hold overlapping runs at a barrier with it
    /// (the CLI's `LIFECYCLE_TEST_BARRIER`), which proves that they overlapped.
    public var beforeJob: (@Sendable (JobRecord) async -> Void)?
    /// Awaited after each job has ended and its outcome is recorded. Nil in every real use:
    /// a process test holds a run there to kill it between a job's done-mark and its report.
    public var afterJob: (@Sendable (JobRecord, JobOutcome) async -> Void)?
    /// The run reports its jobs' stops in its exit status (`worker --once`): each stop is
    /// recorded with its job's done-mark, and the run takes it (`takeUnreportedStops`)
    /// when it reports, so a crash in between leaves it for the next run to report.
    public var reportsStops = false

    public init(concurrency: Int = 2, pollInterval: TimeInterval = 1, owner: String = WorkerOptions.defaultOwner(), kinds: Set<String>? = nil) {
        self.concurrency = max(1, concurrency)
        self.pollInterval = pollInterval
        self.owner = owner
        self.kinds = kinds
    }

    public static func defaultOwner() -> String {
        let host = ProcessInfo.processInfo.hostName
        let pid = ProcessInfo.processInfo.processIdentifier
        return "\(host):\(pid):\(UUID().uuidString.prefix(8).lowercased())"
    }
}

public enum JobOutcome: Sendable, Equatable {
    case succeeded
    case retrying(error: String, at: Date)
    case dead(error: String)
    case cancelled
    /// Another worker took the job over (this one was too slow to heartbeat); nothing recorded.
    case leaseLost
    /// The worker is shutting down: the job was handed back between steps for another worker to resume.
    case released
    /// Ended without doing what it was asked, for this reason (`StepResult.stopped`); recorded as succeeded.
    case stopped(reason: String)
    /// This worker cannot run it as set up (`WorkerNotReady`): handed back, still due, its attempt not used.
    case notReady(reason: String)
}

public enum WorkerEvent: Sendable {
    case started(JobRecord)
    case stepFinished(JobRecord, step: String)
    case finished(JobRecord, JobOutcome)
    case message(JobRecord, String)
    /// A long-running worker found nothing due and now waits for a notice of new work (or
    /// its poll). Nothing is claimed or running at that moment: what is enqueued next can
    /// only reach it through the notice or the poll.
    case waiting
}

public struct DrainSummary: Sendable, Equatable {
    public var succeeded = 0
    public var retrying = 0
    public var dead = 0
    public var cancelled = 0
    public var leaseLost = 0
    public var released = 0
    public var stopped = 0
    /// Jobs handed back because this worker cannot run them as it is set up.
    public var notReady = 0
    public var failures: [String] = []
    /// The jobs counted in `stopped`.
    public var stoppedJobs: [JobID] = []
    /// Kinds this run could not run (their policy file is broken).
    public var unrunnableKinds: [String] = []

    public init() {}

    public var processed: Int { succeeded + retrying + dead + cancelled + leaseLost + released + stopped + notReady }
    /// What cron should see: every job this run touched finished well, and no kind was left out.
    public var allSucceeded: Bool { retrying == 0 && dead == 0 && leaseLost == 0 && stopped == 0 && notReady == 0 && unrunnableKinds.isEmpty }

    mutating func add(_ outcome: JobOutcome, job: JobRecord) {
        switch outcome {
        case .succeeded: succeeded += 1
        case .retrying(let error, let at):
            retrying += 1
            failures.append("job \(job.id) (\(job.kind)) will retry at \(ISO8601.format(at)): \(error)")
        case .dead(let error):
            dead += 1
            failures.append("job \(job.id) (\(job.kind)) is dead after \(job.attempt) attempt(s): \(error)")
        case .cancelled: cancelled += 1
        case .leaseLost: leaseLost += 1
        case .released: released += 1
        case .stopped(let reason):
            stopped += 1
            stoppedJobs.append(job.id)
            failures.append("job \(job.id) (\(job.kind)) stopped: \(reason)")
        case .notReady(let reason):
            notReady += 1
            failures.append("job \(job.id) (\(job.kind)) not run, handed back without using an attempt: \(reason)")
        }
    }

    /// Counts the stops taken from the store that this run has not counted already: those
    /// of a run that crashed (or is still running) before it reported them.
    public mutating func add(unreported stops: [UnreportedStop]) {
        let counted = Set(stoppedJobs)
        for stop in stops where !counted.contains(stop.jobID) {
            stopped += 1
            stoppedJobs.append(stop.jobID)
            failures.append("job \(stop.jobID) (\(stop.kind)) \(stop.report)")
        }
    }
}

/// What the worker loop waits on: a job that ended, or a claim that came back.
private enum LoopEvent: Sendable {
    case finished(JobRecord, JobOutcome, Duration)
    case claimed(Result<[ClaimedJob], any Error>)
}

/// Claims due jobs and runs their unfinished steps in order. Any number of workers,
/// in one process or many, can share a store: claims are atomic, leases fence every
/// step's done-mark, and an expired lease lets another worker resume the job.
public final class Worker<Store: JobQueue>: Sendable {
    public let store: Store
    public let registry: JobRegistry<Store.Transaction>
    public let policies: PolicyBook
    public let clock: any TimeSource
    public let options: WorkerOptions
    private let logger: Logger
    private let events: @Sendable (WorkerEvent) -> Void
    private let shuttingDown = ShutdownFlag()
    private let held = HeldJobs()
    private let transactions: TransactionBatcher<Store.Transaction>
    /// Claims ride the group commits where the store has one writer: a claim then costs no
    /// commit, and no turn on the writer, of its own.
    private let claimsInGroupCommits: Bool
    /// The policy of every kind this worker runs, read once.
    private let kindPolicies: [String: JobPolicy]
    /// Kinds left out because their policy file is broken, with its error: one bad file
    /// stops only its own kinds, and each run reports them instead of ending green.
    public let unrunnableKinds: [String: String]

    public init(
        store: Store, registry: JobRegistry<Store.Transaction>, policies: PolicyBook, clock: any TimeSource,
        options: WorkerOptions = .init(), logger: Logger = Logger(label: "lifecycle.worker"),
        events: @escaping @Sendable (WorkerEvent) -> Void = { _ in }
    ) {
        self.store = store
        self.registry = registry
        self.policies = policies
        self.clock = clock
        self.options = options
        self.logger = logger
        self.events = events
        var kindPolicies: [String: JobPolicy] = [:]
        var unrunnable: [String: String] = [:]
        for kind in registry.names where options.kinds?.contains(kind) ?? true {
            do {
                kindPolicies[kind] = try policies.policy(for: kind)
            } catch {
                unrunnable[kind] = "\(error)"
            }
        }
        self.kindPolicies = kindPolicies
        self.unrunnableKinds = unrunnable
        claimsInGroupCommits = store.concurrentWriteTransactions == 1
        transactions = TransactionBatcher.forSteps(of: store)
    }

    private var kindNames: [String] {
        registry.names.filter { kindPolicies[$0] != nil }
    }

    /// A kind's policy; a job of a kind this worker does not run (an unknown kind) gets the defaults.
    private func policy(for kind: String) -> JobPolicy { kindPolicies[kind] ?? JobPolicy() }

    /// Runs everything due now, then returns: the `worker --once` cron mode.
    public func drain() async throws -> DrainSummary {
        try await loop(untilIdle: true)
    }

    /// Runs until the surrounding task is cancelled (SIGTERM), finishing the steps in flight.
    public func run() async throws -> DrainSummary {
        try await loop(untilIdle: false)
    }

    /// Enqueues each scheduled kind once per cron slot, however many workers race.
    @discardableResult
    public func enqueueScheduledJobs() async throws -> [EnqueueOutcome] {
        let now = clock.now()
        var outcomes: [EnqueueOutcome] = []
        for kind in kindNames {
            let policy = policy(for: kind)
            guard let schedule = policy.schedule, let slot = schedule.latestSlot(atOrBefore: now) else { continue }
            let store = self.store
            let outcome: EnqueueOutcome? = try await store.write { tx in
                guard try store.claimScheduleSlot(name: kind, slot: slot, in: tx) else { return nil }
                let request = EnqueueRequest(kind: kind, payload: "{}", uniqueKey: "schedule:\(kind)")
                return try store.enqueue(request, policy: policy, now: now, in: tx)
            }
            if let outcome {
                logger.info("scheduled job enqueued", metadata: ["kind": "\(kind)", "slot": "\(ISO8601.format(slot))", "job": .stringConvertible(outcome.job.id)])
                outcomes.append(outcome)
            }
        }
        return outcomes
    }

    private func loop(untilIdle: Bool) async throws -> DrainSummary {
        // Cancellation (SIGTERM) must reach jobs between their steps even while the
        // loop itself is waiting for one of them to finish.
        let flag = shuttingDown
        return try await withTaskCancellationHandler {
            try await claimAndRun(untilIdle: untilIdle)
        } onCancel: {
            flag.set()
        }
    }

    private func claimAndRun(untilIdle: Bool) async throws -> DrainSummary {
        var summary = DrainSummary()
        for (kind, error) in unrunnableKinds.sorted(by: { $0.key < $1.key }) {
            logger.error("job kind not run: its policy cannot be used", metadata: ["kind": "\(kind)", "error": "\(error)"])
            summary.unrunnableKinds.append(kind)
            summary.failures.append("kind \(kind) was not run: \(error)")
        }
        let kinds = kindNames
        guard !kinds.isEmpty else { return summary }
        try await uncancelled { try await self.enqueueScheduledJobs() }
        var lastScheduleCheck = clock.now()
        if !untilIdle { await store.startWatchingForWork() }
        let heartbeat = startHeartbeat()
        defer { heartbeat.cancel() }

        try await withThrowingTaskGroup(of: LoopEvent.self) { group in
            var inFlight: [String: Int] = [:]
            var buffered: [ClaimedJob] = []
            var running = 0
            var stopping = false
            var claiming = false
            // False after a claim found nothing, until a job finishes or the idle wait ends:
            // nothing new can be due sooner, and claiming again at once would only spin.
            var mayClaim = true
            // Jobs finished so far, and when the claim in flight was asked for: a job that
            // finished meanwhile may have made work due (a follow-up it enqueued, room for
            // its kind) that the claim did not see, so its empty answer proves nothing.
            var finishedCount = 0
            var finishedAtClaim = 0
            // A claim that failed: the loop winds down (jobs in flight finish, buffered ones
            // are handed back), then the drain throws it.
            var claimFailure: (any Error)?
            // Kinds this worker found it cannot run as set up, until when it leaves them alone:
            // a drain for the rest of its run; a daemon for a minute, since a key file or a
            // library can be put right while it runs.
            var setAside: [String: Date] = [:]

            while true {
                if Task.isCancelled || shuttingDown.isSet { stopping = true }
                if !stopping {
                    // The next batch is claimed while this one's jobs run, once the jobs running
                    // and buffered are no more than two rounds (twice the concurrency): when all
                    // slots are busy, a round still waits in the buffer, and the loop never stops
                    // starting jobs to wait on the writer. On SQLite a claim rides the next
                    // group commit; fired at one and a half rounds, the buffer ran dry before it
                    // answered, and the commits that followed carried a handful of marks each
                    // (no-op drain: 33,000 jobs/s, against 38,000 at two).
                    if mayClaim && !claiming && running + buffered.count <= options.concurrency * 2 {
                        claiming = true
                        finishedAtClaim = finishedCount
                        let buffer = buffered
                        let now = clock.now()
                        let claimable = kinds.filter { setAside[$0].map { now >= $0 } ?? true }
                        group.addTask {
                            do {
                                return .claimed(.success(try await self.uncancelled { try await self.claimBatch(kinds: claimable, buffered: buffer) }))
                            } catch {
                                return .claimed(.failure(error))
                            }
                        }
                    }
                    while !shuttingDown.isSet, running < options.concurrency,
                          let next = buffered.firstIndex(where: { inFlight[$0.record.kind, default: 0] < policy(for: $0.record.kind).concurrency }) {
                        let claimed = buffered.remove(at: next)
                        running += 1
                        inFlight[claimed.record.kind, default: 0] += 1
                        // An unstructured task does not inherit cancellation: on SIGTERM the step
                        // in flight runs to its end, then the job is handed back between steps.
                        group.addTask {
                            let started = ContinuousClock.now
                            let outcome = await Task { await self.execute(claimed) }.value
                            if let afterJob = self.options.afterJob { await afterJob(claimed.record, outcome) }
                            return .finished(claimed.record, outcome, started.duration(to: .now))
                        }
                    }
                }
                if running == 0 && !claiming {
                    if stopping { break }
                    if !mayClaim {
                        // Nothing runs and the last claim found nothing.
                        if untilIdle { break }
                        events(.waiting)
                        await store.waitForWork(timeout: options.pollInterval)
                        if clock.now().timeIntervalSince(lastScheduleCheck) >= 30 {
                            try await uncancelled { try await self.enqueueScheduledJobs() }
                            lastScheduleCheck = clock.now()
                        }
                    }
                    mayClaim = true
                    continue
                }
                guard let event = try await group.next() else { break }
                switch event {
                case .claimed(.success(let claimed)):
                    claiming = false
                    if claimed.isEmpty && finishedCount == finishedAtClaim { mayClaim = false }
                    for job in claimed { held.add(job.record.id, lease: policy(for: job.record.kind).lease) }
                    buffered += claimed
                case .claimed(.failure(let error)):
                    claiming = false
                    claimFailure = error
                    stopping = true
                case .finished(let job, let outcome, let took):
                    RunnerMetrics.finished(kind: job.kind, outcome: outcome, took: took)
                    held.remove(job.id)
                    running -= 1
                    inFlight[job.kind, default: 1] -= 1
                    summary.add(outcome, job: job)
                    if case .notReady = outcome {
                        setAside[job.kind] = untilIdle ? .distantFuture : clock.now().addingTimeInterval(60)
                    }
                    finishedCount += 1
                    mayClaim = true
                }
            }
            // Claimed but never started: hand them back now rather than after the lease expires.
            for claimed in buffered {
                let (store, owner, now) = (store, options.owner, clock.now())
                try? await uncancelled { try await store.release(jobID: claimed.record.id, owner: owner, now: now) }
                held.remove(claimed.record.id)
            }
            if let claimFailure { throw claimFailure }
        }
        return summary
    }

    /// Runs the loop's own database work to its end even once SIGTERM has cancelled the loop:
    /// GRDB throws CancellationError from a cancelled task, so a claim under way would end
    /// the worker with an error (exit 70) instead of handing its jobs back. The loop sees the
    /// shutdown flag right after.
    @discardableResult
    private func uncancelled<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        try await Task { try await work() }.value
    }

    /// Claims several jobs per transaction so one claim feeds several executions:
    /// the per-job transaction count is what limits throughput on SQLite. Jobs wait
    /// in the buffer while their kind is at its concurrency limit; a kind's buffered
    /// jobs count against what the next claim takes of it.
    private func claimBatch(kinds: [String], buffered: [ClaimedJob]) async throws -> [ClaimedJob] {
        let batch = options.concurrency * 2 - buffered.count
        guard batch > 0 else { return [] }
        var waiting: [String: Int] = [:]
        for job in buffered { waiting[job.record.kind, default: 0] += 1 }
        var quota: [String: Int] = [:]
        var leases: [String: TimeInterval] = [:]
        for kind in kinds {
            let policy = policy(for: kind)
            let room = min(batch, policy.concurrency * 2 - waiting[kind, default: 0])
            guard room > 0 else { continue }
            quota[kind] = room
            leases[kind] = policy.lease
        }
        let (store, request) = (store, ClaimRequest(quota: quota, leases: leases, owner: options.owner, holding: held.ids(), now: clock.now()))
        guard claimsInGroupCommits else { return try await store.claim(request) }
        return try await transactions.run { tx in try store.claim(request, in: tx) }
    }

    private func execute(_ claimed: ClaimedJob) async -> JobOutcome {
        let job = claimed.record
        var jobLogger = logger
        jobLogger[metadataKey: "job"] = .stringConvertible(job.id)
        jobLogger[metadataKey: "kind"] = "\(job.kind)"
        events(.started(job))
        if let beforeJob = options.beforeJob { await beforeJob(job) }

        if job.state == .dead {
            // Claimed by rescue on its last attempt: the store already buried it.
            let outcome = JobOutcome.dead(error: job.lastError ?? "worker lost during the final attempt")
            events(.finished(job, outcome))
            return outcome
        }
        let policy = policy(for: job.kind)
        guard let kind = registry[job.kind] else {
            let outcome = await recordFailure(job, error: JobRunnerError.unknownKind(job.kind), policy: policy, logger: jobLogger)
            events(.finished(job, outcome))
            return outcome
        }

        var outputs = claimed.finishedSteps
        let store = self.store
        let owner = options.owner
        let reportsStops = options.reportsStops
        // The done-mark of an outside step followed by a database step: it commits with that
        // step (one commit for the two), or on its own if the job stops before it.
        var carried: StepMark?
        do {
            // Its cancellation was asked for while another worker held it (that worker was
            // lost, and this claim rescued the job): it stops before its next step, as a
            // running job does.
            if job.cancelRequested {
                let lastDone = kind.steps.last { outputs[$0.name] != nil }?.name ?? "none"
                return try await cancelBetweenSteps(job, after: lastDone, logger: jobLogger)
            }
            // A step that runs every attempt does, when a step after it is still to do.
            let lastToDo = kind.steps.lastIndex { outputs[$0.name] == nil } ?? -1
            for (index, step) in kind.steps.enumerated() where outputs[step.name] == nil || (step.runsEveryAttempt && index < lastToDo) {
                if shuttingDown.isSet && !outputs.isEmpty {
                    if let pending = carried {
                        carried = nil
                        if try await transactions.runMark(pending) {
                            return try await cancelBetweenSteps(job, after: pending.step, logger: jobLogger)
                        }
                    }
                    try await store.release(jobID: job.id, owner: owner, now: clock.now())
                    jobLogger.notice("shutting down: job handed back between steps", metadata: ["next": "\(step.name)"])
                    events(.finished(job, .released))
                    return .released
                }
                // With "step finished", says which step a stuck job is in (and tests wait on it).
                jobLogger.debug("step started", metadata: ["step": "\(step.name)"])
                let isLast = index == kind.steps.count - 1
                let context = StepContext(
                    job: job, outputs: outputs, now: clock.now(), logger: jobLogger,
                    progress: { [events] text in events(.message(job, text)) })
                let clock = self.clock
                let stepName = step.name
                let mark: @Sendable (StepResult) -> StepMark = { result in
                    // The step's own clock reading is its start; `jobs show` should say when it ended.
                    StepMark(
                        jobID: job.id, step: stepName, output: result.output, finishesJob: isLast || result.finishesJob,
                        owner: owner, now: clock.now(), stopped: reportsStops && (isLast || result.finishesJob) ? result.stopped : nil)
                }
                let result: StepResult
                let cancelRequested: Bool
                switch step.body {
                case .database(let body):
                    // The step's writes and its done-mark commit together, in a transaction that
                    // other jobs' steps may share too; a failure undoes this step's part alone.
                    let carrying = carried
                    carried = nil
                    do {
                        (result, cancelRequested) = try await transactions.runStep(carrying: carrying) { tx in
                            let result = try body(context, tx)
                            return (result, mark(result))
                        }
                    } catch let error where carrying != nil && !((error as? JobRunnerError)?.isLeaseLost ?? false) {
                        // The outside step before it did its work: recorded now, it is not done
                        // again by the next attempt.
                        _ = try await transactions.runMark(carrying!)
                        guard error is CancelledBeforeStep else { throw error }
                        return try await cancelBetweenSteps(job, after: carrying!.step, logger: jobLogger)
                    }
                case .external(let body):
                    result = try await body(context)
                    let next = index + 1 < kind.steps.count ? kind.steps[index + 1] : nil
                    if !result.recorded && !isLast && !result.finishesJob {
                        // The next step's done-mark checks the lease and the cancel request.
                        cancelRequested = false
                    } else if !isLast && !result.finishesJob, let next, next.isDatabase, outputs[next.name] == nil {
                        // Its done-mark goes in the next step's transaction, which checks the
                        // cancel request before that step takes effect. A crash before that
                        // commits repeats this idempotent step, as one before its own would.
                        carried = mark(result)
                        cancelRequested = false
                    } else {
                        // A crash before the batch commits only repeats an idempotent step.
                        cancelRequested = try await transactions.runMark(mark(result))
                    }
                }
                outputs[step.name] = .some(result.output)
                events(.stepFinished(job, step: step.name))
                jobLogger.debug("step finished", metadata: ["step": "\(step.name)"])
                if isLast || result.finishesJob {
                    var outcome = JobOutcome.succeeded
                    if let reason = result.stopped {
                        // A daemon worker has no exit status to show it: the log and the metric are where it shows.
                        jobLogger.warning("job stopped: \(reason)")
                        outcome = .stopped(reason: reason)
                    }
                    events(.finished(job, outcome))
                    return outcome
                }
                if cancelRequested {
                    return try await cancelBetweenSteps(job, after: step.name, logger: jobLogger)
                }
            }
            // Every step was already recorded by an earlier attempt.
            let now = clock.now()
            try await store.write { tx in try store.markSucceeded(jobID: job.id, owner: owner, now: now, in: tx) }
            events(.finished(job, .succeeded))
            return .succeeded
        } catch let error as JobRunnerError where error.isLeaseLost {
            jobLogger.warning("lease lost; another worker continues this job")
            events(.finished(job, .leaseLost))
            return .leaseLost
        } catch let fault as WorkerNotReady {
            do {
                try await store.release(jobID: job.id, owner: owner, reason: fault.message, now: clock.now())
            } catch {
                // The lease runs out and the job is claimed again, by this worker or another.
                jobLogger.warning("could not hand the job back; it is claimed again when its lease runs out", metadata: ["error": "\(error)"])
                events(.finished(job, .leaseLost))
                return .leaseLost
            }
            jobLogger.error("job handed back, its attempt not used: this worker cannot run its kind as set up", metadata: ["reason": "\(fault.message)"])
            events(.finished(job, .notReady(reason: fault.message)))
            return .notReady(reason: fault.message)
        } catch let withdrawn as JobWithdrawn {
            do {
                try await store.markCancelled(jobID: job.id, owner: owner, reason: withdrawn.message, now: clock.now())
            } catch {
                // The lease runs out and the next attempt's step finds the work withdrawn again.
                jobLogger.warning("could not record the cancellation; the job will be picked up again", metadata: ["error": "\(error)"])
                events(.finished(job, .leaseLost))
                return .leaseLost
            }
            jobLogger.notice("job cancelled: its work was withdrawn", metadata: ["reason": "\(withdrawn.message)"])
            events(.finished(job, .cancelled))
            return .cancelled
        } catch {
            let outcome = await recordFailure(job, error: error, policy: policy, logger: jobLogger)
            events(.finished(job, outcome))
            return outcome
        }
    }

    /// Ends a job whose cancellation was requested, at a step boundary.
    private func cancelBetweenSteps(_ job: JobRecord, after step: String, logger: Logger) async throws -> JobOutcome {
        try await store.markCancelled(jobID: job.id, owner: options.owner, reason: nil, now: clock.now())
        logger.notice("job cancelled between steps", metadata: ["after": "\(step)"])
        events(.finished(job, .cancelled))
        return .cancelled
    }

    private func recordFailure(_ job: JobRecord, error: any Error, policy: JobPolicy, logger: Logger) async -> JobOutcome {
        let message = String(describing: error)
        let now = clock.now()
        let permanent = error is PermanentJobFailure || (error as? JobRunnerError) == JobRunnerError.unknownKind(job.kind)
        let retryAt: Date? = (permanent || job.attempt >= job.maxAttempts)
            ? nil : now.addingTimeInterval(policy.retryDelay(afterAttempt: job.attempt))
        do {
            let state = try await store.markFailed(jobID: job.id, owner: options.owner, error: message, retryAt: retryAt, now: now)
            if state == .retrying, let retryAt {
                logger.warning("attempt failed; will retry", metadata: ["attempt": .stringConvertible(job.attempt), "retry_at": "\(ISO8601.format(retryAt))", "error": "\(message)"])
                return .retrying(error: message, at: retryAt)
            }
            logger.error("job is dead", metadata: ["attempt": .stringConvertible(job.attempt), "error": "\(message)"])
            return .dead(error: message)
        } catch let storeError as JobRunnerError where storeError.isLeaseLost {
            return .leaseLost
        } catch {
            logger.error("could not record the failure; the lease will expire and the job be retried", metadata: ["error": "\(error)"])
            return .retrying(error: message, at: now.addingTimeInterval(policy.lease))
        }
    }

}

extension Worker {
    /// One loop extends the leases of every job this worker holds, running or
    /// claimed and waiting, in one statement per lease length.
    fileprivate func startHeartbeat() -> Task<Void, Never> {
        let store = self.store
        let owner = options.owner
        let clock = self.clock
        let logger = self.logger
        let held = self.held
        let shortestLease = kindPolicies.values.map(\.lease).min() ?? JobPolicy().lease
        let interval = max(0.2, shortestLease / 3)
        return Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000))
                if Task.isCancelled { return }
                for (lease, ids) in held.byLease() {
                    do {
                        let lost = try await store.heartbeat(jobIDs: ids, owner: owner, lease: lease, now: clock.now())
                        if !lost.isEmpty {
                            logger.warning("heartbeat found leases taken over", metadata: ["jobs": .array(lost.sorted().map { .stringConvertible($0) })])
                        }
                    } catch {
                        logger.warning("heartbeat failed; will try again", metadata: ["error": "\(error)"])
                    }
                }
            }
        }
    }
}

/// The jobs a worker holds a lease on, with each one's lease length.
final class HeldJobs: Sendable {
    private let leases = Mutex<[JobID: TimeInterval]>([:])

    func add(_ id: JobID, lease: TimeInterval) { leases.withLock { $0[id] = lease } }
    func remove(_ id: JobID) { _ = leases.withLock { $0.removeValue(forKey: id) } }
    func contains(_ id: JobID) -> Bool { leases.withLock { $0[id] != nil } }
    func ids() -> Set<JobID> { leases.withLock { Set($0.keys) } }
    func byLease() -> [TimeInterval: [JobID]] {
        leases.withLock { leases in Dictionary(grouping: leases.keys, by: { leases[$0]! }) }
    }
}

final class ShutdownFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
