import Foundation
import GRDB
import JobRunner
import Lifecycle

extension SQLiteTransaction: DeletionTransaction {
    // Each state change is one conditional UPDATE inside the caller's IMMEDIATE
    // transaction: SQLite's write lock is the "lock" the purge re-checks under.

    public func markPendingDeletion(accountID: String, requestedAt: Date, purgeAfter: Date) throws -> Bool {
        try db.cachedStatement(sql: """
                UPDATE accounts SET state = 'pendingDeletion', deletion_requested_at = ?, purge_after = ?, updated_at = ?
                WHERE id = ? AND state = 'active'
                """).execute(arguments: [requestedAt, purgeAfter, requestedAt, accountID])
        return db.changesCount == 1
    }

    public func movePurgeDate(accountID: String, purgeAfter: Date, now: Date) throws -> Bool {
        try db.cachedStatement(sql: "UPDATE accounts SET purge_after = ?, updated_at = ? WHERE id = ? AND state = 'pendingDeletion'").execute(arguments: [purgeAfter, now, accountID])
        return db.changesCount == 1
    }

    public func restoreAccount(accountID: String, now: Date) throws -> Bool {
        try db.cachedStatement(sql: """
                UPDATE accounts SET state = 'active', deletion_requested_at = NULL, purge_after = NULL, updated_at = ?
                WHERE id = ? AND state = 'pendingDeletion' AND purge_after > ?
                """).execute(arguments: [now, accountID, now])
        return db.changesCount == 1
    }

    public func beginPurge(accountID: String, now: Date) throws -> Bool {
        try db.cachedStatement(sql: """
                UPDATE accounts SET state = 'purging', updated_at = ?
                WHERE id = ? AND state = 'pendingDeletion' AND purge_after IS NOT NULL AND purge_after <= ?
                """).execute(arguments: [now, accountID, now])
        return db.changesCount == 1
    }

    public func revokeSessions(accountID: String, at: Date) throws -> Int {
        try db.cachedStatement(sql: "UPDATE sessions SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL").execute(arguments: [at, accountID])
        return db.changesCount
    }

    public func setPasswordHash(accountID: String, hash: String, now: Date) throws {
        try db.cachedStatement(sql: "UPDATE accounts SET password_hash = ?, updated_at = ? WHERE id = ?").execute(arguments: [hash, now, accountID])
    }

    public func auditTimes(accountID: String, action: String, outcome: String, since: Date) throws -> [Date] {
        try Date.fetchAll(
            db,
            sql: "SELECT at FROM lifecycle_audit_events WHERE account_id = ? AND at >= ? AND action = ? AND outcome = ? ORDER BY at",
            arguments: [accountID, since, action, outcome])
    }

    public func beginDeletionAttempt(accountID: String, at: Date) throws -> Int64 {
        try db.cachedStatement(sql: "INSERT INTO lifecycle_deletion_attempts (account_ref, started_at) VALUES (?, ?)").execute(arguments: [accountID, at])
        return db.lastInsertedRowID
    }

    public func endDeletionAttempt(_ attempt: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM lifecycle_deletion_attempts WHERE id = ?").execute(arguments: [attempt])
    }

    public func deletionAttemptsInFlight(accountID: String, since: Date) throws -> [Date] {
        try Date.fetchAll(
            db.cachedStatement(sql: "SELECT started_at FROM lifecycle_deletion_attempts WHERE account_ref = ? AND started_at >= ? ORDER BY started_at"),
            arguments: [accountID, since])
    }

    public func accountsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT id, state, purge_after FROM accounts
                WHERE state IN ('pendingDeletion', 'purging') AND purge_after <= ? AND id > ?
                ORDER BY id LIMIT ?
                """,
            arguments: [now.stored, after ?? "", limit]
        ).map {
            let r = CheckedRow($0, table: "accounts", key: "id")
            return DuePurge(accountID: try r("id"), state: try r.oneOf("state"), purgeAfter: try r("purge_after"))
        }
    }

    public func lifecycleRowCounts(accountID: String) throws -> [String: Int] {
        let row = try Row.fetchOne(
            db.cachedStatement(sql: """
                SELECT (SELECT COUNT(*) FROM lifecycle_exports WHERE account_id = ?1), (SELECT COUNT(*) FROM lifecycle_outbox WHERE account_id = ?1)
                """),
            arguments: [accountID])
        return ["exports": row?[0] ?? 0, "outbox": row?[1] ?? 0]
    }

    public func deleteLifecycleRows(accountID: String) throws -> [String: Int] {
        try db.cachedStatement(sql: "DELETE FROM lifecycle_exports WHERE account_id = ?").execute(arguments: [accountID])
        let exports = db.changesCount
        try db.cachedStatement(sql: "DELETE FROM lifecycle_outbox WHERE account_id = ?").execute(arguments: [accountID])
        let outbox = db.changesCount
        // A part deletion that died or was cancelled keeps its recorded keys while it may be
        // retried; once the account is purged there is nothing left for it to erase.
        try db.cachedStatement(sql: """
            DELETE FROM lifecycle_part_deletion_rows WHERE job_id IN (SELECT id FROM lifecycle_jobs WHERE unique_key = ?)
            """).execute(arguments: [DeletionJobs.partKey(accountID: accountID)])
        // Named only when there were some: the reference app's receipt lists its own tables.
        let recorded = db.changesCount
        return recorded > 0 ? ["exports": exports, "outbox": outbox, "part_deletion_rows": recorded] : ["exports": exports, "outbox": outbox]
    }

    public func recordRowInventory(accountID: String, rows: [String: Int], at: Date) throws {
        try db.cachedStatement(sql: "INSERT INTO lifecycle_purge_inventory (account_ref, rows, started_at) VALUES (?, ?, ?) ON CONFLICT(account_ref) DO NOTHING").execute(arguments: [accountID, try JobJSON.encode(rows), at.stored])
    }

    public func recordBlobInventory(accountID: String, count: Int, bytes: Int64) throws {
        try db.cachedStatement(sql: "UPDATE lifecycle_purge_inventory SET blob_count = ?, blob_bytes = ? WHERE account_ref = ? AND blob_count IS NULL").execute(arguments: [count, bytes, accountID])
    }

    public func purgeInventory(accountID: String) throws -> PurgeInventory? {
        try inventory(Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM lifecycle_purge_inventory WHERE account_ref = ?"), arguments: [accountID]))
    }

    public func takePurgeInventory(accountID: String) throws -> PurgeInventory? {
        try inventory(Row.fetchOne(
            db.cachedStatement(sql: "DELETE FROM lifecycle_purge_inventory WHERE account_ref = ? RETURNING account_ref, rows, blob_count, blob_bytes"),
            arguments: [accountID]))
    }

    private func inventory(_ row: Row?) throws -> PurgeInventory? {
        guard let row else { return nil }
        let r = CheckedRow(row, table: "lifecycle_purge_inventory", key: "account_ref")
        return PurgeInventory(
            rows: try JobJSON.decode([String: Int].self, from: try r("rows") as String), blobCount: try r("blob_count"), blobBytes: try r("blob_bytes"))
    }

    public func tombstone(accountID: String, purgedAt: Date) throws -> Bool {
        let columns = try db.columns(in: "accounts").map { column in
            SchemaCatalog.Column(
                name: column.name, declaredType: column.type, kind: SQLiteStore.kind(ofDeclared: column.type), isNotNull: column.isNotNull)
        }
        return try execute(AccountTombstone.statement(columns: columns, dialect: .sqlite, accountID: accountID, purgedAt: purgedAt)) == 1
    }
}

enum DeletionSchema {
    static func register(in migrator: inout Migrator) {
        migrator.registerMigration("v2-deletion") { db in
            // No account_id column on purpose: it is the purge's own bookkeeping, not
            // account data, and it is removed when the tombstone is written.
            try db.execute(sql: """
                CREATE TABLE purge_inventory (
                    account_ref TEXT PRIMARY KEY,
                    rows TEXT NOT NULL,
                    blob_count INTEGER,
                    blob_bytes INTEGER,
                    started_at DATETIME NOT NULL
                ) WITHOUT ROWID;
                """)
        }
    }

    static func registerAttempts(in migrator: inout Migrator) {
        migrator.registerMigration("v3-deletion-attempts") { db in
            // account_ref, not account_id: ids and times only, removed as each check ends.
            try db.execute(sql: """
                CREATE TABLE deletion_attempts (
                    id INTEGER PRIMARY KEY,
                    account_ref TEXT NOT NULL,
                    started_at DATETIME NOT NULL
                );
                CREATE INDEX deletion_attempts_by_account ON deletion_attempts (account_ref, started_at);
                """)
        }
    }
}
