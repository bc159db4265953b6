import Foundation
import GRDB
import Lifecycle

extension ExportRecord {
    init(row: Row) {
        self.init(
            id: row["id"], accountID: row["account_id"], jobID: row["job_id"], format: row["format"],
            state: ExportState(rawValue: row["state"]) ?? .building, requestedBy: row["requested_by"],
            cutoffAt: row["cutoff_at"], blobKey: row["blob_key"], byteSize: row["byte_size"],
            omittedPhotos: row["omitted_photos"], completedAt: row["completed_at"], expiresAt: row["expires_at"],
            revokedAt: row["revoked_at"], expiredAt: row["expired_at"])
    }
}

extension OutboxMessage {
    init(row: Row) {
        self.init(
            id: row["id"], uniqueKey: row["unique_key"], accountID: row["account_id"], recipient: row["recipient"],
            subject: row["subject"], body: row["body"], state: OutboxState(rawValue: row["state"]) ?? .pending,
            attempts: row["attempts"], lastError: row["last_error"], createdAt: row["created_at"],
            deliveredAt: row["delivered_at"])
    }
}

extension ExportValue {
    /// The value as stored, for keyset cursors: compared in SQL exactly as the column holds it.
    init(storage value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .real(number)
        case .string(let text): self = .text(text)
        case .blob(let data): self = .bytes(data)
        }
    }

    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let number): number.databaseValue
        case .real(let number): number.databaseValue
        case .text(let text): text.databaseValue
        case .timestamp(let date): date.databaseValue
        case .bytes(let data): data.databaseValue
        }
    }
}

extension SQLiteTransaction: ExportTransaction {
    public func insertExport(_ export: ExportRecord) throws {
        try db.execute(
            sql: """
                INSERT INTO exports (id, account_id, job_id, format, state, requested_by, cutoff_at, blob_key, byte_size,
                  omitted_photos, completed_at, expires_at, revoked_at, expired_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                export.id, export.accountID, export.jobID, export.format, export.state.rawValue, export.requestedBy,
                export.cutoffAt, export.blobKey, export.byteSize, export.omittedPhotos, export.completedAt,
                export.expiresAt, export.revokedAt, export.expiredAt,
            ])
    }

    public func export(id: String) throws -> ExportRecord? {
        try Row.fetchOne(db, sql: "SELECT * FROM exports WHERE id = ?", arguments: [id]).map(ExportRecord.init(row:))
    }

    public func export(jobID: Int64) throws -> ExportRecord? {
        try Row.fetchOne(db, sql: "SELECT * FROM exports WHERE job_id = ?", arguments: [jobID]).map(ExportRecord.init(row:))
    }

    public func exports(accountID: String) throws -> [ExportRecord] {
        try Row.fetchAll(
            db, sql: "SELECT * FROM exports WHERE account_id = ? ORDER BY cutoff_at DESC, id DESC", arguments: [accountID]
        ).map(ExportRecord.init(row:))
    }

    public func updateExport(_ export: ExportRecord) throws {
        try db.execute(
            sql: """
                UPDATE exports SET state = ?, blob_key = ?, byte_size = ?, omitted_photos = ?, completed_at = ?,
                  expires_at = ?, revoked_at = ?, expired_at = ?
                WHERE id = ?
                """,
            arguments: [
                export.state.rawValue, export.blobKey, export.byteSize, export.omittedPhotos, export.completedAt,
                export.expiresAt, export.revokedAt, export.expiredAt, export.id,
            ])
    }

    public func exportCompletions(accountID: String, since: Date) throws -> [Date] {
        try Date.fetchAll(
            db,
            sql: """
                SELECT completed_at FROM exports
                WHERE account_id = ? AND completed_at > ? AND state != 'revoked' ORDER BY completed_at
                """,
            arguments: [accountID, since])
    }

    public func exportsToExpire(now: Date, limit: Int) throws -> [ExportRecord] {
        try Row.fetchAll(
            db, sql: "SELECT * FROM exports WHERE state = 'ready' AND expires_at <= ? ORDER BY expires_at, id LIMIT ?",
            arguments: [now, limit]
        ).map(ExportRecord.init(row:))
    }

    public func exportRows(table: AccountDataMap.Table, accountID: String, after cursor: ExportCursor?, limit: Int) throws -> ExportRowBatch {
        let name = table.name.quotedDatabaseIdentifier
        let order = table.orderBy.quotedDatabaseIdentifier
        let id = "id".quotedDatabaseIdentifier
        let columns = table.columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        var sql = "SELECT \(columns), \(order), \(id) FROM \(name) WHERE \(table.accountColumn.quotedDatabaseIdentifier) = ?"
        var arguments: StatementArguments = [accountID]
        // SQLite sorts NULLs first: a cursor on a NULL order value continues among the
        // NULLs by id, then takes every non-NULL row; otherwise a plain keyset range,
        // written so the (account, order) index serves it.
        switch cursor {
        case nil:
            break
        case .some(let cursor) where cursor.orderValue == .null:
            sql += " AND ((\(order) IS NULL AND \(id) > ?) OR \(order) IS NOT NULL)"
            arguments += [cursor.id.databaseValue]
        case .some(let cursor):
            sql += " AND \(order) >= ? AND (\(order) > ? OR \(id) > ?)"
            arguments += [cursor.orderValue.databaseValue, cursor.orderValue.databaseValue, cursor.id.databaseValue]
        }
        sql += " ORDER BY \(order), \(id) LIMIT ?"
        arguments += [limit]

        // The (account, order) index visits the table's rows out of storage order, so with
        // SQLite's default 2 MB page cache almost every row costs a pread of its page
        // (100,000 entries: about 100,000 of them, a third of the export's reading time).
        // A larger cache keeps a table of that size in memory once read. It stays with the
        // pooled reader connection (at most this much each) until the connection closes.
        try db.execute(sql: "PRAGMA cache_size = -\(Self.exportCacheKiB)")
        let count = table.columns.count
        let isTimestamp = table.columns.map { table.timestampColumns.contains($0) }
        var values: [ExportValue] = []
        values.reserveCapacity(min(limit, 4_096) * count)
        var rows = 0
        var next: ExportCursor?
        let fetched = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try fetched.next() {
            for index in 0..<count {
                let value: DatabaseValue = row[index]
                if isTimestamp[index], !value.isNull {
                    guard let date = Self.storedDate(value) ?? Date.fromDatabaseValue(value) else {
                        throw LifecycleError(.badInput, "\(table.name).\(table.columns[index]) holds \(value), which is not a timestamp")
                    }
                    values.append(.timestamp(date))
                } else {
                    values.append(ExportValue(storage: value))
                }
            }
            rows += 1
            // Only a full batch has a next one; only its last row's keys are needed.
            if rows == limit {
                next = ExportCursor(orderValue: ExportValue(storage: row[count]), id: ExportValue(storage: row[count + 1]))
            }
        }
        return ExportRowBatch(columnCount: count, values: values, next: next)
    }

    /// Page cache for connections that stream a table into an export, in KiB (32 MiB).
    static let exportCacheKiB = 32_768

    /// GRDB stores dates as `YYYY-MM-DD HH:MM:SS.SSS` in UTC. Read here without a
    /// Calendar, which was the largest per-row cost of a 100,000-row export; any other
    /// form goes through GRDB's own decoder.
    static func storedDate(_ value: DatabaseValue) -> Date? {
        guard case .string(var text) = value.storage else { return nil }
        return text.withUTF8 { bytes -> Date? in
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
    }

    public func exportPhotos(accountID: String, afterID: String?, limit: Int) throws -> [PhotoRecord] {
        try Row.fetchAll(
            db, sql: "SELECT * FROM photos WHERE account_id = ? AND id > ? ORDER BY id LIMIT ?",
            arguments: [accountID, afterID ?? "", limit]
        ).map(PhotoRecord.init(row:))
    }

    public func exportStatistics(accountID: String) throws -> ExportStatistics {
        let mesocycles = try Row.fetchOne(
            db, sql: "SELECT COUNT(*) AS total, COALESCE(SUM(status = 'completed'), 0) AS completed FROM mesocycles WHERE account_id = ?",
            arguments: [accountID])
        let meditation = try Row.fetchOne(
            db, sql: "SELECT COUNT(*) AS sessions, COALESCE(SUM(duration_seconds), 0) AS seconds FROM meditation_sessions WHERE account_id = ?",
            arguments: [accountID])
        return ExportStatistics(
            mesocyclesCompleted: mesocycles?["completed"] ?? 0, mesocyclesTotal: mesocycles?["total"] ?? 0,
            meditationSessions: meditation?["sessions"] ?? 0, meditationSeconds: meditation?["seconds"] ?? 0)
    }

    public func insertOutboxMessage(_ message: OutboxMessage) throws -> OutboxMessage {
        try db.execute(
            sql: """
                INSERT INTO outbox (unique_key, account_id, recipient, subject, body, state, attempts, last_error, created_at, delivered_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (unique_key) DO NOTHING
                """,
            arguments: [
                message.uniqueKey, message.accountID, message.recipient, message.subject, message.body,
                message.state.rawValue, message.attempts, message.lastError, message.createdAt, message.deliveredAt,
            ])
        guard let stored = try outboxMessage(uniqueKey: message.uniqueKey) else {
            throw LifecycleError(.internalError, "outbox message \(message.uniqueKey) vanished right after it was written")
        }
        return stored
    }

    public func outboxMessage(uniqueKey: String) throws -> OutboxMessage? {
        try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE unique_key = ?", arguments: [uniqueKey]).map(OutboxMessage.init(row:))
    }

    public func outboxMessages(accountID: String) throws -> [OutboxMessage] {
        try Row.fetchAll(db, sql: "SELECT * FROM outbox WHERE account_id = ? ORDER BY id", arguments: [accountID])
            .map(OutboxMessage.init(row:))
    }

    public func markOutboxDelivered(id: Int64, at: Date) throws {
        try db.execute(
            sql: "UPDATE outbox SET state = 'delivered', attempts = attempts + 1, last_error = NULL, delivered_at = ? WHERE id = ?",
            arguments: [at, id])
    }

    public func markOutboxFailedAttempt(id: Int64, error: String, at: Date) throws {
        try db.execute(
            sql: "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ? AND state = 'pending'",
            arguments: [String(error.prefix(2_000)), id])
    }
}

enum ExportSchema {
    static func register(in migrator: inout DatabaseMigrator) {
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
