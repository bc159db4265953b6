import Foundation
import GRDB
import GRDBSQLite
import Lifecycle

extension SQLiteTransaction {
    /// Steps a prepared export query, appending the first `columns` values of each row.
    /// GRDB prepares and binds; the rows are read with SQLite's own column functions, each
    /// text cell straight into its String: through GRDB's Row cursor the same 100,000 rows
    /// cost about as much again as SQLite's own work. `row` sees each row after its values
    /// are read (the statement still on it). A `.timestamp` column holding something that
    /// is not one is kept as stored.
    static func readExportRows(
        _ statement: Statement, columns count: Int, kinds: [SchemaCatalog.ColumnKind], into values: inout [ExportValue],
        row: (SQLiteStatement, Int) throws -> Void
    ) throws {
        let raw = statement.sqliteStatement
        defer { sqlite3_reset(raw) }
        var rows = 0
        while true {
            let status = sqlite3_step(raw)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: status), message: String(cString: sqlite3_errmsg(sqlite3_db_handle(raw))),
                    sql: statement.sql)
            }
            for index in 0..<count {
                let column = Int32(index)
                let type = sqlite3_column_type(raw, column)
                switch kinds[index] {
                case .timestamp where type != SQLITE_NULL:
                    // Text is read only from a text column: asking SQLite for another type's
                    // text converts the value in place, and its type is then undefined.
                    let stored = type == SQLITE_TEXT ? Self.storedDate(Self.textBytes(raw, column)) : nil
                    if let date = stored ?? Date.fromDatabaseValue(DatabaseValue(sqliteStatement: raw, index: column)) {
                        values.append(.timestamp(date))
                    } else {
                        values.append(Self.exportValue(raw, column, type: type))
                    }
                case .boolean where type == SQLITE_INTEGER:
                    values.append(.boolean(sqlite3_column_int64(raw, column) != 0))
                default:
                    values.append(Self.exportValue(raw, column, type: type))
                }
            }
            try row(raw, rows)
            rows += 1
        }
    }

    /// How much of the database file a connection that streams a table into an export
    /// maps into memory: address space, not memory used (the kernel's page cache is).
    static let exportMapBytes = 1 << 30

    /// GRDB stores dates as `YYYY-MM-DD HH:MM:SS.SSS` in UTC. Read here without a
    /// Calendar, which was the largest per-row cost of a 100,000-row export; any other
    /// form goes through GRDB's own decoder.
    static func storedDate(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count == 19 || bytes.count == 23, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
              bytes[10] == UInt8(ascii: " ") || bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
              bytes[16] == UInt8(ascii: ":") else { return nil }
        func number(_ start: Int, _ length: Int) -> Int? {
            var result = 0
            for index in start..<(start + length) {
                let digit = Int(bytes[index]) - Int(UInt8(ascii: "0"))
                guard (0...9).contains(digit) else { return nil }
                result = result * 10 + digit
            }
            return result
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
              let minute = number(14, 2), let second = number(17, 2),
              year >= 1, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else { return nil }
        var milliseconds = 0
        if bytes.count == 23 {
            guard bytes[19] == UInt8(ascii: "."), let fraction = number(20, 3) else { return nil }
            milliseconds = fraction
        }
        // Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's days_from_civil).
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = shiftedYear / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second
        return Date(timeIntervalSince1970: TimeInterval(seconds) + TimeInterval(milliseconds) / 1_000)
    }

    /// The column's UTF-8 text as SQLite holds it, valid until the next step.
    static func textBytes(_ statement: SQLiteStatement, _ column: Int32) -> UnsafeBufferPointer<UInt8> {
        // sqlite3_column_text before sqlite3_column_bytes, as SQLite's documentation asks.
        guard let text = sqlite3_column_text(statement, column) else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, column)))
    }

    /// The value as stored, for the files and for keyset cursors (compared in SQL exactly as the column holds it).
    /// `type`: the column's `sqlite3_column_type`, read before any conversion.
    static func exportValue(_ statement: SQLiteStatement, _ column: Int32, type: Int32) -> ExportValue {
        switch type {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT: return .text(String(decoding: textBytes(statement, column), as: UTF8.self))
        case SQLITE_BLOB:
            guard let bytes = sqlite3_column_blob(statement, column) else { return .bytes(Data()) }
            return .bytes(Data(bytes: bytes, count: Int(sqlite3_column_bytes(statement, column))))
        default: return .null
        }
    }

    }

enum ExportSchema {
    static func register(in migrator: inout Migrator) {
        migrator.registerMigration("v2-exports") { db in
            try db.execute(sql: """
                CREATE TABLE exports (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    job_id INTEGER,
                    format TEXT NOT NULL CHECK (format IN ('zip','tar.gz')),
                    state TEXT NOT NULL CHECK (state IN ('building','ready','expired','revoked')),
                    requested_by TEXT NOT NULL,
                    cutoff_at DATETIME NOT NULL,
                    blob_key TEXT,
                    byte_size INTEGER,
                    omitted_photos INTEGER NOT NULL DEFAULT 0,
                    completed_at DATETIME,
                    expires_at DATETIME,
                    revoked_at DATETIME,
                    expired_at DATETIME
                );
                CREATE INDEX exports_account ON exports(account_id, completed_at);
                CREATE INDEX exports_job ON exports(job_id);
                -- The expiry job's scan stays cheap however many expired exports pile up.
                CREATE INDEX exports_ready_expiry ON exports(expires_at) WHERE state = 'ready';

                -- Messages to users, written with the event they report. The unique key makes
                -- a repeated job step find its message instead of writing a second one.
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    unique_key TEXT NOT NULL UNIQUE,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    recipient TEXT,
                    subject TEXT NOT NULL,
                    body TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('pending','delivered')),
                    attempts INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT,
                    created_at DATETIME NOT NULL,
                    delivered_at DATETIME
                );
                CREATE INDEX outbox_account ON outbox(account_id);
                CREATE INDEX outbox_pending ON outbox(created_at) WHERE state = 'pending';
                """)
        }
    }
}
