import Foundation
import GRDB
import GRDBSQLite

/// A statement on the job runner's hot path (a claim's lease, a group commit's marks),
/// bound, stepped and read through SQLite's own calls on GRDB's prepared statement.
///
/// Why not GRDB's arguments and rows: every value of a `StatementArguments` is boxed,
/// the array is built again and validated on each execution, and each column of a row is
/// decoded through a generic conformance. On a no-op drain that was about a third of the
/// Swift time of the one writer thread, which bounds the drain. GRDB still prepares the
/// statement, keeps it for the connection's life and finalizes it; a text run through
/// `HotStatement` must be run only through it, since GRDB does not see its bindings.
///
/// Only inside a write transaction GRDB opened: a failed step throws, and GRDB's
/// transaction block rolls back (or sees that SQLite already did).
struct HotStatement {
    private let statement: Statement
    private let raw: SQLiteStatement
    private let db: Database

    init(_ db: Database, sql: String) throws {
        statement = try db.cachedStatement(sql: sql)
        raw = statement.sqliteStatement
        self.db = db
        // A previous run ended done or failed: reset rewinds it either way (what it returns
        // is that run's error, already thrown then).
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    // Binding can only fail on a wrong index or a value over SQLite's length limit, both
    // bugs here rather than conditions to handle: the step then fails on the missing value.

    func bind(_ value: Int64, at index: Int32) {
        sqlite3_bind_int64(raw, index, value)
    }

    func bind(_ value: Int, at index: Int32) {
        sqlite3_bind_int64(raw, index, Int64(value))
    }

    /// `ids` from parameter `first` on, the last one repeated up to `size` parameters: an IN
    /// list of a statement prepared for more ids than there are (`SQLTextByCount`).
    func bind(_ ids: [Int64], paddedTo size: Int, from first: Int32) {
        for offset in 0..<size { bind(ids[min(offset, ids.count - 1)], at: first + Int32(offset)) }
    }

    func bind(_ text: String?, at index: Int32) {
        guard let text else {
            sqlite3_bind_null(raw, index)
            return
        }
        // Up to its first NUL, as GRDB binds text, so what GRDB reads back is what was bound.
        sqlite3_bind_text(raw, index, text, -1, sqliteTransient)
    }

    /// As GRDB stores a date, so it compares with every date GRDB wrote (`StoredDate`).
    func bind(_ date: Date, at index: Int32) {
        bind(StoredDate.text(of: date) ?? String.fromDatabaseValue(date.databaseValue), at: index)
    }

    /// Steps once: true with a row to read, false once done. A run stopped before it is
    /// done must be `reset()`.
    func step() throws -> Bool {
        switch sqlite3_step(raw) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw DatabaseError(resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage, sql: statement.sql)
        }
    }

    /// Steps to the end, reading no rows.
    func execute() throws {
        while try step() {}
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(raw, column)
    }

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(raw, column) == SQLITE_NULL
    }

    /// The column as GRDB reads it, for what GRDB decodes (dates).
    func value(_ column: Int32) -> DatabaseValue {
        DatabaseValue(sqliteStatement: raw, index: column)
    }

    /// As GRDB reads text (up to a NUL, which GRDB's binding never stores), invalid UTF-8 repaired.
    func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(raw, column) else { return nil }
        return String(cString: bytes)
    }

    /// Ends a run left before its last row (an unfinished statement would keep its read
    /// open past the transaction), or readies a finished one to be bound and run again.
    func reset() {
        sqlite3_reset(raw)
    }
}

/// SQLite copies the bound text before the call returns, so a Swift string's temporary
/// C buffer may go.
private let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
