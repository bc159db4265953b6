import Foundation
import JobRunner

/// What deletion, restore and purge read and write inside one database transaction.
/// State changes are compare-and-set on the account row: each returns whether the
/// account was in the state the change starts from, so two racing callers (a
/// restore and a purge, two purge workers) can never both win. Each is one conditional
/// UPDATE: under READ COMMITTED PostgreSQL waits for a concurrent change to the same row
/// and re-checks the WHERE clause against the committed row; SQLite's write lock, which
/// the caller's IMMEDIATE transaction holds, is the lock the purge re-checks under.
extension OwnStateTransaction {
    /// active → pendingDeletion. False if the account was not active.
    public func markPendingDeletion(accountID: String, requestedAt: Date, purgeAfter: Date) throws -> Bool {
        try change("""
            UPDATE \(table: .accounts) SET state = 'pendingDeletion', deletion_requested_at = \(requestedAt), purge_after = \(purgeAfter),
              updated_at = \(requestedAt)
            WHERE id = \(accountID) AND state = 'active'
            """) == 1
    }

    /// Moves the purge date of a pendingDeletion account (an operator's "delete now").
    public func movePurgeDate(accountID: String, purgeAfter: Date, now: Date) throws -> Bool {
        try change("""
            UPDATE \(table: .accounts) SET purge_after = \(purgeAfter), updated_at = \(now) WHERE id = \(accountID) AND state = 'pendingDeletion'
            """) == 1
    }

    /// pendingDeletion with `purge_after > now` → active. False otherwise.
    public func restoreAccount(accountID: String, now: Date) throws -> Bool {
        try restore(.accounts, key: accountID, now: now)
    }

    /// pendingDeletion with `purge_after <= now` → purging. False otherwise.
    public func beginPurge(accountID: String, now: Date) throws -> Bool {
        try beginPurge(.accounts, key: accountID, now: now)
    }

    func restore(_ rows: DeletionStateRows, key: String, now: Date) throws -> Bool {
        try change("""
            UPDATE \(table: rows.table) SET state = 'active', deletion_requested_at = NULL, purge_after = NULL, updated_at = \(now)
            WHERE \(generated: rows.key) = \(key) AND state = 'pendingDeletion' AND purge_after > \(now)
            """) == 1
    }

    func beginPurge(_ rows: DeletionStateRows, key: String, now: Date) throws -> Bool {
        try change("""
            UPDATE \(table: rows.table) SET state = 'purging', updated_at = \(now)
            WHERE \(generated: rows.key) = \(key) AND state = 'pendingDeletion' AND purge_after IS NOT NULL AND purge_after <= \(now)
            """) == 1
    }

    /// Signs the account out everywhere; returns how many sessions were still open.
    public func revokeSessions(accountID: String, at: Date) throws -> Int {
        try change("UPDATE \(table: .sessions) SET revoked_at = \(at) WHERE account_id = \(accountID) AND revoked_at IS NULL")
    }

    public func setPasswordHash(accountID: String, hash: String, now: Date) throws {
        try change("UPDATE \(table: .accounts) SET password_hash = \(hash), updated_at = \(now) WHERE id = \(accountID)")
    }

    /// When `action` ended in `outcome` for the account since `since` (the lockout reads wrong passwords).
    public func auditTimes(accountID: String, action: String, outcome: String, since: Date) throws -> [Date] {
        try select("""
            SELECT at FROM \(table: .auditEvents) WHERE account_id = \(accountID) AND at >= \(since) AND action = \(action) AND outcome = \(outcome)
            ORDER BY at
            """, from: .auditEvents, .timestamp).map { try $0.date(0) }
    }

    /// Password checks of deletion requests still running: each is registered together with
    /// the lockout check, and ended together with its outcome, under the account's row lock,
    /// so parallel wrong guesses cannot all pass the check before any of them is recorded.
    public func beginDeletionAttempt(accountID: String, at: Date) throws -> Int64 {
        guard let row = try select("""
            INSERT INTO \(table: .deletionAttempts) (account_ref, started_at) VALUES (\(accountID), \(at)) RETURNING id
            """, from: .deletionAttempts, .integer).first
        else { throw LifecycleError(.internalError, "recording a deletion attempt returned no id") }
        return try row.integer(0)
    }

    public func endDeletionAttempt(_ attempt: Int64) throws {
        try change("DELETE FROM \(table: .deletionAttempts) WHERE id = \(attempt)")
    }

    /// When the attempts still running for the account (or abandoned by a crash) started, since `since`.
    public func deletionAttemptsInFlight(accountID: String, since: Date) throws -> [Date] {
        try select("""
            SELECT started_at FROM \(table: .deletionAttempts) WHERE account_ref = \(accountID) AND started_at >= \(since) ORDER BY started_at
            """, from: .deletionAttempts, .timestamp).map { try $0.date(0) }
    }

    /// Accounts whose purge is due (pendingDeletion or an interrupted purging, `purge_after <= now`),
    /// in id order after `after`.
    public func accountsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge] {
        try select("""
            SELECT id, state, purge_after FROM \(table: .accounts)
            WHERE state IN ('pendingDeletion', 'purging') AND purge_after <= \(now) AND id\(byteOrder: ()) > \(after ?? "")
            ORDER BY id\(byteOrder: ()) LIMIT \(limit)
            """, from: .accounts, .text, .text, .timestamp
        ).map { DuePurge(accountID: try $0.text(0), state: try $0.state(1), purgeAfter: try $0.optionalDate(2)) }
    }

    /// Lifecycle's own rows about the account, which go with it: its export records and
    /// the messages sent about them, by table (`exports`, `outbox`, zero included, so that
    /// receipts stay comparable with those of releases that listed both in the data map).
    /// They are not in the data map: they are lifecycle's state, not the app's. The audit
    /// trail stays; the purge's own bookkeeping goes as each purge ends.
    public func lifecycleRowCounts(accountID: String) throws -> [String: Int] {
        let row = try select("""
            SELECT (SELECT COUNT(*) FROM \(table: .exports) WHERE account_id = \(accountID)),
                   (SELECT COUNT(*) FROM \(table: .outbox) WHERE account_id = \(accountID))
            """, from: .exports, .integer, .integer).first
        return ["exports": Int(try row?.integer(0) ?? 0), "outbox": Int(try row?.integer(1) ?? 0)]
    }

    /// Deletes those rows; returns how many per table.
    public func deleteLifecycleRows(accountID: String) throws -> [String: Int] {
        let exports = try change("DELETE FROM \(table: .exports) WHERE account_id = \(accountID)")
        let outbox = try change("DELETE FROM \(table: .outbox) WHERE account_id = \(accountID)")
        // A part deletion that died or was cancelled keeps its recorded keys while it may be
        // retried; once the account is purged there is nothing left for it to erase.
        let recorded = try change("""
            DELETE FROM \(table: .partDeletionRows) WHERE job_id IN (SELECT id FROM \(table: .jobs) WHERE unique_key = \(DeletionJobs.partKey(accountID: accountID)))
            """)
        // Named only when there were some: the reference app's receipt lists its own tables.
        return recorded > 0 ? ["exports": exports, "outbox": outbox, "part_deletion_rows": recorded] : ["exports": exports, "outbox": outbox]
    }

    /// What the purge found when it started: rows per table (recorded by its first
    /// step) and blobs (recorded when it first lists them). The first record of each
    /// wins, so a purge resumed after a crash still reports what it removed in total.
    public func recordRowInventory(accountID: String, rows: [String: Int], at: Date) throws {
        try change("""
            INSERT INTO \(table: .purgeInventory) (account_ref, rows, started_at) VALUES (\(accountID), \(try JobJSON.encode(rows)), \(at))
            ON CONFLICT (account_ref) DO NOTHING
            """)
    }

    public func recordBlobInventory(accountID: String, count: Int, bytes: Int64) throws {
        try change("""
            UPDATE \(table: .purgeInventory) SET blob_count = \(count), blob_bytes = \(bytes)
            WHERE account_ref = \(accountID) AND blob_count IS NULL
            """)
    }

    public func purgeInventory(accountID: String) throws -> PurgeInventory? {
        try inventory("SELECT rows, blob_count, blob_bytes FROM \(table: .purgeInventory) WHERE account_ref = \(accountID)")
    }

    /// Removes the inventory and returns what it held (nil if there was none).
    public func takePurgeInventory(accountID: String) throws -> PurgeInventory? {
        try inventory("DELETE FROM \(table: .purgeInventory) WHERE account_ref = \(accountID) RETURNING rows, blob_count, blob_bytes")
    }

    private func inventory(_ sql: OwnSQL) throws -> PurgeInventory? {
        guard let row = try select(sql, from: .purgeInventory, .text, .integer, .integer).first else { return nil }
        return PurgeInventory(
            rows: try JobJSON.decode([String: Int].self, from: try row.text(0)), blobCount: try row.optionalInteger(1).map(Int.init),
            blobBytes: try row.optionalInteger(2))
    }

    /// purging → purged: the row keeps its id, state and purged_at; every personal column is emptied.
    /// False if the account was not purging.
    public func tombstone(accountID: String, purgedAt: Date) throws -> Bool {
        try execute(AccountTombstone.statement(columns: try columns(of: .accounts), dialect: dialect, accountID: accountID, purgedAt: purgedAt)) == 1
    }
}

/// The two places deletion state is kept, with the same columns: the reference app's
/// `accounts` rows (keyed by `id`) and lifecycle's records of an app's accounts
/// (`subject_key`).
enum DeletionStateRows {
    case accounts, subjects

    var table: OwnTable { self == .accounts ? .accounts : .subjects }
    var key: OwnSQL { self == .accounts ? "id" : "subject_key" }
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
