import Foundation
import GRDB
import JobRunner
import Lifecycle

extension SQLiteStore {
    public var dialect: SQLDialect { .sqlite }
}

extension SQLiteTransaction: GeneratedSQLTransaction {
    public func rows(_ statement: SQLStatement) throws -> [[SQLValue]] {
        try Row.fetchAll(db.cachedStatement(sql: statement.sql), arguments: Self.arguments(statement.bindings)).map { row in
            row.databaseValues.enumerated().map { index, value in
                Self.value(value, as: index < statement.resultKinds.count ? statement.resultKinds[index] : .other)
            }
        }
    }

    @discardableResult
    public func execute(_ statement: SQLStatement) throws -> Int {
        try db.cachedStatement(sql: statement.sql).execute(arguments: Self.arguments(statement.bindings))
        return db.changesCount
    }

    /// The export's own reader (`readExportRows`), memory-mapped as the reference export reads.
    public func exportPage(_ statement: SQLStatement, columns: Int, limit: Int) throws -> ExportPage {
        try db.execute(sql: "PRAGMA mmap_size = \(Self.exportMapBytes)")
        let prepared = try db.cachedStatement(sql: statement.sql)
        try prepared.setArguments(Self.arguments(statement.bindings))
        var values: [ExportValue] = []
        var rows = 0
        var last: [SQLValue]?
        try Self.readExportRows(prepared, columns: columns, kinds: statement.resultKinds, into: &values) { raw, index in
            rows = index + 1
            guard rows == limit else { return }
            // As stored (`.other`), an exported timestamp column too: bound back unchanged, it
            // compares as the rows do whatever text form the app stores its dates in.
            last = statement.cursorColumns.map { column in
                Self.value(DatabaseValue(sqliteStatement: raw, index: Int32(column)), as: .other)
            }
        }
        return ExportPage(values: values, rows: rows, last: last)
    }

    static func arguments(_ values: [SQLValue]) -> StatementArguments {
        StatementArguments(values.map { value -> (any DatabaseValueConvertible)? in
            switch value {
            case .null: nil
            case .integer(let number): number
            case .real(let number): number
            case .text(let text): text
            case .boolean(let flag): flag
            case .timestamp(let date): date.stored
            case .bytes(let data): data
            }
        })
    }

    /// SQLite stores what it is given; the declared kind says how to read it back.
    static func value(_ value: DatabaseValue, as kind: SchemaCatalog.ColumnKind) -> SQLValue {
        switch value.storage {
        case .null:
            return .null
        case .int64(let number):
            switch kind {
            case .boolean: return .boolean(number != 0)
            case .timestamp: return Date.fromDatabaseValue(value).map(SQLValue.timestamp) ?? .integer(number)
            default: return .integer(number)
            }
        case .double(let number):
            return kind == .timestamp ? (Date.fromDatabaseValue(value).map(SQLValue.timestamp) ?? .real(number)) : .real(number)
        case .string(let text):
            if kind == .timestamp, let date = Date.fromDatabaseValue(value) ?? ISO8601.parse(text) { return .timestamp(date) }
            return .text(text)
        case .blob(let data):
            return .bytes(data)
        }
    }
}

extension SQLiteTransaction: SubjectTransaction {
    // Lifecycle's record of an app account: a row appears the first time lifecycle has
    // something to keep (a deletion request); no row means active.

    public func lockSubject(key: String, now: Date) throws -> SubjectRecord {
        // SQLite's single writer already serialises write transactions; the insert makes
        // the record exist for the compare-and-set updates that follow.
        try db.cachedStatement(sql: """
            INSERT INTO lifecycle_subjects (subject_key, state, updated_at) VALUES (?, 'active', ?)
            ON CONFLICT (subject_key) DO NOTHING
            """).execute(arguments: [key, now])
        return try subject(key: key) ?? SubjectRecord(key: key, state: .active)
    }

    public func subject(key: String) throws -> SubjectRecord? {
        try Row.fetchOne(db.cachedStatement(sql: """
            SELECT subject_key, state, deletion_requested_at, purge_after, purged_at FROM lifecycle_subjects WHERE subject_key = ?
            """), arguments: [key]).map(Self.subjectRecord)
    }

    static func subjectRecord(_ row: Row) throws -> SubjectRecord {
        let r = CheckedRow(row, table: "lifecycle_subjects", key: "subject_key")
        return SubjectRecord(
            key: try r("subject_key"), state: try r.oneOf("state"),
            deletionRequestedAt: try r("deletion_requested_at"), purgeAfter: try r("purge_after"), purgedAt: try r("purged_at"))
    }

    public func markSubjectPending(key: String, requestedAt: Date, purgeAfter: Date) throws -> Bool {
        try db.cachedStatement(sql: """
            INSERT INTO lifecycle_subjects (subject_key, state, deletion_requested_at, purge_after, updated_at)
            VALUES (?, 'pendingDeletion', ?, ?, ?)
            ON CONFLICT (subject_key) DO UPDATE SET state = 'pendingDeletion', deletion_requested_at = excluded.deletion_requested_at,
                purge_after = excluded.purge_after, updated_at = excluded.updated_at
            WHERE lifecycle_subjects.state = 'active'
            """).execute(arguments: [key, requestedAt, purgeAfter, requestedAt])
        return db.changesCount == 1
    }

    public func moveSubjectPurgeDate(key: String, purgeAfter: Date) throws -> Bool {
        try db.cachedStatement(sql: """
            UPDATE lifecycle_subjects SET purge_after = ?, updated_at = ? WHERE subject_key = ? AND state = 'pendingDeletion'
            """).execute(arguments: [purgeAfter, purgeAfter, key])
        return db.changesCount == 1
    }

    public func restoreSubject(key: String, now: Date) throws -> Bool {
        try db.cachedStatement(sql: """
            UPDATE lifecycle_subjects SET state = 'active', deletion_requested_at = NULL, purge_after = NULL, updated_at = ?
            WHERE subject_key = ? AND state = 'pendingDeletion' AND purge_after > ?
            """).execute(arguments: [now, key, now])
        return db.changesCount == 1
    }

    public func beginSubjectPurge(key: String, now: Date) throws -> Bool {
        try db.cachedStatement(sql: """
            UPDATE lifecycle_subjects SET state = 'purging', updated_at = ?
            WHERE subject_key = ? AND state = 'pendingDeletion' AND purge_after IS NOT NULL AND purge_after <= ?
            """).execute(arguments: [now, key, now])
        return db.changesCount == 1
    }

    public func markSubjectPurged(key: String, at: Date) throws -> Bool {
        try db.cachedStatement(sql: """
            UPDATE lifecycle_subjects SET state = 'purged', purged_at = ?, updated_at = ? WHERE subject_key = ? AND state = 'purging'
            """).execute(arguments: [at, at, key])
        return db.changesCount == 1
    }

    public func subjectsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT subject_key, state, purge_after FROM lifecycle_subjects
            WHERE state IN ('pendingDeletion', 'purging') AND purge_after <= ? AND subject_key > ?
            ORDER BY subject_key LIMIT ?
            """), arguments: [now, after ?? "", limit]
        ).map {
            let r = CheckedRow($0, table: "lifecycle_subjects", key: "subject_key")
            return DuePurge(accountID: try r("subject_key"), state: try r.oneOf("state"), purgeAfter: try r("purge_after"))
        }
    }

    public func addPurgeProgress(key: String, table: String, deleted: Int, masked: Int) throws {
        guard deleted > 0 || masked > 0 else { return }
        try db.cachedStatement(sql: """
            INSERT INTO lifecycle_purge_progress (subject_key, table_name, deleted, masked) VALUES (?, ?, ?, ?)
            ON CONFLICT (subject_key, table_name) DO UPDATE SET deleted = deleted + excluded.deleted, masked = masked + excluded.masked
            """).execute(arguments: [key, table, deleted, masked])
    }

    public func purgeProgress(key: String) throws -> [String: PurgeCounts] {
        var counts: [String: PurgeCounts] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT table_name, deleted, masked FROM lifecycle_purge_progress WHERE subject_key = ?
            """), arguments: [key]) {
            let r = CheckedRow(row, table: "lifecycle_purge_progress", key: "table_name")
            counts[try r("table_name")] = PurgeCounts(deleted: try r("deleted"), masked: try r("masked"))
        }
        return counts
    }

    public func takePurgeProgress(key: String) throws -> [String: PurgeCounts] {
        let counts = try purgeProgress(key: key)
        try db.cachedStatement(sql: "DELETE FROM lifecycle_purge_progress WHERE subject_key = ?").execute(arguments: [key])
        return counts
    }

    public func recordPurgeFiles(key: String, files: [String]) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO lifecycle_purge_files (subject_key, blob_key, state) VALUES (?, ?, 'pending')
            ON CONFLICT (subject_key, blob_key) DO UPDATE SET state = 'pending'
            """)
        for file in files { try statement.execute(arguments: [key, file]) }
    }

    public func recordListedPurgeFiles(key: String, files: [String]) throws -> Int {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO lifecycle_purge_files (subject_key, blob_key, state) VALUES (?, ?, 'pending')
            ON CONFLICT (subject_key, blob_key) DO NOTHING
            """)
        var added = 0
        for file in files {
            try statement.execute(arguments: [key, file])
            added += db.changesCount
        }
        return added
    }

    public func pendingPurgeFiles(key: String, after: String?, limit: Int) throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: """
            SELECT blob_key FROM lifecycle_purge_files WHERE subject_key = ? AND state = 'pending' AND blob_key > ? ORDER BY blob_key LIMIT ?
            """), arguments: [key, after ?? "", limit])
    }

    public func settlePurgeFiles(key: String, files: [PurgeFile]) throws {
        let statement = try db.cachedStatement(sql: "UPDATE lifecycle_purge_files SET state = ?, bytes = MAX(bytes, ?) WHERE subject_key = ? AND blob_key = ?")
        for file in files { try statement.execute(arguments: [file.state.rawValue, file.bytes, key, file.key]) }
    }

    public func takePurgeFiles(key: String) throws -> PurgeFileTotals {
        var totals = PurgeFileTotals()
        for row in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT state, COUNT(*), COALESCE(SUM(bytes), 0) FROM lifecycle_purge_files WHERE subject_key = ? GROUP BY state
            """), arguments: [key]) {
            let (state, count, bytes): (String, Int, Int64) = (row[0], row[1], row[2])
            switch state {
            case "deleted": (totals.deleted, totals.bytes) = (count, bytes)
            case "kept": totals.kept = count
            default: totals.pending += count
            }
        }
        try db.cachedStatement(sql: "DELETE FROM lifecycle_purge_files WHERE subject_key = ?").execute(arguments: [key])
        return totals
    }

    public func recordGraceValues(key: String, values: [GraceValue]) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO lifecycle_grace_values (subject_key, table_name, row_key, column_name, value) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT DO NOTHING
            """)
        for value in values { try statement.execute(arguments: [key, value.table, value.row, value.column, value.value]) }
    }

    public func takeGraceValues(key: String) throws -> [GraceValue] {
        try Row.fetchAll(db.cachedStatement(sql: """
            DELETE FROM lifecycle_grace_values WHERE subject_key = ? RETURNING table_name, row_key, column_name, value
            """), arguments: [key]).map { GraceValue(table: $0[0], row: $0[1], column: $0[2], value: $0[3]) }
    }

}
