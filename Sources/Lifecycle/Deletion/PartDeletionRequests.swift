import Foundation
import JobRunner

/// How a request to delete part of an account ended: the job that deletes it.
public struct PartDeletionResult: Sendable, Codable, Equatable {
    public var accountID: String
    /// The parts, by name, in the order the data map declares them.
    public var parts: [String]
    public var jobID: JobID
    /// What to tell the person.
    public var message: String

    enum CodingKeys: String, CodingKey {
        case accountID = "account_id", parts, jobID = "job_id", message
    }
}

/// Deleting part of an account's data (the data map's `parts:`) while it stays open, asked
/// for with the password (the app), through a confirmation link (the web deletion page)
/// or by an operator. Each request checks the parts exist, the account is active and not
/// on hold, and that no other part deletion of it is under way, then enqueues the job and
/// audits the request in one transaction; the job audits the verified receipt.
extension DeletionService {
    /// The whole map's plan, which the parts belong to.
    public var wholePlan: DataMapPlan { directory.data.plan }

    /// The parts named, checked, in the map's order, with their labels.
    public func parts(_ names: [String]) async throws -> [DataMap.Part] {
        let plan = wholePlan
        _ = try plan.restricted(to: names)
        return plan.parts.filter { names.contains($0.name) }
    }

    public func requestPartDeletion(account reference: AccountReference, password: String, parts names: [String]) async throws -> PartDeletionResult {
        let now = services.clock.now()
        let parts = try await parts(names)
        let account = try await existingAccount(reference)
        try refuseParts(of: account)
        let (attempt, format) = try await confirmPassword(account, reference: reference, password: password, action: DeletionAudit.partRequest, now: now)
        do {
            return try await scheduleParts(parts, of: account.id, actor: "user", detail: ["hash_format": .string(format)], attempt: attempt, now: now)
        } catch {
            try? await services.store.write { [self] tx in try endAttempt(attempt, accountID: account.id, now: now, in: tx) }
            throw error
        }
    }

    /// Confirmed through a link the web deletion page sent: single-use, as for the whole account.
    public func requestPartDeletionConfirmedByEmail(accountID id: String, parts names: [String], linkIssuedAt: Date) async throws -> PartDeletionResult {
        let now = services.clock.now()
        let parts = try await parts(names)
        return try await scheduleParts(parts, of: id, actor: "user:email-link", detail: [
            "confirmed_by": .string("email-link"), "link_issued_at": .string(ISO8601.format(linkIssuedAt)),
        ], now: now) { tx in
            if try Self.linkUsed(accountID: id, since: linkIssuedAt, in: tx) { throw ConfirmationLinkUsed() }
        }
    }

    /// For support: the user asked another way (a ticket). Audited with the operator's name and reason.
    public func requestPartDeletionByOperator(
        account reference: AccountReference, parts names: [String], operatorName: String, reason: String
    ) async throws -> PartDeletionResult {
        let operatorName = operatorName.trimmingCharacters(in: .whitespacesAndNewlines)
        let reason = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !operatorName.isEmpty, !reason.isEmpty else {
            throw LifecycleError(.badInput, "an operator deletion needs the operator's name and a reason (both are audited)")
        }
        let parts = try await parts(names)
        let account = try await existingAccount(reference)
        try refuseParts(of: account)
        return try await scheduleParts(parts, of: account.id, actor: "operator:\(operatorName)", detail: ["reason": .string(reason)], now: services.clock.now())
    }

    /// Only an active account's parts: one scheduled for deletion loses everything at its
    /// purge (restore it first), one being purged or purged has nothing left to choose from.
    private func refuseParts(of account: AccountDirectory<Store>.Entry) throws {
        switch account.state {
        case .active: return
        case .pendingDeletion:
            let date = account.purgeAfter.map { " on or after \(ISO8601.format($0))" } ?? ""
            throw LifecycleError(.badInput, """
                account \(account.id) is scheduled for deletion: all its data goes at its purge\(date). Restore it first to \
                delete only part of it
                """)
        case .purging, .purged: throw purgedError(account)
        }
    }

    private func scheduleParts(
        _ parts: [DataMap.Part], of id: String, actor: String, detail: [String: JSONValue], attempt: Int64? = nil, now: Date,
        check: @escaping @Sendable (Store.Transaction) throws -> Void = { _ in }
    ) async throws -> PartDeletionResult {
        let names = parts.map(\.name)
        let request = try EnqueueRequest(
            kind: DeletionJobs.partKind, payload: PartDeletionPayload(account: id, parts: names, actor: actor, recordedRows: true),
            uniqueKey: DeletionJobs.partKey(accountID: id))
        // The part as the user sees it now is what they ask to delete (RecordedRows).
        let partSQL = DataMapSQL(plan: try wholePlan.restricted(to: names), dialect: services.store.dialect)
        let policy = try services.policies.policy(for: DeletionJobs.partKind)
        let store = services.store
        let result = try await store.write { [self] tx -> PartDeletionResult in
            guard let account = try directory.entry(id: id, in: tx, locking: true, now: now) else { throw LifecycleError.noSuchAccount(.key(id)) }
            if let attempt { try tx.endDeletionAttempt(attempt) }
            try check(tx)
            try refuseParts(of: account)
            if let hold = try HoldCheck.activeHold(id, now: now, in: tx) {
                throw LifecycleError(.badInput, "account \(id) is \(HoldCheck.describe(hold)): none of its data may be deleted until the hold ends")
            }
            let enqueued = try store.enqueue(request, policy: policy, now: now, in: tx)
            guard enqueued.created else {
                throw LifecycleError(.badInput, """
                    a deletion of part of account \(id) is already under way (job \(enqueued.job.id)); ask again once it has \
                    finished (`lifecycle jobs show \(enqueued.job.id)`)
                    """, forApp: .init(
                        code: "part_deletion_under_way", message: "a deletion of part of account \(id) is already under way; ask again once it has finished"))
            }
            for statement in partSQL.recordRows(key: id, job: enqueued.job.id) { try tx.execute(statement) }
            var audited = detail
            audited["parts"] = .array(names.map(JSONValue.string))
            audited["job"] = .int(enqueued.job.id)
            try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.partRequest, outcome: "requested", at: now, detail: audited))
            return PartDeletionResult(accountID: id, parts: names, jobID: enqueued.job.id, message: DeletionMessages.partsDeleted(labels: parts.map(\.label)))
        }
        services.logger.notice("deletion of part of an account requested", metadata: ["account": "\(id)", "parts": "\(names.joined(separator: ","))", "job": "\(result.jobID)"])
        return result
    }
}
