import Foundation
import JobRunner

/// What deletion, restore and purge read and write inside one database transaction,
/// besides the account's deletion state (SubjectTransaction.swift).
extension OwnStateTransaction {
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
        // Named only when there were some: a receipt lists the tables a purge found rows in.
        return recorded > 0 ? ["exports": exports, "outbox": outbox, "part_deletion_rows": recorded] : ["exports": exports, "outbox": outbox]
    }

    /// What a purge recorded by an earlier release found when it started: rows per table
    /// and blobs. A purge of this release counts as it goes (`addPurgeProgress`) and only
    /// takes such a record over, so a purge resumed across an upgrade still reports what it
    /// removed in total.
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
