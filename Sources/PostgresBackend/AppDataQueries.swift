import Foundation
import JobRunner
import Lifecycle
import NIOCore
import PostgresNIO

extension PostgresStore {
    public var dialect: SQLDialect { .postgres }
}

extension PostgresTransaction: GeneratedSQLTransaction {
    public func rows(_ statement: SQLStatement) throws -> [[SQLValue]] {
        try query(Self.query(statement)).map { try Self.values($0, kinds: statement.resultKinds) }
    }

    @discardableResult
    public func execute(_ statement: SQLStatement) throws -> Int {
        try execute(Self.query(statement))
    }

    public func tableAccess(_ tables: [DataMap.TableName]) throws -> [DataMap.TableName: SchemaCatalog.Access] {
        guard !tables.isEmpty else { return [:] }
        let schemas = tables.map { $0.schema ?? "public" }
        let names = tables.map(\.name)
        var access: [DataMap.TableName: SchemaCatalog.Access] = [:]
        for row in try query(PostgresQuery(unsafeSQL: "SELECT n.nspname::text, c.relname::text, \(PostgresStore.accessColumns) " + """
            FROM unnest($1::text[], $2::text[]) AS t(schema_name, table_name)
            JOIN pg_namespace n ON n.nspname = t.schema_name
            JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.table_name
            """, binds: { var b = PostgresBindings(); b.append(schemas); b.append(names); return b }())) {
            let (schema, table, rowSecurity, select, update, delete, insert) = try row.decode((String, String, Bool, Bool, Bool, Bool, Bool).self)
            access[.init(schema: schema, name: table)] = .init(rowSecurity: rowSecurity, select: select, update: update, delete: delete, insert: insert)
        }
        return access
    }

    public func prepareErasure(settings: [DataMap.TransactionSetting]) throws {
        try execute("SET CONSTRAINTS ALL IMMEDIATE")
        for setting in settings {
            _ = try query(PostgresQuery(unsafeSQL: "SELECT set_config($1, $2, true)", binds: {
                var bindings = PostgresBindings()
                bindings.append(setting.name)
                bindings.append(setting.value)
                return bindings
            }()))
        }
    }

    static func query(_ statement: SQLStatement) -> PostgresQuery {
        PostgresQuery(unsafeSQL: statement.sql, binds: bindings(statement.bindings))
    }

    static func bindings(_ values: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .null: bindings.appendNull()
            case .integer(let number): bindings.append(number)
            case .real(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .boolean(let flag): bindings.append(flag)
            case .timestamp(let date): bindings.append(date)
            case .bytes(let data): bindings.append(ByteBuffer(bytes: data))
            }
        }
        return bindings
    }

    static func values(_ row: PostgresRow, kinds: [SchemaCatalog.ColumnKind]) throws -> [SQLValue] {
        var values: [SQLValue] = []
        for (index, cell) in row.enumerated() {
            guard cell.bytes != nil else {
                values.append(.null)
                continue
            }
            let kind = index < kinds.count ? kinds[index] : .text
            switch kind {
            case .integer: values.append(.integer(try cell.decode(Int64.self)))
            case .real: values.append(.real(try cell.decode(Double.self)))
            case .boolean: values.append(.boolean(try cell.decode(Bool.self)))
            case .timestamp: values.append(.timestamp(try cell.decode(Date.self)))
            case .bytes: values.append(.bytes(Data(buffer: try cell.decode(ByteBuffer.self))))
            case .text, .other: values.append(.text(try cell.decode(String.self)))
            }
        }
        return values
    }
}

extension PostgresTransaction: SubjectTransaction {
    // Lifecycle's record of an app account: a row appears the first time lifecycle has
    // something to keep (a deletion request); no row means active. Every change is one
    // conditional statement, which under READ COMMITTED waits for a concurrent change
    // to the row and re-checks its condition against the committed row.

    public func lockSubject(key: String, now: Date) throws -> SubjectRecord {
        try execute("""
            INSERT INTO lifecycle.subjects (subject_key, state, updated_at) VALUES (\(key), 'active', \(now))
            ON CONFLICT (subject_key) DO NOTHING
            """)
        let rows = try query("""
            SELECT subject_key, state, deletion_requested_at, purge_after, purged_at FROM lifecycle.subjects
            WHERE subject_key = \(key) FOR UPDATE
            """)
        return try rows.first.map(Self.subjectRecord) ?? SubjectRecord(key: key, state: .active)
    }

    public func subject(key: String) throws -> SubjectRecord? {
        try query("""
            SELECT subject_key, state, deletion_requested_at, purge_after, purged_at FROM lifecycle.subjects WHERE subject_key = \(key)
            """).first.map(Self.subjectRecord)
    }

    static func subjectRecord(_ row: PostgresRow) throws -> SubjectRecord {
        let (key, state, requested, purgeAfter, purged) = try row.decode((String, String, Date?, Date?, Date?).self)
        return SubjectRecord(key: key, state: try AccountState.stored(state), deletionRequestedAt: requested, purgeAfter: purgeAfter, purgedAt: purged)
    }

    public func markSubjectPending(key: String, requestedAt: Date, purgeAfter: Date) throws -> Bool {
        try execute("""
            INSERT INTO lifecycle.subjects AS s (subject_key, state, deletion_requested_at, purge_after, updated_at)
            VALUES (\(key), 'pendingDeletion', \(requestedAt), \(purgeAfter), \(requestedAt))
            ON CONFLICT (subject_key) DO UPDATE SET state = 'pendingDeletion', deletion_requested_at = excluded.deletion_requested_at,
                purge_after = excluded.purge_after, updated_at = excluded.updated_at
            WHERE s.state = 'active'
            """) == 1
    }

    public func moveSubjectPurgeDate(key: String, purgeAfter: Date) throws -> Bool {
        try execute("""
            UPDATE lifecycle.subjects SET purge_after = \(purgeAfter), updated_at = \(purgeAfter)
            WHERE subject_key = \(key) AND state = 'pendingDeletion'
            """) == 1
    }

    public func restoreSubject(key: String, now: Date) throws -> Bool {
        try execute("""
            UPDATE lifecycle.subjects SET state = 'active', deletion_requested_at = NULL, purge_after = NULL, updated_at = \(now)
            WHERE subject_key = \(key) AND state = 'pendingDeletion' AND purge_after > \(now)
            """) == 1
    }

    public func beginSubjectPurge(key: String, now: Date) throws -> Bool {
        try execute("""
            UPDATE lifecycle.subjects SET state = 'purging', updated_at = \(now)
            WHERE subject_key = \(key) AND state = 'pendingDeletion' AND purge_after IS NOT NULL AND purge_after <= \(now)
            """) == 1
    }

    public func markSubjectPurged(key: String, at: Date) throws -> Bool {
        try execute("""
            UPDATE lifecycle.subjects SET state = 'purged', purged_at = \(at), updated_at = \(at)
            WHERE subject_key = \(key) AND state = 'purging'
            """) == 1
    }

    public func subjectsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge] {
        try query("""
            SELECT subject_key, state, purge_after FROM lifecycle.subjects
            WHERE state IN ('pendingDeletion', 'purging') AND purge_after <= \(now) AND subject_key > \(after ?? "")
            ORDER BY subject_key LIMIT \(limit)
            """).map { row in
            let (key, state, purgeAfter) = try row.decode((String, String, Date?).self)
            return DuePurge(accountID: key, state: try AccountState.stored(state), purgeAfter: purgeAfter)
        }
    }

    public func addPurgeProgress(key: String, table: String, deleted: Int, masked: Int) throws {
        guard deleted > 0 || masked > 0 else { return }
        try execute("""
            INSERT INTO lifecycle.purge_progress AS p (subject_key, table_name, deleted, masked) VALUES (\(key), \(table), \(deleted), \(masked))
            ON CONFLICT (subject_key, table_name) DO UPDATE SET deleted = p.deleted + excluded.deleted, masked = p.masked + excluded.masked
            """)
    }

    public func purgeProgress(key: String) throws -> [String: PurgeCounts] {
        var counts: [String: PurgeCounts] = [:]
        for row in try query("SELECT table_name, deleted, masked FROM lifecycle.purge_progress WHERE subject_key = \(key)") {
            let (table, deleted, masked) = try row.decode((String, Int, Int).self)
            counts[table] = PurgeCounts(deleted: deleted, masked: masked)
        }
        return counts
    }

    public func takePurgeProgress(key: String) throws -> [String: PurgeCounts] {
        let counts = try purgeProgress(key: key)
        try execute("DELETE FROM lifecycle.purge_progress WHERE subject_key = \(key)")
        return counts
    }

    public func recordPurgeFiles(key: String, files: [String]) throws {
        guard !files.isEmpty else { return }
        try execute("""
            INSERT INTO lifecycle.purge_files (subject_key, blob_key, state)
            SELECT DISTINCT \(key), f, 'pending' FROM unnest(\(files)::text[]) AS f
            ON CONFLICT (subject_key, blob_key) DO UPDATE SET state = 'pending'
            """)
    }

    public func recordListedPurgeFiles(key: String, files: [String]) throws -> Int {
        guard !files.isEmpty else { return 0 }
        return try query("""
            INSERT INTO lifecycle.purge_files (subject_key, blob_key, state)
            SELECT DISTINCT \(key), f, 'pending' FROM unnest(\(files)::text[]) AS f
            ON CONFLICT (subject_key, blob_key) DO NOTHING RETURNING 1
            """).count
    }

    public func pendingPurgeFiles(key: String, after: String?, limit: Int) throws -> [String] {
        try query("""
            SELECT blob_key FROM lifecycle.purge_files WHERE subject_key = \(key) AND state = 'pending' AND blob_key > \(after ?? "")
            ORDER BY blob_key LIMIT \(limit)
            """).map { try $0.decode(String.self) }
    }

    public func settlePurgeFiles(key: String, files: [PurgeFile]) throws {
        guard !files.isEmpty else { return }
        try execute("""
            UPDATE lifecycle.purge_files p SET state = s.state, bytes = GREATEST(p.bytes, s.bytes)
            FROM unnest(\(files.map(\.key))::text[], \(files.map(\.state.rawValue))::text[], \(files.map(\.bytes))::bigint[]) AS s(blob_key, state, bytes)
            WHERE p.subject_key = \(key) AND p.blob_key = s.blob_key
            """)
    }

    public func takePurgeFiles(key: String) throws -> PurgeFileTotals {
        var totals = PurgeFileTotals()
        for row in try query("""
            SELECT state, COUNT(*)::bigint, COALESCE(SUM(bytes), 0)::bigint FROM lifecycle.purge_files WHERE subject_key = \(key) GROUP BY state
            """) {
            let (state, count, bytes) = try row.decode((String, Int64, Int64).self)
            switch state {
            case "deleted": (totals.deleted, totals.bytes) = (Int(count), bytes)
            case "kept": totals.kept = Int(count)
            default: totals.pending += Int(count)
            }
        }
        try execute("DELETE FROM lifecycle.purge_files WHERE subject_key = \(key)")
        return totals
    }

    public func recordGraceValues(key: String, values: [GraceValue]) throws {
        // Row by row: a deletion request keeps a few values, and a text[] cannot carry a null.
        for value in values {
            try execute("""
                INSERT INTO lifecycle.grace_values (subject_key, table_name, row_key, column_name, value)
                VALUES (\(key), \(value.table), \(value.row), \(value.column), \(value.value))
                ON CONFLICT DO NOTHING
                """)
        }
    }

    public func takeGraceValues(key: String) throws -> [GraceValue] {
        try query("""
            DELETE FROM lifecycle.grace_values WHERE subject_key = \(key) RETURNING table_name, row_key, column_name, value
            """).map {
            let (table, row, column, value) = try $0.decode((String, String, String, String?).self)
            return GraceValue(table: table, row: row, column: column, value: value)
        }
    }

}
