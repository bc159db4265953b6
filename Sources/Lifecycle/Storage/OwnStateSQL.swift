import Foundation
import JobRunner

/// The tables lifecycle creates: its own state, which PostgreSQL keeps in the `lifecycle`
/// schema and SQLite's one file under a `lifecycle_` prefix, and the reference app's schema
/// (`lifecycle demo`, `init`). Their columns are the same on both backends (each backend's
/// migrations create them), so what lifecycle writes there is written once, as `OwnSQL`.
public enum OwnTable: String, Sendable {
    case subjects
    case holds
    case settings
    case lookupDigests = "lookup_digests"
    case purgeProgress = "purge_progress"
    case purgeFiles = "purge_files"
    case graceValues = "grace_values"
    case auditEvents = "audit_events"
    case exports
    case outbox
    case purgeInventory = "purge_inventory"
    case deletionAttempts = "deletion_attempts"
    case partDeletionRows = "part_deletion_rows"
    case encodedOwners = "encoded_owners"
    case encodedIndexes = "encoded_indexes"
    case jobs
    /// The reference app's.
    case accounts
    case preferences
    case sessions
    case journalEntries = "journal_entries"
    case photos
    case mesocycles
    case meditationSessions = "meditation_sessions"

    var isReferenceSchema: Bool {
        switch self {
        case .accounts, .preferences, .sessions, .journalEntries, .photos, .mesocycles, .meditationSessions: true
        default: false
        }
    }
}

extension SQLDialect {
    /// The PostgreSQL schema lifecycle's own tables live in.
    public static let ownSchema = "lifecycle"

    /// Lifecycle's own table `name` (the runner's `jobs`, `migrations`, …, or an `OwnTable`'s):
    /// `lifecycle_jobs` in SQLite, `lifecycle.jobs` in PostgreSQL.
    public func ownTable(_ name: String) -> String {
        switch self {
        case .sqlite: "lifecycle_" + name
        case .postgres: Self.ownSchema + "." + name
        }
    }

    public func table(_ own: OwnTable) -> String {
        own.isReferenceSchema ? own.rawValue : ownTable(own.rawValue)
    }
}

/// A statement on lifecycle's own tables in both dialects at once: tables and values are
/// interpolated (`"SELECT … FROM \(table: .holds) WHERE subject_key = \(key)"`), and become
/// the dialect's table name and numbered placeholders when the transaction runs it.
public struct OwnSQL: ExpressibleByStringInterpolation, Sendable {
    enum Piece: Sendable {
        case literal(String)
        case table(OwnTable)
        case value(SQLValue)
        /// `FOR UPDATE` on PostgreSQL; SQLite's single writer already serialises writers.
        case rowLock
        /// `COLLATE "C"` on PostgreSQL: byte order, SQLite's own, so paging by a text key
        /// agrees between the backends.
        case byteOrder
        /// A column equal to a value whatever the case: the reference app's emails, which
        /// SQLite's column compares `COLLATE NOCASE` (its unique index) and PostgreSQL's
        /// unique index on `lower(email)`.
        case caseless(column: String, value: SQLValue)
    }

    var pieces: [Piece]

    public init(stringLiteral value: String) { pieces = [.literal(value)] }

    public init(stringInterpolation: StringInterpolation) { pieces = stringInterpolation.pieces }

    public struct StringInterpolation: StringInterpolationProtocol {
        var pieces: [Piece] = []

        public init(literalCapacity: Int, interpolationCount: Int) { pieces.reserveCapacity(interpolationCount * 2 + 1) }

        public mutating func appendLiteral(_ literal: String) { pieces.append(.literal(literal)) }
        public mutating func appendInterpolation(table: OwnTable) { pieces.append(.table(table)) }
        public mutating func appendInterpolation(_ value: SQLValue) { pieces.append(.value(value)) }
        public mutating func appendInterpolation(_ text: String) { pieces.append(.value(.text(text))) }
        public mutating func appendInterpolation(_ text: String?) { pieces.append(.value(text.map(SQLValue.text) ?? .null)) }
        public mutating func appendInterpolation(_ date: Date) { pieces.append(.value(.timestamp(date))) }
        public mutating func appendInterpolation(_ date: Date?) { pieces.append(.value(date.map(SQLValue.timestamp) ?? .null)) }
        public mutating func appendInterpolation(_ number: Int) { pieces.append(.value(.integer(Int64(number)))) }
        public mutating func appendInterpolation(_ number: Int64) { pieces.append(.value(.integer(number))) }
        public mutating func appendInterpolation(rowLock: Void) { pieces.append(.rowLock) }
        public mutating func appendInterpolation(byteOrder: Void) { pieces.append(.byteOrder) }
        public mutating func appendInterpolation(column: String, caseless value: String) { pieces.append(.caseless(column: column, value: .text(value))) }
        /// Text generated here (a list of placeholders), never a value.
        public mutating func appendInterpolation(generated: OwnSQL) { pieces.append(contentsOf: generated.pieces) }
        /// `a, b, c`, or `p.a, p.b, p.c` with a prefix.
        public mutating func appendInterpolation(columns: OwnColumns, prefix: String = "") {
            pieces.append(.literal(columns.names.map { prefix + $0 }.joined(separator: ", ")))
        }
    }

    /// A statement grown from fragments: `scope += " AND id > \(after)"`.
    public static func += (sql: inout OwnSQL, fragment: OwnSQL) { sql.pieces += fragment.pieces }

    /// `(v1, v2), (v3, v4)…`: one parenthesised group of values per element.
    static func rows<Element>(_ elements: some Sequence<Element>, _ values: (Element) -> [SQLValue]) -> OwnSQL {
        var sql: OwnSQL = ""
        for (index, element) in elements.enumerated() {
            sql += index == 0 ? "(" : ", ("
            for (column, value) in values(element).enumerated() {
                sql += column > 0 ? ", \(value)" : "\(value)"
            }
            sql += ")"
        }
        return sql
    }

    /// `locking`: whether a row lock is taken (not in a read-only transaction, where
    /// PostgreSQL refuses one).
    func statement(_ dialect: SQLDialect, resultKinds: [SchemaCatalog.ColumnKind], locking: Bool = true) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        for piece in pieces {
            switch piece {
            case .literal(let text): builder.append(text)
            case .table(let table): builder.append(dialect.table(table))
            case .value(let value): builder.append(builder.bind(value))
            case .rowLock: if dialect == .postgres && locking { builder.append(" FOR UPDATE") }
            case .byteOrder: if dialect == .postgres { builder.append(" COLLATE \"C\"") }
            case .caseless(let column, let value):
                switch dialect {
                case .sqlite: builder.append("\(column) = \(builder.bind(value))")
                case .postgres: builder.append("lower(\(column)) = lower(\(builder.bind(value)))")
                }
            }
        }
        return builder.statement(resultKinds)
    }
}

/// The columns a query reads, by name, each with the kind it is read as; the first is the
/// row's key (a message about the row names it by that).
public struct OwnColumns: Sendable {
    let names: [String]
    let kinds: [SchemaCatalog.ColumnKind]

    init(_ columns: KeyValuePairs<String, SchemaCatalog.ColumnKind>) {
        names = columns.map(\.key)
        kinds = columns.map(\.value)
    }
}

/// A row read from lifecycle's own tables, its values in the order the query named them.
public struct OwnRow: Sendable {
    let values: [SQLValue]
    let table: OwnTable
    /// The query's column names, when it said them (`OwnColumns`).
    let names: [String]?

    /// A value lifecycle never writes, put there by hand: named by table, row and column,
    /// as the operator who corrects it needs.
    private func problem(_ index: Int, _ wanted: String) -> UnreadableRow {
        guard let names else {
            return UnreadableRow(
                table: table.rawValue, row: "key \(Self.shown(values[0]))", column: "in column \(index + 1) of the query, where \(wanted) belongs,",
                value: Self.shown(values[index]))
        }
        return UnreadableRow(table: table.rawValue, row: "\(names[0]) \(Self.shown(values[0]))", column: names[index], value: Self.shown(values[index]))
    }

    private static func shown(_ value: SQLValue) -> String {
        switch value {
        case .null: "NULL"
        case .integer(let number): String(number)
        case .real(let number): String(number)
        case .text(let text): "\"\(text)\""
        case .boolean(let flag): String(flag)
        case .timestamp(let date): ISO8601.format(date)
        case .bytes(let data): "\(data.count) bytes"
        }
    }

    public func text(_ index: Int) throws -> String {
        guard let text = try optionalText(index) else { throw problem(index, "a text") }
        return text
    }

    public func optionalText(_ index: Int) throws -> String? {
        switch values[index] {
        case .null: nil
        case .text(let text): text
        default: throw problem(index, "a text")
        }
    }

    public func integer(_ index: Int) throws -> Int64 {
        guard let number = try optionalInteger(index) else { throw problem(index, "an integer") }
        return number
    }

    public func optionalInteger(_ index: Int) throws -> Int64? {
        switch values[index] {
        case .null: nil
        case .integer(let number): number
        default: throw problem(index, "an integer")
        }
    }

    public func date(_ index: Int) throws -> Date {
        guard let date = try optionalDate(index) else { throw problem(index, "a date") }
        return date
    }

    public func optionalDate(_ index: Int) throws -> Date? {
        switch values[index] {
        case .null: nil
        case .timestamp(let date): date
        default: throw problem(index, "a date")
        }
    }

    public func boolean(_ index: Int) throws -> Bool {
        switch values[index] {
        case .boolean(let flag): return flag
        default: throw problem(index, "a boolean")
        }
    }

    /// A value of one of lifecycle's enumerations, stored as its raw text.
    public func one<Kind: RawRepresentable>(_ index: Int, of kind: Kind.Type = Kind.self) throws -> Kind where Kind.RawValue == String {
        guard let value = Kind(rawValue: try text(index)) else { throw problem(index, "one of \(Kind.self)'s values") }
        return value
    }

    public func optionalOne<Kind: RawRepresentable>(_ index: Int, of kind: Kind.Type = Kind.self) throws -> Kind? where Kind.RawValue == String {
        guard let text = try optionalText(index) else { return nil }
        guard let value = Kind(rawValue: text) else { throw problem(index, "one of \(Kind.self)'s values") }
        return value
    }

    public func state(_ index: Int) throws -> AccountState {
        guard let state = AccountState(rawValue: try text(index)) else { throw problem(index, "an account state") }
        return state
    }
}

/// A row of lifecycle's tables or the reference schema holds a value lifecycle never writes
/// there (see `CheckedRow`).
public struct UnreadableRow: Error, CustomStringConvertible {
    public init(table: String, row: String, column: String, value: String) {
        self.table = table
        self.row = row
        self.column = column
        self.value = value
    }

    public let table: String
    public let row: String
    public let column: String
    public let value: String

    public var description: String {
        "the \(table) row with \(row) has \(column) \(value), which lifecycle cannot read: correct that column or delete the row"
    }
}

/// A transaction that reads and writes lifecycle's own state through statements written
/// once for both dialects (`OwnSQL`): a backend supplies only its dialect and the two
/// calls that run generated SQL.
public protocol OwnStateTransaction: GeneratedSQLTransaction {
    var dialect: SQLDialect { get }
    /// Whether a statement may ask for row locks (`FOR UPDATE`): PostgreSQL refuses them in
    /// its read-only transactions. SQLite renders no such clause.
    var mayLockRows: Bool { get }
    /// The columns of one of the tables lifecycle creates, as the database has them now
    /// (a migration of the adopter's may have added some): the catalog reader's.
    func columns(of table: OwnTable) throws -> [SchemaCatalog.Column]
}

extension OwnStateTransaction {
    func select(_ sql: OwnSQL, from table: OwnTable, _ kinds: SchemaCatalog.ColumnKind...) throws -> [OwnRow] {
        try rows(sql.statement(dialect, resultKinds: kinds, locking: mayLockRows)).map { OwnRow(values: $0, table: table, names: nil) }
    }

    func select(_ sql: OwnSQL, from table: OwnTable, reading columns: OwnColumns) throws -> [OwnRow] {
        try rows(sql.statement(dialect, resultKinds: columns.kinds, locking: mayLockRows)).map { OwnRow(values: $0, table: table, names: columns.names) }
    }

    @discardableResult
    func change(_ sql: OwnSQL) throws -> Int {
        try execute(sql.statement(dialect, resultKinds: []))
    }
}
