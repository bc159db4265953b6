import ArgumentParser
import Foundation
import LifecycleRuntime

extension JobState: ExpressibleByArgument {}

struct JobsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jobs", abstract: "List, inspect, retry, cancel and pause jobs; check the queue's health.",
        subcommands: [
            ListJobs.self, ShowJob.self, RetryJob.self, CancelJob.self, CheckJobs.self, PauseKind.self, ResumeKind.self, ProbeJob.self,
        ])
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
        let paused = try await services.store.pausedKinds()
        if options.json {
            try Terminal.printJSON(JobList(pausedKinds: paused, jobs: jobs))
            return .ok
        }
        for pause in paused { Terminal.line(describe(pause)) }
        if jobs.isEmpty {
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

struct JobList: Encodable {
    var pausedKinds: [PausedKind]
    var jobs: [JobRecord]

    enum CodingKeys: String, CodingKey { case pausedKinds = "paused_kinds", jobs }
}

func describe(_ pause: PausedKind) -> String {
    "paused: \(pause.kind) since \(ISO8601.format(pause.pausedAt)) by \(pause.pausedBy)" + (pause.reason.map { " (\($0))" } ?? "")
        + "; no worker claims its jobs until `lifecycle jobs resume \(pause.kind)`"
}

/// A kind named on the command line must be one the installation runs.
func knownKind<Store: LifecycleStore>(_ kind: String, in services: LifecycleServices<Store>) throws -> String {
    guard services.registry[kind] != nil else {
        throw CLIFailure(.usage, "unknown job kind '\(kind)'; known kinds: \(services.registry.names.joined(separator: ", "))")
    }
    return kind
}

struct CheckJobs: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "For monitoring: exit 0 only when no job is dead and none is overdue.",
        discussion: """
            Overdue: a job due for longer than --overdue-after that no worker has claimed, or a running job whose \
            worker stopped heartbeating that long ago. Jobs of a paused kind are listed as paused, not overdue.
            A policy file that cannot be used is not healthy either: one that does not parse (its kinds run \
            nowhere), or a settings section with a key or value that purge, export, import or photos would refuse.
            Exit 0 healthy, 75 otherwise (each job named, with what to do). --json for alerting.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(name: .customLong("overdue-after"), help: ArgumentHelp("Seconds a due job may wait.", valueName: "seconds"))
    var overdueAfter: Int = 900

    func validate() throws {
        guard overdueAfter >= 0 else { throw ValidationError("--overdue-after must be 0 or more seconds") }
    }

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let health = try await QueueHealth.check(
            store: services.store, policies: services.policies, overdueAfter: TimeInterval(overdueAfter), now: services.clock.now())
        if options.json {
            try Terminal.printJSON(health)
        } else {
            for job in health.dead + health.overdue { Terminal.line(job.line) }
            for pause in health.paused { Terminal.line(describe(pause)) }
            for file in health.brokenPolicyFiles { Terminal.line("policy file not usable: \(file)") }
            let counts = JobState.allCases.map { "\(health.counts[$0.rawValue] ?? 0) \($0.rawValue)" }.joined(separator: ", ")
            let problems = ["\(health.dead.count) dead", "\(health.overdue.count) overdue"]
                + (health.brokenPolicyFiles.isEmpty ? [] : ["\(health.brokenPolicyFiles.count) broken policy file(s)"])
            Terminal.line((health.ok ? "ok" : "NOT OK: " + problems.joined(separator: ", ")) + " (\(counts))")
        }
        return health.ok ? .ok : .tryLater
    }
}

struct PauseKind: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Stop every worker (on every machine) from claiming jobs of a kind, until `jobs resume`.",
        discussion: """
            Jobs already running finish; queued ones wait, and new ones are still enqueued. `lifecycle purge` with \
            deletion.purge paused purges nothing and says so. Shown by `jobs list` and `jobs check`.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "The job kind, e.g. deletion.purge.") var kind: String
    @Option(help: ArgumentHelp("Why (shown with the pause).", valueName: "text")) var reason: String?

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let kind = try knownKind(kind, in: services)
        let paused = try await OperatorJobActions(services: services, operatorName: operatorOption.operatorName).pause(kind: kind, reason: reason)
        let record = try await services.store.pausedKinds().first { $0.kind == kind }
        if options.json {
            try Terminal.printJSON(PauseReport(kind: kind, changed: paused, pause: record))
        } else {
            Terminal.line(paused ? "paused \(kind): no worker claims its jobs until `lifecycle jobs resume \(kind)`"
                                 : "\(kind) was paused already: " + (record.map(describe) ?? ""))
        }
        return .ok
    }
}

struct ResumeKind: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Let workers claim jobs of a paused kind again.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "The job kind.") var kind: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let kind = try knownKind(kind, in: services)
        let resumed = try await OperatorJobActions(services: services, operatorName: operatorOption.operatorName).resume(kind: kind)
        if options.json {
            try Terminal.printJSON(PauseReport(kind: kind, changed: resumed, pause: nil))
        } else {
            Terminal.line(resumed ? "resumed \(kind): workers claim its jobs again" : "\(kind) was not paused")
        }
        return .ok
    }
}

struct PauseReport: Encodable {
    var kind: String
    var changed: Bool
    var pause: PausedKind?
}

struct JobDetail: Codable {
    var job: JobRecord
    var steps: [StepRecord]
    var pendingSteps: [String]

    enum CodingKeys: String, CodingKey {
        case job, steps, pendingSteps = "pending_steps"
    }
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
        discussion: "Finished steps are kept: the job resumes at its first unfinished step. Audited with the operator when the job is an account's.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let jobID = try parseJobID(id)
        do {
            guard let job = try await OperatorJobActions(services: services, operatorName: operatorOption.operatorName).retry(jobID) else {
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
        abstract: "Cancel a job: at once if it is waiting, before its next step if it is running.",
        discussion: "Audited with the operator when the job is an account's.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let jobID = try parseJobID(id)
        guard let job = try await OperatorJobActions(services: services, operatorName: operatorOption.operatorName).cancel(jobID) else {
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
        usage: """
            lifecycle jobs probe [--count <count>] [--hold <hold>] [--fail-attempts <fail-attempts>] [--hold-attempts <hold-attempts>]
                                 [--noop] [--unique-key-prefix <unique-key-prefix>] [--one-by-one]
                                 \(GlobalOptions.usage)
            """,
        discussion: """
            A probe job has three steps (record-start, hold, record-finish); `--noop` enqueues one-step jobs \
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
    @Flag(name: .customLong("one-by-one"), help: "Enqueue each job in its own transaction, as an app enqueues one per request (default: in bulk).")
    var oneByOne = false

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
        let policy = try services.policies.policy(for: kind)
        let now = services.clock.now()
        let store = services.store
        var ids: [JobID] = []
        var created = 0
        await TestBarrier.current?.arrive()
        let started = ContinuousClock.now
        if let prefix = uniqueKeyPrefix {
            for index in 1...count {
                let outcome = try await services.enqueue(EnqueueRequest(kind: kind, payload: payload, uniqueKey: "\(prefix)\(index)"))
                ids.append(outcome.job.id)
                if outcome.created { created += 1 }
            }
        } else if oneByOne {
            for _ in 1...count {
                ids.append(try await services.enqueue(EnqueueRequest(kind: kind, payload: payload)).job.id)
                created += 1
            }
        } else {
            // Transactions of 50,000: one is enough for any probe a person asks for, and
            // a benchmark's million does not build one transaction of everything.
            var remaining = count
            while remaining > 0 {
                let batch = min(remaining, 50_000)
                let requests = Array(repeating: EnqueueRequest(kind: kind, payload: payload), count: batch)
                ids += try await store.write { tx in try store.enqueue(many: requests, policy: policy, now: now, in: tx).map(\.id) }
                remaining -= batch
                created += batch
            }
        }
        let seconds = started.duration(to: .now).seconds
        if options.json {
            try Terminal.printJSON(ProbeReport(kind: kind, created: created, first: ids.first, last: ids.last, seconds: seconds))
        } else {
            Terminal.line("enqueued \(created) new \(kind) job(s) (\(ids.count - created) already queued): #\(ids.first ?? 0)…#\(ids.last ?? 0)"
                + " in \(String(format: "%.3f", seconds)) s")
        }
        return .ok
    }
}

struct ProbeReport: Encodable {
    var kind: String
    /// New jobs; the rest of the range were queued already under the same unique keys.
    var created: Int
    var first: JobID?
    var last: JobID?
    /// How long enqueueing took, in this process (start-up and connecting not included).
    var seconds: Double
}
