import Foundation
import GRDB
import GRDBSQLite
import JobRunner
import Lifecycle

extension SQLiteStore {
    public var dialect: SQLDialect { .sqlite }
}

extension SQLiteTransaction: OwnStateTransaction {
    public var dialect: SQLDialect { .sqlite }
    public var mayLockRows: Bool { true }

    public func rows(_ statement: SQLStatement) throws -> [[SQLValue]] {
        let prepared = try db.cachedStatement(sql: statement.sql)
        let raw = try Self.bind(statement, to: prepared)
        defer { sqlite3_reset(raw) }
        let count = Int(sqlite3_column_count(raw))
        var rows: [[SQLValue]] = []
        while try Self.step(raw, prepared) {
            rows.append((0..<count).map { index in
                Self.value(
                    DatabaseValue(sqliteStatement: raw, index: Int32(index)),
                    as: index < statement.resultKinds.count ? statement.resultKinds[index] : .other)
            })
        }
        return rows
    }

    @discardableResult
    public func execute(_ statement: SQLStatement) throws -> Int {
        let prepared = try db.cachedStatement(sql: statement.sql)
        let raw = try Self.bind(statement, to: prepared)
        defer { sqlite3_reset(raw) }
        while try Self.step(raw, prepared) {}
        return db.changesCount
    }

    /// Binds a generated statement's values with SQLite's own calls. GRDB checks arguments
    /// against the statement's parameter names, and SQLite finds each `?NNN` name by walking
    /// a list: a residue scan's pass binding thousands of values spent more time there than
    /// in the scan. The builder numbers every value it binds, so there is nothing to check.
    static func bind(_ statement: SQLStatement, to prepared: Statement) throws -> SQLiteStatement {
        let raw = prepared.sqliteStatement
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
        guard Int(sqlite3_bind_parameter_count(raw)) == statement.bindings.count else {
            throw DatabaseError(
                resultCode: .SQLITE_RANGE,
                message: "the statement takes \(sqlite3_bind_parameter_count(raw)) values but \(statement.bindings.count) were bound",
                sql: statement.sql)
        }
        for (offset, value) in statement.bindings.enumerated() {
            let code = Self.databaseValue(value).bind(to: raw, at: Int32(offset + 1))
            guard code == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(sqlite3_db_handle(raw))), sql: statement.sql)
            }
        }
        return raw
    }

    /// One step: true on a row, false when done.
    static func step(_ raw: SQLiteStatement, _ prepared: Statement) throws -> Bool {
        switch sqlite3_step(raw) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let status:
            throw DatabaseError(
                resultCode: ResultCode(rawValue: status), message: String(cString: sqlite3_errmsg(sqlite3_db_handle(raw))), sql: prepared.sql)
        }
    }

    /// The export's own reader (`readExportRows`), memory-mapped as the reference export reads.
    public func exportPage(_ statement: SQLStatement, columns: Int, limit: Int) throws -> ExportPage {
        try db.execute(sql: "PRAGMA mmap_size = \(Self.exportMapBytes)")
        let prepared = try db.cachedStatement(sql: statement.sql)
        _ = try Self.bind(statement, to: prepared)
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

    static func databaseValue(_ value: SQLValue) -> DatabaseValue {
        switch value {
        case .null: .null
        case .integer(let number): number.databaseValue
        case .real(let number): number.databaseValue
        case .text(let text): text.databaseValue
        case .boolean(let flag): flag.databaseValue
        case .timestamp(let date): date.stored.databaseValue
        case .bytes(let data): data.databaseValue
        }
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

