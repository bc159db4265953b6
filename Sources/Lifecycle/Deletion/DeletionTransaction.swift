import Foundation

/// What deletion, restore and purge read and write inside one database transaction.
/// State changes are compare-and-set on the account row: each returns whether the
/// account was in the state the change starts from, so two racing callers (a
/// restore and a purge, two purge workers) can never both win.
public protocol DeletionTransaction {
    /// active → pendingDeletion. False if the account was not active.
    func markPendingDeletion(accountID: String, requestedAt: Date, purgeAfter: Date) throws -> Bool
    /// Moves the purge date of a pendingDeletion account (an operator's "delete now").
    func movePurgeDate(accountID: String, purgeAfter: Date, now: Date) throws -> Bool
    /// pendingDeletion with `purge_after > now` → active. False otherwise.
    func restoreAccount(accountID: String, now: Date) throws -> Bool
    /// pendingDeletion with `purge_after <= now` → purging. False otherwise.
    func beginPurge(accountID: String, now: Date) throws -> Bool
    /// Signs the account out everywhere; returns how many sessions were still open.
    func revokeSessions(accountID: String, at: Date) throws -> Int
    func setPasswordHash(accountID: String, hash: String, now: Date) throws

    /// When `action` ended in `outcome` for the account since `since` (the lockout reads wrong passwords).
    func auditTimes(accountID: String, action: String, outcome: String, since: Date) throws -> [Date]

    /// Password checks of deletion requests still running: each is registered together with
    /// the lockout check, and ended together with its outcome, under the account's row lock,
    /// so parallel wrong guesses cannot all pass the check before any of them is recorded.
    func beginDeletionAttempt(accountID: String, at: Date) throws -> Int64
    func endDeletionAttempt(_ attempt: Int64) throws
    /// When the attempts still running for the account (or abandoned by a crash) started, since `since`.
    func deletionAttemptsInFlight(accountID: String, since: Date) throws -> [Date]

    /// Accounts whose purge is due (pendingDeletion or an interrupted purging, `purge_after <= now`),
    /// in id order after `after`.
    func accountsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge]

    /// Lifecycle's own rows about the account, which go with it: its export records and
    /// the messages sent about them, by table (`exports`, `outbox`, zero included, so that
    /// receipts stay comparable with those of releases that listed both in the data map).
    /// They are not in the data map: they are lifecycle's state, not the app's. The audit
    /// trail stays; the purge's own bookkeeping goes as each purge ends.
    func lifecycleRowCounts(accountID: String) throws -> [String: Int]
    /// Deletes those rows; returns how many per table.
    func deleteLifecycleRows(accountID: String) throws -> [String: Int]

    /// What the purge found when it started: rows per table (recorded by its first
    /// step) and blobs (recorded when it first lists them). The first record of each
    /// wins, so a purge resumed after a crash still reports what it removed in total.
    func recordRowInventory(accountID: String, rows: [String: Int], at: Date) throws
    func recordBlobInventory(accountID: String, count: Int, bytes: Int64) throws
    func purgeInventory(accountID: String) throws -> PurgeInventory?
    /// Removes the inventory and returns what it held (nil if there was none).
    func takePurgeInventory(accountID: String) throws -> PurgeInventory?

    /// purging → purged: the row keeps its id, state and purged_at; every personal column is emptied.
    /// False if the account was not purging.
    func tombstone(accountID: String, purgedAt: Date) throws -> Bool
}

/// An account whose purge is due, as the sweep and the dry run list it.
public struct DuePurge: Sendable, Equatable {
    public var accountID: String
    public var state: AccountState
    public var purgeAfter: Date?

    public init(accountID: String, state: AccountState, purgeAfter: Date?) {
        self.accountID = accountID
        self.state = state
        self.purgeAfter = purgeAfter
    }
}

public struct PurgeInventory: Sendable, Codable, Equatable {
    public var rows: [String: Int]
    /// Nil until the blob step has listed the account's prefix.
    public var blobCount: Int?
    public var blobBytes: Int64?

    public init(rows: [String: Int], blobCount: Int?, blobBytes: Int64?) {
        self.rows = rows
        self.blobCount = blobCount
        self.blobBytes = blobBytes
    }
}
