import Foundation
import JobRunner
import Logging
import Lifecycle

/// What an operator does to jobs, from the CLI (`jobs retry|cancel|pause|resume`) and from
/// the `/ops` dashboard alike: one place, so both log and audit the same way. A retry or
/// cancel of an account's job goes into that account's audit trail with the operator
/// (a job without an account, such as a canary, is only logged); pauses are logged.
public struct OperatorJobActions<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    /// Who acts, as the audit names them (`operator:NAME`).
    public let operatorName: String
    /// Where the action came from when not the CLI (`dashboard`), recorded with it.
    public let origin: String?

    public init(services: LifecycleServices<Store>, operatorName: String, origin: String? = nil) {
        self.services = services
        self.operatorName = operatorName
        self.origin = origin
    }

    public var actor: String { "operator:" + operatorName }

    /// Queued again with a fresh attempt budget; nil when there is no such job. Throws
    /// JobRunnerError when the job is not dead or cancelled.
    public func retry(_ id: JobID) async throws -> JobRecord? {
        guard let job = try await services.store.retry(jobID: id, now: services.clock.now()) else { return nil }
        try await audit("job.retry", job)
        return job
    }

    /// Cancelled at once if waiting, before its next step if running; nil when there is no such job.
    public func cancel(_ id: JobID) async throws -> JobRecord? {
        guard let job = try await services.store.cancel(jobID: id, now: services.clock.now()) else { return nil }
        try await audit("job.cancel", job)
        return job
    }

    /// False when the kind was paused already (the first pause's record stays).
    public func pause(kind: String, reason: String?) async throws -> Bool {
        let paused = try await services.store.pause(kind: kind, by: operatorName, reason: reason, now: services.clock.now())
        services.logger.notice("job kind paused", metadata: metadata(["kind": "\(kind)", "changed": .stringConvertible(paused)]))
        return paused
    }

    /// False when the kind was not paused.
    public func resume(kind: String) async throws -> Bool {
        let resumed = try await services.store.resume(kind: kind)
        services.logger.notice("job kind resumed", metadata: metadata(["kind": "\(kind)", "changed": .stringConvertible(resumed)]))
        return resumed
    }

    private func audit(_ action: String, _ job: JobRecord) async throws {
        services.logger.notice("operator job action", metadata: metadata([
            "action": "\(action)", "job": .stringConvertible(job.id), "kind": "\(job.kind)", "state": "\(job.state.rawValue)",
        ]))
        guard let account = JobAttention(job).account else { return }
        var detail: [String: JSONValue] = ["job": .int(job.id), "kind": .string(job.kind)]
        if let origin { detail["from"] = .string(origin) }
        let event = AuditEvent(at: services.clock.now(), actor: actor, action: action, accountID: account, outcome: job.state.rawValue, detail: detail)
        try await services.store.write { tx in try tx.recordAudit(event) }
    }

    private func metadata(_ fields: [String: Logger.MetadataValue]) -> Logger.Metadata {
        var all = fields
        all["operator"] = "\(operatorName)"
        if let origin { all["from"] = "\(origin)" }
        return all
    }
}
