import ArgumentParser
import Dispatch
import Foundation
import JobRunner
import Lifecycle
import LifecycleRuntime

struct WorkerCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Run due jobs: once (for cron) or until SIGTERM/SIGINT.",
        discussion: """
            With --once: runs everything due, then exits 0 when every job it ran succeeded and 75 when some
            are retrying or dead (see `lifecycle jobs list --state dead`). Overlapping runs are safe.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(help: "Run what is due, then exit (cron mode).") var once = false
    @Option(help: "Jobs run at once in this process.") var concurrency: Int = 2
    @Option(help: "Only run these job kinds (repeatable).") var kind: [String] = []

    func validate() throws {
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 256") }
    }

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let registry = services.registry
        for name in kind where registry[name] == nil {
            throw CLIFailure(.usage, "unknown job kind '\(name)'; known kinds: \(registry.names.joined(separator: ", "))")
        }
        let summary = try await runWorker(services: services, once: once, concurrency: concurrency, kinds: kind.isEmpty ? nil : Set(kind))
        if options.json {
            try Terminal.printJSON(WorkerReport(summary))
        } else {
            Terminal.line("worker: \(summary.succeeded) succeeded, \(summary.retrying) retrying, \(summary.dead) dead, \(summary.cancelled) cancelled"
                + (summary.released > 0 ? ", \(summary.released) handed back for another worker" : ""))
            for failure in summary.failures { Terminal.note("  " + failure) }
        }
        return summary.allSucceeded ? .ok : .tryLater
    }
}

struct WorkerReport: Codable {
    var succeeded, retrying, dead, cancelled, leaseLost, released: Int
    var failures: [String]

    init(_ summary: DrainSummary) {
        succeeded = summary.succeeded
        retrying = summary.retrying
        dead = summary.dead
        cancelled = summary.cancelled
        leaseLost = summary.leaseLost
        released = summary.released
        failures = summary.failures
    }
}

/// Shared by `worker` and the commands that run their own jobs in-process (`demo`, `--wait`).
func runWorker<Store: LifecycleStore>(
    services: LifecycleServices<Store>, once: Bool, concurrency: Int, kinds: Set<String>? = nil
) async throws -> DrainSummary {
    let progress = ProgressLine(label: "jobs finished") { services.logger.info("\($0)") }
    let worker = Worker(
        store: services.store, registry: services.registry, policies: services.policies, clock: services.clock,
        options: WorkerOptions(concurrency: concurrency, kinds: kinds), logger: services.logger
    ) { event in
        switch event {
        case .started(let job): progress.update(doing: "\(job.kind) #\(job.id)")
        case .stepFinished(let job, let step): progress.update(doing: "\(job.kind) #\(job.id) \(step) done")
        case .message(let job, let text): progress.update(doing: "\(job.kind) #\(job.id): \(text)")
        case .finished: progress.update(increment: 1)
        }
    }
    defer { progress.finish() }
    if once { return try await worker.drain() }

    // Daemon: SIGTERM or SIGINT stops claiming; steps in flight finish first.
    let task = Task { try await worker.runReconnecting(logger: services.logger) }
    signal(SIGTERM, SIG_IGN)
    signal(SIGINT, SIG_IGN)
    let sources = [SIGTERM, SIGINT].map { number in
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler {
            services.logger.notice("signal received; finishing the steps in flight, then exiting", metadata: ["signal": "\(number)"])
            task.cancel()
        }
        source.resume()
        return source
    }
    defer { sources.forEach { $0.cancel() } }
    return try await task.value
}
