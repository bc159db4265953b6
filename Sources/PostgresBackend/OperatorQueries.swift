import Foundation
import Lifecycle
import PostgresNIO

extension PostgresTransaction: HoldTransaction {
    public func placeHold(_ hold: AccountHold) throws {
        try execute("""
            INSERT INTO lifecycle.holds (subject_key, reason, held_by, held_at, until)
            VALUES (\(hold.account), \(hold.reason), \(hold.heldBy), \(hold.heldAt), \(hold.until))
            """)
    }

    public func openHold(key: String) throws -> AccountHold? {
        try query("SELECT * FROM lifecycle.holds WHERE subject_key = \(key) AND released_at IS NULL").first.map(Self.hold)
    }

    public func releaseHold(key: String, by actor: String, at: Date) throws -> AccountHold? {
        try query("""
            UPDATE lifecycle.holds SET released_at = \(at), released_by = \(actor)
            WHERE subject_key = \(key) AND released_at IS NULL RETURNING *
            """).first.map(Self.hold)
    }

    public func holds(key: String) throws -> [AccountHold] {
        try query("SELECT * FROM lifecycle.holds WHERE subject_key = \(key) ORDER BY held_at, id").map(Self.hold)
    }

    public func heldKeys(_ keys: [String], now: Date) throws -> Set<ExactText> {
        guard !keys.isEmpty else { return [] }
        return Set(try query("""
            SELECT subject_key FROM lifecycle.holds
            WHERE released_at IS NULL AND (until IS NULL OR until > \(now)) AND subject_key = ANY(\(keys))
            """).map { ExactText(try $0.decode(String.self)) })
    }

    private static func hold(_ row: PostgresRow) throws -> AccountHold {
        let c = Columns(row)
        return AccountHold(
            account: try c.text("subject_key"), reason: try c.text("reason"), heldBy: try c.text("held_by"), heldAt: try c.date("held_at"),
            until: try c.optionalDate("until"), releasedAt: try c.optionalDate("released_at"), releasedBy: try c.optionalText("released_by"))
    }
}

extension PostgresTransaction: LookupDigestTransaction {
    public func lookupSalt() throws -> String {
        guard let salt = try query("SELECT value FROM lifecycle.settings WHERE name = 'lookup_salt'").first?.decode(String.self) else {
            throw PostgresStoreError.migration("the installation has no lookup_salt in lifecycle.settings; run `lifecycle migrate`")
        }
        return salt
    }

    public func recordLookupDigests(_ digests: [String], key: String) throws {
        try execute("""
            INSERT INTO lifecycle.lookup_digests (digest, subject_key) SELECT d, \(key) FROM unnest(\(digests)::text[]) AS d
            ON CONFLICT DO NOTHING
            """)
    }

    public func subjectKeys(lookupDigest: String) throws -> [String] {
        try query("SELECT subject_key FROM lifecycle.lookup_digests WHERE digest = \(lookupDigest) ORDER BY subject_key").map { try $0.decode(String.self) }
    }
}

extension PostgresTransaction: OverviewTransaction {
    public func openHolds(limit: Int) throws -> [AccountHold] {
        try query("SELECT * FROM lifecycle.holds WHERE released_at IS NULL ORDER BY held_at DESC, id DESC LIMIT \(limit)").map(Self.hold)
    }

    public func latestAuditEvents(action: String, limit: Int) throws -> [AuditEvent] {
        try query("SELECT * FROM lifecycle.audit_events WHERE action = \(action) ORDER BY id DESC LIMIT \(limit)").map { row in
            let c = Columns(row)
            return AuditEvent(
                id: Int64(try c.int("id")), at: try c.date("at"), actor: try c.text("actor"), action: try c.text("action"),
                accountID: try c.optionalText("account_id"), outcome: try c.text("outcome"), detail: try c.optionalText("detail"))
        }
    }

    public func exportVolume() throws -> [ExportVolume] {
        try query("SELECT state, COUNT(*)::int8, COALESCE(SUM(byte_size), 0)::int8 FROM lifecycle.exports GROUP BY state ORDER BY state").map { row in
            let (state, count, bytes) = try row.decode((String, Int64, Int64).self)
            return ExportVolume(state: state, count: Int(count), bytes: bytes)
        }
    }
}
