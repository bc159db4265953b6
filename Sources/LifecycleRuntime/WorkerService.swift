import JobRunner
import Lifecycle
import Logging
import ServiceLifecycle
import Synchronization

/// A worker as a service of a ServiceGroup (`lifecycle worker`, and beside `serve`'s HTTP
/// server): on graceful shutdown (SIGTERM or SIGINT) it stops claiming, finishes the steps
/// in flight and hands claimed jobs back; a lost database connection is waited out
/// (`runReconnecting`). What it did is kept for the caller's report.
public final class WorkerService<Store: LifecycleStore>: Service {
    private let worker: Worker<Store>
    private let logger: Logger
    private let finished = Mutex<DrainSummary?>(nil)

    public init(services: LifecycleServices<Store>, options: WorkerOptions, events: @escaping @Sendable (WorkerEvent) -> Void = { _ in }) {
        worker = Worker(
            store: services.store, registry: services.registry, policies: services.policies, clock: services.clock,
            options: options, logger: services.logger, events: events)
        logger = services.logger
    }

    /// What the worker did, once `run` has returned.
    public var summary: DrainSummary? { finished.withLock { $0 } }

    public func run() async throws {
        try await cancelWhenGracefulShutdown {
            let summary = try await self.worker.runReconnecting(logger: self.logger)
            self.finished.withLock { $0 = summary }
        }
    }
}

/// Runs `body` every `interval` until graceful shutdown (a daemon's metrics file, written
/// again while it runs).
public struct PeriodicService: Service {
    let interval: Duration
    let body: @Sendable () async -> Void

    public init(every interval: Duration, _ body: @escaping @Sendable () async -> Void) {
        self.interval = interval
        self.body = body
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    try await Task.sleep(for: self.interval)
                    await self.body()
                }
            }
        } catch is CancellationError {
            return
        }
    }
}

extension WorkerService {
    /// `lifecycle worker` without `--once`: the worker (and `every15s`, if given) until
    /// SIGTERM or SIGINT, then the steps in flight finish; returns what the worker did.
    public static func runUntilSignalled(
        services: LifecycleServices<Store>, options: WorkerOptions, events: @escaping @Sendable (WorkerEvent) -> Void,
        alongside periodic: (@Sendable () async -> Void)? = nil
    ) async throws -> DrainSummary {
        let worker = WorkerService(services: services, options: options, events: events)
        var all: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: worker)]
        if let periodic { all.append(.init(service: PeriodicService(every: .seconds(15), periodic))) }
        let group = ServiceGroup(configuration: .init(services: all, gracefulShutdownSignals: [.sigterm, .sigint], logger: services.logger))
        try await group.run()
        return worker.summary ?? DrainSummary()
    }
}
