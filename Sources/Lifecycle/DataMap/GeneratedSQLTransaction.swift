import Foundation

/// Runs statements generated from the data map (`DataMapSQL`) inside one of the store's
/// transactions: the app's tables are read and erased through these two calls only.
public protocol GeneratedSQLTransaction {
    /// Every row of a query, each value read as the statement's `resultKinds` say.
    func rows(_ statement: SQLStatement) throws -> [[SQLValue]]
    /// Runs a statement and returns how many rows it changed.
    @discardableResult
    func execute(_ statement: SQLStatement) throws -> Int
    /// One page of an export query (`DataMapSQL.exportPage`, at most `limit` rows): the
    /// first `columns` values of every row as the archive writes them, in one array, and,
    /// when the page is full, its last row's `cursorColumns` as stored, which the next
    /// page starts after.
    func exportPage(_ statement: SQLStatement, columns: Int, limit: Int) throws -> ExportPage
    /// What this connection's role may do with each table, read now: row level security
    /// or a privilege can change under a running worker, and a purge checks before it erases.
    func tableAccess(_ tables: [DataMap.TableName]) throws -> [DataMap.TableName: SchemaCatalog.Access]
    /// Readies a transaction that erases the app's rows: every constraint checked at its
    /// statement, deferred ones too (Django declares its foreign keys DEFERRABLE INITIALLY
    /// DEFERRED), so a refusal names the statement, and so the table, instead of coming at
    /// COMMIT; and the map's `erase_settings` in force until the transaction ends.
    func prepareErasure(settings: [DataMap.TransactionSetting]) throws
}

public struct ExportPage: Sendable {
    public var values: [ExportValue]
    public var rows: Int
    /// nil when the page was not full: it was the last.
    public var last: [SQLValue]?

    public init(values: [ExportValue], rows: Int, last: [SQLValue]?) {
        self.values = values
        self.rows = rows
        self.last = last
    }
}

extension GeneratedSQLTransaction {
    /// A database without roles, privileges or row level security (SQLite).
    public func tableAccess(_ tables: [DataMap.TableName]) throws -> [DataMap.TableName: SchemaCatalog.Access] {
        Dictionary(tables.map { ($0, SchemaCatalog.Access.full) }, uniquingKeysWith: { first, _ in first })
    }

    /// SQLite checks a deferred foreign key only at COMMIT, and has no way to say otherwise;
    /// it has no settings either (the plan refuses `erase_settings` on it).
    public func prepareErasure(settings: [DataMap.TransactionSetting]) throws {}

    /// Through `rows`: what a backend without a faster reader of its own uses.
    public func exportPage(_ statement: SQLStatement, columns: Int, limit: Int) throws -> ExportPage {
        let rows = try rows(statement)
        var values: [ExportValue] = []
        values.reserveCapacity(rows.count * columns)
        for row in rows {
            for index in 0..<columns {
                values.append(ExportValue(row[index], timestamp: statement.resultKinds[index] == .timestamp))
            }
        }
        return ExportPage(
            values: values, rows: rows.count, last: rows.count == limit ? rows.last.map { row in statement.cursorColumns.map { row[$0] } } : nil)
    }
}
