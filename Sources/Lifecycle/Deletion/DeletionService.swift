import Credentials
import Foundation
import JobRunner

/// Audit vocabulary of deletion. Details hold ids, dates, counts and the hash
/// *format* name; never a password or a hash.
public enum DeletionAudit {
    public static let request = "deletion.request"
    public static let operatorRequest = "deletion.operator-request"
    public static let restore = "deletion.restore"
    public static let purge = "account.purge"
    public static let setPassword = "account.set-password"
    /// A confirmation link sent from the web deletion page (`lifecycle serve`'s /account/delete).
    public static let webLink = "deletion.web-link"
    /// Deletion of part of an account's data asked for (the data map's `parts:`).
    public static let partRequest = "deletion.part-request"
    /// Its receipt, once the parts are erased and verified.
    public static let partDeletion = "deletion.part"

    public static let incorrectPassword = "incorrect-password"
    public static let lockedOut = "locked-out"
}

/// How a deletion request ended.
public struct DeletionRequestResult: Sendable, Codable, Equatable {
    public enum Outcome: String, Sendable, Codable {
        /// The account is now pendingDeletion and its purge is scheduled.
        case requested
        /// It already was; nothing changed.
        case alreadyPending
        /// An operator moved the purge of a pending account to now.
        case rescheduled
    }

    public var outcome: Outcome
    public var accountID: String
    public var state: AccountState
    public var purgeAfter: Date?
    public var purgeJobID: JobID?
    public var sessionsRevoked: Int
    /// Tokens revoked besides (refresh and API tokens removed, JWTs blacklisted).
    public var tokensRevoked: Int = 0
    /// What to tell the person: the product message, or why nothing changed.
    public var message: String

    enum CodingKeys: String, CodingKey {
        case outcome, accountID = "account_id", state, purgeAfter = "purge_after", purgeJobID = "purge_job_id", sessionsRevoked = "sessions_revoked",
             tokensRevoked = "tokens_revoked", message
    }
}

public struct RestoreResult: Sendable, Codable, Equatable {
    public var accountID: String
    /// The scheduled purge this restore cancelled.
    public var cancelledJobID: JobID?

    enum CodingKeys: String, CodingKey {
        case accountID = "account_id", cancelledJobID = "cancelled_job_id"
    }
}

/// The deletion calls an app backend makes in-process (its "Delete Account"
/// endpoint calls `requestDeletion(account:password:)`, its sign-in path calls
/// `restore(account:)` for a pending account) and the CLI makes for operators.
///
/// States move only as DESIGN.md "Account states" draws them:
/// active → pendingDeletion → (restore → active) | (purge job → purging → purged).
public struct DeletionService<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    public let policy: DeletionPolicy
    public let verifier: PasswordVerifier
    /// The app's accounts as its data map describes them (`LifecycleServices.directory()`).
    public let directory: AccountDirectory<Store>

    public init(services: LifecycleServices<Store>, directory: AccountDirectory<Store>, verifier: PasswordVerifier = PasswordVerifier()) throws {
        self.services = services
        self.policy = try DeletionPolicy(policies: services.policies)
        self.verifier = verifier
        self.directory = directory
    }

    // MARK: - The user's request

    /// Deletes the account after checking its password: "Incorrect password"
    /// (`permissionDenied`) on mismatch, `tryLater` while repeated failures lock
    /// deletion. On success, in one transaction: pendingDeletion, purge date,
    /// every session revoked, audit event, purge job scheduled for the purge date.
    public func requestDeletion(account reference: AccountReference, password: String) async throws -> DeletionRequestResult {
        let now = services.clock.now()
        let store = services.store
        let account = try await existingAccount(reference)
        let id = account.id
        guard account.state == .active else {
            let result = alreadyPending(account)
            try await audit(id, actor: "user", action: DeletionAudit.request, outcome: "already-pending", at: now)
            return result
        }

        let (attempt, format) = try await confirmPassword(account, reference: reference, password: password, action: DeletionAudit.request, now: now)
        do {
            return try await markDeleted(account, format: format, attempt: attempt, now: now)
        } catch {
            // The outcome's own transaction ends the attempt; this covers errors before it.
            try? await store.write { [self] tx in try endAttempt(attempt, accountID: id, now: now, in: tx) }
            throw error
        }
    }

    /// The password check of a user's request (`action`: the whole account, or parts of it):
    /// "Incorrect password" (`permissionDenied`, audited under `action`) on mismatch,
    /// `tryLater` while repeated failures (of either request) lock deletion. On a match, the
    /// attempt (still open: the caller's transaction ends it) and the hash's format name.
    func confirmPassword(
        _ account: AccountDirectory<Store>.Entry, reference: AccountReference, password: String, action: String, now: Date
    ) async throws -> (attempt: Int64, format: String) {
        let store = services.store
        let id = account.id
        // Checks still running count as failures until they end: otherwise parallel wrong
        // guesses would all pass this check before the first of them is recorded.
        let lockout = Lockout(policy: policy)
        let admission = try await store.write { [self] tx -> Result<Int64, LifecycleError> in
            // Every transaction that adds to or ends an attempt takes the account's row lock
            // first (SQLite: the single writer; PostgreSQL: FOR UPDATE). Under READ COMMITTED
            // the two counts below are two snapshots: an attempt ending between them would be
            // in neither, and two admissions could both count four and both be let through.
            guard try directory.entry(id: id, in: tx, locking: true, now: now) != nil else {
                return .failure(LifecycleError.noSuchAccount(reference))
            }
            let since = lockout.lookback(from: now)
            var failures: [Date] = []
            for asked in [DeletionAudit.request, DeletionAudit.partRequest] {
                failures += try tx.auditTimes(accountID: id, action: asked, outcome: DeletionAudit.incorrectPassword, since: since)
            }
            let running = try tx.deletionAttemptsInFlight(accountID: id, since: now.addingTimeInterval(-lockout.window))
            if let until = lockout.lockedUntil(failureTimes: failures.sorted() + running, now: now) {
                try tx.recordAudit(event(id, actor: "user", action: action, outcome: DeletionAudit.lockedOut, at: now,
                                         detail: ["locked_until": .string(ISO8601.format(until))]))
                return .failure(LifecycleError(
                    .tryLater, "Too many incorrect passwords. Deleting account \(id) is locked; try again after \(ISO8601.format(until)).", retryAt: until))
            }
            return .success(try tx.beginDeletionAttempt(accountID: id, at: now))
        }
        let attempt = try admission.get()
        do {
            return (attempt, try await checkPassword(account, password: password, action: action, attempt: attempt, now: now))
        } catch {
            try? await store.write { [self] tx in try endAttempt(attempt, accountID: id, now: now, in: tx) }
            throw error
        }
    }

    /// Ends an attempt under the account's row lock, which the admission counts under:
    /// the end must not land between its two counts.
    func endAttempt(_ attempt: Int64, accountID: String, now: Date, in tx: Store.Transaction) throws {
        _ = try directory.entry(id: accountID, in: tx, locking: true, now: now)
        try tx.endDeletionAttempt(attempt)
    }

    /// The stored hash's format name when the password matches it.
    private func checkPassword(
        _ account: AccountDirectory<Store>.Entry, password: String, action: String, attempt: Int64, now: Date
    ) async throws -> String {
        let store = services.store
        let id = account.id
        let directory = self.directory

        // Checked before the write transaction: a hash takes up to a few hundred
        // milliseconds, and the database must not stay locked for that long.
        let storedHash = try await store.read { tx in try directory.passwordHash(id: id, in: tx) }
        let format = storedHash.map { PasswordHashFormat.detect($0)?.name ?? "unknown" } ?? "none"
        let matches: Bool
        do {
            guard let hash = storedHash, !hash.isEmpty else { throw CredentialsError.unknownFormat }
            matches = try verifier.verify(password: password, storedHash: hash)
        } catch let error as CredentialsError {
            try await audit(id, actor: "user", action: action, outcome: "unverifiable-hash", at: now,
                            detail: ["hash_format": .string(format), "error": .string(error.description)])
            if error == .hashingFailed {
                throw LifecycleError(.unavailable, "the password of account \(id) could not be checked right now (\(error.detail)); try again")
            }
            let remedy = directory.data.plan.subject.password?.settable == true
                ? "Set a new one with `lifecycle accounts set-password \(id) --password-stdin`"
                : "The app must store a hash in a format lifecycle checks (bcrypt, argon2, scrypt, PBKDF2)"
            throw LifecycleError(.badInput, """
                the stored password hash of account \(id) cannot be checked (\(error)). \(remedy), or delete it through \
                support with `--operator`.
                """, forApp: .init(code: "password_unverifiable", message: """
                the stored password of account \(id) is in a form that cannot be checked, so it cannot confirm this; \
                the password must be set again, or support deletes the account on the user's behalf
                """))
        }
        guard matches else {
            let failure = event(id, actor: "user", action: action, outcome: DeletionAudit.incorrectPassword, at: now,
                                detail: ["hash_format": .string(format)])
            try await store.write { [self] tx in
                try tx.recordAudit(failure)
                try endAttempt(attempt, accountID: id, now: now, in: tx)
            }
            throw LifecycleError(.permissionDenied, DeletionMessages.incorrectPassword)
        }
        return format
    }

    private func markDeleted(_ account: AccountDirectory<Store>.Entry, format: String, attempt: Int64, now: Date) async throws -> DeletionRequestResult {
        let store = services.store
        let id = account.id

        let purgeAfter = now.addingTimeInterval(policy.gracePeriod)
        let result = try await store.write { [self] tx in
            // The password check ran outside this transaction: look at the state again
            // (a read that also takes the row lock `endAttempt` takes).
            let current = try directory.entry(id: id, in: tx, locking: true, now: now)
            try tx.endDeletionAttempt(attempt)
            guard let current, current.state == .active,
                  try directory.markPendingDeletion(id: id, requestedAt: now, purgeAfter: purgeAfter, in: tx)
            else {
                let current = try directory.entry(id: id, in: tx, locking: false, now: now) ?? account
                try tx.recordAudit(event(id, actor: "user", action: DeletionAudit.request, outcome: "already-pending", at: now))
                return alreadyPending(current)
            }
            let revoked = try directory.revokeSessions(id: id, at: now, in: tx)
            let job = try schedulePurge(id, at: purgeAfter, now: now, in: tx)
            try ExportJobs.withdraw(accountID: id, actor: "deletion", purgeJob: job.id, store: store, now: now, in: tx)
            try tx.recordAudit(event(id, actor: "user", action: DeletionAudit.request, outcome: "requested", at: now, detail: [
                "hash_format": .string(format), "purge_after": .string(ISO8601.format(purgeAfter)), "sessions_revoked": .int(revoked.sessions), "tokens_revoked": .int(revoked.tokens),
                "purge_job": .int(job.id),
            ]))
            return DeletionRequestResult(
                outcome: .requested, accountID: id, state: .pendingDeletion, purgeAfter: purgeAfter, purgeJobID: job.id,
                sessionsRevoked: revoked.sessions, tokensRevoked: revoked.tokens, message: DeletionMessages.deleted(graceDays: policy.graceDays))
        }
        services.logger.notice("deletion requested", metadata: ["account": "\(id)", "outcome": "\(result.outcome.rawValue)"])
        return result
    }

    // MARK: - Confirmed by email (the web deletion page)

    /// Deletion confirmed through a link sent to the account's address instead of the
    /// password: the same grace period, sessions signed out, purge scheduled and audit as
    /// the user's request. `linkIssuedAt` makes the link single-use: a deletion requested
    /// (or restored) since it was sent voids it.
    public func requestDeletionConfirmedByEmail(accountID id: String, linkIssuedAt: Date) async throws -> DeletionRequestResult {
        let now = services.clock.now()
        let purgeAfter = now.addingTimeInterval(policy.gracePeriod)
        let result = try await services.store.write { [self] tx -> DeletionRequestResult in
            guard let account = try directory.entry(id: id, in: tx, locking: true, now: now) else { throw LifecycleError.noSuchAccount(.key(id)) }
            if try Self.linkUsed(accountID: id, since: linkIssuedAt, in: tx) { throw ConfirmationLinkUsed() }
            guard account.state == .active,
                  try directory.markPendingDeletion(id: id, requestedAt: now, purgeAfter: purgeAfter, in: tx) else {
                if account.state == .purged { throw purgedError(account) }
                try tx.recordAudit(event(id, actor: "user:email-link", action: DeletionAudit.request, outcome: "already-pending", at: now))
                return alreadyPending(account)
            }
            let revoked = try directory.revokeSessions(id: id, at: now, in: tx)
            let job = try schedulePurge(id, at: purgeAfter, now: now, in: tx)
            try ExportJobs.withdraw(accountID: id, actor: "deletion", purgeJob: job.id, store: services.store, now: now, in: tx)
            try tx.recordAudit(event(id, actor: "user:email-link", action: DeletionAudit.request, outcome: "requested", at: now, detail: [
                "confirmed_by": .string("email-link"), "link_issued_at": .string(ISO8601.format(linkIssuedAt)),
                "purge_after": .string(ISO8601.format(purgeAfter)), "sessions_revoked": .int(revoked.sessions), "tokens_revoked": .int(revoked.tokens), "purge_job": .int(job.id),
            ]))
            return DeletionRequestResult(
                outcome: .requested, accountID: id, state: .pendingDeletion, purgeAfter: purgeAfter, purgeJobID: job.id,
                sessionsRevoked: revoked.sessions, tokensRevoked: revoked.tokens, message: DeletionMessages.deleted(graceDays: policy.graceDays))
        }
        services.logger.notice("deletion requested", metadata: ["account": "\(id)", "outcome": "\(result.outcome.rawValue)", "confirmed_by": "email-link"])
        return result
    }

    /// Whether anything a confirmation link would do has happened since it was sent: a
    /// deletion requested (by this link or any other way) or a restore.
    static func linkUsed(accountID id: String, since issued: Date, in tx: Store.Transaction) throws -> Bool {
        for (action, outcome) in [(DeletionAudit.request, "requested"), (DeletionAudit.request, "already-pending"),
                                  (DeletionAudit.operatorRequest, "requested"), (DeletionAudit.restore, "restored"),
                                  (DeletionAudit.partRequest, "requested")] {
            if try !tx.auditTimes(accountID: id, action: action, outcome: outcome, since: issued).isEmpty { return true }
        }
        return false
    }

    // MARK: - Support and legal

    /// Deletion without the user's password, for support and legal requests. Audited
    /// with the operator's name and reason. `immediately` skips the grace period: the
    /// next purge run removes the account (also for one already pending).
    public func requestDeletionByOperator(
        account reference: AccountReference, operatorName: String, reason: String, immediately: Bool
    ) async throws -> DeletionRequestResult {
        let operatorName = operatorName.trimmingCharacters(in: .whitespacesAndNewlines)
        let reason = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !operatorName.isEmpty, !reason.isEmpty else {
            throw LifecycleError(.badInput, "an operator deletion needs the operator's name and a reason (both are audited)")
        }
        let now = services.clock.now()
        let id = try await existingAccount(reference).id
        let actor = "operator:\(operatorName)"
        let detail: [String: JSONValue] = ["reason": .string(reason), "immediately": .bool(immediately)]
        let result = try await services.store.write { [self] tx in
            guard let account = try directory.entry(id: id, in: tx, locking: true, now: now) else { throw LifecycleError.noSuchAccount(reference) }
            switch account.state {
            case .purged:
                throw purgedError(account)
            case .purging:
                try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.operatorRequest, outcome: "already-pending", at: now, detail: detail))
                return alreadyPending(account)
            case .pendingDeletion:
                guard immediately, let purgeAfter = account.purgeAfter, purgeAfter > now,
                      try directory.movePurgeDate(id: id, purgeAfter: now, now: now, in: tx)
                else {
                    try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.operatorRequest, outcome: "already-pending", at: now, detail: detail))
                    return alreadyPending(account)
                }
                let job = try reschedulePurge(id, at: now, now: now, in: tx)
                try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.operatorRequest, outcome: "rescheduled", at: now,
                                         detail: detail.merging(["purge_after": .string(ISO8601.format(now)), "purge_job": .int(job.id)]) { $1 }))
                return DeletionRequestResult(
                    outcome: .rescheduled, accountID: id, state: .pendingDeletion, purgeAfter: now, purgeJobID: job.id,
                    sessionsRevoked: 0, message: "Account \(id) will be purged by the next purge run (purge date moved to now).")
            case .active:
                let purgeAfter = immediately ? now : now.addingTimeInterval(policy.gracePeriod)
                guard try directory.markPendingDeletion(id: id, requestedAt: now, purgeAfter: purgeAfter, in: tx) else {
                    throw LifecycleError(.internalError, "account \(id) changed state during the request; run the command again")
                }
                let revoked = try directory.revokeSessions(id: id, at: now, in: tx)
                let job = try schedulePurge(id, at: purgeAfter, now: now, in: tx)
                try ExportJobs.withdraw(accountID: id, actor: "deletion", purgeJob: job.id, store: services.store, now: now, in: tx)
                try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.operatorRequest, outcome: "requested", at: now,
                                         detail: detail.merging([
                                             "purge_after": .string(ISO8601.format(purgeAfter)), "sessions_revoked": .int(revoked.sessions), "tokens_revoked": .int(revoked.tokens), "purge_job": .int(job.id),
                                         ]) { $1 }))
                let message = immediately
                    ? "Account \(id) is scheduled for deletion now: the next purge run removes it."
                    : DeletionMessages.deleted(graceDays: policy.graceDays)
                return DeletionRequestResult(
                    outcome: .requested, accountID: id, state: .pendingDeletion, purgeAfter: purgeAfter, purgeJobID: job.id,
                    sessionsRevoked: revoked.sessions, tokensRevoked: revoked.tokens, message: message)
            }
        }
        services.logger.notice("operator deletion", metadata: ["account": "\(id)", "operator": "\(operatorName)", "outcome": "\(result.outcome.rawValue)"])
        return result
    }

    // MARK: - Restore

    /// Cancels a pending deletion: allowed only in pendingDeletion before the purge
    /// date, and cancels the scheduled purge in the same transaction. Sessions stay
    /// revoked; the user signs in afresh. The app's sign-in path calls this when a
    /// pending user signs in again.
    public func restore(account reference: AccountReference, actor: String = "user") async throws -> RestoreResult {
        let now = services.clock.now()
        let store = services.store
        let id = try await existingAccount(reference, allowPurged: true).id
        let decision: RestoreDecision = try await store.write { [self] tx in
            guard let account = try directory.entry(id: id, in: tx, locking: true, now: now) else { throw LifecycleError.noSuchAccount(reference) }
            let refusal: String? = switch account.state {
            case .active: "account \(id) is not scheduled for deletion; there is nothing to restore"
            case .purging: "account \(id) cannot be restored: its purge already started and cannot be undone"
            case .purged: "account \(id) cannot be restored: it was purged\(account.purgedAt.map { " at \(ISO8601.format($0))" } ?? "")"
            case .pendingDeletion:
                if let purgeAfter = account.purgeAfter, purgeAfter <= now {
                    "account \(id) cannot be restored: its grace period ended at \(ISO8601.format(purgeAfter)) and the purge is due"
                } else { nil }
            }
            if let refusal {
                try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.restore, outcome: "refused", at: now,
                                         detail: ["state": .string(account.state.rawValue)]))
                return .refused(LifecycleError(.badInput, refusal))
            }
            guard try directory.restore(id: id, now: now, in: tx) else {
                throw LifecycleError(.internalError, "account \(id) changed state during the restore; run it again")
            }
            var cancelled: JobID?
            if let job = try store.liveJob(uniqueKey: DeletionJobs.purgeKey(accountID: id), in: tx) {
                // A purge job already claimed but not yet past its first step is only flagged;
                // its first step then finds the account active and does nothing.
                _ = try store.cancel(jobID: job.id, now: now, in: tx)
                cancelled = job.id
            }
            try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.restore, outcome: "restored", at: now,
                                     detail: ["cancelled_job": cancelled.map { .int($0) } ?? .null]))
            return .restored(RestoreResult(accountID: id, cancelledJobID: cancelled))
        }
        switch decision {
        case .restored(let result):
            services.logger.notice("account restored", metadata: ["account": "\(id)", "actor": "\(actor)"])
            return result
        case .refused(let error):
            throw error
        }
    }

    /// Whether the account is active (no deletion pending, purging or done).
    public func isActive(_ reference: AccountReference) async throws -> Bool {
        try await existingAccount(reference, allowPurged: true).state == .active
    }

    // MARK: - Passwords

    /// Stores a new argon2id hash, e.g. for an account whose imported hash is in a
    /// format nothing can verify. Returns the format name written.
    @discardableResult
    public func setPassword(account reference: AccountReference, password: String, actor: String = "operator") async throws -> String {
        guard !password.isEmpty else { throw LifecycleError(.badInput, "the new password is empty") }
        let sql = directory.data.sql
        guard let place = directory.data.plan.subject.password, place.settable else {
            throw LifecycleError(.badInput, """
                the data map (\(directory.data.map.source)) does not let lifecycle set passwords: the app sets its users' passwords. \
                If the app reads argon2id hashes, add `set: argon2id` to `subject.password`
                """)
        }
        let id = try await existingAccount(reference).id
        let hash: String
        do {
            hash = try verifier.hashNewPassword(password)
        } catch let error as CredentialsError {
            throw LifecycleError(.badInput, "the new password cannot be used: \(error.detail)")
        }
        let format = PasswordHashFormat.detect(hash)?.name ?? "argon2id"
        let now = services.clock.now()
        try await services.store.write { [self] tx in
            guard let account = try directory.entry(id: id, in: tx, locking: true, now: now) else { throw LifecycleError.noSuchAccount(reference) }
            guard account.state == .active || account.state == .pendingDeletion else { throw purgedError(account) }
            guard let statement = sql.setPasswordHash(key: id, hash: hash), try tx.execute(statement) == 1 else {
                throw LifecycleError(.noSuchAccount, "account \(id) has no row in \(place.table.map(\.description) ?? "the user table") to hold its password")
            }
            try tx.recordAudit(event(id, actor: actor, action: DeletionAudit.setPassword, outcome: "set", at: now, detail: ["hash_format": .string(format)]))
        }
        return format
    }

    // MARK: - Helpers

    func existingAccount(_ reference: AccountReference, allowPurged: Bool = false) async throws -> AccountDirectory<Store>.Entry {
        let directory = self.directory
        let now = services.clock.now()
        let found = try await services.store.read { tx in
            try directory.find(reference, in: tx).flatMap { try directory.entry(id: $0, in: tx, locking: false, now: now) }
        }
        guard let account = found else { throw LifecycleError.noSuchAccount(reference) }
        if account.state == .purged && !allowPurged { throw purgedError(account) }
        return account
    }

    func purgedError(_ account: AccountDirectory<Store>.Entry) -> LifecycleError {
        let when = account.purgedAt.map { " at \(ISO8601.format($0))" } ?? ""
        return account.state == .purged
            ? LifecycleError(.noSuchAccount, "account \(account.id) was purged\(when); nothing of it is left")
            : LifecycleError(.badInput, "account \(account.id) is being purged; nothing can change it any more")
    }

    private func alreadyPending(_ account: AccountDirectory<Store>.Entry) -> DeletionRequestResult {
        let date = account.purgeAfter.map { ISO8601.format($0) } ?? "its purge date"
        let message = account.state == .purging
            ? "Account \(account.id) is already being purged."
            : "Account \(account.id) is already scheduled for deletion; it will be purged on or after \(date). Nothing changed."
        return DeletionRequestResult(
            outcome: .alreadyPending, accountID: account.id, state: account.state, purgeAfter: account.purgeAfter,
            purgeJobID: nil, sessionsRevoked: 0, message: message)
    }

    private func schedulePurge(_ id: String, at runAt: Date, now: Date, in tx: Store.Transaction) throws -> JobRecord {
        let policy = try services.policies.policy(for: DeletionJobs.purgeKind)
        return try services.store.enqueue(try DeletionJobs.purgeRequest(accountID: id, runAt: runAt), policy: policy, now: now, in: tx).job
    }

    /// A queued purge job cannot change its run time, so it is replaced by one due now.
    private func reschedulePurge(_ id: String, at runAt: Date, now: Date, in tx: Store.Transaction) throws -> JobRecord {
        let store = services.store
        if let live = try store.liveJob(uniqueKey: DeletionJobs.purgeKey(accountID: id), in: tx), live.state != .running {
            _ = try store.cancel(jobID: live.id, now: now, in: tx)
        }
        return try schedulePurge(id, at: runAt, now: now, in: tx)
    }

    func event(_ id: String, actor: String, action: String, outcome: String, at: Date, detail: [String: JSONValue] = [:]) -> AuditEvent {
        AuditEvent(at: at, actor: actor, action: action, accountID: id, outcome: outcome, detail: detail)
    }

    private func audit(_ id: String, actor: String, action: String, outcome: String, at: Date, detail: [String: JSONValue] = [:]) async throws {
        let event = event(id, actor: actor, action: action, outcome: outcome, at: at, detail: detail)
        try await services.store.write { tx in try tx.recordAudit(event) }
    }
}

/// A refused restore still commits its audit row, so the refusal is returned, not thrown, from the transaction.
private enum RestoreDecision: Sendable {
    case restored(RestoreResult)
    case refused(LifecycleError)
}
