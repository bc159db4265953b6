import Foundation

/// A value bound into, or read out of, SQL generated from the data map.
public enum SQLValue: Sendable, Equatable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case boolean(Bool)
    case timestamp(Date)
    case bytes(Data)

    /// For messages and for keys compared as text.
    public var text: String? {
        switch self {
        case .text(let text): text
        case .integer(let number): String(number)
        default: nil
        }
    }
}

/// One statement with its bound values, in the dialect it was generated for.
public struct SQLStatement: Sendable, Equatable, CustomStringConvertible {
    public var sql: String
    public var bindings: [SQLValue]
    /// Columns each row of a query returns, with the kind to read them as.
    public var resultKinds: [SchemaCatalog.ColumnKind]
    /// An export page's (`exportPage`): the result columns holding its page key, as stored.
    public var cursorColumns: [Int] = []

    public var description: String { sql }
}

/// The two SQL dialects account-data statements are generated in. The differences are
/// few and all here: placeholders, how a table is named, null-safe equality and the
/// casts PostgreSQL needs to compare a bound text with a uuid or json column.
public enum SQLDialect: Sendable {
    case sqlite
    case postgres

    func quote(_ identifier: String) -> String {
        // Statements are generated anew for every batch of every account: Foundation's
        // replacingOccurrences would cost more than the rest of the generation together.
        guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
        return "\"" + identifier.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
    }

    func table(_ name: DataMap.TableName) -> String {
        switch self {
        case .sqlite: return quote(name.name)  // One file, one schema (main).
        case .postgres:
            guard let schema = name.schema else { return quote(name.name) }
            return quote(schema) + "." + quote(name.name)
        }
    }
}

/// Builds one statement, numbering placeholders as it goes.
struct SQLBuilder {
    let dialect: SQLDialect
    private(set) var sql = ""
    private(set) var bindings: [SQLValue] = []

    init(_ dialect: SQLDialect) { self.dialect = dialect }

    mutating func append(_ text: String) { sql += text }

    /// A placeholder for `value`, cast on PostgreSQL to the column's own type so a text
    /// compares with a uuid, and a boolean lands in a boolean column.
    mutating func bind(_ value: SQLValue, as column: SchemaCatalog.Column? = nil) -> String {
        // 0 and 1 are how SQLite keeps booleans, and how a map may write them: PostgreSQL
        // casts no integer to boolean.
        if column?.kind == .boolean, case .integer(let number) = value {
            bindings.append(.boolean(number != 0))
        } else {
            bindings.append(value)
        }
        // Numbered on both dialects (SQLite reads `?NNN`), so a statement may use its
        // values in another order than they were bound.
        switch dialect {
        case .sqlite:
            return "?\(bindings.count)"
        case .postgres:
            let placeholder = "$\(bindings.count)"
            guard let column, value != .null else { return placeholder }
            return "CAST(\(placeholder) AS \(column.declaredType))"
        }
    }

    /// `lhs` equal to `value`, a null equal to a null.
    mutating func nullSafeEquals(_ lhs: String, _ value: SQLValue, as column: SchemaCatalog.Column) -> String {
        if value == .null { return "\(lhs) IS NULL" }
        // PostgreSQL's json has no equality operator (jsonb has): compared as its text.
        if dialect == .postgres, column.declaredType.lowercased() == "json" {
            return "CAST(\(lhs) AS text) IS NOT DISTINCT FROM \(bind(value))"
        }
        let placeholder = bind(value, as: column)
        return switch dialect {
        case .sqlite: "\(lhs) IS \(placeholder)"
        case .postgres: "\(lhs) IS NOT DISTINCT FROM \(placeholder)"
        }
    }

    func statement(_ kinds: [SchemaCatalog.ColumnKind] = []) -> SQLStatement {
        SQLStatement(sql: sql, bindings: bindings, resultKinds: kinds)
    }
}

/// Account-data SQL generated from a checked map: one generator for both dialects, so a
/// rule (which rows are the user's, what a purge deletes) is written once.
public struct DataMapSQL: Sendable {
    public let plan: DataMapPlan
    public let dialect: SQLDialect
    /// A part deletion's rows as they were when it was asked for (RecordedRowsSQL.swift):
    /// every statement then reaches only those rows of its tables, and what hangs on them.
    public var recorded: RecordedRows?

    public init(plan: DataMapPlan, dialect: SQLDialect, recorded: RecordedRows? = nil) {
        self.plan = plan
        self.dialect = dialect
        self.recorded = recorded
    }

    var catalog: SchemaCatalog { plan.catalog }
    func q(_ identifier: String) -> String { dialect.quote(identifier) }

    /// The subject's key as the owner column stores it.
    func keyValue(_ key: String, for column: SchemaCatalog.Column) -> SQLValue {
        if column.kind == .integer, let number = Int64(key) { return .integer(number) }
        return .text(key)
    }

    func column(_ table: DataMap.TableName, _ name: String) -> SchemaCatalog.Column {
        // The plan checked every column it names exists.
        catalog.table(table)?.column(name) ?? .init(name: name, declaredType: "text", kind: .text, isNotNull: false)
    }

    // MARK: Whose rows

    /// `alias`'s rows that belong to the subject `key`.
    func owned(_ owner: DataMapPlan.Owner, table: DataMap.TableName, alias: String, key: String, depth: Int = 0, into builder: inout SQLBuilder) -> String {
        let condition = ownedAsItStands(owner, table: table, alias: alias, key: key, depth: depth, into: &builder)
        guard let recorded, recorded.tables.contains(table) else { return condition }
        return condition + " AND " + recordedRow(table, alias: alias, recorded: recorded, into: &builder)
    }

    /// `alias`'s rows that belong to the subject `key` now, recorded or not.
    func ownedAsItStands(_ owner: DataMapPlan.Owner, table: DataMap.TableName, alias: String, key: String, depth: Int = 0, into builder: inout SQLBuilder) -> String {
        switch owner {
        case .column(let name):
            return "\(alias).\(q(name)) = \(builder.bind(keyValue(key, for: column(table, name)), as: column(table, name)))"
        case .value(let value):
            return match(value, table: table, alias: alias, key: key, into: &builder)
        case .sides(let sides):
            let terms = sides.map { side in match(side.value, table: table, alias: alias, key: key, into: &builder) }
            return "(" + terms.joined(separator: " OR ") + ")"
        case .parent(let via, let parent, let parentColumn, let parentOwner):
            let inner = "p\(depth)"
            let condition = owned(Self.deleting(parentOwner), table: parent, alias: inner, key: key, depth: depth + 1, into: &builder)
            return "\(alias).\(q(via)) IN (SELECT \(inner).\(q(parentColumn)) FROM \(dialect.table(parent)) \(inner) WHERE \(condition))"
        }
    }

    /// A row naming several users is the user's to erase (and its children with it) only
    /// through the sides that delete it: a side only masked leaves the row, and what hangs
    /// off it, to the other user (Django's SET_NULL beside a CASCADE on one table).
    static func deleting(_ owner: DataMapPlan.Owner) -> DataMapPlan.Owner {
        guard case .sides(let sides) = owner else { return owner }
        let deleting = sides.filter { $0.erase.deletesRows }
        return deleting.isEmpty || deleting.count == sides.count ? owner : .sides(deleting)
    }

    /// Rows of one side of a two-user table.
    private func side(_ side: DataMap.Side, table: DataMap.TableName, alias: String, key: String, into builder: inout SQLBuilder) -> String {
        let condition = match(side.value, table: table, alias: alias, key: key, into: &builder)
        guard let recorded, recorded.tables.contains(table) else { return condition }
        return condition + " AND " + recordedRow(table, alias: alias, recorded: recorded, into: &builder)
    }

    /// Rows whose value names the subject: the column itself, a key inside a JSON column
    /// (compared as text: JSON keeps numbers and strings apart, an app may write either),
    /// or a generic relation's key column on the rows whose type is the subject's.
    func match(_ value: DataMap.OwnerValue, table: DataMap.TableName, alias: String, key: String, into builder: inout SQLBuilder) -> String {
        let expression = "\(alias).\(q(value.column))"
        if !value.json.isEmpty {
            switch dialect {
            case .postgres:
                let path = builder.bind(.text("{" + value.json.joined(separator: ",") + "}"))
                return "(\(expression) #>> CAST(\(path) AS text[])) = \(builder.bind(.text(key)))"
            case .sqlite:
                let path = builder.bind(.text("$" + value.json.map { ".\"\($0)\"" }.joined()))
                // json_extract fails the whole statement on text that is not JSON.
                return "(CASE WHEN json_valid(\(expression)) THEN CAST(json_extract(\(expression), \(path)) AS TEXT) END) = \(builder.bind(.text(key)))"
            }
        }
        let owner = column(table, value.column)
        var condition: String
        if owner.kind == .integer || (owner.kind == .other && dialect == .postgres && owner.declaredType.lowercased() == "uuid") {
            condition = "\(expression) = \(builder.bind(keyValue(key, for: owner), as: owner))"
        } else {
            // A generic relation's key column is text whatever the keys it holds are.
            condition = "\(expression) = \(builder.bind(.text(key), as: owner))"
        }
        if let type = value.type {
            let typeColumn = column(table, type.column)
            if let expected = type.value {
                condition += " AND \(alias).\(q(type.column)) = \(builder.bind(.text(expected), as: typeColumn))"
            } else if let typeTable = type.table.map(catalog.qualified), let typeKey = catalog.typeKey(type, of: table) {
                let terms = type.match.map { pair in "k.\(q(pair.column)) = \(builder.bind(.text(pair.value), as: column(typeTable, pair.column)))" }
                condition += " AND \(alias).\(q(type.column)) IN (SELECT k.\(q(typeKey)) FROM \(dialect.table(typeTable)) k WHERE \(terms.joined(separator: " AND ")))"
            }
        }
        return "(" + condition + ")"
    }

    // MARK: The grace period (on_deletion)

    /// The user's rows a deletion request removes (sessions, tokens); never put back.
    public func graceRemove(_ removal: DataMap.OnDeletion.Removal, key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let table = dialect.table(removal.table)
        let condition = graceOwned(removal, alias: table, key: key, into: &builder)
        builder.append("DELETE FROM \(table) WHERE \(condition)")
        return builder.statement()
    }

    /// The user's rows of a `remove:` entry: by its owner, or through the rows its parent
    /// entry removes (`via:`), which are still there when it runs.
    private func graceOwned(_ removal: DataMap.OnDeletion.Removal, alias: String, key: String, depth: Int = 0, into builder: inout SQLBuilder) -> String {
        guard let parentName = removal.parent, let parentColumn = removal.parentColumn,
              let parent = plan.onDeletion.remove.first(where: { $0.table == parentName }) else {
            return match(removal.owner, table: removal.table, alias: alias, key: key, into: &builder)
        }
        let inner = "g\(depth)"
        let condition = graceOwned(parent, alias: inner, key: key, depth: depth + 1, into: &builder)
        return "\(alias).\(q(removal.owner.column)) IN (SELECT \(inner).\(q(parentColumn)) FROM \(dialect.table(parentName)) \(inner) WHERE \(condition))"
    }

    /// One row per row of the user's in the source table that no row of the table links to
    /// yet (`on_deletion: insert:`): run again, it adds nothing. A row another transaction
    /// inserted meanwhile (the app blacklisting the same token) is left to it.
    public func graceInsert(_ insertion: DataMap.OnDeletion.Insertion, key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let target = dialect.table(insertion.table)
        let linked = q(insertion.linkedColumn ?? "")
        var columns = [insertion.link]
        var values = ["s.\(linked)"]
        for name in insertion.now {
            columns.append(name)
            // The database's clock, as Django's auto_now_add would write it (SQLite: text in UTC).
            values.append(dialect == .postgres ? "CURRENT_TIMESTAMP" : "strftime('%Y-%m-%d %H:%M:%f', 'now')")
        }
        for (name, value) in insertion.values {
            columns.append(name)
            values.append(builder.bind(value.resolved(key: key).sqlValue, as: column(insertion.table, name)))
        }
        let condition = match(insertion.sourceOwner, table: insertion.source, alias: "s", key: key, into: &builder)
        builder.append("""
            INSERT INTO \(target) (\(columns.map(q).joined(separator: ", "))) SELECT \(values.joined(separator: ", ")) \
            FROM \(dialect.table(insertion.source)) s WHERE \(condition) \
            AND NOT EXISTS (SELECT 1 FROM \(target) x WHERE x.\(q(insertion.link)) = s.\(linked)) ON CONFLICT DO NOTHING
            """)
        return builder.statement()
    }

    /// The rows of `keys` (of a table whose owner is encoded).
    public func graceDelete(_ removal: DataMap.OnDeletion.Removal, keys: [String]) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let key = graceKey(removal.table)[0]
        let placeholders = keys.map { builder.bind(.text($0), as: column(removal.table, key)) }
        builder.append("DELETE FROM \(dialect.table(removal.table)) WHERE \(q(key)) IN (\(placeholders.joined(separator: ", ")))")
        return builder.statement()
    }

    /// Before a deletion request sets values: each row's primary key, then the values it
    /// replaces, all as text (what a restore writes back).
    public func graceCapture(_ setting: DataMap.OnDeletion.Setting, key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let columns = graceKey(setting.table) + setting.values.map(\.column)
        let condition = match(setting.owner, table: setting.table, alias: "t", key: key, into: &builder)
        builder.append("SELECT \(columns.map { "CAST(t.\(q($0)) AS TEXT)" }.joined(separator: ", ")) FROM \(dialect.table(setting.table)) t WHERE \(condition)")
        return builder.statement(columns.map { _ in .text })
    }

    public func graceSet(_ setting: DataMap.OnDeletion.Setting, key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let table = dialect.table(setting.table)
        let assignments = setting.values.map { "\(q($0.column)) = \(builder.bind($0.value.resolved(key: key).sqlValue, as: column(setting.table, $0.column)))" }
        let condition = match(setting.owner, table: setting.table, alias: table, key: key, into: &builder)
        builder.append("UPDATE \(table) SET \(assignments.joined(separator: ", ")) WHERE \(condition)")
        return builder.statement()
    }

    /// Puts one kept value back into the row whose primary key is `row` (as `graceCapture`
    /// read it).
    public func graceRestore(table name: DataMap.TableName, row: [String?], column columnName: String, value: String?) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let assignment = "\(q(columnName)) = \(builder.bind(value.map(SQLValue.text) ?? .null, as: column(name, columnName)))"
        // A primary key holds no null; `=` keeps its index usable (IS NOT DISTINCT FROM does not).
        let key = zip(graceKey(name), row).map { "\(q($0.0)) = \(builder.bind(.text($0.1 ?? ""), as: column(name, $0.0)))" }
        builder.append("UPDATE \(dialect.table(name)) SET \(assignment) WHERE \(key.joined(separator: " AND "))")
        return builder.statement()
    }

    /// The columns that tell a row of an `on_deletion: set:` table apart (the plan checked it has a primary key).
    public func graceKey(_ table: DataMap.TableName) -> [String] { catalog.table(table)?.primaryKey ?? [] }

    // MARK: Looking an account up

    /// The keys of the user rows whose `columns` (the key, lookup columns) hold `reference`; at most two.
    /// `ignoringCase`: the map's `ignore_case:` columns among them compare whatever the case.
    public func findSubject(_ reference: String, columns: [String], ignoringCase: Bool = false) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let subject = plan.subject
        let keyColumn = column(subject.table, subject.key)
        var terms: [String] = []
        // A reference that cannot be of a column's type (an email against a uuid key) must
        // not make the query fail: such columns are compared as text.
        func term(_ name: String, _ column: SchemaCatalog.Column) -> String? {
            switch column.kind {
            case .integer:
                guard let number = Int64(reference) else { return nil }
                return "s.\(q(name)) = \(builder.bind(.integer(number), as: column))"
            case .text where ignoringCase && subject.ignoreCase.contains(name):
                // SQLite's NOCASE folds ASCII letters; PostgreSQL's lower() as the database's
                // locale does, and an app's unique index on lower(column) serves it.
                return dialect == .postgres
                    ? "lower(s.\(q(name))) = lower(\(builder.bind(.text(reference), as: column)))"
                    : "s.\(q(name)) = \(builder.bind(.text(reference), as: column)) COLLATE NOCASE"
            case .text:
                return "s.\(q(name)) = \(builder.bind(.text(reference), as: column))"
            default:
                return "CAST(s.\(q(name)) AS \(dialect == .postgres ? "text" : "TEXT")) = \(builder.bind(.text(reference)))"
            }
        }
        for name in columns {
            let described = name == subject.key ? keyColumn : column(subject.table, name)
            if let found = term(name, described) { terms.append(found) }
        }
        if terms.isEmpty { terms.append("1 = 0") }
        let keyText = dialect == .postgres ? "CAST(s.\(q(subject.key)) AS text)" : "CAST(s.\(q(subject.key)) AS TEXT)"
        builder.append("SELECT \(keyText) FROM \(dialect.table(subject.table)) s WHERE \(terms.joined(separator: " OR ")) LIMIT 2")
        return builder.statement([.text])
    }

    /// One row when the user row with this key exists.
    public func subjectExists(key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let subject = plan.subject
        let keyColumn = column(subject.table, subject.key)
        guard keyColumn.kind != .integer || Int64(key) != nil else { return SQLStatement(sql: "SELECT 1 WHERE 1 = 0", bindings: [], resultKinds: [.integer]) }
        builder.append("SELECT 1 FROM \(dialect.table(subject.table)) s WHERE s.\(q(subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        return builder.statement([.integer])
    }

    /// One column of the user row, as text.
    public func subjectValue(column name: String, key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let subject = plan.subject
        let keyColumn = column(subject.table, subject.key)
        let value = dialect == .postgres ? "CAST(s.\(q(name)) AS text)" : "s.\(q(name))"
        builder.append("SELECT \(value) FROM \(dialect.table(subject.table)) s WHERE s.\(q(subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        return builder.statement([.text])
    }

    /// The stored password hash of the subject, wherever the map says it lives.
    public func passwordHash(key: String) -> SQLStatement? {
        guard let password = plan.subject.password else { return nil }
        var builder = SQLBuilder(dialect)
        let table = password.table ?? plan.subject.table
        let keyName = password.key ?? plan.subject.key
        let keyColumn = column(table, keyName)
        builder.append("SELECT h.\(q(password.column)) FROM \(dialect.table(table)) h WHERE h.\(q(keyName)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        return builder.statement([.text])
    }

    /// Stores a new password hash where the map says hashes live; nil when the map names none.
    public func setPasswordHash(key: String, hash: String) -> SQLStatement? {
        guard let password = plan.subject.password else { return nil }
        var builder = SQLBuilder(dialect)
        let table = password.table ?? plan.subject.table
        let keyName = password.key ?? plan.subject.key
        let keyColumn = column(table, keyName)
        let value = builder.bind(.text(hash))
        builder.append("UPDATE \(dialect.table(table)) SET \(q(password.column)) = \(value) WHERE \(q(keyName)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        return builder.statement([])
    }

    // MARK: Counting and reading

    /// How many of the table's rows are the subject's.
    public func countOwned(_ table: DataMapPlan.TablePlan, key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let condition = owned(table.owner, table: table.table.name, alias: "t", key: key, into: &builder)
        builder.append("SELECT COUNT(*) FROM \(dialect.table(table.table.name)) t WHERE \(condition)")
        return builder.statement([.integer])
    }

    // MARK: Files

    /// Blob keys named by the subject's rows in one column, in key order after `after`:
    /// the rows a purge deletes (or masks with the column emptied), so their files go.
    public func blobKeys(_ table: DataMapPlan.TablePlan, column name: String, key: String, after: String?, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let condition: String
        if case .sides(let sides) = table.owner {
            // A side that is only masked keeps the row, and its files, for the other user.
            let deleting = sides.filter { $0.erase == .delete }
            guard !deleting.isEmpty else { return emptyTextQuery() }
            condition = "(" + deleting.map { side($0, table: table.table.name, alias: "t", key: key, into: &builder) }.joined(separator: " OR ") + ")"
        } else {
            condition = owned(table.owner, table: table.table.name, alias: "t", key: key, into: &builder)
        }
        return blobQuery(table: table.table.name, column: name, alias: "t", condition: condition, after: after, limit: limit, builder: &builder)
    }

    /// Blob keys of other users' rows a cascade deletes with the subject's rows.
    public func cascadeBlobKeys(_ table: DataMapPlan.TablePlan, cascade index: Int, column name: String, key: String, after: String?, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let condition = cascadeRows(table, index: index, alias: "c", key: key, target: .deletedEventually, into: &builder)
        return blobQuery(table: table.cascades[index].table, column: name, alias: "c", condition: condition, after: after, limit: limit, builder: &builder)
    }

    /// The subject row's own files.
    public func subjectBlobKeys(column name: String, key: String, after: String?, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let subject = plan.subject
        let keyColumn = column(subject.table, subject.key)
        let condition = "s.\(q(subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))"
        return blobQuery(table: subject.table, column: name, alias: "s", condition: condition, after: after, limit: limit, builder: &builder)
    }

    private func blobQuery(
        table: DataMap.TableName, column name: String, alias: String, condition: String, after: String?, limit: Int, builder: inout SQLBuilder
    ) -> SQLStatement {
        let blob = "\(alias).\(q(name))"
        var sql = "SELECT DISTINCT \(blob) FROM \(dialect.table(table)) \(alias) WHERE \(condition) AND \(blob) IS NOT NULL AND \(blob) <> ''"
        if let after { sql += " AND \(blob) > \(builder.bind(.text(after), as: column(table, name)))" }
        builder.append(sql + " ORDER BY \(blob) LIMIT \(limit)")
        return builder.statement([.text])
    }

    private func emptyTextQuery() -> SQLStatement {
        SQLStatement(sql: "SELECT '' WHERE 1 = 0", bindings: [], resultKinds: [.text])
    }

    /// Which of the subject's rows a cascade follows.
    enum CascadeTarget {
        /// The rows deletable now (nothing references them any more): those the same
        /// transaction deletes, so a row that ends up masked keeps what references it.
        case deletableNow
        /// The rows the purge will delete sooner or later: all but those another user's
        /// row keeps (`delete_unless_referenced_by`). For listing files before any row goes.
        case deletedEventually
    }

    /// Rows of cascade `index`: those referencing the subject's rows of the table that
    /// `target` names, or rows of an earlier cascade (a comment's files, under the user's post).
    private func cascadeRows(
        _ table: DataMapPlan.TablePlan, index: Int, alias: String, key: String, target: CascadeTarget, into builder: inout SQLBuilder
    ) -> String {
        let cascade = table.cascades[index]
        let inner = "r\(index)"
        let condition: String
        if cascade.referencedTable == table.table.name {
            condition = switch target {
            case .deletableNow: deletable(table, alias: inner, key: key, into: &builder)
            case .deletedEventually: notKept(table, alias: inner, key: key, into: &builder)
            }
        } else {
            let earlier = table.cascades.indices.first { table.cascades[$0].table == cascade.referencedTable && $0 < index } ?? 0
            condition = cascadeRows(table, index: earlier, alias: inner, key: key, target: target, into: &builder)
        }
        return "\(alias).\(q(cascade.column)) IN (SELECT \(inner).\(q(cascade.referencedColumn)) FROM \(dialect.table(cascade.referencedTable)) \(inner) WHERE \(condition))"
    }

    /// The subject's rows that nothing references any more through a reference that
    /// blocks a delete (a reply, a row that keeps it): deleting them cannot fail.
    private func deletable(_ table: DataMapPlan.TablePlan, alias: String, key: String, side onlySide: DataMap.Side? = nil, into builder: inout SQLBuilder) -> String {
        var condition = onlySide.map { side($0, table: table.table.name, alias: alias, key: key, into: &builder) }
            ?? owned(Self.deleting(table.owner), table: table.table.name, alias: alias, key: key, into: &builder)
        for reference in blockingReferences(table) {
            condition += " AND NOT EXISTS (SELECT 1 FROM \(dialect.table(reference.table)) b WHERE b.\(q(reference.column)) = \(alias).\(q(reference.referencedColumn)))"
        }
        return condition
    }

    /// The subject's rows no other user's row keeps. A row kept only through the user's
    /// own rows is counted as deleted: the exact set is known only as leaves go.
    private func notKept(_ table: DataMapPlan.TablePlan, alias: String, key: String, into builder: inout SQLBuilder) -> String {
        var condition = owned(Self.deleting(table.owner), table: table.table.name, alias: alias, key: key, into: &builder)
        for reference in table.keptBy {
            var theirs = "1 = 1"
            if let referencing = plan.plan(for: reference.table) {
                theirs = "NOT (" + owned(referencing.owner, table: referencing.table.name, alias: "k", key: key, into: &builder) + ")"
            }
            condition += " AND NOT EXISTS (SELECT 1 FROM \(dialect.table(reference.table)) k WHERE k.\(q(reference.column)) = \(alias).\(q(reference.referencedColumn)) AND \(theirs))"
        }
        return condition
    }

    // MARK: Erasing

    /// Deletes at most `limit` rows of cascade `index` (other users' rows that go with the
    /// subject's). Cascades are run from the last to the first, so a reference between
    /// them never blocks a delete.
    public func deleteCascade(_ table: DataMapPlan.TablePlan, cascade index: Int, key: String, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let cascade = table.cascades[index]
        let keyColumns = primaryKey(of: cascade.table)
        let condition = cascadeRows(table, index: index, alias: "c", key: key, target: .deletableNow, into: &builder)
        let bound = builder.bind(.integer(Int64(limit)))
        if let value = cascade.setValue {
            // The other user's row stays, no longer pointing at the row about to go; one that
            // is set no longer matches, so repeating the statement ends.
            let rows = rowSelector(cascade.table, key: keyColumns)
            let target = column(cascade.table, cascade.column)
            let assignment = "\(q(cascade.column)) = \(builder.bind(value.resolved(key: key).sqlValue, as: target))"
            // A row already holding the value is done, even when the value is one of the keys
            // going (a default naming her own row): it must not be picked again and again.
            let pending = value == .null ? "" : " AND c.\(q(cascade.column)) <> \(builder.bind(value.resolved(key: key).sqlValue, as: target))"
            builder.append("UPDATE \(dialect.table(cascade.table)) SET \(assignment) WHERE \(rows(nil)) IN (SELECT \(rows("c")) FROM \(dialect.table(cascade.table)) c WHERE \(condition)\(pending) LIMIT \(bound))")
            return builder.statement()
        }
        let blobs = plan.mappedTable(cascade.table)?.table.blobs ?? []
        builder.append(deleteByKey(cascade.table, keyColumns, select: "FROM \(dialect.table(cascade.table)) c WHERE \(condition)", alias: "c", limit: bound)
            + returning(blobs))
        return builder.statement(blobs.map { _ in .text })
    }

    /// ` RETURNING` the file columns of the rows a statement deletes, so the purge records
    /// the files in the same transaction that takes the last rows naming them.
    private func returning(_ blobs: [String]) -> String {
        guard !blobs.isEmpty else { return "" }
        let columns = blobs.map { dialect == .postgres ? "CAST(\(q($0)) AS text)" : q($0) }
        return " RETURNING " + columns.joined(separator: ", ")
    }

    /// The file columns of the subject's rows a mask is about to empty (the rows not yet
    /// masked), read before the mask: an UPDATE's RETURNING gives the new values.
    public func blobsBeforeMask(_ table: DataMapPlan.TablePlan, mask: DataMap.Mask, key: String, side onlySide: DataMap.Side? = nil) -> SQLStatement? {
        let blobs = table.table.blobs.filter { blob in mask.contains { $0.column == blob } }
        guard !blobs.isEmpty else { return nil }
        var builder = SQLBuilder(dialect)
        let name = table.table.name
        let condition = unmasked(table, mask: mask, key: key, side: onlySide, into: &builder)
        let columns = blobs.map { dialect == .postgres ? "CAST(t.\(q($0)) AS text)" : "t.\(q($0))" }
        builder.append("SELECT \(columns.joined(separator: ", ")) FROM \(dialect.table(name)) t WHERE \(condition)")
        return builder.statement(blobs.map { _ in .text })
    }

    /// The user row's file columns, read before the row is erased.
    public func subjectBlobs(key: String) -> SQLStatement? {
        var subject = plan.subject
        // A user row kept as a tombstone keeps the files of the columns its mask leaves.
        subject.blobs = subject.blobs.filter(subject.erase.takesFiles)
        guard !subject.blobs.isEmpty else { return nil }
        var builder = SQLBuilder(dialect)
        let keyColumn = column(subject.table, subject.key)
        let columns = subject.blobs.map { dialect == .postgres ? "CAST(s.\(q($0)) AS text)" : "s.\(q($0))" }
        builder.append("SELECT \(columns.joined(separator: ", ")) FROM \(dialect.table(subject.table)) s WHERE s.\(q(subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        return builder.statement(subject.blobs.map { _ in .text })
    }

    // MARK: Verifying

    /// How many of the subject's rows are still there as they were, for every mapped table
    /// (each side of a two-user table apart) and the user row: for a deleted table every
    /// row the map says is the user's, for a masked one every such row that does not hold
    /// exactly the mask. Erasure is verified when each is zero. Rows of `(position, count)`,
    /// `position` being the table's index in `plan.tables`, `plan.tables.count` the user
    /// row; few statements of many `UNION ALL` terms (SQLite allows 500 per statement), as
    /// the read runs for every purged account.
    public func verificationReads(key: String, includingSubject: Bool = true) -> [SQLStatement] {
        var terms: [(position: Int, table: DataMapPlan.TablePlan?, side: DataMap.Side?)] = []
        for (position, table) in plan.tables.enumerated() {
            if case .sides(let sides) = table.owner {
                terms += sides.map { (position, table, $0) }
            } else {
                terms.append((position, table, nil))
            }
        }
        if includingSubject { terms.append((plan.tables.count, nil, nil)) }
        return stride(from: 0, to: terms.count, by: 100).map { start in
            var builder = SQLBuilder(dialect)
            let parts = terms[start..<min(start + 100, terms.count)].map { term -> String in
                guard let table = term.table else {
                    let condition = subjectUnerased(key: key, into: &builder)
                    return "SELECT \(term.position), COUNT(*) FROM \(dialect.table(plan.subject.table)) s WHERE \(condition)"
                }
                let mask = term.side.map(\.erase.mask) ?? table.table.erase.mask
                let condition = unmasked(table, mask: mask, key: key, side: term.side, into: &builder)
                return "SELECT \(term.position), COUNT(*) FROM \(dialect.table(table.table.name)) t WHERE \(condition)"
            }
            builder.append(parts.joined(separator: " UNION ALL "))
            return builder.statement([.integer, .integer])
        }
    }

    /// The user row, if it is still there as it was: present when it is deleted, or
    /// holding anything but the mask when it is kept.
    public func subjectRemaining(key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let condition = subjectUnerased(key: key, into: &builder)
        builder.append("SELECT COUNT(*) FROM \(dialect.table(plan.subject.table)) s WHERE \(condition)")
        return builder.statement([.integer])
    }

    private func subjectUnerased(key: String, into builder: inout SQLBuilder) -> String {
        let subject = plan.subject
        let keyColumn = column(subject.table, subject.key)
        var condition = "s.\(q(subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))"
        if let mask = subject.erase.mask {
            let done = mask.map { builder.nullSafeEquals("s.\(q($0.column))", $0.value.resolved(key: key).sqlValue, as: column(subject.table, $0.column)) }
            condition += " AND NOT (" + done.joined(separator: " AND ") + ")"
        }
        return condition
    }

    /// Which of `keys` a row of the map still names in any file column, as bytes (an NFC
    /// and an NFD key are two files): those are not deleted.
    public func namedFiles(_ keys: [String], in tx: some GeneratedSQLTransaction) throws -> Set<ExactText> {
        var named = Set<ExactText>()
        for (table, column) in fileColumns {
            for row in try tx.rows(stillNamed(keys, table: table, column: column)) {
                if let file = row.first?.text { named.insert(ExactText(file)) }
            }
        }
        return named
    }

    /// Which of `keys` a row of `table` still names in `column`: a file shared with a row
    /// the purge keeps (another account's, or one kept masked) stays.
    public func stillNamed(_ keys: [String], table: DataMap.TableName, column name: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let blob = "t.\(q(name))"
        // Compared in the column's own type only where that is text: a key bound as a uuid
        // would fail the statement for every key that is not one.
        let asText = dialect == .postgres && column(table, name).kind != .text
        let compared = asText ? "CAST(\(blob) AS text)" : blob
        let placeholders = keys.map { asText ? builder.bind(.text($0)) : builder.bind(.text($0), as: column(table, name)) }
        let selected = dialect == .postgres ? "CAST(\(blob) AS text)" : blob
        builder.append("SELECT DISTINCT \(selected) FROM \(dialect.table(table)) t WHERE \(compared) IN (\(placeholders.joined(separator: ", ")))")
        return builder.statement([.text])
    }

    /// Every file column the map names, with its table: where a file may still be named.
    public var fileColumns: [(table: DataMap.TableName, column: String)] {
        plan.subject.blobs.map { (plan.subject.table, $0) } + plan.tables.flatMap { table in table.table.blobs.map { (table.table.name, $0) } }
    }

    /// The keys at the top level of the JSON values of a column, from its first rows: a
    /// look at what an audit payload holds (`actor_id`), without reading the whole table.
    public func jsonKeysSample(table: DataMap.TableName, column name: String, rows: Int) -> SQLStatement {
        let value = q(name)
        let sql: String = switch dialect {
        case .postgres: """
            SELECT DISTINCT k FROM (SELECT CAST(\(value) AS json) AS v FROM \(dialect.table(table)) WHERE \(value) IS NOT NULL LIMIT \(rows)) s,
            LATERAL json_object_keys(CASE WHEN json_typeof(s.v) = 'object' THEN s.v END) AS k
            """
        case .sqlite: """
            SELECT DISTINCT j.key FROM (SELECT \(value) AS v FROM \(dialect.table(table)) WHERE json_valid(\(value)) LIMIT \(rows)) s,
            json_each(s.v) AS j WHERE json_type(s.v) = 'object'
            """
        }
        return SQLStatement(sql: sql, bindings: [], resultKinds: [.text])
    }

    /// Deletes at most `limit` of the subject's rows that nothing references any more
    /// (another row of the same table — a reply — or a row that keeps it): the rows that
    /// can go now without a foreign key failing. Repeated until it deletes none.
    public func deleteOwned(_ table: DataMapPlan.TablePlan, key: String, limit: Int, side onlySide: DataMap.Side? = nil) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let condition = deletable(table, alias: "t", key: key, side: onlySide, into: &builder)
        let bound = builder.bind(.integer(Int64(limit)))
        builder.append(deleteByKey(table.table.name, table.key, select: "FROM \(dialect.table(table.table.name)) t WHERE \(condition)", alias: "t", limit: bound)
            + returning(table.table.blobs))
        return builder.statement(table.table.blobs.map { _ in .text })
    }

    /// Masks at most `limit` of the subject's rows not masked yet; returns a statement
    /// whose affected-row count is how many it masked.
    public func maskOwned(_ table: DataMapPlan.TablePlan, mask: DataMap.Mask, key: String, limit: Int, side onlySide: DataMap.Side? = nil) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let name = table.table.name
        let condition = unmasked(table, mask: mask, key: key, side: onlySide, into: &builder)
        let rows = rowSelector(name, key: table.key)
        let selection = "SELECT \(rows("t")) FROM \(dialect.table(name)) t WHERE \(condition) LIMIT \(builder.bind(.integer(Int64(limit))))"
        let assignments = mask.map { "\(q($0.column)) = \(builder.bind($0.value.resolved(key: key).sqlValue, as: column(name, $0.column)))" }
        builder.append("UPDATE \(dialect.table(name)) SET \(assignments.joined(separator: ", ")) WHERE \(rows(nil)) IN (\(selection))")
        return builder.statement()
    }

    /// The subject's rows of the table (or of one side) that do not hold `mask` yet; all of
    /// them without a mask. Alias `t`.
    private func unmasked(
        _ table: DataMapPlan.TablePlan, mask: DataMap.Mask?, key: String, side onlySide: DataMap.Side?, into builder: inout SQLBuilder
    ) -> String {
        let name = table.table.name
        var condition = onlySide.map { side($0, table: name, alias: "t", key: key, into: &builder) }
            ?? owned(table.owner, table: name, alias: "t", key: key, into: &builder)
        if let mask {
            let done = mask.map { builder.nullSafeEquals("t.\(q($0.column))", $0.value.resolved(key: key).sqlValue, as: column(name, $0.column)) }
            condition += " AND NOT (" + done.joined(separator: " AND ") + ")"
        }
        return condition
    }

    /// The subject row's erase: deleted, or masked into a tombstone.
    public func eraseSubject(key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let subject = plan.subject
        let keyColumn = column(subject.table, subject.key)
        switch subject.erase {
        case .mask(let mask), .deleteUnlessReferenced(_, let mask):
            let assignments = mask.map { "\(q($0.column)) = \(builder.bind($0.value.resolved(key: key).sqlValue, as: column(subject.table, $0.column)))" }
            builder.append("UPDATE \(dialect.table(subject.table)) SET \(assignments.joined(separator: ", ")) WHERE \(q(subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        case .delete:
            builder.append("DELETE FROM \(dialect.table(subject.table)) WHERE \(q(subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        }
        return builder.statement()
    }

    /// Whether deleting some of the subject's rows of the table can make more of them
    /// deletable (a reply gone, its post may go): then a delete is repeated until it
    /// deletes none. Otherwise one that deletes fewer than its limit has deleted them all.
    public func deletesInRounds(_ table: DataMapPlan.TablePlan) -> Bool {
        !blockingReferences(table).isEmpty
    }

    /// References into the table a delete must wait for: the table's own (replies) and
    /// those that keep a row (`delete_unless_referenced_by`).
    private func blockingReferences(_ table: DataMapPlan.TablePlan) -> [DataMapPlan.Cascade] {
        var references = table.keptBy
        // A reply the table's own `set:` cascade unlinks first no longer holds a row back.
        let unlinked = Set(table.cascades.filter { !$0.deletesRows && $0.table == table.table.name }.map(\.column))
        for key in catalog.foreignKeys(from: table.table.name)
        where key.referencedTable == table.table.name && key.columns.count == 1 && !key.onDelete.handlesReferencingRows
            && !unlinked.contains(key.columns[0])
            && !references.contains(where: { $0.table == key.table && $0.column == key.columns[0] }) {
            references.append(.init(table: key.table, column: key.columns[0], referencedTable: key.referencedTable, referencedColumn: key.referencedColumns[0]))
        }
        return references
    }

    private func primaryKey(of table: DataMap.TableName) -> [String] {
        plan.mappedTable(table)?.key ?? catalog.table(table)?.primaryKey ?? []
    }

    /// `a, b` for a select list.
    func list(_ columns: [String], alias: String) -> String {
        columns.map { "\(alias).\(q($0))" }.joined(separator: ", ")
    }

    /// `(a, b)` (or `a`) for comparing a key.
    private func tuple(_ columns: [String], alias: String?) -> String {
        let names = columns.map { name in alias.map { "\($0).\(q(name))" } ?? q(name) }
        return names.count == 1 ? names[0] : "(" + names.joined(separator: ", ") + ")"
    }

    /// `DELETE … WHERE key IN (SELECT key … LIMIT n)`: both dialects bound a delete this way.
    /// The limit is a placeholder: a purge asks for what is left of its batch, and each
    /// limit written out would be another statement to prepare and keep.
    private func deleteByKey(_ table: DataMap.TableName, _ key: [String], select: String, alias: String, limit: String) -> String {
        let rows = rowSelector(table, key: key)
        return "DELETE FROM \(dialect.table(table)) WHERE \(rows(nil)) IN (SELECT \(rows(alias)) \(select) LIMIT \(limit))"
    }

    /// How a bounded statement names the rows it picked: SQLite's rowid where the table has
    /// one, the table's key otherwise. Each row picked by a text key is looked up again in
    /// the key's own index before it goes; by rowid it is found in the table itself, which
    /// made the reference purge's deletes a fifth cheaper (Debian's SQLite, 10,000
    /// accounts of 100 rows).
    private func rowSelector(_ table: DataMap.TableName, key: [String]) -> (_ alias: String?) -> String {
        if let rowID = catalog.table(table)?.rowID {
            return { alias in alias.map { "\($0).\(rowID)" } ?? rowID }
        }
        return { alias in alias.map { self.list(key, alias: $0) } ?? self.tuple(key, alias: nil) }
    }
}

extension DataMap.MaskValue {
    var sqlValue: SQLValue {
        switch self {
        case .null: .null
        case .text(let text), .template(let text): .text(text)
        case .integer(let number): .integer(number)
        case .real(let number): .real(number)
        case .boolean(let flag): .boolean(flag)
        }
    }
}
