import Foundation

/// Lifecycle's own record of an account of an app's database: its deletion state, keyed
/// by the subject's key. The app's tables hold no lifecycle column; an account lifecycle
/// has never recorded anything about is active.
public struct SubjectRecord: Sendable, Codable, Equatable {
    public var key: String
    public var state: AccountState
    public var deletionRequestedAt: Date?
    public var purgeAfter: Date?
    public var purgedAt: Date?

    public init(key: String, state: AccountState, deletionRequestedAt: Date? = nil, purgeAfter: Date? = nil, purgedAt: Date? = nil) {
        self.key = key
        self.state = state
        self.deletionRequestedAt = deletionRequestedAt
        self.purgeAfter = purgeAfter
        self.purgedAt = purgedAt
    }

    enum CodingKeys: String, CodingKey {
        case key, state, deletionRequestedAt = "deletion_requested_at", purgeAfter = "purge_after", purgedAt = "purged_at"
    }
}

/// The deletion states of an app's accounts, in lifecycle's namespace. Every change is a
/// compare-and-set that returns whether the account was in the state it starts from, so
/// a restore and a purge (or two purge workers) can never both win: one conditional
/// statement, which PostgreSQL under READ COMMITTED re-checks against a row a concurrent
/// change committed, and SQLite's single writer runs one at a time. A record appears the
/// first time lifecycle has something to keep (a deletion request); no record means active.
extension OwnStateTransaction {
    /// Takes the account's row lock for the rest of a write transaction (creating its
    /// record, active, if there is none): deletion attempts of one account take turns.
    public func lockSubject(key: String, now: Date) throws -> SubjectRecord {
        try change("""
            INSERT INTO \(table: .subjects) (subject_key, state, updated_at) VALUES (\(key), 'active', \(now))
            ON CONFLICT (subject_key) DO NOTHING
            """)
        return try subjectRecord(key: key, locking: true) ?? SubjectRecord(key: key, state: .active)
    }

    /// nil when lifecycle holds nothing about the account (it is active).
    public func subject(key: String) throws -> SubjectRecord? {
        try subjectRecord(key: key, locking: false)
    }

    /// Where the account stands in deletion, by lifecycle's record: active when there is none.
    public func deletionState(key: String) throws -> AccountState {
        try subject(key: key)?.state ?? .active
    }

    private func subjectRecord(key: String, locking: Bool) throws -> SubjectRecord? {
        let lock: OwnSQL = locking ? "\(rowLock: ())" : ""
        return try select("""
            SELECT subject_key, state, deletion_requested_at, purge_after, purged_at FROM \(table: .subjects)
            WHERE subject_key = \(key)\(generated: lock)
            """, from: .subjects, .text, .text, .timestamp, .timestamp, .timestamp
        ).first.map { row in
            SubjectRecord(
                key: try row.text(0), state: try row.state(1), deletionRequestedAt: try row.optionalDate(2),
                purgeAfter: try row.optionalDate(3), purgedAt: try row.optionalDate(4))
        }
    }

    /// active → pendingDeletion.
    public func markSubjectPending(key: String, requestedAt: Date, purgeAfter: Date) throws -> Bool {
        try change("""
            INSERT INTO \(table: .subjects) AS s (subject_key, state, deletion_requested_at, purge_after, updated_at)
            VALUES (\(key), 'pendingDeletion', \(requestedAt), \(purgeAfter), \(requestedAt))
            ON CONFLICT (subject_key) DO UPDATE SET state = 'pendingDeletion', deletion_requested_at = excluded.deletion_requested_at,
                purge_after = excluded.purge_after, updated_at = excluded.updated_at
            WHERE s.state = 'active'
            """) == 1
    }

    /// A pending account's purge date moved (an operator's "delete now").
    public func moveSubjectPurgeDate(key: String, purgeAfter: Date) throws -> Bool {
        try change("""
            UPDATE \(table: .subjects) SET purge_after = \(purgeAfter), updated_at = \(purgeAfter)
            WHERE subject_key = \(key) AND state = 'pendingDeletion'
            """) == 1
    }

    /// pendingDeletion with `purge_after > now` → active.
    public func restoreSubject(key: String, now: Date) throws -> Bool {
        try change("""
            UPDATE \(table: .subjects) SET state = 'active', deletion_requested_at = NULL, purge_after = NULL, updated_at = \(now)
            WHERE subject_key = \(key) AND state = 'pendingDeletion' AND purge_after > \(now)
            """) == 1
    }

    /// pendingDeletion with `purge_after <= now` → purging.
    public func beginSubjectPurge(key: String, now: Date) throws -> Bool {
        try change("""
            UPDATE \(table: .subjects) SET state = 'purging', updated_at = \(now)
            WHERE subject_key = \(key) AND state = 'pendingDeletion' AND purge_after IS NOT NULL AND purge_after <= \(now)
            """) == 1
    }

    /// purging → purged.
    public func markSubjectPurged(key: String, at: Date) throws -> Bool {
        try change("""
            UPDATE \(table: .subjects) SET state = 'purged', purged_at = \(at), updated_at = \(at)
            WHERE subject_key = \(key) AND state = 'purging'
            """) == 1
    }

    /// Accounts whose purge is due (pending past their date, or an interrupted purge), in key order after `after`.
    public func subjectsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge] {
        try select("""
            SELECT subject_key, state, purge_after FROM \(table: .subjects)
            WHERE state IN ('pendingDeletion', 'purging') AND purge_after <= \(now) AND subject_key > \(after ?? "")
            ORDER BY subject_key LIMIT \(limit)
            """, from: .subjects, .text, .text, .timestamp
        ).map { DuePurge(accountID: try $0.text(0), state: try $0.state(1), purgeAfter: try $0.optionalDate(2)) }
    }

    /// Adds to what the purge has erased of one table (in the same transaction as the
    /// batch, so a purge resumed after a crash reports every row exactly once).
    public func addPurgeProgress(key: String, table: String, deleted: Int, masked: Int) throws {
        guard deleted > 0 || masked > 0 else { return }
        try change("""
            INSERT INTO \(table: .purgeProgress) AS p (subject_key, table_name, deleted, masked) VALUES (\(key), \(table), \(deleted), \(masked))
            ON CONFLICT (subject_key, table_name) DO UPDATE SET deleted = p.deleted + excluded.deleted, masked = p.masked + excluded.masked
            """)
    }

    /// Rows deleted and masked per table so far; removed with `takePurgeProgress`.
    public func purgeProgress(key: String) throws -> [String: PurgeCounts] {
        var counts: [String: PurgeCounts] = [:]
        for row in try select(
            "SELECT table_name, deleted, masked FROM \(table: .purgeProgress) WHERE subject_key = \(key)", from: .purgeProgress, .text, .integer, .integer)
        {
            counts[try row.text(0)] = PurgeCounts(deleted: Int(try row.integer(1)), masked: Int(try row.integer(2)))
        }
        return counts
    }

    public func takePurgeProgress(key: String) throws -> [String: PurgeCounts] {
        let counts = try purgeProgress(key: key)
        try change("DELETE FROM \(table: .purgeProgress) WHERE subject_key = \(key)")
        return counts
    }

    /// Records files a purge deletes once nothing names them, pending: in the transaction
    /// that erases the rows naming them. A file recorded again is pending again (a row
    /// written since named it, so whether it is still shared is looked at anew).
    public func recordPurgeFiles(key: String, files: [String]) throws {
        for batch in Self.distinctBatches(files) {
            try change("""
                INSERT INTO \(table: .purgeFiles) (subject_key, blob_key, state) VALUES \(generated: OwnSQL.rows(batch) { [.text(key), .text($0), .text("pending")] })
                ON CONFLICT (subject_key, blob_key) DO UPDATE SET state = 'pending'
                """)
        }
    }

    /// Records files found by listing the user's folders (`blob_prefixes:`), pending; one
    /// already recorded (named by an erased row, or listed by an earlier attempt) stays as it
    /// is. Returns how many were new, so each is counted once however often the purge runs.
    public func recordListedPurgeFiles(key: String, files: [String]) throws -> Int {
        var added = 0
        for batch in Self.distinctBatches(files) {
            added += try select("""
                INSERT INTO \(table: .purgeFiles) (subject_key, blob_key, state) VALUES \(generated: OwnSQL.rows(batch) { [.text(key), .text($0), .text("pending")] })
                ON CONFLICT (subject_key, blob_key) DO NOTHING RETURNING 1
                """, from: .purgeFiles, .integer).count
        }
        return added
    }

    /// Pending files in key order after `after`.
    public func pendingPurgeFiles(key: String, after: String?, limit: Int) throws -> [String] {
        try select("""
            SELECT blob_key FROM \(table: .purgeFiles) WHERE subject_key = \(key) AND state = 'pending' AND blob_key > \(after ?? "")
            ORDER BY blob_key LIMIT \(limit)
            """, from: .purgeFiles, .text).map { try $0.text(0) }
    }

    /// Settles files: deleted (with their size; a size found before is kept) or kept
    /// (another row still names them).
    public func settlePurgeFiles(key: String, files: [PurgeFile]) throws {
        for start in stride(from: 0, to: files.count, by: Self.rowsPerStatement) {
            let batch = files[start..<min(files.count, start + Self.rowsPerStatement)]
            try change("""
                WITH settled (blob_key, state, bytes) AS (VALUES \(generated: OwnSQL.rows(batch) { [.text($0.key), .text($0.state.rawValue), .integer($0.bytes)] }))
                UPDATE \(table: .purgeFiles) SET state = settled.state,
                    bytes = CASE WHEN settled.bytes > \(table: .purgeFiles).bytes THEN settled.bytes ELSE \(table: .purgeFiles).bytes END
                FROM settled WHERE \(table: .purgeFiles).subject_key = \(key) AND \(table: .purgeFiles).blob_key = settled.blob_key
                """)
        }
    }

    /// What the purge did with its files; removed with `takePurgeFiles`.
    public func takePurgeFiles(key: String) throws -> PurgeFileTotals {
        var totals = PurgeFileTotals()
        for row in try select("""
            SELECT state, COUNT(*), CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM \(table: .purgeFiles) WHERE subject_key = \(key) GROUP BY state
            """, from: .purgeFiles, .text, .integer, .integer)
        {
            let (count, bytes) = (Int(try row.integer(1)), try row.integer(2))
            switch try row.text(0) {
            case "deleted": (totals.deleted, totals.bytes) = (count, bytes)
            case "kept": totals.kept = count
            default: totals.pending += count
            }
        }
        try change("DELETE FROM \(table: .purgeFiles) WHERE subject_key = \(key)")
        return totals
    }

    /// Keeps the values `on_deletion: set:` is about to replace, for a restore to put back.
    /// A value already kept stays: the one there now is the one deletion set.
    public func recordGraceValues(key: String, values: [GraceValue]) throws {
        for start in stride(from: 0, to: values.count, by: Self.rowsPerStatement) {
            let batch = values[start..<min(values.count, start + Self.rowsPerStatement)]
            try change("""
                INSERT INTO \(table: .graceValues) (subject_key, table_name, row_key, column_name, value)
                VALUES \(generated: OwnSQL.rows(batch) { [.text(key), .text($0.table), .text($0.row), .text($0.column), $0.value.map(SQLValue.text) ?? .null] })
                ON CONFLICT DO NOTHING
                """)
        }
    }

    /// The kept values, removed: by a restore that puts them back, or a purge that starts.
    public func takeGraceValues(key: String) throws -> [GraceValue] {
        try select("""
            DELETE FROM \(table: .graceValues) WHERE subject_key = \(key) RETURNING table_name, row_key, column_name, value
            """, from: .graceValues, .text, .text, .text, .text
        ).map { GraceValue(table: try $0.text(0), row: try $0.text(1), column: try $0.text(2), value: try $0.optionalText(3)) }
    }

    /// Rows per multi-row statement: few enough that SQLite's 32,766 placeholders and each
    /// dialect's statement cache (one entry per distinct batch size) stay far away.
    static var rowsPerStatement: Int { 100 }

    /// `files` without repeats, compared as bytes (an NFC and an NFD key are two files, and
    /// one statement must not name a row twice: PostgreSQL refuses to update it twice), in batches.
    static func distinctBatches(_ files: [String]) -> [ArraySlice<String>] {
        var seen = Set<ExactText>()
        let distinct = files.filter { seen.insert(ExactText($0)).inserted }
        return stride(from: 0, to: distinct.count, by: rowsPerStatement).map { distinct[$0..<min(distinct.count, $0 + rowsPerStatement)] }
    }
}

/// One value an account's deletion request replaced in the app's database (`on_deletion:
/// set:`), as text, with the row it was in by its primary key (a JSON array of the key's
/// values as text).
public struct GraceValue: Sendable, Equatable {
    public var table: String
    public var row: String
    public var column: String
    public var value: String?

    public init(table: String, row: String, column: String, value: String?) {
        self.table = table
        self.row = row
        self.column = column
        self.value = value
    }
}

public struct PurgeFile: Sendable, Equatable {
    public enum State: String, Sendable { case deleted, kept }
    public var key: String
    public var state: State
    public var bytes: Int64

    public init(key: String, state: State, bytes: Int64) {
        self.key = key
        self.state = state
        self.bytes = bytes
    }
}

public struct PurgeFileTotals: Sendable, Equatable {
    public var deleted: Int
    public var bytes: Int64
    /// Still named by a row the purge keeps (another account's, or one kept masked).
    public var kept: Int
    /// Never settled: the purge must not end with any.
    public var pending: Int

    public init(deleted: Int = 0, bytes: Int64 = 0, kept: Int = 0, pending: Int = 0) {
        self.deleted = deleted
        self.bytes = bytes
        self.kept = kept
        self.pending = pending
    }
}

public struct PurgeCounts: Sendable, Codable, Equatable {
    public var deleted: Int
    public var masked: Int

    public init(deleted: Int = 0, masked: Int = 0) {
        self.deleted = deleted
        self.masked = masked
    }
}
