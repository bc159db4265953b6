import Foundation

/// The runner's own canary kinds. Operators enqueue them to check that workers
/// drain the queue (`lifecycle jobs probe`); the crash-resume tests and the
/// throughput benchmark use them because their effects are easy to count.
public enum ProbeJobs {
    public static let probeKind = "runner.probe"
    public static let noopKind = "runner.noop"

    public struct Payload: Codable, Sendable {
        /// Seconds the middle step holds the job, standing in for slow outside work.
        public var holdSeconds: Double
        /// The middle step fails on this many attempts before it succeeds.
        public var failAttempts: Int
        /// Hold only on attempts up to this one (nil: every attempt), so a resumed job finishes quickly.
        public var holdAttempts: Int?

        public init(holdSeconds: Double = 0, failAttempts: Int = 0, holdAttempts: Int? = nil) {
            self.holdSeconds = holdSeconds
            self.failAttempts = failAttempts
            self.holdAttempts = holdAttempts
        }
    }

    public struct InducedFailure: Error, CustomStringConvertible {
        public let attempt: Int
        public var description: String { "probe failure induced on attempt \(attempt)" }
    }

    /// Three steps: a database-only step, an outside step that may hold or fail,
    /// and another database-only step. Each database step leaves one probe row.
    public static func probe<Store: JobProbeRecording>(store: Store) -> JobKind<Store.Transaction> {
        JobKind(name: probeKind, steps: [
            JobStep("record-start", database: { context, tx in
                try store.recordProbeEffect(jobID: context.job.id, step: "record-start", now: context.now, in: tx)
                return .done
            }),
            JobStep("hold", external: { context in
                let payload = try context.payload(Payload.self)
                if context.job.attempt <= payload.failAttempts {
                    throw InducedFailure(attempt: context.job.attempt)
                }
                if payload.holdSeconds > 0, context.job.attempt <= (payload.holdAttempts ?? Int.max) {
                    context.progress("holding for \(payload.holdSeconds) s")
                    try await Task.sleep(nanoseconds: UInt64(payload.holdSeconds * 1_000_000_000))
                }
                return .done
            }),
            JobStep("record-finish", database: { context, tx in
                try store.recordProbeEffect(jobID: context.job.id, step: "record-finish", now: context.now, in: tx)
                return .done
            }),
        ])
    }

    /// One step that does nothing: what the throughput benchmark measures is the runner itself.
    public static func noop<Store: JobQueue>(store: Store) -> JobKind<Store.Transaction> {
        JobKind(name: noopKind, steps: [JobStep("noop", external: { _ in .done })])
    }
}
