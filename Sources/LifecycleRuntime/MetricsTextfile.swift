import CoreMetrics
import Foundation
import JobRunner
import Lifecycle
import Prometheus

/// Prometheus figures for a process: the runner's and the domain's swift-metrics
/// (jobs by kind and outcome, durations, purges, exports, bytes) in one registry, plus
/// gauges of the queue as it stands, in Prometheus' text format. `lifecycle worker` and
/// `lifecycle purge` write it to a file for node_exporter's textfile collector
/// (`--metrics-file`); an HTTP server can serve `text()` at /metrics.
public final class LifecycleMetricsRegistry: Sendable {
    public let registry: PrometheusCollectorRegistry

    private static let shared = LifecycleMetricsRegistry()

    private init() {
        registry = PrometheusCollectorRegistry()
    }

    /// The process' registry, made the swift-metrics backend the first time: swift-metrics
    /// takes one backend per process. An app that bootstrapped its own keeps it, and this
    /// registry then holds only the queue gauges.
    public static func bootstrapped() -> LifecycleMetricsRegistry {
        Bootstrap.once { MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: shared.registry)) }
        return shared
    }

    /// `lifecycle_jobs{kind,state}` for every kind the installation runs and every state
    /// (0 included, so a state that empties reads 0 rather than vanishing), and
    /// `lifecycle_job_kind_paused{kind}`.
    public func recordQueue(store: some JobStore, kinds: [String]) async throws {
        let counts = try await store.countByKindAndState()
        let paused = Set(try await store.pausedKinds().map(\.kind))
        let jobs = MetricNameDescriptor(namespace: "lifecycle", metricName: "jobs", unitName: "", helpText: "Jobs by kind and state")
        let pausedKind = MetricNameDescriptor(
            namespace: "lifecycle", metricName: "job_kind_paused", unitName: "", helpText: "1 while the kind is paused (lifecycle jobs pause)")
        for kind in Set(kinds).union(counts.keys.map(\.kind)).sorted() {
            for state in JobState.allCases {
                registry.makeGauge(descriptor: jobs, labels: [("kind", kind), ("state", state.rawValue)])
                    .set(to: Double(counts[JobCountKey(kind: kind, state: state)] ?? 0))
            }
            registry.makeGauge(descriptor: pausedKind, labels: [("kind", kind)]).set(to: paused.contains(kind) ? 1 : 0)
        }
    }

    /// When a run of `command` ended and with which exit status: what an alert on a cron
    /// job that stopped running, or keeps failing, reads.
    public func recordRun(command: String, exitStatus: Int32, at: Date) {
        let ended = MetricNameDescriptor(
            namespace: "lifecycle", metricName: "last_run_timestamp", unitName: "seconds", helpText: "When the last run ended (Unix time)")
        let status = MetricNameDescriptor(
            namespace: "lifecycle", metricName: "last_run_exit_status", unitName: "", helpText: "Exit status of the last run (0 ok, 75 work left undone)")
        registry.makeGauge(descriptor: ended, labels: [("command", command)]).set(to: at.timeIntervalSince1970)
        registry.makeGauge(descriptor: status, labels: [("command", command)]).set(to: Double(exitStatus))
    }

    public func text() -> String { registry.emitToString() }

    /// The text with a `run` label on every sample. node_exporter refuses a series that two
    /// files both hold, and the worker's and the purge's files both hold the queue gauges:
    /// the label keeps each file's series its own.
    public func text(run: String) -> String {
        let label = "run=\"\(run)\""
        return text().split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard let first = line.first, first != "#" else { return String(line) }
            if let brace = line.firstIndex(of: "{") {
                let rest = line[line.index(after: brace)...]
                return line[...brace] + label + (rest.first == "}" ? "" : ",") + rest
            }
            guard let space = line.firstIndex(of: " ") else { return String(line) }
            return line[..<space] + "{" + label + "}" + line[space...]
        }.joined(separator: "\n")
    }

    /// Writes the text (labelled with `run`) where node_exporter's textfile collector reads
    /// it: to a temporary file beside it, then renamed, so the collector never reads half a file.
    public func write(to path: String, run: String) throws {
        let temporary = path + ".tmp.\(getpid())"
        do {
            try Data(text(run: run).utf8).write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, path) == 0 else {
                throw LifecycleError(.cannotCreate, "cannot move the metrics file into place at \(path): \(String(cString: strerror(errno)))")
            }
        } catch let error as LifecycleError {
            unlink(temporary)
            throw error
        } catch {
            unlink(temporary)
            throw LifecycleError(.cannotCreate, "cannot write the metrics file \(path): \(error.localizedDescription); check --metrics-file and that its folder is writable")
        }
    }
}

private enum Bootstrap {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var done = false

    static func once(_ body: () -> Void) {
        lock.withLock {
            guard !done else { return }
            done = true
            body()
        }
    }
}
