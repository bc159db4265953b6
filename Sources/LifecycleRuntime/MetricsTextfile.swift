import CoreMetrics
import Foundation
import JobRunner
import Lifecycle
import Prometheus
import Synchronization

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
    /// The file is 0644 (everything else this process writes is 0600): the collector runs as
    /// another user.
    ///
    /// A process that writes once and exits (`worker --once`, `purge` from cron) starts its
    /// counters at zero; with `accumulating` its counters and histograms are added to those
    /// the file already holds, so they keep growing from run to run as Prometheus expects of
    /// a counter (a series this run did not touch keeps its value). A daemon's own counters
    /// grow for its lifetime, and it writes them as they are.
    public func write(to path: String, run: String, accumulating: Bool = false) throws {
        let temporary = path + ".tmp.\(getpid())"
        do {
            var text = text(run: run)
            if accumulating, let previous = try? String(contentsOfFile: path, encoding: .utf8) {
                text = PrometheusText.adding(previous, to: text)
            }
            try Data(text.utf8).write(to: URL(fileURLWithPath: temporary))
            // node_exporter runs as its own user and must read the file. Metrics hold no
            // personal data, so 0644 is safe; the process' 0077 umask would make it 0600.
            guard chmod(temporary, 0o644) == 0 else {
                throw LifecycleError(.cannotCreate, "cannot make the metrics file \(path) readable by node_exporter: \(String(cString: strerror(errno)))")
            }
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
    private static let done = Mutex(false)

    static func once(_ body: () -> Void) {
        done.withLock { done in
            guard !done else { return }
            done = true
            body()
        }
    }
}

/// The parts of Prometheus' text format that adding one run's figures to the last needs.
enum PrometheusText {
    struct Family {
        var header: [String] = []
        var type = "untyped"
        /// Series (name with labels) → value, in the order first seen.
        var samples: [(series: String, value: Double)] = []
    }

    static func parse(_ text: String) -> [(name: String, family: Family)] {
        var families: [(name: String, family: Family)] = []
        var index: [String: Int] = [:]
        func family(_ name: String) -> Int {
            if let existing = index[name] { return existing }
            families.append((name, Family()))
            index[name] = families.count - 1
            return families.count - 1
        }
        for line in text.split(separator: "\n") {
            if line.hasPrefix("#") {
                let words = line.split(separator: " ", maxSplits: 3)
                guard words.count >= 3, words[1] == "HELP" || words[1] == "TYPE" else { continue }
                let at = family(String(words[2]))
                families[at].family.header.append(String(line))
                if words[1] == "TYPE", words.count == 4 { families[at].family.type = String(words[3]) }
                continue
            }
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let series = String(line[..<space])
            let name = String(series.prefix { $0 != "{" })
            // A histogram's _bucket, _sum and _count belong to the family its TYPE line named.
            let owner = [name, String(name.dropLast(7)), String(name.dropLast(4)), String(name.dropLast(6))]
                .first { index[$0] != nil && (name == $0 || families[index[$0]!].family.type == "histogram") } ?? name
            families[family(owner)].family.samples.append((series, value))
        }
        return families
    }

    /// `current` with `previous`'s counters and histograms added in; gauges as `current` has them.
    static func adding(_ previous: String, to current: String) -> String {
        var old: [String: Double] = [:]
        var oldFamilies: [String: Family] = [:]
        for (name, family) in parse(previous) where family.type == "counter" || family.type == "histogram" {
            oldFamilies[name] = family
            for sample in family.samples { old[sample.series] = sample.value }
        }
        var lines: [String] = []
        var written: Set<String> = []
        for (name, family) in parse(current) {
            lines += family.header
            let accumulates = family.type == "counter" || family.type == "histogram"
            for sample in family.samples {
                written.insert(sample.series)
                lines.append("\(sample.series) \(format(sample.value + (accumulates ? old[sample.series] ?? 0 : 0)))")
            }
            for sample in oldFamilies[name]?.samples ?? [] where !written.contains(sample.series) {
                written.insert(sample.series)
                lines.append("\(sample.series) \(format(sample.value))")
            }
            oldFamilies[name] = nil
        }
        for (_, family) in oldFamilies.sorted(by: { $0.key < $1.key }) {
            lines += family.header
            lines += family.samples.map { "\($0.series) \(format($0.value))" }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func format(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
