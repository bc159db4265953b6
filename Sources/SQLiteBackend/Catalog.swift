import Foundation
import GRDB
import Lifecycle

extension SQLiteStore {
    /// The app's tables as SQLite describes them (`main` schema): columns with their
    /// declared types, primary keys, foreign keys. SQLite's own and GRDB's bookkeeping
    /// tables are left out.
    public func catalog() async throws -> SchemaCatalog {
        try await pool.read { db in try Self.catalog(db) }
    }

    /// The catalog of the SQLite file at `path`, opened read-only: nothing is created,
    /// not even the file.
    public static func catalog(path: String) throws -> SchemaCatalog {
        guard FileManager.default.fileExists(atPath: path) else {
            throw SQLiteStoreError(message: "there is no SQLite database at \(path)")
        }
        return try readOnly(path: path) { db in try catalog(db) }
    }

    /// Statements generated from the data map, read on a connection of their own that
    /// cannot write; each statement's rows, first column as text.
    public static func readRows(path: String, _ statements: [SQLStatement]) throws -> [[String]] {
        try readOnly(path: path) { db in
            let tx = SQLiteTransaction(db: db)
            return try statements.map { try tx.rows($0).compactMap { $0.first?.text } }
        }
    }

    /// One read of the file at `path` on a read-only connection of its own. Workers started
    /// together each look first, while another may be closing the file (copying its log
    /// in): it waits for that as every other connection does.
    static func readOnly<T>(path: String, _ body: @escaping (Database) throws -> T) throws -> T {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(SQLiteStore.defaultBusyTimeout)
        do {
            return try SQLiteStore.retryingBusy(timeout: SQLiteStore.defaultBusyTimeout) {
                try DatabaseQueue(path: path, configuration: configuration).read(body)
            }
        } catch {
            throw SQLiteStoreError.classify(error, path: path) ?? SQLiteStoreError(message: "cannot read the SQLite database at \(path): \(error)")
        }
    }

    static func catalog(_ db: Database) throws -> SchemaCatalog {
        let names = try String.fetchAll(db, sql: """
            SELECT name FROM sqlite_master
            WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'grdb\\_%' ESCAPE '\\'
            ORDER BY name
            """)
        var tables: [SchemaCatalog.Table] = []
        var keys: [SchemaCatalog.ForeignKey] = []
        for name in names {
            let table = DataMap.TableName(schema: "main", name: name)
            var columns: [SchemaCatalog.Column] = []
            var primaryKey: [(Int, String)] = []
            // Every column, generated and hidden ones too, takes a rowid name from the rowid;
            // the catalog's columns stay the plain ones (hidden = 0), those table_info lists.
            var taken: Set<String> = []
            for row in try Row.fetchAll(db, sql: "SELECT name, type, \"notnull\", pk, hidden, dflt_value IS NOT NULL AS has_default FROM pragma_table_xinfo(?)", arguments: [name]) {
                let column: String = row["name"]
                taken.insert(column.lowercased())
                guard row["hidden"] as Int == 0 else { continue }
                let type: String = row["type"]
                columns.append(.init(name: column, declaredType: type, kind: kind(ofDeclared: type), isNotNull: row["notnull"], hasDefault: row["has_default"]))
                let position: Int = row["pk"]
                if position > 0 { primaryKey.append((position, column)) }
            }
            var indexed = Set(primaryKey.filter { $0.0 == 1 }.map(\.1))
            for index in try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list(?)", arguments: [name]) {
                if let first = try String.fetchOne(db, sql: "SELECT name FROM pragma_index_info(?) WHERE seqno = 0", arguments: [index]) {
                    indexed.insert(first)
                }
            }
            // A virtual table's rowid is whatever its module says, so it is left to its key.
            let hasRowID = try Bool.fetchOne(db, sql: "SELECT type = 'table' AND wr = 0 FROM pragma_table_list WHERE schema = 'main' AND name = ?", arguments: [name]) ?? false
            let rowID = hasRowID ? ["rowid", "_rowid_", "oid"].first { !taken.contains($0) } : nil
            // An INTEGER PRIMARY KEY is the rowid itself: an insert leaving it out gets the next one.
            if hasRowID, primaryKey.count == 1, let index = columns.firstIndex(where: { $0.name == primaryKey[0].1 }),
               columns[index].declaredType.uppercased() == "INTEGER" {
                columns[index].hasDefault = true
            }
            tables.append(.init(
                name: table, columns: columns, primaryKey: primaryKey.sorted { $0.0 < $1.0 }.map(\.1), indexedColumns: indexed, rowID: rowID))
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, seq, "table", "from", "to", on_delete FROM pragma_foreign_key_list(?) ORDER BY id, seq
                """, arguments: [name])
            for group in Dictionary(grouping: rows, by: { $0["id"] as Int }).sorted(by: { $0.key < $1.key }).map(\.value) {
                let referenced: String = group[0]["table"]
                // A missing "to" means the referenced table's primary key.
                var targets = group.map { $0["to"] as String? }
                if targets.contains(where: { $0 == nil }) {
                    targets = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", arguments: [referenced])
                }
                keys.append(.init(
                    table: table, columns: group.map { $0["from"] }, referencedTable: .init(schema: "main", name: referenced),
                    referencedColumns: targets.compactMap { $0 }, onDelete: SchemaCatalog.DeleteAction(rawValue: group[0]["on_delete"]) ?? .noAction))
            }
        }
        return SchemaCatalog(defaultSchema: "main", tables: tables, foreignKeys: keys)
    }

    /// SQLite's type affinity rules (datatype3.html §3.1), refined for the names apps use
    /// for dates and booleans, which SQLite itself stores as text or numbers.
    static func kind(ofDeclared type: String) -> SchemaCatalog.ColumnKind {
        // Byte search, not Foundation's `contains`, which goes through CFString with a
        // locale: every purge's tombstone classifies the accounts table's columns again.
        let upper = Array(type.uppercased().utf8)
        func has(_ part: String) -> Bool {
            let needle = Array(part.utf8)
            guard needle.count <= upper.count else { return false }
            return (0...(upper.count - needle.count)).contains { upper[$0..<$0 + needle.count].elementsEqual(needle) }
        }
        if has("BOOL") { return .boolean }
        if has("DATE") || has("TIME") { return .timestamp }
        if has("INT") { return .integer }
        if has("CHAR") || has("CLOB") || has("TEXT") { return .text }
        if has("BLOB") { return .bytes }
        if has("REAL") || has("FLOA") || has("DOUB") || has("NUM") || has("DEC") { return .real }
        return upper.isEmpty ? .bytes : .other
    }
}

extension SQLiteStore {
    /// Whether `path` holds a lifecycle installation, found without writing anything
    /// (not even the file): commands other than `lifecycle init` refuse a missing or
    /// never-initialised database instead of silently starting an empty one there.
    public static func installationState(path: String) throws -> InstallationState {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return .missing }
        if isFolder.boolValue {
            throw SQLiteStoreError(message: "cannot open the SQLite database at \(path): it is a folder, not a file")
        }
        return try readOnly(path: path) { db in
            if try db.tableExists("lifecycle_migrations"),
               try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM lifecycle_migrations") ?? 0 > 0 {
                return .initialised
            }
            // A release that used GRDB's migrator recorded its migrations there.
            if try db.tableExists("grdb_migrations"),
               try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM grdb_migrations WHERE identifier = 'v1-job-runner')") ?? false {
                return .initialised
            }
            return .uninitialised
        }
    }
}
