import Foundation
import JobRunner
import Lifecycle
import Synchronization

/// The nightly purge (`lifecycle purge`) in the caller's process: a purge job for each
/// due account that has none (accounts imported already pending, say), then every due
/// purge job run until none is left. Overlapping runs, in this process or others, are
/// safe: each account is purged exactly once.
public struct PurgeDrain<Store: LifecycleStore>: Sendable {
    /// What a run is doing, for a progress display.
    public enum Progress: Sendable {
        /// After the sweep: how many purge jobs are due now (a total to count down).
        case due(Int)
        /// A purge job started on this account.
        case started(account: String)
        /// A purge job finished; `purged` accounts are purged so far in this run.
        case finished(purged: Int)
    }

    public let services: LifecycleServices<Store>
    private let sweep: PurgeSweep<Store>

    /// Refuses (`.badInput`) while the data map does not check against the database.
    public init(services: LifecycleServices<Store>) async throws {
        let directory = try await services.directory()
        self.services = services
        sweep = try PurgeSweep(services: services, directory: directory)
    }

    /// Due accounts, at most `limit`, with the rows and blobs their purge would remove; changes nothing.
    public func preview(limit: Int? = nil) async throws -> [PurgePreview] {
        try await sweep.preview(limit: limit)
    }

    /// Enqueues the missing purge jobs, then runs due purge jobs until none is left, or
    /// until `limit` of them have finished. With a limit, jobs run one at a time and those
    /// claimed but not started are handed back at once instead of waiting for their lease
    /// to run out. `progress` is called from the worker's tasks.
    /// `beforeJob` is the runner's test hook (`WorkerOptions.beforeJob`); nil outside tests.
    public func run(
        limit: Int? = nil, concurrency: Int = 16, beforeJob: (@Sendable (JobRecord) async -> Void)? = nil,
        progress: @escaping @Sendable (Progress) -> Void = { _ in }
    ) async throws -> PurgeRunReport {
        let sweepReport = try await sweep.enqueueDuePurges()
        if let due = try? await services.store.countDue(kinds: [DeletionJobs.purgeKind], now: services.clock.now()) {
            progress(.due(limit.map { min($0, due) } ?? due))
        }
        let summary = try await runPurges(limit: limit, concurrency: concurrency, beforeJob: beforeJob, progress: progress)
        return PurgeRunReport(sweep: sweepReport, run: summary)
    }

    private func runPurges(
        limit: Int?, concurrency: Int, beforeJob: (@Sendable (JobRecord) async -> Void)?, progress: @escaping @Sendable (Progress) -> Void
    ) async throws -> PurgeRunSummary {
        let services = self.services
        let tally = PurgeTally()
        let owner = WorkerOptions.defaultOwner()
        let stopper = Stopper()
        var options = WorkerOptions(concurrency: limit == nil ? concurrency : 1, owner: owner, kinds: [DeletionJobs.purgeKind])
        options.beforeJob = beforeJob
        options.reportsStops = true
        let worker = Worker(
            store: services.store, registry: services.registry, policies: services.policies, clock: services.clock,
            options: options,
            logger: services.logger
        ) { event in
            switch event {
            case .started(let job): progress(.started(account: tally.account(of: job)))
            case .stepFinished(let job, let step):
                if DeletionJobs.finalPurgeSteps.contains(step) { tally.purged(job) }
            case .message, .waiting: break
            case .finished(let job, let outcome):
                let handled = tally.finished(job, outcome)
                progress(.finished(purged: tally.purgedCount))
                if let limit, handled >= limit { stopper.stop() }
            }
        }
        let task = Task { try await worker.drain() }
        stopper.attach(task)
        _ = try await task.value
        // With this run's own stops, those a run before it recorded and did not live to report.
        tally.add(unreported: try await services.store.takeUnreportedStops(kinds: [DeletionJobs.purgeKind]))
        if limit != nil {
            let now = services.clock.now()
            for job in try await services.store.jobs(matching: JobFilter(states: [.running], kinds: [DeletionJobs.purgeKind], limit: 10_000))
            where job.leaseOwner == owner {
                try await services.store.release(jobID: job.id, owner: owner, now: now)
            }
        }
        return tally.report
    }
}

public struct PurgeRunReport: Codable, Sendable {
    public var sweep: SweepReport
    public var run: PurgeRunSummary
}

public struct PurgeRunSummary: Codable, Sendable {
    /// Account ids.
    public var purged: [String] = []
    /// Restored meanwhile, or already purged.
    public var skipped: [String] = []
    /// One line each, naming the account and its job.
    public var failures: [String] = []
    /// Started but handed back between steps (the process was asked to stop); the next run resumes them.
    public var handedBack: [String] = []

    enum CodingKeys: String, CodingKey {
        case purged, skipped, failures, handedBack = "handed_back"
    }
}

/// What one run did, fed by worker events from several tasks.
final class PurgeTally: Sendable {
    private let state = Mutex(State())

    private struct State {
        var summary = PurgeRunSummary()
        var tombstoned: Set<JobID> = []
        var stopped: Set<JobID> = []
        var accounts: [JobID: String] = [:]
        var handled = 0
    }

    var report: PurgeRunSummary { state.withLock { $0.summary } }
    var purgedCount: Int { state.withLock { $0.summary.purged.count } }

    /// The payload is decoded once per job, on its first event.
    func account(of job: JobRecord) -> String {
        if let known = state.withLock({ $0.accounts[job.id] }) { return known }
        let id = (try? JobJSON.decode(PurgePayload.self, from: job.payload).account) ?? "?"
        state.withLock { $0.accounts[job.id] = id }
        return id
    }

    func purged(_ job: JobRecord) {
        let id = account(of: job)
        state.withLock { state in
            state.tombstoned.insert(job.id)
            state.summary.purged.append(id)
        }
    }

    /// Returns how many jobs this run has finished so far.
    func finished(_ job: JobRecord, _ outcome: JobOutcome) -> Int {
        let id = account(of: job)
        return state.withLock { state in
            state.handled += 1
            switch outcome {
            case .succeeded, .cancelled:
                if !state.tombstoned.contains(job.id) { state.summary.skipped.append(id) }
            case .retrying(let error, let at):
                state.summary.failures.append("account \(id): purge job #\(job.id) failed, retries at \(ISO8601.format(at)): \(error)")
            case .dead(let error):
                state.summary.failures.append("account \(id): purge job #\(job.id) is dead: \(error)")
            case .leaseLost:
                state.summary.failures.append("account \(id): purge job #\(job.id) was taken over by another worker (this one was too slow)")
            case .released:
                state.summary.handedBack.append(id)
            case .stopped(let reason):
                state.stopped.insert(job.id)
                state.summary.failures.append("account \(id): purge job #\(job.id) stopped: \(reason)")
            case .notReady(let reason):
                state.summary.failures.append("account \(id): purge job #\(job.id) was handed back, this process cannot run it as set up: \(reason)")
            }
            return state.handled
        }
    }

    /// Stops taken from the store that this run has not counted itself.
    func add(unreported stops: [UnreportedStop]) {
        state.withLock { state in
            for stop in stops where state.stopped.insert(stop.jobID).inserted {
                state.summary.failures.append("purge job #\(stop.jobID) \(stop.report)")
            }
        }
    }
}

/// Cancels the drain once a limit is reached. Called from the job's own
/// `finished` event, after its last write, so no step is cut short.
final class Stopper: Sendable {
    private let state = Mutex<(task: Task<DrainSummary, any Error>?, stopped: Bool)>((nil, false))

    func attach(_ task: Task<DrainSummary, any Error>) {
        let cancelNow = state.withLock { state in
            state.task = task
            return state.stopped
        }
        if cancelNow { task.cancel() }
    }

    func stop() {
        let task = state.withLock { state in
            state.stopped = true
            return state.task
        }
        task?.cancel()
    }
}
