import ArgumentParser
import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend

extension JobState: ExpressibleByArgument {}

struct JobsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jobs", abstract: "List, inspect, retry and cancel jobs.",
        subcommands: [ListJobs.self, ShowJob.self, RetryJob.self, CancelJob.self, ProbeJob.self])
}

func describe(_ job: JobRecord) -> String {
    var text = "#\(job.id) \(job.kind) \(job.state.rawValue) attempt \(job.attempt)/\(job.maxAttempts) run_at \(ISO8601.format(job.runAt))"
    if let key = job.uniqueKey { text += " key \(key)" }
    if let owner = job.leaseOwner, let until = job.leaseExpiresAt { text += " leased to \(owner) until \(ISO8601.format(until))" }
    if job.cancelRequested && job.state == .running { text += " (cancel requested)" }
    return text
}

func parseJobID(_ text: String) throws -> JobID {
    guard let id = JobID(text.trimmingCharacters(in: CharacterSet(charactersIn: "#"))), id > 0 else {
        throw CLIFailure(.usage, "'\(text)' is not a job id; ids are the numbers `lifecycle jobs list` shows")
    }
    return id
}

struct ListJobs: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List jobs, newest first.")

    @OptionGroup var options: GlobalOptions
    @Option(help: "Only jobs in this state (queued, running, retrying, succeeded, dead, cancelled); repeatable.") var state: [JobState] = []
    @Option(help: "Only jobs of this kind; repeatable.") var kind: [String] = []
    @Option(help: "At most this many.") var limit: Int = 50

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let jobs = try await services.store.jobs(matching: JobFilter(states: state, kinds: kind, limit: limit))
        if options.json {
            try Terminal.printJSON(jobs)
        } else if jobs.isEmpty {
            Terminal.line("no jobs match")
        } else {
            for job in jobs {
                Terminal.line(describe(job))
                if let error = job.lastError, job.state != .succeeded { Terminal.line("    last error: \(error)") }
            }
        }
        return .ok
    }
}

struct JobDetail: Codable {
    var job: JobRecord
    var steps: [StepRecord]
    var pendingSteps: [String]
}

struct ShowJob: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one job with its finished steps.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let jobID = try parseJobID(id)
        guard let job = try await services.store.job(id: jobID) else { throw CLIFailure(.dataError, "no job with id \(jobID)") }
        let steps = try await services.store.steps(of: jobID)
        let done = Set(steps.map(\.step))
        let pending = services.registry[job.kind]?.steps.map(\.name).filter { !done.contains($0) } ?? []
        if options.json {
            try Terminal.printJSON(JobDetail(job: job, steps: steps, pendingSteps: pending))
            return .ok
        }
        Terminal.line(describe(job))
        Terminal.line("  payload: \(job.payload)")
        Terminal.line("  created \(ISO8601.format(job.createdAt)), updated \(ISO8601.format(job.updatedAt))"
              + (job.finishedAt.map { ", finished \(ISO8601.format($0))" } ?? ""))
        if let error = job.lastError { Terminal.line("  last error: \(error)") }
        for step in steps {
            Terminal.line("  ✓ \(step.step) at \(ISO8601.format(step.finishedAt))" + (step.output.map { " → \($0)" } ?? ""))
        }
        for step in pending { Terminal.line("  · \(step)") }
        return .ok
    }
}

struct RetryJob: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Queue a dead or cancelled job again with a fresh attempt budget (or run a waiting one now).",
        discussion: "Finished steps are kept: the job resumes at its first unfinished step.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let jobID = try parseJobID(id)
        do {
            guard let job = try await services.store.retry(jobID: jobID, now: services.clock.now()) else {
                throw CLIFailure(.dataError, "no job with id \(jobID)")
            }
            if options.json { try Terminal.printJSON(job) } else { Terminal.line("queued again: \(describe(job))") }
        } catch let error as JobRunnerError {
            throw CLIFailure(.dataError, error.message)
        }
        return .ok
    }
}

struct CancelJob: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a job: at once if it is waiting, before its next step if it is running.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let jobID = try parseJobID(id)
        guard let job = try await services.store.cancel(jobID: jobID, now: services.clock.now()) else {
            throw CLIFailure(.dataError, "no job with id \(jobID)")
        }
        if options.json {
            try Terminal.printJSON(job)
        } else if job.state == .running {
            Terminal.line("cancel requested: \(describe(job)); it stops before its next step")
        } else if job.state == .cancelled {
            Terminal.line("cancelled: \(describe(job))")
        } else {
            Terminal.line("nothing to cancel: job \(job.id) already \(job.state.rawValue)")
        }
        return .ok
    }
}

struct ProbeJob: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Enqueue canary jobs that show whether workers drain the queue.",
        discussion: """
            A probe job has three steps (record-start, hold, record-finish); `--noop` enqueues one-step jobs
            that do nothing, which is what the throughput benchmark measures.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(help: "How many jobs to enqueue.") var count: Int = 1
    @Option(help: "Seconds the hold step waits (stands in for slow outside work).") var hold: Double = 0
    @Option(name: .customLong("fail-attempts"), help: "The hold step fails on this many attempts first.") var failAttempts: Int = 0
    @Option(name: .customLong("hold-attempts"), help: "Hold only on the first N attempts.") var holdAttempts: Int?
    @Flag(help: "One-step no-op jobs instead of probes.") var noop = false
    @Option(name: .customLong("unique-key-prefix"), help: "Give job i the unique key <prefix><i>, each enqueued in its own transaction.")
    var uniqueKeyPrefix: String?

    func validate() throws {
        guard count >= 1, count <= 10_000_000 else { throw ValidationError("--count must be between 1 and 10000000") }
        guard hold >= 0 else { throw ValidationError("--hold must be ≥ 0") }
    }

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let kind = noop ? ProbeJobs.noopKind : ProbeJobs.probeKind
        let payload = try JobJSON.encode(ProbeJobs.Payload(holdSeconds: hold, failAttempts: failAttempts, holdAttempts: holdAttempts))
        let policy = services.policies.policy(for: kind)
        let now = services.clock.now()
        let store = services.store
        var ids: [JobID] = []
        var created = 0
        if let prefix = uniqueKeyPrefix {
            for index in 1...count {
                let outcome = try await store.write { tx in
                    try store.enqueue(EnqueueRequest(kind: kind, payload: payload, uniqueKey: "\(prefix)\(index)"), policy: policy, now: now, in: tx)
                }
                ids.append(outcome.job.id)
                if outcome.created { created += 1 }
            }
        }
        var remaining = uniqueKeyPrefix == nil ? count : 0
        while remaining > 0 {
            let batch = min(remaining, 5_000)
            ids += try await store.write { tx in
                try (0..<batch).map { _ in
                    try store.enqueue(EnqueueRequest(kind: kind, payload: payload), policy: policy, now: now, in: tx).job.id
                }
            }
            remaining -= batch
            created += batch
        }
        if options.json {
            try Terminal.printJSON(["kind": kind, "created": "\(created)", "first": "\(ids.first ?? 0)", "last": "\(ids.last ?? 0)"])
        } else {
            Terminal.line("enqueued \(created) new \(kind) job(s) (\(ids.count - created) already queued): #\(ids.first ?? 0)…#\(ids.last ?? 0)")
        }
        return .ok
    }
}
