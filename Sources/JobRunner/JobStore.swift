import Foundation

/// What a worker needs from a database: enqueue, claim, heartbeat, the done-marks and the
/// end of an attempt, in transactions it can share. A backend implements it once per
/// dialect (SQLite, PostgreSQL); the runner never sees SQL.
///
/// `Transaction` is the backend's handle on one open write transaction. Steps
/// whose effects are all in the database receive it, so their writes and the
/// step's "done" mark commit together.
public protocol JobQueue: Sendable {
    associatedtype Transaction

    /// Runs `body` in one write transaction; commits if it returns, rolls back if it throws.
    func write<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T

    /// `write`, for a caller that already gathers many pieces into each transaction (the
    /// runner's group commits): where `write` itself shares transactions between callers,
    /// this one skips that, and the hand-offs it costs on every commit.
    func writeUnshared<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T

    /// Runs `body` so that its writes can be undone alone (a savepoint): the runner commits
    /// several jobs' steps in one transaction, and one step's failure must not undo the others.
    /// Rethrows what `body` throws, after rolling back its writes.
    func savepoint<T>(in tx: Transaction, _ body: () throws -> T) throws -> T

    /// False where a savepoint per piece costs more than the rare rerun: the runner then
    /// runs a shared transaction's pieces bare and, if one throws, each again alone.
    var savepointsAreCheap: Bool { get }

    /// How many of a worker's group-commit transactions may be open at once: 1 where the
    /// database has one writer; more where each waits on round trips to a server.
    var concurrentWriteTransactions: Int { get }

    /// Where the database has one writer that can run the runner's code (SQLite's writer
    /// queue): runs group-commit sessions there, so the writer goes from one commit to the
    /// next batch without a hand-off. Nil (the default) where transactions are round trips
    /// to a server: each is then awaited through `writeUnshared`.
    var writerSessions: WriterSessions<Transaction>? { get }

    /// Returns when a job may have become due (one was enqueued), or after `timeout` seconds,
    /// or when the calling task is cancelled: an idle worker's wait between claims. A backend
    /// without notifications just sleeps.
    func waitForWork(timeout: TimeInterval) async

    /// Sets up what `waitForWork` listens to, before a long-running worker's first claim,
    /// so nothing enqueued after that claim goes unheard.
    func startWatchingForWork() async

    /// Idempotent by unique key: a live job with the same key is returned, not duplicated.
    func enqueue(_ request: EnqueueRequest, policy: JobPolicy, now: Date, in tx: Transaction) throws -> EnqueueOutcome

    /// One job, committed on its own (`enqueue(_:policy:now:in:)` in a transaction of its
    /// own, unless the backend can do it in fewer round trips).
    func enqueue(_ request: EnqueueRequest, policy: JobPolicy, now: Date) async throws -> EnqueueOutcome

    /// Many jobs at once, all under `policy` (one kind's, typically), in request order:
    /// one statement where the backend can, rather than one per job. A request with a
    /// unique key is enqueued as `enqueue` does it (a live job with the key is returned).
    func enqueue(many requests: [EnqueueRequest], policy: JobPolicy, now: Date, in tx: Transaction) throws -> [EnqueuedJob]

    /// Marks the job succeeded, fenced by the lease: throws `JobRunnerError.leaseLost` when
    /// another worker now holds the job.
    func markSucceeded(jobID: JobID, owner: String, now: Date, in tx: Transaction) throws

    /// The done-marks of several jobs' steps (a group commit's): each records its step as
    /// finished, and a job's last step's also marks the job succeeded. Each is fenced by its
    /// lease, and holds off a rescue of its job until the transaction commits. Returns one
    /// entry per mark, in order: nil where the lease was lost (nothing of that mark is
    /// written), else whether cancellation was requested. A second mark of the same step
    /// fails the statement. The caller abandons the transaction when a nil entry's step
    /// wrote anything besides its mark.
    func markStepsDone(_ marks: [StepMark], in tx: Transaction) throws -> [Bool?]

    /// The stops recorded by marks with `stopped` set, of these kinds (nil: every kind),
    /// oldest first; those returned are forgotten in the same transaction, so each is
    /// reported once, by whichever run takes it.
    func takeUnreportedStops(kinds: [String]?) async throws -> [UnreportedStop]

    /// Atomically leases due jobs (queued or retrying with `runAt <= now`, or running
    /// with an expired lease) to `owner`: at most `quota[kind]` of each kind, each
    /// for `leases[kind]` seconds. A rescued job on its last attempt goes `dead`.
    /// `holding` are the jobs the claiming worker still runs or holds: their leases may
    /// have run out (a stalled heartbeat), but rescuing them would start a second run of
    /// a job beside the first, under the same owner, so the marks' fence could not tell
    /// the two apart. Other workers still rescue them.
    func claim(_ request: ClaimRequest) async throws -> [ClaimedJob]

    /// `claim`, inside a write transaction shared with other work: on a store with one writer
    /// the runner's claims ride its group commits instead of each paying a commit of its own.
    func claim(_ request: ClaimRequest, in tx: Transaction) throws -> [ClaimedJob]

    /// Extends the leases `owner` still holds; returns the ids another worker has taken
    /// over since (its lease ran out and a claim rescued the job). A job that finished or
    /// was handed back in the meantime is not among them: nobody took it.
    func heartbeat(jobIDs: [JobID], owner: String, lease: TimeInterval, now: Date) async throws -> Set<JobID>

    /// Records a failed attempt: `retrying` with a new `runAt`, or `dead` when `retryAt` is nil.
    func markFailed(jobID: JobID, owner: String, error: String, retryAt: Date?, now: Date) async throws -> JobState

    /// Gives back a claimed job without using up an attempt: one this worker never started
    /// (it is shutting down), or one it cannot run as it is set up (`reason`, kept as the
    /// job's last error for `jobs show` and `jobs check`). Its `runAt` is left as it was.
    func release(jobID: JobID, owner: String, reason: String?, now: Date) async throws

    /// Moves a job whose cancellation was requested to `cancelled`, between steps.
    /// `reason`, when given, is kept as the job's last error: why its work was withdrawn.
    func markCancelled(jobID: JobID, owner: String, reason: String?, now: Date) async throws

    /// For cron-style schedules: returns true exactly once per (name, slot), across
    /// processes, so overlapping `worker --once` runs enqueue a scheduled job once.
    func claimScheduleSlot(name: String, slot: Date, in tx: Transaction) throws -> Bool
}

/// What an operator and the product's own code ask of the queue beyond a worker's needs:
/// cancel, retry, pause, and the reads behind `jobs list|show|check` and the dashboard.
public protocol JobOperations: JobQueue {
    /// Queued or retrying jobs become `cancelled` at once; a running job is flagged
    /// and stops before its next step.
    func cancel(jobID: JobID, now: Date) async throws -> JobRecord?
    func cancel(jobID: JobID, now: Date, in tx: Transaction) throws -> JobRecord?

    /// Puts a dead or cancelled job back in the queue with a fresh attempt budget.
    func retry(jobID: JobID, now: Date) async throws -> JobRecord?

    func job(id: JobID) async throws -> JobRecord?
    func job(id: JobID, in tx: Transaction) throws -> JobRecord?
    func liveJob(uniqueKey: String, in tx: Transaction) throws -> JobRecord?
    func jobs(matching filter: JobFilter) async throws -> [JobRecord]
    func steps(of jobID: JobID) async throws -> [StepRecord]
    func countByKindAndState() async throws -> [JobCountKey: Int]
    /// Jobs of `kinds` (empty: every kind) a worker could claim at `now`: queued or retrying
    /// and due, or running with a lease that ran out. What a progress display counts down.
    func countDue(kinds: [String], now: Date) async throws -> Int

    /// Stops every worker, on any machine, from claiming jobs of `kind` (running ones finish)
    /// until `resume`. False when it was paused already (the first pause's record stays).
    func pause(kind: String, by actor: String, reason: String?, now: Date) async throws -> Bool
    /// False when the kind was not paused.
    func resume(kind: String) async throws -> Bool
    func pausedKinds() async throws -> [PausedKind]

    /// Jobs an operator should hear about, oldest first, of `kinds` (empty: every kind).
    /// Always the dead ones; with `.stuck(now:)` also every job backing off or leased and
    /// every queued one due by `now`; with `.overdue(before:)` the waiting ones due before
    /// that instant and the running ones whose lease ran out before it. Waiting jobs of a
    /// paused kind are left out: nobody is meant to run them.
    func jobsNeedingAttention(kinds: [String], _ scope: AttentionScope, limit: Int) async throws -> [JobRecord]
}

/// The runner's canary jobs (`jobs probe`) and what they record.
public protocol JobProbeRecording: JobQueue {
    /// The runner's own probe table: one row per (job, step) for canary jobs,
    /// which show that database-only steps take effect exactly once.
    func recordProbeEffect(jobID: JobID, step: String, now: Date, in tx: Transaction) throws
    func probeEffectCount(jobID: JobID) async throws -> Int
}

/// Everything a backend gives the runner: the queue, the operator's view, the probe table.
public protocol JobStore: JobOperations, JobProbeRecording {}

/// What a worker asks `claim` for: at most `quota[kind]` due jobs of each kind, leased to
/// `owner` for `leases[kind]` seconds each, never one of `holding` (see `JobQueue.claim`).
public struct ClaimRequest: Sendable {
    public var quota: [String: Int]
    public var leases: [String: TimeInterval]
    public var owner: String
    public var holding: Set<JobID>
    public var now: Date

    public init(quota: [String: Int], leases: [String: TimeInterval], owner: String, holding: Set<JobID> = [], now: Date) {
        self.quota = quota
        self.leases = leases
        self.owner = owner
        self.holding = holding
        self.now = now
    }
}

extension JobOperations {
    public func countByState() async throws -> [JobState: Int] {
        try await countByKindAndState().reduce(into: [:]) { counts, cell in counts[cell.key.state, default: 0] += cell.value }
    }
}

/// A job `enqueue(many:)` made, or found live under the request's unique key.
public struct EnqueuedJob: Sendable, Equatable {
    public var id: JobID
    public var created: Bool

    public init(id: JobID, created: Bool) {
        self.id = id
        self.created = created
    }
}

/// A finished step's done-mark, as the runner hands it to the store.
public struct StepMark: Sendable, Equatable {
    public var jobID: JobID
    public var step: String
    public var output: String?
    /// The job's last step (or one that ends the job early): the job is marked succeeded too.
    public var finishesJob: Bool
    /// The lease holder the mark is fenced by.
    public var owner: String
    public var now: Date
    /// A finishing mark of a job that stopped (`StepResult.stopped`), in a run that reports
    /// its stops in its exit status (`WorkerOptions.reportsStops`): recorded with the mark,
    /// for `takeUnreportedStops`.
    public var stopped: String?

    public init(jobID: JobID, step: String, output: String?, finishesJob: Bool, owner: String, now: Date, stopped: String? = nil) {
        self.jobID = jobID
        self.step = step
        self.output = output
        self.finishesJob = finishesJob
        self.owner = owner
        self.now = now
        self.stopped = stopped
    }
}

/// A job's stop that a run meant to report in its exit status and had not reported yet:
/// recorded with the job's done-mark, so a crash between the two loses nothing.
public struct UnreportedStop: Sendable, Equatable {
    public var jobID: JobID
    public var kind: String
    public var reason: String
    public var stoppedAt: Date

    public init(jobID: JobID, kind: String, reason: String, stoppedAt: Date) {
        self.jobID = jobID
        self.kind = kind
        self.reason = reason
        self.stoppedAt = stoppedAt
    }

    /// What a report says of it, after the job's name: when, why, and that another run made it.
    public var report: String {
        "stopped at \(ISO8601.format(stoppedAt)): \(reason) (by a run that had not reported it: it ended first, or is still running)"
    }
}

/// One cell of the queue's counts.
public struct JobCountKey: Hashable, Sendable {
    public var kind: String
    public var state: JobState

    public init(kind: String, state: JobState) {
        self.kind = kind
        self.state = state
    }
}

extension JobQueue {
    public func release(jobID: JobID, owner: String, now: Date) async throws {
        try await release(jobID: jobID, owner: owner, reason: nil, now: now)
    }

    public var savepointsAreCheap: Bool { true }
    public var concurrentWriteTransactions: Int { 1 }
    public var writerSessions: WriterSessions<Transaction>? { nil }

    public func writeUnshared<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await write(body)
    }

    public func waitForWork(timeout: TimeInterval) async {
        try? await Task.sleep(nanoseconds: UInt64(max(0, timeout) * 1_000_000_000))
    }

    public func startWatchingForWork() async {}

    /// A claim by a caller that holds no jobs.
    public func claim(quota: [String: Int], leases: [String: TimeInterval], owner: String, now: Date) async throws -> [ClaimedJob] {
        try await claim(ClaimRequest(quota: quota, leases: leases, owner: owner, now: now))
    }

    public func enqueue(_ request: EnqueueRequest, policy: JobPolicy, now: Date) async throws -> EnqueueOutcome {
        try await write { tx in try self.enqueue(request, policy: policy, now: now, in: tx) }
    }

    public func enqueue(many requests: [EnqueueRequest], policy: JobPolicy, now: Date, in tx: Transaction) throws -> [EnqueuedJob] {
        try requests.map { request in
            let outcome = try enqueue(request, policy: policy, now: now, in: tx)
            return EnqueuedJob(id: outcome.job.id, created: outcome.created)
        }
    }
}

public struct JobRunnerError: Error, CustomStringConvertible, Sendable, Equatable {
    private enum Code: Equatable, Sendable {
        case leaseLost, unknownKind, invalidPolicy, invalidSchedule, noSuchJob, notRetryable
    }

    private let code: Code
    public let message: String

    public var description: String { message }

    public static func leaseLost(_ id: JobID) -> Self {
        .init(code: .leaseLost, message: "job \(id): lease lost to another worker; this attempt's step was rolled back")
    }
    public static func unknownKind(_ kind: String) -> Self {
        .init(code: .unknownKind, message: "no job kind named '\(kind)' is registered")
    }
    public static func invalidPolicy(_ message: String) -> Self { .init(code: .invalidPolicy, message: message) }
    public static func invalidSchedule(_ message: String) -> Self { .init(code: .invalidSchedule, message: message) }
    public static func noSuchJob(_ id: JobID) -> Self { .init(code: .noSuchJob, message: "no job with id \(id)") }
    public static func notRetryable(_ id: JobID, _ state: JobState) -> Self {
        .init(code: .notRetryable, message: "job \(id) is \(state.rawValue); only dead or cancelled jobs can be retried")
    }

    public var isLeaseLost: Bool { code == .leaseLost }
    public var isNoSuchJob: Bool { code == .noSuchJob }
    /// A policy file or a schedule the installation was given cannot be used: its
    /// operator's to fix, never the fault of whoever asked for the job.
    public var isInvalidSetting: Bool { code == .invalidPolicy || code == .invalidSchedule }
}

/// Thrown by a step when running it again cannot help (bad payload, the
/// account is gone): the job goes straight to `dead`.
public struct PermanentJobFailure: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Thrown by a step that this worker cannot run as it is set up (a key, a credential or a
/// library it lacks): the job is not at fault, so running it again here cannot help and
/// burying it would lose work someone asked for. The job is handed back without using up
/// an attempt and stays due, with this message as its last error, so `jobs check` reports
/// it overdue once it has waited too long; this worker claims no more jobs of its kind for
/// a while (a `--once` run: for the rest of the run) and reports the fault.
public struct WorkerNotReady: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Thrown by a step that finds its job's work withdrawn by another job (an export of an
/// account whose purge has begun): the job ends `cancelled`, as `jobs cancel` would end it,
/// not `dead` — nothing failed and nobody needs to act. Whoever withdrew the work keeps
/// the record of why (the purge audits the exports it cancels).
public struct JobWithdrawn: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
