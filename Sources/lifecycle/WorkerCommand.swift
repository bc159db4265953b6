import ArgumentParser
import Foundation
import LifecycleRuntime

struct WorkerCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Run due jobs: once (for cron) or until SIGTERM/SIGINT.",
        usage: """
            lifecycle worker [--once] [--concurrency <concurrency>] [--kind <kind> ...] [--poll-interval <seconds>]
                             [--metrics-file <path>] \(GlobalOptions.usage)
            """,
        discussion: """
            With --once: runs everything due, then exits 0 when nothing is left undone and 75 otherwise, \
            naming each job left: retrying, dead, held by another process (or one that died, until its lease \
            runs out), or due and unclaimed, whoever left it so (see `lifecycle jobs check`). Overlapping runs \
            are safe. A kind whose policy file is broken is not run, and the run exits 75 naming the file. A job \
            that ended refused (a part deletion whose account went on hold) is named too, and the run exits 75; \
            one a killed run could not report is named by the next run of its kind.
            A job this worker cannot run as it is set up (an export with no signing key) is handed back still due, \
            without using an attempt; the run runs no more of its kind and exits 69 naming what to fix.
            --kind runner.probe is the canary: it runs the probe jobs `jobs probe` made and touches nothing else.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var metrics: MetricsOption
    @Flag(help: "Run what is due, then exit (cron mode).") var once = false
    @Option(help: "Jobs run at once in this process.") var concurrency: Int = 2
    @Option(help: "Only run these job kinds (repeatable).") var kind: [String] = []
    @Option(name: .customLong("poll-interval"), help: ArgumentHelp("""
        Seconds between an idle worker's looks for due jobs. A job enqueued wakes it at once (PostgreSQL's \
        NOTIFY; on SQLite, from any process of this machine, the kernel's file events): the poll finds the rest \
        (delays and retries that come due, expired leases).
        """, valueName: "seconds")) var pollInterval: Double = 1

    func validate() throws {
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 256") }
        guard pollInterval >= 0.05, pollInterval <= 3_600 else { throw ValidationError("--poll-interval must be between 0.05 and 3600 seconds") }
    }

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let registry = services.registry
        for name in kind where registry[name] == nil {
            throw CLIFailure(.usage, "unknown job kind '\(name)'; known kinds: \(registry.names.joined(separator: ", "))")
        }
        let figures = metrics.start()
        var writeFigures: (@Sendable () async -> ExitStatus)?
        if let figures {
            let metrics = self.metrics
            writeFigures = { await metrics.finish(figures, command: "worker", status: .ok, final: false, services: services) }
        }
        var summary = try await runWorker(
            services: services, once: once, concurrency: concurrency, kinds: kind.isEmpty ? nil : Set(kind), pollInterval: pollInterval,
            metrics: writeFigures, reportsStops: once)
        // This run's stops and those a run before it recorded and never reported (it was
        // killed after the job's done-mark): taken now, as close to the exit status as can be.
        if once { summary.add(unreported: try await services.store.takeUnreportedStops(kinds: kind.isEmpty ? nil : kind)) }
        // What this run did is half the answer: work it could not do (another process holds
        // it, it backs off, it is dead) is named too, whoever left it so.
        let attention = once ? try await JobAttention.stuck(in: services.store, kinds: kind, now: services.clock.now()) : []
        // A paused kind's due jobs were left on purpose, but left: the run says so and is not green.
        let paused = once ? try await PausedWork.waiting(in: services.store, kinds: kind.isEmpty ? registry.names : kind, now: services.clock.now()) : []
        if options.json {
            try Terminal.printJSON(WorkerReport(summary, attention: attention, paused: paused))
        } else {
            Terminal.line("worker: \(summary.succeeded) succeeded, \(summary.retrying) retrying, \(summary.dead) dead, \(summary.cancelled) cancelled"
                + (summary.stopped > 0 ? ", \(summary.stopped) stopped" : "")
                + (summary.released > 0 ? ", \(summary.released) handed back for another worker" : "")
                + (summary.notReady > 0 ? ", \(summary.notReady) not run (this worker is not set up for them)" : ""))
            for failure in summary.failures { Terminal.note("  " + failure) }
            reportAttention(attention)
            for waiting in paused { Terminal.note(waiting.line) }
        }
        // A setup fault is the operator's to fix, not a matter of waiting: it outranks "try later".
        let status: ExitStatus = summary.notReady > 0 ? .unavailable
            : summary.allSucceeded && attention.isEmpty && paused.isEmpty ? .ok : .tryLater
        return await metrics.finish(figures, command: "worker", status: status, final: once, services: services)
    }
}

/// Names each stuck job on stderr, with where to look next.
func reportAttention(_ attention: [JobAttention]) {
    guard !attention.isEmpty else { return }
    Terminal.note("not done: \(attention.count)\(attention.count == JobAttention.listLimit ? "+" : "") job(s) still need attention:")
    for job in attention { Terminal.note("  " + job.line) }
    Terminal.note("See `lifecycle jobs check` and Jobs/runbooks/jobs.md.")
}

struct WorkerReport: Encodable {
    var succeeded, retrying, dead, cancelled, leaseLost, released, stopped, notReady: Int
    var failures: [String]
    var unrunnableKinds: [String]
    var attention: [JobAttention]
    var paused: [PausedWork]

    enum CodingKeys: String, CodingKey {
        case succeeded, retrying, dead, cancelled, leaseLost = "lease_lost", released, stopped, notReady = "not_ready", failures
        case unrunnableKinds = "unrunnable_kinds", attention, paused
    }

    init(_ summary: DrainSummary, attention: [JobAttention], paused: [PausedWork]) {
        self.attention = attention
        self.paused = paused
        unrunnableKinds = summary.unrunnableKinds
        succeeded = summary.succeeded
        retrying = summary.retrying
        dead = summary.dead
        cancelled = summary.cancelled
        leaseLost = summary.leaseLost
        released = summary.released
        stopped = summary.stopped
        notReady = summary.notReady
        failures = summary.failures
    }
}

/// Shared by `worker` and the commands that run their own jobs in-process (`demo`, `--wait`).
func runWorker<Store: LifecycleStore>(
    services: LifecycleServices<Store>, once: Bool, concurrency: Int, kinds: Set<String>? = nil, pollInterval: TimeInterval = 1,
    metrics: (@Sendable () async -> ExitStatus)? = nil, reportsStops: Bool = false
) async throws -> DrainSummary {
    let progress = ProgressLine(label: "jobs finished") { services.logger.info("\($0)") }
    var options = WorkerOptions(concurrency: concurrency, pollInterval: pollInterval, kinds: kinds)
    options.beforeJob = TestBarrier.beforeJob
    options.afterJob = TestBarrier.afterJob
    options.reportsStops = reportsStops
    let events: @Sendable (WorkerEvent) -> Void = { event in
        switch event {
        case .started(let job): progress.update(doing: "\(job.kind) #\(job.id)")
        case .stepFinished(let job, let step): progress.update(doing: "\(job.kind) #\(job.id) \(step) done")
        case .message(let job, let text): progress.update(doing: "\(job.kind) #\(job.id): \(text)")
        case .finished: progress.update(increment: 1)
        case .waiting: break
        }
    }
    defer { progress.finish() }
    if once {
        let worker = Worker(
            store: services.store, registry: services.registry, policies: services.policies, clock: services.clock,
            options: options, logger: services.logger, events: events)
        progress.setTotal(try? await services.store.countDue(kinds: kinds.map { Array($0) } ?? [], now: services.clock.now()))
        return try await worker.drain()
    }

    // Daemon: SIGTERM or SIGINT stops claiming; steps in flight finish first. Its figures
    // are read while it runs: the metrics file is written again every 15 s.
    let write = metrics.map { write in { @Sendable in _ = await write() } }
    return try await WorkerService<Store>.runUntilSignalled(services: services, options: options, events: events, alongside: write)
}
