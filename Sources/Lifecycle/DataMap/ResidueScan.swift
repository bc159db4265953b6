import Foundation

extension DataMap {
    /// `residue:`: columns the scan after erasure may find the user's identifiers in and
    /// leave (with the reason the receipt lists), and names of columns and JSON keys that
    /// hold an integer user key besides the usual ones (`user_id`, `owner`, `actor_id`, …).
    public struct Residue: Sendable, Equatable {
        public var allow: [ColumnReference] = []
        public var reason: String?
        public var userColumns: [String] = []
        public var line: Int?

        public init(allow: [ColumnReference] = [], reason: String? = nil, userColumns: [String] = [], line: Int? = nil) {
            self.allow = allow
            self.reason = reason
            self.userColumns = userColumns
            self.line = line
        }
    }
}

/// The residue scan (DESIGN.md, "Verified — nothing anywhere"): after an account's rows are
/// erased, and before any of its files is deleted, every table this role can read in the
/// schemas the map touches (and the platform's, `auth` and `storage`), mapped or not, is
/// searched for the account's identifiers. A map covers the tables it knows of; this finds
/// the copy it does not (an email in an unmapped audit payload, a username in a log table).
///
/// What is searched for: the key when it is text or a uuid, and every `lookup:` value
/// (email, username), compared case-insensitively, in text, varchar, uuid and JSON columns,
/// JSON at any depth (on SQLite, every text that parses as a JSON object or array). An
/// integer key is searched for only in columns, and JSON keys, whose name says they hold a
/// user (`user_id`, `owner`, `actor_id`, the columns of the schema's foreign keys into the
/// user table, and `residue: user_columns:`): a bare 7 anywhere else is not the user.
/// PostgreSQL text columns are compared whole, not parsed as JSON.
///
/// Not searched: lifecycle's own tables (the audit names the account by its key: that is the
/// record a receipt is), the user table's key column and every foreign key into the user
/// table (after the erase they can only name another account or the tombstone), the columns
/// the tombstone's mask writes, mapped tables' plain owner columns (the verification read looks
/// for her rows through them, and a row written there since is retried, not a map to fix),
/// owner columns of rows the map keeps masked without emptying them, columns a mask writes
/// from `{key}`, and the columns `residue: allow:` names.
///
/// One statement per table, one pass over it: the rows counted and, per column, the key of
/// the first row that holds an identifier (every identifier a bound value, every name from
/// the catalog, quoted).
public struct ResidueScan: Sendable {
    /// What the account is known by: read from its user row before the row is erased.
    public struct Identifiers: Sendable, Equatable {
        /// As stored, each once (by its bytes), none empty. Folded by the database's own
        /// `lower()` beside the column it is compared with, never by Swift: SQLite's folds
        /// ASCII only, so a value lower-cased here ("élodie") would miss an exact copy
        /// ("Élodie") that `lower()` leaves as it is.
        public var texts: [String]
        public var integerKey: Int64?

        public init(texts: [String], integerKey: Int64?) {
            var seen = Set<[UInt8]>()
            self.texts = texts.filter { !$0.isEmpty && seen.insert(Array($0.utf8)).inserted }
            self.integerKey = integerKey
        }

        public var isEmpty: Bool { texts.isEmpty && integerKey == nil }
    }

    /// An identifier found: the table, the column and the row (its key as text).
    public struct Hit: Sendable, Equatable, CustomStringConvertible {
        public var table: String
        public var column: String
        public var row: String

        public var description: String { "\(table).\(column) (row \(row))" }
    }

    /// What the receipt says was scanned and found.
    public struct Summary: Codable, Sendable, Equatable {
        public var tablesScanned: Int
        public var columnsScanned: Int
        public var rowsScanned: Int
        public var found: Int
        /// `residue: allow:` as the map writes it, with its reason.
        public var allowed: [String]?
        public var reason: String?

        enum CodingKeys: String, CodingKey {
            case tablesScanned = "tables_scanned", columnsScanned = "columns_scanned", rowsScanned = "rows_scanned", found, allowed, reason
        }
    }

    /// The scan found the account's identifiers where nothing allows them. Thrown as a
    /// permanent failure: retrying finds them again until the map or the data changes, and
    /// the next purge run (a new job) scans again.
    public struct Found: Error, CustomStringConvertible {
        public let hits: [Hit]
        public var description: String {
            """
            \(ResidueScan.marker) the account's identifiers (its key or a lookup value) after erasure in \
            \(hits.map(\.description).joined(separator: ", ")): the purge stopped before deleting any file and the account \
            stays purging. Map what holds them (a table under `tables:`, an owner column), or allow each column under \
            `residue: {allow: [TABLE.COLUMN], reason: …}` in the map, then retry the job
            """
        }
    }

    /// Starts every message of a `Found`: how a purge run tells this stop from other failures.
    public static let marker = "residue scan found"

    /// Purge progress rows under these names carry the scan's counts from erase-rows to
    /// the receipt; no table is reported under a name with a space and a colon.
    static let progressTables = "lifecycle residue scan: tables, columns"
    static let progressRows = "lifecycle residue scan: rows"

    let plan: DataMapPlan
    let dialect: SQLDialect

    public init(plan: DataMapPlan, dialect: SQLDialect) {
        self.plan = plan
        self.dialect = dialect
    }

    /// Every `residue: allow:` column exists (a misspelt one would allow nothing, silently).
    static func check(_ map: DataMap, catalog: SchemaCatalog) throws {
        for reference in map.residue.allow where catalog.table(reference.table)?.column(reference.column) == nil {
            throw LifecycleError(.badInput, "\(map.place(map.residue.line)): residue: allow: \(reference) is not a column of this database")
        }
    }

    /// The identifiers of an account whose user row is still there: its key (unless an
    /// integer) and its lookup values, as `values` read them.
    public func identifiers(key: String, lookupValues: [String?]) -> Identifiers {
        let integerKey = plan.subjectKeyKind == .integer ? Int64(key) : nil
        return Identifiers(texts: (integerKey == nil ? [key] : []) + lookupValues.compactMap { $0 }, integerKey: integerKey)
    }

    /// Column names that hold a user's key, lower-cased.
    var userNames: Set<String> {
        plan.keyNames.union(plan.map.residue.userColumns.map { $0.lowercased() })
    }

    /// Columns the scan passes over: the tombstone's, kept owners', and those allowed.
    var excluded: Set<DataMap.ColumnReference> {
        let catalog = plan.catalog
        var columns = Set(plan.map.residue.allow.map { DataMap.ColumnReference(table: catalog.qualified($0.table), column: $0.column) })
        let subject = plan.subject
        let subjectTable = catalog.qualified(subject.table)
        // Once her row is erased, what the user table's key column holds is each remaining
        // account's own key (or her tombstone's), and a foreign key into the user table can
        // only name a row that is there: another account, or the tombstone (an admin log the
        // map ignores, as `map check` lets it), what it is kept for. Searched, they would
        // stop her purge for another account whose key happens to equal her username.
        columns.insert(.init(table: subjectTable, column: subject.key))
        for key in catalog.foreignKeys(to: subjectTable) {
            for column in key.columns { columns.insert(.init(table: key.table, column: column)) }
        }
        if let mask = subject.erase.mask {
            for entry in mask { columns.insert(.init(table: subjectTable, column: entry.column)) }
        }
        for table in plan.tables {
            let name = catalog.qualified(table.table.name)
            // A plain owner column is the verification read's: a row of the user's found
            // there is written since (by the app, a trigger) and retried, not a map to fix.
            // A JSON owner is searched whole (its other keys may name her) unless kept as is.
            func owner(_ column: String, plain: Bool, _ erase: DataMap.Erase) {
                let kept = erase.mask.map { mask in !mask.contains { $0.column == column } } ?? false
                if plain || kept { columns.insert(.init(table: name, column: column)) }
            }
            switch table.owner {
            case .column(let column): owner(column, plain: true, table.table.erase)
            case .value(let value): owner(value.column, plain: value.isPlainColumn, table.table.erase)
            case .sides(let sides): for side in sides { owner(side.column, plain: side.value.isPlainColumn, side.erase) }
            case .parent: break
            }
            let masks = [table.table.erase.mask] + ((table.owner.sides ?? []).map(\.erase.mask))
            for entry in masks.compactMap({ $0 }).joined() { if case .template = entry.value { columns.insert(.init(table: name, column: entry.column)) } }
        }
        return columns
    }

    /// The schemas searched: those the map names, the default one, and the platform's.
    var schemas: Set<String> {
        let catalog = plan.catalog
        var names: Set<String> = [catalog.defaultSchema, "auth", "storage"]
        let tables = [plan.subject.table] + plan.tables.map(\.table.name) + plan.map.ignored.map(\.table)
        for table in tables { if let schema = catalog.qualified(table).schema { names.insert(schema) } }
        return names
    }

    /// One table's statement: `COUNT(*)`, then per searched column the smallest key of a row
    /// holding an identifier there (null when none). nil when no column of it is searched.
    func statement(for table: SchemaCatalog.Table, _ identifiers: Identifiers) -> (columns: [String], statement: SQLStatement)? {
        let excluded = self.excluded
        let userNames = self.userNames.sorted()
        var builder = SQLBuilder(dialect)
        // Each value is bound when a condition first uses it: SQLite refuses a statement
        // given more values than its placeholders take.
        var bound: (texts: [String]?, number: String?, text: String?, names: [String]?) = (nil, nil, nil, nil)
        func textSlots() -> [String] {
            if let texts = bound.texts { return texts }
            let texts = identifiers.texts.map { text in
                let slot = builder.bind(.text(text))
                return dialect == .postgres ? "lower(CAST(\(slot) AS text))" : "lower(\(slot))"
            }
            bound.texts = texts
            return texts
        }
        func keyNumber() -> String? {
            guard let key = identifiers.integerKey else { return nil }
            if let slot = bound.number { return slot }
            let slot = builder.bind(.integer(key))
            bound.number = slot
            return slot
        }
        func keyText() -> String? {
            guard let key = identifiers.integerKey else { return nil }
            if let slot = bound.text { return slot }
            let slot = builder.bind(.text(String(key)))
            bound.text = slot
            return slot
        }
        func nameSlots() -> [String] {
            if let names = bound.names { return names }
            let names = userNames.map { builder.bind(.text($0)) }
            bound.names = names
            return names
        }
        let hasTexts = !identifiers.texts.isEmpty, hasInteger = identifiers.integerKey != nil
        var columns: [String] = []
        var terms: [String] = []
        for column in table.columns where !excluded.contains(.init(table: table.name, column: column.name)) {
            let value = "t.\(dialect.quote(column.name))"
            let declared = column.declaredType.lowercased()
            let isJSON = declared == "json" || declared == "jsonb"
            let namesUser = userNames.contains(column.name.lowercased())
            var conditions: [String] = []
            switch dialect {
            case .postgres:
                if isJSON {
                    let texts = hasTexts ? textSlots() : []
                    var filters = texts.indices.map { "@ == $t\($0)" }
                    var variables = texts.enumerated().map { "'t\($0.offset)', CAST(\($0.element) AS text)" }
                    if let number = keyNumber(), let text = keyText() {
                        for name in userNames {
                            let quoted = "\"" + name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
                            filters += ["@.\(quoted) == $n", "@.\(quoted) == $s"]
                        }
                        variables += ["'n', CAST(\(number) AS bigint)", "'s', CAST(\(text) AS text)"]
                    }
                    if !filters.isEmpty {
                        // The path is the statement's own text, the values its variables: bound.
                        let path = builder.bind(.text("$.** ? (" + filters.joined(separator: " || ") + ")"))
                        conditions.append("""
                            jsonb_path_exists(CAST(lower(CAST(\(value) AS text)) AS jsonb), CAST(\(path) AS jsonpath), \
                            jsonb_build_object(\(variables.joined(separator: ", "))))
                            """)
                    }
                } else if column.kind == .text || column.kind == .other {
                    if hasTexts { conditions.append("lower(CAST(\(value) AS text)) IN (\(textSlots().joined(separator: ", ")))") }
                    if namesUser, let text = keyText() { conditions.append("CAST(\(value) AS text) = \(text)") }
                } else if column.kind == .integer, namesUser, let number = keyNumber() {
                    conditions.append("\(value) = \(number)")
                }
            case .sqlite:
                guard column.kind != .bytes else { break }
                let searchesText = column.kind == .text || column.kind == .other
                if searchesText && hasTexts { conditions.append("lower(\(value)) IN (\(textSlots().joined(separator: ", ")))") }
                if namesUser, let text = keyText() { conditions.append("CAST(\(value) AS TEXT) = \(text)") }
                if searchesText {
                    var inside: [String] = []
                    if hasTexts { inside.append("lower(j.atom) IN (\(textSlots().joined(separator: ", ")))") }
                    if hasInteger, !userNames.isEmpty, let text = keyText() {
                        inside.append("(lower(j.key) IN (\(nameSlots().joined(separator: ", "))) AND CAST(j.atom AS TEXT) = \(text))")
                    }
                    if !inside.isEmpty {
                        // json_tree fails the statement on text that is not JSON; only objects and
                        // arrays are walked (a bare string is compared whole above).
                        conditions.append("""
                            (CASE WHEN substr(\(value), 1, 1) IN ('{', '[') AND json_valid(\(value)) THEN \
                            EXISTS (SELECT 1 FROM json_tree(\(value)) j WHERE \(inside.joined(separator: " OR "))) END)
                            """)
                    }
                }
            }
            guard !conditions.isEmpty else { continue }
            columns.append(column.name)
            terms.append("MIN(CASE WHEN \(conditions.map { "(\($0))" }.joined(separator: " OR ")) THEN \(rowKey(table)) END)")
        }
        guard !terms.isEmpty else { return nil }
        builder.append("SELECT COUNT(*), \(terms.joined(separator: ", ")) FROM \(dialect.table(table.name)) t")
        return (columns, builder.statement([.integer] + columns.map { _ in .text }))
    }

    /// A row's key as text: its primary key, else SQLite's rowid or PostgreSQL's ctid.
    private func rowKey(_ table: SchemaCatalog.Table) -> String {
        let text = dialect == .postgres ? "text" : "TEXT"
        if !table.primaryKey.isEmpty {
            return table.primaryKey.map { "CAST(t.\(dialect.quote($0)) AS \(text))" }.joined(separator: " || ',' || ")
        }
        switch dialect {
        case .postgres: return "CAST(t.ctid AS text)"
        case .sqlite: return table.rowID.map { "CAST(t.\($0) AS TEXT)" } ?? "CAST(t.\(dialect.quote(table.columns.first?.name ?? "rowid")) AS TEXT)"
        }
    }

    /// The tables searched, in name order: readable by this role, not lifecycle's own.
    var tables: [SchemaCatalog.Table] {
        let schemas = self.schemas
        return plan.catalog.tables.values
            .filter { table in
                !(table.name.schema == "lifecycle" || table.name.name.hasPrefix("lifecycle_")) && table.access.select && (dialect == .sqlite || table.name.schema.map(schemas.contains) ?? true)
            }
            .sorted { $0.name < $1.name }
    }

    /// Searches every table; the summary of what was read, and every hit.
    public func run<T: GeneratedSQLTransaction>(_ identifiers: Identifiers, in tx: T) throws -> (summary: Summary, hits: [Hit]) {
        var summary = Summary(
            tablesScanned: 0, columnsScanned: 0, rowsScanned: 0, found: 0,
            allowed: plan.map.residue.allow.isEmpty ? nil : plan.map.residue.allow.map(\.description), reason: plan.map.residue.reason)
        guard !identifiers.isEmpty else { return (summary, []) }
        var hits: [Hit] = []
        for table in tables {
            guard let (columns, statement) = statement(for: table, identifiers) else { continue }
            guard let row = try tx.rows(statement).first, case .integer(let count) = row.first else {
                throw PurgeIncomplete("the residue scan of \(table.name) returned no count; the purge will retry")
            }
            summary.tablesScanned += 1
            summary.columnsScanned += columns.count
            summary.rowsScanned += Int(count)
            for (index, column) in columns.enumerated() {
                if case .text(let rowKey) = row[index + 1] {
                    let name = table.name.schema == plan.catalog.defaultSchema || dialect == .sqlite ? table.name.name : table.name.description
                    hits.append(Hit(table: name, column: column, row: rowKey))
                }
            }
        }
        summary.found = hits.count
        return (summary, hits)
    }
}

extension DataMapPlan.Owner {
    var sides: [DataMap.Side]? {
        if case .sides(let sides) = self { return sides }
        return nil
    }
}
