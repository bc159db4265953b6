import Foundation
import GRDB
import Lifecycle

extension SQLiteTransaction: HoldTransaction {
    public func placeHold(_ hold: AccountHold) throws {
        try db.execute(
            sql: "INSERT INTO lifecycle_holds (subject_key, reason, held_by, held_at, until) VALUES (?, ?, ?, ?, ?)",
            arguments: [hold.account, hold.reason, hold.heldBy, hold.heldAt, hold.until])
    }

    public func openHold(key: String) throws -> AccountHold? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM lifecycle_holds WHERE subject_key = ? AND released_at IS NULL"), arguments: [key]
        ).map(Self.hold)
    }

    public func releaseHold(key: String, by actor: String, at: Date) throws -> AccountHold? {
        guard var hold = try openHold(key: key) else { return nil }
        try db.execute(
            sql: "UPDATE lifecycle_holds SET released_at = ?, released_by = ? WHERE subject_key = ? AND released_at IS NULL",
            arguments: [at, actor, key])
        hold.releasedAt = at
        hold.releasedBy = actor
        return hold
    }

    public func holds(key: String) throws -> [AccountHold] {
        // Every purge's receipt reads them: prepared once per connection.
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT id, subject_key, reason, held_by, held_at, until, released_at, released_by FROM lifecycle_holds
            WHERE subject_key = ? ORDER BY held_at, id
            """), arguments: [key]).map(Self.hold)
    }

    public func heldKeys(_ keys: [String], now: Date) throws -> Set<ExactText> {
        guard !keys.isEmpty else { return [] }
        // Most nights nobody is held: one indexed look at the open holds, not one per key.
        let open = try Row.fetchAll(
            db.cachedStatement(sql: "SELECT subject_key, until FROM lifecycle_holds WHERE released_at IS NULL"))
        let wanted = Set(keys.map(ExactText.init))
        return Set(try open.compactMap { row -> ExactText? in
            let r = CheckedRow(row, table: "lifecycle_holds", key: "subject_key")
            let key = ExactText(try r("subject_key") as String)
            let until: Date? = try r("until")
            return wanted.contains(key) && (until.map { $0 > now } ?? true) ? key : nil
        })
    }

    private static func hold(_ row: Row) throws -> AccountHold {
        let r = CheckedRow(row, table: "lifecycle_holds", key: "id")
        return AccountHold(
            account: try r("subject_key"), reason: try r("reason"), heldBy: try r("held_by"), heldAt: try r("held_at"), until: try r("until"),
            releasedAt: try r("released_at"), releasedBy: try r("released_by"))
    }
}

extension SQLiteTransaction: LookupDigestTransaction {
    public func lookupSalt() throws -> String {
        guard let salt = try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM lifecycle_settings WHERE name = 'lookup_salt'")) else {
            throw SQLiteStoreError(message: "the installation has no lookup_salt in lifecycle_settings; run `lifecycle migrate`")
        }
        return salt
    }

    public func recordLookupDigests(_ digests: [String], key: String) throws {
        let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO lifecycle_lookup_digests (digest, subject_key) VALUES (?, ?)")
        for digest in digests { try insert.execute(arguments: [digest, key]) }
    }

    public func subjectKeys(lookupDigest: String) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT subject_key FROM lifecycle_lookup_digests WHERE digest = ? ORDER BY subject_key", arguments: [lookupDigest])
    }
}

extension SQLiteTransaction: OverviewTransaction {
    public func openHolds(limit: Int) throws -> [AccountHold] {
        try Row.fetchAll(
            db, sql: "SELECT * FROM lifecycle_holds WHERE released_at IS NULL ORDER BY held_at DESC, id DESC LIMIT ?", arguments: [limit]
        ).map(Self.hold)
    }

    public func latestAuditEvents(action: String, limit: Int) throws -> [AuditEvent] {
        try Row.fetchAll(db, sql: "SELECT * FROM lifecycle_audit_events WHERE action = ? ORDER BY id DESC LIMIT ?", arguments: [action, limit])
            .map(AuditEvent.init(row:))
    }

    public func exportVolume() throws -> [ExportVolume] {
        try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS n, COALESCE(SUM(byte_size), 0) AS bytes FROM lifecycle_exports GROUP BY state ORDER BY state")
            .map {
                let r = CheckedRow($0, table: "lifecycle_exports", key: "state")
                return ExportVolume(state: try r("state"), count: try r("n"), bytes: try r("bytes"))
            }
    }
}
