import Foundation
import GRDB
import Lifecycle

/// One row of a table, read column by column with each value checked: a value of the wrong
/// kind (a date that is none, text where a number belongs, NULL in a column lifecycle always
/// fills, all written into the file by hand) throws `UnreadableRow` naming the table, the
/// row and the column, where GRDB's typed subscripts stop the process. Job rows have their
/// own reader (`JobRecord(row:)`), on the worker's hot path.
struct CheckedRow {
    let row: Row
    let table: String
    /// The column that says which row this is, for the message.
    let key: String
    /// The selected columns in order, for a row read by position.
    let columns: [String]

    init(_ row: Row, table: String, key: String, columns: [String] = []) {
        self.row = row
        self.table = table
        self.key = key
        self.columns = columns
    }

    /// `Value` optional: NULL reads as nil, and only a value of the wrong kind throws.
    func callAsFunction<Value: DatabaseValueConvertible>(_ column: String) throws -> Value {
        try converted(row[column], column)
    }

    /// By position, for a row selected with `columns` listed.
    func callAsFunction<Value: DatabaseValueConvertible>(_ index: Int) throws -> Value {
        try converted(row[index], columns[index])
    }

    /// A column holding one of `Kind`'s raw values.
    func oneOf<Kind: RawRepresentable>(_ column: String, _ kind: Kind.Type = Kind.self) throws -> Kind where Kind.RawValue == String {
        try oneOfValue(row[column], column)
    }

    /// The same by position.
    func oneOf<Kind: RawRepresentable>(_ index: Int) throws -> Kind where Kind.RawValue == String {
        try oneOfValue(row[index], columns[index])
    }

    /// The same, where NULL is allowed.
    func optionalOneOf<Kind: RawRepresentable>(_ column: String, _ kind: Kind.Type = Kind.self) throws -> Kind? where Kind.RawValue == String {
        let value: DatabaseValue = row[column]
        return value.isNull ? nil : try oneOfValue(value, column) as Kind
    }

    private func converted<Value: DatabaseValueConvertible>(_ value: DatabaseValue, _ column: String) throws -> Value {
        guard let converted = Value.fromDatabaseValue(value) else { throw unreadable(column, value) }
        return converted
    }

    private func oneOfValue<Kind: RawRepresentable>(_ value: DatabaseValue, _ column: String) throws -> Kind where Kind.RawValue == String {
        guard let text = String.fromDatabaseValue(value), let kind = Kind(rawValue: text) else { throw unreadable(column, value) }
        return kind
    }

    private func unreadable(_ column: String, _ value: DatabaseValue) -> UnreadableRow {
        let keyValue: DatabaseValue = row.hasColumn(key) ? row[key] : .null
        return UnreadableRow(table: table, row: "\(key) \(keyValue)", column: column, value: "\(value)")
    }
}

