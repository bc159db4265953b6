import Foundation
import Logging

/// What a step sees: the job, the outputs of the steps finished before it, and "now".
public struct StepContext: Sendable {
    public let job: JobRecord
    public let outputs: [String: String?]
    public let now: Date
    public let logger: Logger
    public let progress: @Sendable (String) -> Void

    public func payload<P: Decodable>(_ type: P.Type) throws -> P {
        do {
            return try JobJSON.decode(type, from: job.payload)
        } catch {
            throw PermanentJobFailure("job \(job.id) (\(job.kind)): payload is not valid: \(error)")
        }
    }

    public func output<O: Decodable>(of step: String, as type: O.Type) throws -> O? {
        guard let stored = outputs[step], let text = stored else { return nil }
        return try JobJSON.decode(type, from: text)
    }
}

public struct StepResult: Sendable {
    public var output: String?
    /// Skip the remaining steps and mark the job succeeded (e.g. a purge that finds
    /// the account restored has nothing left to do).
    public var finishesJob: Bool
    /// False for an external step that found nothing to do and decides the same way when
    /// run again: no done-mark is written (its output still reaches the later steps of this
    /// run), which saves a write per job where that is common. Ignored for database steps,
    /// the last step and a step that finishes the job.
    public var recorded: Bool
    /// With `finishesJob`: why the job ends without doing what it was asked, where nothing
    /// will do it later and a person has to act (a part deletion whose account was put on
    /// hold). The job is recorded as succeeded, there being nothing to retry, but the run
    /// names it and is not green: an exit 0 must not stand for work that was refused.
    public var stopped: String?

    public init(output: String? = nil, finishesJob: Bool = false, recorded: Bool = true, stopped: String? = nil) {
        self.output = output
        self.finishesJob = finishesJob
        self.recorded = recorded
        self.stopped = stopped
    }

    public static let done = StepResult()

    public static func output<O: Encodable>(_ value: O, finishesJob: Bool = false, stopped: String? = nil) throws -> StepResult {
        StepResult(output: try JobJSON.encode(value), finishesJob: finishesJob, stopped: stopped)
    }

    /// An external step's decision to do nothing, not written down: see `recorded`.
    public static func unrecorded<O: Encodable>(_ value: O) throws -> StepResult {
        StepResult(output: try JobJSON.encode(value), recorded: false)
    }
}

public enum StepBody<Transaction>: Sendable {
    /// All effects in the database: run inside the transaction that also records
    /// the step as done, so it takes effect exactly once.
    case database(@Sendable (StepContext, Transaction) throws -> StepResult)
    /// Effects outside the database (files, blobs, mail): must be idempotent,
    /// because a crash after the effect and before the done-mark runs it again.
    case external(@Sendable (StepContext) async throws -> StepResult)
}

public struct JobStep<Transaction>: Sendable {
    public let name: String
    public let body: StepBody<Transaction>

    public init(_ name: String, database body: @escaping @Sendable (StepContext, Transaction) throws -> StepResult) {
        self.name = name
        self.body = .database(body)
        self.runsEveryAttempt = false
    }

    /// Runs in every attempt that gets to it, whatever an earlier attempt recorded: for an
    /// idempotent step that returns unrecorded results (no done-mark, no commit) in a job
    /// whose earlier versions recorded it.
    public let runsEveryAttempt: Bool

    public init(_ name: String, external body: @escaping @Sendable (StepContext) async throws -> StepResult, runsEveryAttempt: Bool = false) {
        self.name = name
        self.body = .external(body)
        self.runsEveryAttempt = runsEveryAttempt
    }

    var isDatabase: Bool {
        if case .database = body { return true }
        return false
    }
}

/// A name and an ordered list of named steps.
public struct JobKind<Transaction>: Sendable {
    public let name: String
    public let steps: [JobStep<Transaction>]

    public init(name: String, steps: [JobStep<Transaction>]) {
        precondition(!steps.isEmpty, "a job kind needs at least one step")
        precondition(Set(steps.map(\.name)).count == steps.count, "step names within a kind must be unique")
        self.name = name
        self.steps = steps
    }
}

public struct JobRegistry<Transaction>: Sendable {
    public private(set) var kinds: [String: JobKind<Transaction>] = [:]

    public init(_ kinds: [JobKind<Transaction>] = []) {
        for kind in kinds { register(kind) }
    }

    public mutating func register(_ kind: JobKind<Transaction>) {
        kinds[kind.name] = kind
    }

    public subscript(name: String) -> JobKind<Transaction>? { kinds[name] }

    public var names: [String] { kinds.keys.sorted() }
}
