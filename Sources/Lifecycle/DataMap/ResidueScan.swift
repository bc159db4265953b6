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
/// erased, and before its user row and any of its files go, every table this role can read
/// in the schemas the map touches (and the platform's, `auth` and `storage`), mapped or not,
/// is searched for the account's identifiers. A map covers the tables it knows of; this
/// finds the copy it does not (an email in an unmapped audit payload, a username in a log).
///
/// What is searched for, and where (compared case-insensitively as the database folds case: PostgreSQL's `lower()`, SQLite's NOCASE):
/// - values nobody else plausibly holds (an email address, a uuid, a phone number, a
///   generated id of 12 or more letters and digits: the key when it is text, a lookup
///   value) in every text, uuid, array and JSON column, JSON at any depth, and as a quoted
///   string inside text that holds JSON;
/// - other lookup values (a username such as `admin` or `john`, which is also a content
///   type, a permission, another person's first name) only in columns and JSON keys that
///   name a user (`username`, `author_name`, `owner`, `email`, …);
/// - an integer key only in columns, and JSON keys, whose name says they hold a user's key
///   (`user_id`, `owner`, `actor_id`, the columns of the schema's foreign keys into the user
///   table, and `residue: user_columns:`): a bare 7 anywhere else is not the user.
///
/// Not searched: lifecycle's own tables (the audit names the account by its key: that is the
/// record a receipt is), the user table's key and lookup columns and every foreign key into
/// it (after the erase they can only name another account or the tombstone: Django lets two
/// accounts share an email), the user rows of the accounts being scanned (erased next, their
/// tombstone checked by the verification), encoded owners and their rows' keys
/// (`django_session`, read decoded by the sign-out instead), mapped tables' plain owner columns (the
/// verification read looks for her rows through them, and a row written there since is
/// retried, not a map to fix), owner columns of rows the map keeps masked without emptying
/// them, columns a mask writes from `{key}`, and the columns `residue: allow:` names. Tables
/// the role cannot read, or reads through row level security, are listed in the receipt as
/// not scanned.
///
/// One statement per table serves a whole batch of accounts: the rows counted and, per
/// column, the key of the first row holding any of the batch's identifiers. Only a table
/// where something was found is read again, account by account, to say whose it is. Every
/// identifier is a bound value, every name from the catalog, quoted.
public struct ResidueScan: Sendable {
    /// What the account is known by: read from its user row before the row is erased.
    public struct Identifiers: Sendable, Equatable {
        /// The account's key, as text: its user row is passed over while it is scanned.
        public var key: String
        /// Everything below, as stored, each once (by its bytes), none empty: what a
        /// message never repeats. Folded by the database beside the column it is compared
        /// with (PostgreSQL's `lower()`, SQLite's NOCASE), never by Swift: SQLite folds ASCII
        /// only, so a value lower-cased here ("élodie") would miss an exact copy ("Élodie").
        public var texts: [String]
        /// Searched in every column that holds text.
        public var distinctive: [String]
        /// Searched only where a column or JSON key names a user.
        public var plain: [String]
        public var integerKey: Int64?

        public init(key: String, texts: [String], integerKey: Int64?) {
            var seen = Set<[UInt8]>()
            self.key = key
            self.texts = texts.filter { !$0.isEmpty && seen.insert(Array($0.utf8)).inserted }
            self.distinctive = self.texts.filter(ResidueScan.isDistinctive)
            self.plain = self.texts.filter { !ResidueScan.isDistinctive($0) }
            self.integerKey = integerKey
        }

        public var isEmpty: Bool { texts.isEmpty && integerKey == nil }
    }

    /// A value nobody else plausibly holds, so found anywhere it is the user's: an email
    /// address, a uuid, a phone number, or a generated id mixing letters and digits.
    static func isDistinctive(_ value: String) -> Bool {
        if value.contains("@") || UUID(uuidString: value) != nil { return true }
        let digits = value.unicodeScalars.filter { ("0"..."9").contains($0) }.count
        if digits >= 8 && value.unicodeScalars.allSatisfy({ "+0123456789 -().".unicodeScalars.contains($0) }) { return true }
        return value.count >= 12 && digits > 0 && value.contains { $0.isLetter }
    }

    /// Parts of a column's or JSON key's name that say it names a user, for the plain values.
    static let userNameParts = ["user", "mail", "login", "handle", "author", "actor", "owner", "creator", "nick", "phone", "member"]

    /// An identifier found: the table, the column and the row (its key as text).
    public struct Hit: Sendable, Equatable, CustomStringConvertible {
        public var table: String
        public var column: String
        public var row: String

        public var description: String { "\(table).\(column) (\(row))" }
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
        /// Tables of the scanned schemas this role cannot read, or reads only through row
        /// level security: nothing is said of them, and the receipt says so.
        public var notScanned: [String]?
        /// How long the pass that served this account took, and how many accounts it served
        /// (what the scan costs a purge: `make bench` sums milliseconds / pass_accounts).
        public var milliseconds: Double?
        public var passAccounts: Int?

        enum CodingKeys: String, CodingKey {
            case tablesScanned = "tables_scanned", columnsScanned = "columns_scanned", rowsScanned = "rows_scanned", found, allowed, reason,
                 notScanned = "not_scanned", milliseconds, passAccounts = "pass_accounts"
        }
    }

    /// The scan found the account's identifiers where nothing allows them. Thrown as a
    /// permanent failure: retrying finds them again until the map or the data changes.
    public struct Found: Error, CustomStringConvertible {
        public let hits: [Hit]
        public var description: String {
            """
            \(ResidueScan.marker) the account's identifiers (its key or a lookup value) after erasure in \
            \(hits.map(\.description).joined(separator: ", ")): the purge stopped before erasing the user row or deleting any \
            file, and the account stays purging. Map what holds them (a table under `tables:`, an owner column), or allow \
            each column under `residue: {allow: [TABLE.COLUMN], reason: …}` in the map, then retry the job
            """
        }
    }

    /// Starts every message of a `Found`: how a purge run tells this stop from other failures.
    public static let marker = "residue scan found"

    /// Purge progress rows under these names carry the scan's counts from erase-rows to
    /// the receipt; no table is reported under a name with a space and a colon.
    static let progressTables = "lifecycle residue scan: tables, columns"
    static let progressRows = "lifecycle residue scan: rows"
    static let progressTime = "lifecycle residue scan: microseconds, pass accounts"

    let plan: DataMapPlan
    let dialect: SQLDialect
    /// Column names that hold a user's key, lower-cased.
    let userNames: Set<String>
    /// Columns the scan passes over (see `excludedColumns`).
    let excluded: Set<DataMap.ColumnReference>

    /// Derives what every statement of a pass shares once: a pass builds one statement per
    /// table, and each column asks whether its name names a user.
    public init(plan: DataMapPlan, dialect: SQLDialect) {
        self.plan = plan
        self.dialect = dialect
        self.userNames = plan.keyNames.union(plan.map.residue.userColumns.map { $0.lowercased() })
        self.excluded = Self.excludedColumns(plan)
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
        return Identifiers(key: key, texts: (integerKey == nil ? [key] : []) + lookupValues.compactMap { $0 }, integerKey: integerKey)
    }

    /// Whether a column's (or JSON key's) name says it names a user: plain values are
    /// searched there only.
    func namesUser(_ name: String) -> Bool {
        let name = name.lowercased()
        return userNames.contains(name) || plan.subject.lookup.contains { $0.lowercased() == name } || Self.userNameParts.contains { name.contains($0) }
    }

    /// Columns the scan passes over: the user table's key and lookups, the foreign keys
    /// into it, kept owners', and those allowed.
    static func excludedColumns(_ plan: DataMapPlan) -> Set<DataMap.ColumnReference> {
        let catalog = plan.catalog
        var columns = Set(plan.map.residue.allow.map { DataMap.ColumnReference(table: catalog.qualified($0.table), column: $0.column) })
        let subject = plan.subject
        let subjectTable = catalog.qualified(subject.table)
        // What the user table's key and lookup columns hold, once her row is erased, is each
        // remaining account's own (two Django accounts may share an email), and a foreign
        // key into the user table can only name a row that is there: another account, or the
        // tombstone (an admin log the map ignores, as `map check` lets it). Searched, they
        // would stop her purge for another account that happens to share a value.
        for column in [subject.key] + subject.lookup { columns.insert(.init(table: subjectTable, column: column)) }
        for key in catalog.foreignKeys(to: subjectTable) {
            for column in key.columns { columns.insert(.init(table: key.table, column: column)) }
        }
        if let mask = subject.erase.mask {
            for entry in mask { columns.insert(.init(table: subjectTable, column: entry.column)) }
        }
        // An encoded owner (a Django session's `session_data`) holds nothing in plain text,
        // and its row's key is a random token: searched, they would find nothing, at the cost
        // of reading the whole table (a million sessions) each pass. Her rows there are found
        // decoded, through lifecycle's index, and signed out by the purge.
        for removal in plan.onDeletion.remove where removal.owner.encoding != nil {
            let table = catalog.qualified(removal.table)
            columns.insert(.init(table: table, column: removal.owner.column))
            for key in catalog.table(table)?.primaryKey ?? [] { columns.insert(.init(table: table, column: key)) }
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

    /// What one statement looks for: the identifiers of every account of a batch.
    struct Sought {
        var distinctive: [String] = []
        var plain: [String] = []
        var integerKeys: [Int64] = []
        /// The user rows passed over: the accounts' own, erased after the scan.
        var keys: [String] = []

        init(_ batch: [Identifiers]) {
            var seen = Set<[UInt8]>()
            for identifiers in batch {
                distinctive += identifiers.distinctive.filter { seen.insert(Array($0.utf8)).inserted }
                plain += identifiers.plain.filter { seen.insert(Array($0.utf8)).inserted }
                if let key = identifiers.integerKey, !integerKeys.contains(key) { integerKeys.append(key) }
                keys.append(identifiers.key)
            }
        }
    }

    /// One table's statement: `COUNT(*)`, then per searched column the smallest key of a row
    /// holding one of the identifiers there (null when none). nil when no column is searched.
    func statement(for table: SchemaCatalog.Table, _ sought: Sought) -> (columns: [String], statement: SQLStatement)? {
        let userNames = self.userNames.sorted()
        let subject = plan.catalog.qualified(plan.subject.table)
        let isSubject = table.name == subject
        var builder = SQLBuilder(dialect)
        // Each list is bound when a condition first uses it: SQLite refuses a statement given
        // more values than its placeholders take.
        var slots: [String: [String]] = [:]
        // SQLite: one JSON array for a whole list, its parser looking each `?NNN` up in a list:
        // a pass's thousands of values, named again in every column's condition, cost more to
        // prepare than the scan costs to run. Only ever inside `IN (…)`.
        func jsonList(_ values: [SQLValue]) -> String {
            "SELECT value FROM json_each(\(builder.bind(.text(Self.jsonArray(values)))))"
        }
        func bound(_ name: String, _ values: @autoclosure () -> [SQLValue], lower: Bool = false) -> [String] {
            if let existing = slots[name] { return existing }
            if dialect == .sqlite {
                let made = [jsonList(values())]
                slots[name] = made
                return made
            }
            let made = values().map { value in
                let slot = builder.bind(value)
                // SQLite compares under NOCASE instead (below): the same ASCII-only folding as
                // its lower(), without a new string for every row of every column.
                guard lower, dialect == .postgres else { return slot }
                return "lower(CAST(\(slot) AS text))"
            }
            slots[name] = made
            return made
        }
        func distinctive() -> [String] { bound("distinctive", sought.distinctive.map { .text($0) }, lower: true) }
        func plain() -> [String] { bound("plain", sought.plain.map { .text($0) }, lower: true) }
        func numbers() -> [String] { bound("numbers", sought.integerKeys.map { .integer($0) }) }
        func numberTexts() -> [String] { bound("number texts", sought.integerKeys.map { .text(String($0)) }) }
        func names() -> [String] { bound("names", userNames.map { .text($0) }) }
        let list = { (slots: [String]) in slots.joined(separator: ", ") }
        let hasDistinctive = !sought.distinctive.isEmpty, hasPlain = !sought.plain.isEmpty && !isSubject
        let hasInteger = !sought.integerKeys.isEmpty
        // The user table's other rows are other accounts: a plain value there is theirs.
        let lookups = Set(plan.subject.lookup.map { $0.lowercased() })
        let keyPattern = Self.userNameParts.joined(separator: "|")

        var columns: [String] = []
        var terms: [String] = []
        for column in table.columns where !excluded.contains(.init(table: table.name, column: column.name)) {
            let value = "t.\(dialect.quote(column.name))"
            let declared = column.declaredType.lowercased()
            let namesUser = self.namesUser(column.name)
            let namesKey = userNames.contains(column.name.lowercased()) || lookups.contains(column.name.lowercased())
            var conditions: [String] = []
            switch dialect {
            case .postgres:
                let lowered = "lower(CAST(\(value) AS text))"
                if declared == "json" || declared == "jsonb" {
                    var variables: [String] = []
                    func variable(_ name: String, _ slot: String, as type: String) -> String {
                        variables.append("'\(name)', CAST(\(slot) AS \(type))")
                        return "$\(name)"
                    }
                    var anywhere = hasDistinctive ? distinctive().enumerated().map { "@ == \(variable("d\($0.offset)", $0.element, as: "text"))" } : []
                    var keyed: [String] = []
                    if hasPlain {
                        let values = plain().enumerated().map { "@.value == \(variable("p\($0.offset)", $0.element, as: "text"))" }
                        keyed.append("@.key like_regex \"\(keyPattern)\" && (\(values.joined(separator: " || ")))")
                    }
                    if hasInteger {
                        let keys = userNames.map { "@.key == \"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
                        let values = numbers().enumerated().map { "@.value == \(variable("n\($0.offset)", $0.element, as: "bigint"))" }
                            + numberTexts().enumerated().map { "@.value == \(variable("s\($0.offset)", $0.element, as: "text"))" }
                        if !keys.isEmpty { keyed.append("(\(keys.joined(separator: " || "))) && (\(values.joined(separator: " || ")))") }
                    }
                    var paths: [String] = []
                    if !anywhere.isEmpty { paths.append("$.** ? (" + anywhere.joined(separator: " || ") + ")") }
                    if !keyed.isEmpty {
                        anywhere = keyed.map { "(\($0))" }
                        paths.append("$.** ? (@.type() == \"object\").keyvalue() ? (" + anywhere.joined(separator: " || ") + ")")
                    }
                    for path in paths {
                        // The path is the statement's own text, the values its variables: bound.
                        let slot = builder.bind(.text(path))
                        conditions.append("""
                            jsonb_path_exists(CAST(\(lowered) AS jsonb), CAST(\(slot) AS jsonpath), \
                            jsonb_build_object(\(variables.joined(separator: ", "))))
                            """)
                    }
                } else if declared.hasSuffix("[]") {
                    var wanted = hasDistinctive ? distinctive() : []
                    if namesUser && hasPlain { wanted += plain() }
                    if namesKey && hasInteger { wanted += numberTexts() }
                    if !wanted.isEmpty {
                        conditions.append("EXISTS (SELECT 1 FROM unnest(CAST(\(lowered) AS text[])) e WHERE e IN (\(list(wanted))))")
                    }
                } else if column.kind == .text || column.kind == .other {
                    if hasDistinctive {
                        conditions.append("\(lowered) IN (\(list(distinctive())))")
                        // JSON kept as text: her value as a string of it, quotes and all.
                        let quoted = distinctive().map { "strpos(\(lowered), '\"' || \($0) || '\"') > 0" }
                        conditions.append("(left(CAST(\(value) AS text), 1) IN ('{', '[') AND (\(quoted.joined(separator: " OR "))))")
                    }
                    if namesUser && hasPlain { conditions.append("\(lowered) IN (\(list(plain())))") }
                    if namesKey && hasInteger { conditions.append("CAST(\(value) AS text) IN (\(list(numberTexts())))") }
                } else if column.kind == .integer, namesKey, hasInteger {
                    conditions.append("\(value) IN (\(list(numbers())))")
                }
            case .sqlite:
                // A column's declared type does not bind what SQLite stores: an untyped or
                // BLOB column may hold text, compared as such.
                let holdsText = column.kind == .text || column.kind == .other || column.kind == .bytes
                // A BLOB never equals a text: read as text first, as lower() would.
                let folded = (column.kind == .bytes ? "CAST(\(value) AS TEXT)" : value) + " COLLATE NOCASE"
                if holdsText && hasDistinctive { conditions.append("\(folded) IN (\(list(distinctive())))") }
                if holdsText && namesUser && hasPlain { conditions.append("\(folded) IN (\(list(plain())))") }
                if namesKey && hasInteger { conditions.append("CAST(\(value) AS TEXT) IN (\(list(numberTexts())))") }
                if holdsText {
                    var inside: [String] = []
                    if hasDistinctive { inside.append("j.atom COLLATE NOCASE IN (\(list(distinctive())))") }
                    if hasPlain {
                        let keyNames = Self.userNameParts.map { "lower(j.key) LIKE '%\($0)%'" }.joined(separator: " OR ")
                        inside.append("((\(keyNames)) AND j.atom COLLATE NOCASE IN (\(list(plain()))))")
                    }
                    if hasInteger && !userNames.isEmpty {
                        inside.append("(lower(j.key) IN (\(list(names()))) AND CAST(j.atom AS TEXT) IN (\(list(numberTexts()))))")
                    }
                    if !inside.isEmpty {
                        // json_tree fails the statement on text that is not JSON (and reads a
                        // BLOB as SQLite's binary JSON); only objects and arrays held as text
                        // are walked (a bare string is compared whole above).
                        conditions.append("""
                            (CASE WHEN typeof(\(value)) = 'text' AND substr(\(value), 1, 1) IN ('{', '[') AND json_valid(\(value)) THEN \
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
        if isSubject, !sought.keys.isEmpty, let keyColumn = table.column(plan.subject.key) {
            let values = sought.keys.map { key in keyColumn.kind == .integer ? Int64(key).map(SQLValue.integer) ?? .text(key) : .text(key) }
            let keys = dialect == .sqlite
                ? [jsonList(values)]
                : values.map { builder.bind($0, as: keyColumn) }
            builder.append(" WHERE t.\(dialect.quote(plan.subject.key)) NOT IN (\(list(keys)))")
        }
        return (columns, builder.statement([.integer] + columns.map { _ in .text }))
    }

    /// Texts and integers as one JSON array, for SQLite's `json_each`, which gives each back with its type.
    static func jsonArray(_ values: [SQLValue]) -> String {
        let elements: [Any] = values.map { value in
            switch value {
            case .integer(let number): NSNumber(value: number)
            default: value.text ?? NSNull()
            }
        }
        // Swift strings and integers always make valid JSON; an empty list here would hide what the scan looks for.
        guard let data = try? JSONSerialization.data(withJSONObject: elements, options: [.withoutEscapingSlashes]) else {
            preconditionFailure("the residue scan's values could not be written as JSON")
        }
        return String(decoding: data, as: UTF8.self)
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

    /// The tables of the scanned schemas, in name order, not lifecycle's own.
    private var candidates: [SchemaCatalog.Table] {
        let schemas = self.schemas
        return plan.catalog.tables.values
            .filter { table in
                !(table.name.schema == "lifecycle" || table.name.name.hasPrefix("lifecycle_")) && (dialect == .sqlite || table.name.schema.map(schemas.contains) ?? true)
            }
            .sorted { $0.name < $1.name }
    }

    /// The tables searched: readable by this role, without row level security hiding rows.
    var tables: [SchemaCatalog.Table] { candidates.filter { $0.access.select && !$0.access.rowSecurity } }

    /// Tables of the scanned schemas this role cannot read, or reads through row level security.
    var notScanned: [String]? {
        let names = candidates.filter { !$0.access.select || $0.access.rowSecurity }.map { displayName($0.name) }
        return names.isEmpty ? nil : names
    }

    private func displayName(_ table: DataMap.TableName) -> String {
        table.schema == plan.catalog.defaultSchema || dialect == .sqlite ? table.name : table.description
    }

    /// Searches every table for one account; the summary of what was read, and every hit.
    public func run<T: GeneratedSQLTransaction>(_ identifiers: Identifiers, in tx: T) throws -> (summary: Summary, hits: [Hit]) {
        let (summary, hits) = try run(batch: [identifiers], in: tx)
        return (summary, hits[0])
    }

    /// Searches every table once for a batch of accounts: the summary of what was read (the
    /// same for each), and each account's hits, in the batch's order.
    public func run<T: GeneratedSQLTransaction>(batch: [Identifiers], in tx: T) throws -> (summary: Summary, hits: [[Hit]]) {
        var summary = Summary(
            tablesScanned: 0, columnsScanned: 0, rowsScanned: 0, found: 0,
            allowed: plan.map.residue.allow.isEmpty ? nil : plan.map.residue.allow.map(\.description), reason: plan.map.residue.reason,
            notScanned: notScanned)
        var hits = [[Hit]](repeating: [], count: batch.count)
        let searched = batch.indices.filter { !batch[$0].isEmpty }
        guard !searched.isEmpty else { return (summary, hits) }
        let sought = Sought(searched.map { batch[$0] })
        for table in tables {
            guard let (columns, statement) = statement(for: table, sought) else { continue }
            let row = try Self.counted(tx.rows(statement).first, table)
            summary.tablesScanned += 1
            summary.columnsScanned += columns.count
            summary.rowsScanned += row.count
            guard row.found.contains(where: { $0 != nil }) else { continue }
            // Something is there: whose, read again account by account (a rare path).
            for index in searched {
                let single: (columns: [String], found: [String?])
                if searched.count == 1 {
                    single = (columns, row.found)
                } else {
                    // Her identifiers alone, the batch's user rows passed over as in the pass.
                    var own = Sought([batch[index]])
                    own.keys = sought.keys
                    guard let (columns, statement) = self.statement(for: table, own) else { continue }
                    single = (columns, try Self.counted(tx.rows(statement).first, table).found)
                }
                for (column, rowKey) in zip(single.columns, single.found) {
                    guard let rowKey else { continue }
                    hits[index].append(Hit(table: displayName(table.name), column: column, row: Self.describe(rowKey: rowKey, batch[index])))
                }
            }
        }
        summary.found = hits.map(\.count).reduce(0, +)
        return (summary, hits)
    }

    /// A count and the row keys found per column, from one statement's single row.
    private static func counted(_ row: [SQLValue]?, _ table: SchemaCatalog.Table) throws -> (count: Int, found: [String?]) {
        guard let row, case .integer(let count) = row.first else {
            throw PurgeIncomplete("the residue scan of \(table.name) returned no count; the purge will retry")
        }
        return (Int(count), row.dropFirst().map(\.text))
    }

    /// The row as a message may name it: never by a key that holds the identifier itself
    /// (a table keyed by email), which every log and `jobs check` would then repeat.
    static func describe(rowKey: String, _ identifiers: Identifiers) -> String {
        let folded = rowKey.lowercased()
        let holdsIdentifier = identifiers.texts.contains { folded.contains($0.lowercased()) }
        return holdsIdentifier ? "a row whose key holds the identifier" : "row \(rowKey)"
    }
}

extension DataMapPlan.Owner {
    var sides: [DataMap.Side]? {
        if case .sides(let sides) = self { return sides }
        return nil
    }
}

/// Gathers the residue scans of the purges running at once in a process into one pass per
/// table. A pass reads every table whole, whether it serves one account or a thousand, so
/// the fewer the passes the cheaper the purge: a purge says it is on its way to a scan when
/// it starts erasing (`approach`), and a pass starts once every purge on its way has
/// arrived (or left without one, `withdraw`), or when the first to arrive has waited
/// `longestWait`: a purge slowed by a large account holds the others back no longer. The
/// wait costs the run nothing while the purges on their way keep the writer busy, which
/// they do until the last of them arrives. On a 2-core machine, over a 5,000-account purge,
/// a pass started as soon as one purge arrived served 430 accounts on average and passes
/// read for half of the purge's time; waiting, 640 and 15 %. Those that arrive while a pass
/// runs are served by the next.
public actor ResidueScanBatcher {
    public typealias Outcome = (summary: ResidueScan.Summary, hits: [ResidueScan.Hit])
    public typealias Run = @Sendable ([ResidueScan.Identifiers]) async throws -> (summary: ResidueScan.Summary, hits: [[ResidueScan.Hit]])
    private var waiting: [(identifiers: ResidueScan.Identifiers, reply: CheckedContinuation<Outcome, any Error>)] = []
    private var run: Run?
    private var scanning = false
    /// Purges that have started erasing and have neither arrived nor left.
    private var approaching = 0
    /// Ends the wait of the purges that arrived if the others take longer than `longestWait`.
    private var waitLimit: Task<Void, Never>?
    private let longestWait: Duration

    public init(longestWait: Duration = .seconds(10)) {
        self.longestWait = longestWait
    }

    /// A purge has started erasing and will ask for a scan, or `withdraw`.
    public func approach() { approaching += 1 }

    /// A purge that approached will not ask for a scan (it failed, or had nothing left to scan).
    public func withdraw() {
        approaching = max(0, approaching - 1)
        startIfReady()
    }

    /// The account's hits, from a pass that may serve others too. `run` reads every table
    /// once for the batch it is given. The caller has approached.
    public func scan(_ identifiers: ResidueScan.Identifiers, run: @escaping Run) async throws -> Outcome {
        try await withCheckedThrowingContinuation { reply in
            approaching = max(0, approaching - 1)
            waiting.append((identifiers, reply))
            self.run = run
            startIfReady()
        }
    }

    private func startIfReady(waitedLongEnough: Bool = false) {
        guard !scanning, !waiting.isEmpty, let run else { return }
        guard approaching == 0 || waitedLongEnough else {
            limitWait()
            return
        }
        scanning = true
        // The actor runs one thing at a time, so a limit that has not yet resumed sees this.
        waitLimit?.cancel()
        waitLimit = nil
        let batch = waiting
        waiting = []
        Task { await self.pass(batch, run) }
    }

    private func limitWait() {
        guard waitLimit == nil else { return }
        let wait = longestWait
        waitLimit = Task {
            do { try await Task.sleep(for: wait) } catch { return }
            guard !Task.isCancelled else { return }
            self.waitLimit = nil
            self.startIfReady(waitedLongEnough: true)
        }
    }

    private func pass(_ batch: [(identifiers: ResidueScan.Identifiers, reply: CheckedContinuation<Outcome, any Error>)], _ run: Run) async {
        let started = ContinuousClock.now
        do {
            let (summary, hits) = try await run(batch.map(\.identifiers))
            let took = started.duration(to: .now)
            for (index, entry) in batch.enumerated() {
                var own = summary
                own.found = hits[index].count
                own.milliseconds = Double(took.components.seconds) * 1000 + Double(took.components.attoseconds) / 1e15
                own.passAccounts = batch.count
                entry.reply.resume(returning: (own, hits[index]))
            }
        } catch {
            for entry in batch { entry.reply.resume(throwing: error) }
        }
        scanning = false
        startIfReady()
    }
}
