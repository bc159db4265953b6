import Foundation
import GRDB
import JobRunner
import Lifecycle

extension SQLiteStore {
    public var dialect: SQLDialect { .sqlite }
}

extension SQLiteTransaction: OwnStateTransaction {
    public var dialect: SQLDialect { .sqlite }
    public var mayLockRows: Bool { true }

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

