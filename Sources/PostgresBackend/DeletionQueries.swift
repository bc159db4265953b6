import Foundation
import JobRunner
import Lifecycle
import PostgresNIO

extension PostgresTransaction: DeletionTransaction {
    // Each state change is one conditional UPDATE. Under READ COMMITTED an UPDATE
    // waits for a concurrent change to the same row and re-checks its WHERE clause
    // against the committed row: a restore and a purge racing on two machines
    // cannot both win, and the purge's "still due?" check holds the row lock.

    public func markPendingDeletion(accountID: String, requestedAt: Date, purgeAfter: Date) throws -> Bool {
        try execute("""
            UPDATE accounts SET state = 'pendingDeletion', deletion_requested_at = \(requestedAt), purge_after = \(purgeAfter),
              updated_at = \(requestedAt)
            WHERE id = \(accountID) AND state = 'active'
            """) == 1
    }

    public func movePurgeDate(accountID: String, purgeAfter: Date, now: Date) throws -> Bool {
        try execute("""
            UPDATE accounts SET purge_after = \(purgeAfter), updated_at = \(now) WHERE id = \(accountID) AND state = 'pendingDeletion'
            """) == 1
    }

    public func restoreAccount(accountID: String, now: Date) throws -> Bool {
        try execute("""
            UPDATE accounts SET state = 'active', deletion_requested_at = NULL, purge_after = NULL, updated_at = \(now)
            WHERE id = \(accountID) AND state = 'pendingDeletion' AND purge_after > \(now)
            """) == 1
    }

    public func beginPurge(accountID: String, now: Date) throws -> Bool {
        try execute("""
            UPDATE accounts SET state = 'purging', updated_at = \(now)
            WHERE id = \(accountID) AND state = 'pendingDeletion' AND purge_after IS NOT NULL AND purge_after <= \(now)
            """) == 1
    }

    public func revokeSessions(accountID: String, at: Date) throws -> Int {
        try execute("UPDATE sessions SET revoked_at = \(at) WHERE account_id = \(accountID) AND revoked_at IS NULL")
    }

    public func setPasswordHash(accountID: String, hash: String, now: Date) throws {
        try execute("UPDATE accounts SET password_hash = \(hash), updated_at = \(now) WHERE id = \(accountID)")
    }

    public func auditTimes(accountID: String, action: String, outcome: String, since: Date) throws -> [Date] {
        try query("""
            SELECT at FROM lifecycle.audit_events WHERE account_id = \(accountID) AND at >= \(since) AND action = \(action) AND outcome = \(outcome)
            ORDER BY at
            """).map { try $0.decode(Date.self) }
    }

    public func beginDeletionAttempt(accountID: String, at: Date) throws -> Int64 {
        guard let id = try query("INSERT INTO lifecycle.deletion_attempts (account_ref, started_at) VALUES (\(accountID), \(at)) RETURNING id").first else {
            throw PostgresStoreError.query("INSERT INTO lifecycle.deletion_attempts … RETURNING id returned no row", sqlState: nil)
        }
        return try id.decode(Int64.self)
    }

    public func endDeletionAttempt(_ attempt: Int64) throws {
        try execute("DELETE FROM lifecycle.deletion_attempts WHERE id = \(attempt)")
    }

    public func deletionAttemptsInFlight(accountID: String, since: Date) throws -> [Date] {
        try query("SELECT started_at FROM lifecycle.deletion_attempts WHERE account_ref = \(accountID) AND started_at >= \(since) ORDER BY started_at")
            .map { try $0.decode(Date.self) }
    }

    public func accountsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge] {
        // COLLATE "C": the same byte order as SQLite's, so paging by id agrees between backends.
        try query("""
            SELECT id, state, purge_after FROM accounts
            WHERE state IN ('pendingDeletion', 'purging') AND purge_after <= \(now) AND id COLLATE "C" > \(after ?? "")
            ORDER BY id COLLATE "C" LIMIT \(limit)
            """).map { row in
            let (id, state, purgeAfter) = try row.decode((String, String, Date?).self)
            return DuePurge(accountID: id, state: try AccountState.stored(state), purgeAfter: purgeAfter)
        }
    }

    public func lifecycleRowCounts(accountID: String) throws -> [String: Int] {
        guard let row = try query("""
            SELECT (SELECT COUNT(*) FROM lifecycle.exports WHERE account_id = \(accountID)),
                   (SELECT COUNT(*) FROM lifecycle.outbox WHERE account_id = \(accountID))
            """).first else { return ["exports": 0, "outbox": 0] }
        let (exports, outbox) = try row.decode((Int64, Int64).self)
        return ["exports": Int(exports), "outbox": Int(outbox)]
    }

    public func deleteLifecycleRows(accountID: String) throws -> [String: Int] {
        let exports = try execute("DELETE FROM lifecycle.exports WHERE account_id = \(accountID)")
        let outbox = try execute("DELETE FROM lifecycle.outbox WHERE account_id = \(accountID)")
        // See the SQLite backend: a dead or cancelled part deletion's keys outlive it until the purge.
        let recorded = try execute("""
            DELETE FROM lifecycle.part_deletion_rows WHERE job_id IN (SELECT id FROM lifecycle.jobs WHERE unique_key = \(DeletionJobs.partKey(accountID: accountID)))
            """)
        return recorded > 0 ? ["exports": exports, "outbox": outbox, "part_deletion_rows": recorded] : ["exports": exports, "outbox": outbox]
    }

    public func recordRowInventory(accountID: String, rows: [String: Int], at: Date) throws {
        try execute("""
            INSERT INTO lifecycle.purge_inventory (account_ref, rows, started_at) VALUES (\(accountID), \(try JobJSON.encode(rows)), \(at))
            ON CONFLICT (account_ref) DO NOTHING
            """)
    }

    public func recordBlobInventory(accountID: String, count: Int, bytes: Int64) throws {
        try execute("""
            UPDATE lifecycle.purge_inventory SET blob_count = \(Int32(clamping: count)), blob_bytes = \(bytes)
            WHERE account_ref = \(accountID) AND blob_count IS NULL
            """)
    }

    public func purgeInventory(accountID: String) throws -> PurgeInventory? {
        try inventory(query("SELECT rows, blob_count, blob_bytes FROM lifecycle.purge_inventory WHERE account_ref = \(accountID)").first)
    }

    public func takePurgeInventory(accountID: String) throws -> PurgeInventory? {
        try inventory(query("DELETE FROM lifecycle.purge_inventory WHERE account_ref = \(accountID) RETURNING rows, blob_count, blob_bytes").first)
    }

    private func inventory(_ row: PostgresRow?) throws -> PurgeInventory? {
        guard let row else { return nil }
        let (rows, count, bytes) = try row.decode((String, Int32?, Int64?).self)
        return PurgeInventory(rows: try JobJSON.decode([String: Int].self, from: rows), blobCount: count.map(Int.init), blobBytes: bytes)
    }

    public func tombstone(accountID: String, purgedAt: Date) throws -> Bool {
        let columns = try query("""
            SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull, t.typname::text, t.typcategory::text
            FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
            WHERE a.attrelid = 'accounts'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
            """).map { row in
            let (name, declared, notNull, typeName, category) = try row.decode((String, String, Bool, String, String).self)
            return SchemaCatalog.Column(
                name: name, declaredType: declared, kind: PostgresStore.kind(typeName: typeName, category: category), isNotNull: notNull)
        }
        return try execute(AccountTombstone.statement(columns: columns, dialect: .postgres, accountID: accountID, purgedAt: purgedAt)) == 1
    }
}
