import Foundation
import JobRunner

/// A hold keeps an account from being purged (a legal request, an investigation), until an
/// operator lifts it or its end date passes. Holds are kept after they end: the audit and
/// the purge receipt show every hold an account had.
public struct AccountHold: Sendable, Codable, Equatable {
    public var account: String
    public var reason: String
    public var heldBy: String
    public var heldAt: Date
    /// When the hold ends by itself; nil: until an operator lifts it.
    public var until: Date?
    public var releasedAt: Date?
    public var releasedBy: String?

    public init(
        account: String, reason: String, heldBy: String, heldAt: Date, until: Date?, releasedAt: Date? = nil, releasedBy: String? = nil
    ) {
        self.account = account
        self.reason = reason
        self.heldBy = heldBy
        self.heldAt = heldAt
        self.until = until
        self.releasedAt = releasedAt
        self.releasedBy = releasedBy
    }

    /// In force at `now`: not lifted, and its end date (if any) still ahead.
    public func isActive(at now: Date) -> Bool {
        releasedAt == nil && (until.map { $0 > now } ?? true)
    }

    enum CodingKeys: String, CodingKey {
        case account, reason, heldBy = "held_by", heldAt = "held_at", until, releasedAt = "released_at", releasedBy = "released_by"
    }
}

/// Holds, in lifecycle's own tables, keyed by the account's key. Every write happens under
/// the account's row lock (`AccountDirectory.entry(locking: true)`), the lock restore and
/// the purge's first step take, so a hold either lands before a purge starts (and stops
/// it) or finds the purge started.
extension OwnStateTransaction {
    /// Records a hold. The caller holds the account's lock and has closed any earlier open one.
    public func placeHold(_ hold: AccountHold) throws {
        try change("""
            INSERT INTO \(table: .holds) (subject_key, reason, held_by, held_at, until)
            VALUES (\(hold.account), \(hold.reason), \(hold.heldBy), \(hold.heldAt), \(hold.until))
            """)
    }

    /// The hold not lifted yet (it may have run past its end date), if any.
    public func openHold(key: String) throws -> AccountHold? {
        try selectHolds("SELECT \(columns: holdColumns) FROM \(table: .holds) WHERE subject_key = \(key) AND released_at IS NULL").first
    }

    /// Closes the open hold at `at`; returns it as closed, or nil when there was none.
    public func releaseHold(key: String, by actor: String, at: Date) throws -> AccountHold? {
        try selectHolds("""
            UPDATE \(table: .holds) SET released_at = \(at), released_by = \(actor)
            WHERE subject_key = \(key) AND released_at IS NULL RETURNING \(columns: holdColumns)
            """).first
    }

    /// Every hold the account had, oldest first.
    public func holds(key: String) throws -> [AccountHold] {
        try selectHolds("SELECT \(columns: holdColumns) FROM \(table: .holds) WHERE subject_key = \(key) ORDER BY held_at, id")
    }

    /// The holds not lifted yet, latest first: the operator's overview.
    public func openHolds(limit: Int) throws -> [AccountHold] {
        try selectHolds("SELECT \(columns: holdColumns) FROM \(table: .holds) WHERE released_at IS NULL ORDER BY held_at DESC, id DESC LIMIT \(limit)")
    }

    /// Of `keys`, those with a hold in force at `now`, as bytes: an NFC and an NFD key
    /// are two accounts, and a hold on one must not stop the other's purge.
    public func heldKeys(_ keys: [String], now: Date) throws -> Set<ExactText> {
        guard !keys.isEmpty else { return [] }
        // Most nights nobody is held: one indexed look at the open holds, not one per key.
        let wanted = Set(keys.map(ExactText.init))
        return Set(try select(
            "SELECT subject_key, until FROM \(table: .holds) WHERE released_at IS NULL", from: .holds, .text, .timestamp
        ).compactMap { row -> ExactText? in
            let key = ExactText(try row.text(0))
            let inForce = try row.optionalDate(1).map { $0 > now } ?? true
            return wanted.contains(key) && inForce ? key : nil
        })
    }

    private func selectHolds(_ sql: OwnSQL) throws -> [AccountHold] {
        try select(sql, from: .holds, reading: holdColumns).map { row in
            AccountHold(
                account: try row.text(0), reason: try row.text(1), heldBy: try row.text(2), heldAt: try row.date(3),
                until: try row.optionalDate(4), releasedAt: try row.optionalDate(5), releasedBy: try row.optionalText(6))
        }
    }
}

/// What the purge's first step asks, under the account's lock, before it moves the
/// account to `purging`. A held account ends the purge job there, in the same commit
/// that records the step (outcome `held`): nothing failed, but the purge did not happen,
/// so the run says stopped (`worker --once` exits 75). The job is over before the lock is
/// let go, so an `unhold` that follows finds no live job and schedules a fresh one.
public enum HoldCheck {
    public static func activeHold(_ key: String, now: Date, in tx: some OwnStateTransaction) throws -> AccountHold? {
        guard let hold = try tx.openHold(key: key), hold.isActive(at: now) else { return nil }
        return hold
    }

    /// Why a purge job ended without purging, for the run's report.
    public static func purgeWithheld(_ key: String, _ hold: AccountHold) -> String {
        """
        account \(key) is \(describe(hold)), so it was not purged; the purge sweep schedules a fresh purge once \
        the hold ends (Jobs/runbooks/deletion-and-purge.md, section 3b)
        """
    }

    public static func describe(_ hold: AccountHold) -> String {
        "on hold since \(ISO8601.format(hold.heldAt)) by \(hold.heldBy): \(hold.reason)" + (hold.until.map { " (until \(ISO8601.format($0)))" } ?? "")
    }
}

public enum HoldAudit {
    public static let hold = "account.hold"
    public static let unhold = "account.unhold"
}

/// What `accounts hold` and `accounts unhold` did.
public struct HoldResult: Sendable, Codable, Equatable {
    public var account: String
    /// False when nothing changed (unhold of an account that was not on hold).
    public var changed: Bool
    public var hold: AccountHold?
    public var state: AccountState
    /// The purge job the hold cancelled, or the one the release scheduled again.
    public var purgeJob: JobID?

    enum CodingKeys: String, CodingKey {
        case account, changed, hold, state, purgeJob = "purge_job"
    }
}

/// Holds for operators: placed and lifted under the account's lock, audited with who and why.
public struct HoldService<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    public let directory: AccountDirectory<Store>

    public init(services: LifecycleServices<Store>, directory: AccountDirectory<Store>) {
        self.services = services
        self.directory = directory
    }

    /// Holds the account. Refused once its purge has begun (nothing can stop it then) and
    /// while another hold is in force (lift it first, so each hold keeps its own reason).
    /// A queued purge job is cancelled with the hold; the sweep schedules a new one once
    /// the hold ends, and `unhold` at once.
    public func hold(account reference: AccountReference, reason: String, until: Date?, actor: String) async throws -> HoldResult {
        let reason = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !reason.isEmpty else { throw LifecycleError(.badInput, "a hold needs a reason (--reason): it is audited and shown to whoever finds the account held") }
        guard !reason.contains(where: { $0.isNewline }), reason.count <= 500 else {
            throw LifecycleError(.badInput, "--reason must be one line of at most 500 characters")
        }
        let now = services.clock.now()
        if let until, until <= now {
            throw LifecycleError(.badInput, "--until \(ISO8601.format(until)) is not in the future; a hold that has ended would hold nothing")
        }
        let store = services.store
        let directory = self.directory
        let result = try await store.write { tx -> HoldResult in
            let (id, entry) = try Self.lockedEntry(reference, directory: directory, now: now, in: tx)
            switch entry.state {
            case .purging, .purged:
                throw LifecycleError(.badInput, """
                    account \(id) is \(entry.state.rawValue): its purge has begun and cannot be held or stopped any more \
                    (`lifecycle audit \(id)` shows what happened)
                    """)
            case .active, .pendingDeletion: break
            }
            if let open = try tx.openHold(key: id) {
                guard !open.isActive(at: now) else {
                    throw LifecycleError(.badInput, """
                        account \(id) is on hold already (since \(ISO8601.format(open.heldAt)) by \(open.heldBy): \(open.reason)); \
                        lift it with `lifecycle accounts unhold \(id)` first to hold it for another reason
                        """)
                }
                // Ran out by its date: closed as of that date, so the history stays true.
                _ = try tx.releaseHold(key: id, by: "expiry", at: open.until ?? now)
            }
            let hold = AccountHold(account: id, reason: reason, heldBy: actor, heldAt: now, until: until)
            try tx.placeHold(hold)
            var cancelled: JobID?
            if let job = try store.liveJob(uniqueKey: DeletionJobs.purgeKey(accountID: id), in: tx) {
                // A claimed purge job that has not passed its first step is only flagged;
                // that step then finds the hold (or the flag) and purges nothing.
                _ = try store.cancel(jobID: job.id, now: now, in: tx)
                cancelled = job.id
            }
            var detail: [String: JSONValue] = ["reason": .string(reason)]
            if let until { detail["until"] = .string(ISO8601.format(until)) }
            if let cancelled { detail["purge_job_cancelled"] = .int(cancelled) }
            try tx.recordAudit(AuditEvent(at: now, actor: actor, action: HoldAudit.hold, accountID: id, outcome: "held", detail: detail))
            return HoldResult(account: id, changed: true, hold: hold, state: entry.state, purgeJob: cancelled)
        }
        services.logger.notice("account held", metadata: ["account": "\(result.account)", "operator": "\(actor)"])
        return result
    }

    /// Lifts the account's hold. A pending account whose purge date has passed gets its
    /// purge job back at once (due now); one still in its grace period, at its purge date.
    public func unhold(account reference: AccountReference, actor: String) async throws -> HoldResult {
        let now = services.clock.now()
        let store = services.store
        let directory = self.directory
        let purgePolicy = try services.policies.policy(for: DeletionJobs.purgeKind)
        let result = try await store.write { tx -> HoldResult in
            let (id, entry) = try Self.lockedEntry(reference, directory: directory, now: now, in: tx)
            guard let released = try tx.releaseHold(key: id, by: actor, at: now) else {
                return HoldResult(account: id, changed: false, hold: nil, state: entry.state, purgeJob: nil)
            }
            var scheduled: JobID?
            if entry.state == .pendingDeletion, let purgeAfter = entry.purgeAfter {
                let request = try DeletionJobs.purgeRequest(accountID: id, runAt: max(purgeAfter, now))
                scheduled = try store.enqueue(request, policy: purgePolicy, now: now, in: tx).job.id
            }
            var detail: [String: JSONValue] = ["reason": .string(released.reason), "held_by": .string(released.heldBy),
                                                "held_at": .string(ISO8601.format(released.heldAt))]
            if let scheduled { detail["purge_job"] = .int(scheduled) }
            try tx.recordAudit(AuditEvent(at: now, actor: actor, action: HoldAudit.unhold, accountID: id, outcome: "released", detail: detail))
            return HoldResult(account: id, changed: true, hold: released, state: entry.state, purgeJob: scheduled)
        }
        if result.changed {
            services.logger.notice("account hold lifted", metadata: ["account": "\(result.account)", "operator": "\(actor)"])
        }
        return result
    }

    /// The account's holds, oldest first (ended ones included).
    public func holds(account reference: AccountReference) async throws -> (account: String, holds: [AccountHold]) {
        let directory = self.directory
        let now = services.clock.now()
        return try await services.store.read { tx in
            guard let id = try directory.find(reference, in: tx), try directory.entry(id: id, in: tx, locking: false, now: now) != nil else {
                throw LifecycleError.noSuchAccount(reference)
            }
            return (id, try tx.holds(key: id))
        }
    }

    private static func lockedEntry(
        _ reference: AccountReference, directory: AccountDirectory<Store>, now: Date, in tx: Store.Transaction
    ) throws -> (String, AccountDirectory<Store>.Entry) {
        guard let id = try directory.find(reference, in: tx),
              let entry = try directory.entry(id: id, in: tx, locking: true, now: now)
        else { throw LifecycleError.noSuchAccount(reference) }
        return (id, entry)
    }
}

private let holdColumns = OwnColumns([
    "subject_key": .text, "reason": .text, "held_by": .text, "held_at": .timestamp, "until": .timestamp, "released_at": .timestamp,
    "released_by": .text,
])
