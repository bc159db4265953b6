import Metrics

/// What the runner reports through swift-metrics: whichever backend the process bootstraps
/// (the CLI's Prometheus registry, an app's own) receives them; without one they cost nothing.
enum RunnerMetrics {
    static func finished(kind: String, outcome: JobOutcome, took: Duration) {
        let name = switch outcome {
        case .succeeded: "succeeded"
        case .retrying: "retrying"
        case .dead: "dead"
        case .cancelled: "cancelled"
        case .leaseLost: "lease_lost"
        case .released: "released"
        case .stopped: "stopped"
        case .notReady: "not_ready"
        }
        Counter(label: "lifecycle_job_attempts_total", dimensions: [("kind", kind), ("outcome", name)]).increment()
        // Handed-back attempts did not run to an end; their time says nothing about the kind.
        if case .released = outcome { return }
        if case .notReady = outcome { return }
        let (seconds, attoseconds) = took.components
        Metrics.Timer(label: "lifecycle_job_duration_seconds", dimensions: [("kind", kind)])
            .recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
