import Foundation
import JobRunner
import Lifecycle
import NIOCore
import PostgresNIO

extension ExportRecord {
    init(row: PostgresRow) throws {
        let c = Columns(row)
        self.init(
            id: try c.text("id"), accountID: try c.text("account_id"), jobID: try c.optionalInt("job_id").map(Int64.init),
            format: try c.text("format"), state: ExportState(rawValue: try c.text("state")) ?? .building,
            requestedBy: try c.text("requested_by"), cutoffAt: try c.date("cutoff_at"), blobKey: try c.optionalText("blob_key"),
            byteSize: try c.optionalInt("byte_size").map(Int64.init), omittedPhotos: try c.int32("omitted_photos"),
            completedAt: try c.optionalDate("completed_at"), expiresAt: try c.optionalDate("expires_at"),
            revokedAt: try c.optionalDate("revoked_at"), expiredAt: try c.optionalDate("expired_at"))
    }
}

extension OutboxMessage {
    init(row: PostgresRow) throws {
        let c = Columns(row)
        self.init(
            id: Int64(try c.int("id")), uniqueKey: try c.text("unique_key"), accountID: try c.text("account_id"),
            recipient: try c.optionalText("recipient"), subject: try c.text("subject"), body: try c.text("body"),
            state: OutboxState(rawValue: try c.text("state")) ?? .pending, attempts: try c.int32("attempts"),
            lastError: try c.optionalText("last_error"), createdAt: try c.date("created_at"),
            deliveredAt: try c.optionalDate("delivered_at"))
    }
}

extension ExportValue {
    /// A cell as the export writes it. Booleans come out as 0/1, as SQLite stores
    /// them, so an archive reads the same whichever backend wrote it.
    init(cell: PostgresCell, table: String) throws {
        guard cell.bytes != nil else {
            self = .null
            return
        }
        switch cell.dataType {
        case .text, .varchar, .bpchar, .name: self = .text(try cell.decode(String.self))
        case .int2: self = .integer(Int64(try cell.decode(Int16.self)))
        case .int4: self = .integer(Int64(try cell.decode(Int32.self)))
        case .int8: self = .integer(try cell.decode(Int64.self))
        case .float4: self = .real(Double(try cell.decode(Float.self)))
        case .float8: self = .real(try cell.decode(Double.self))
        case .bool: self = .integer(try cell.decode(Bool.self) ? 1 : 0)
        case .timestamptz, .timestamp, .date: self = .timestamp(try cell.decode(Date.self))
        case .bytea:
            var buffer = try cell.decode(ByteBuffer.self)
            self = .bytes(Data(buffer.readBytes(length: buffer.readableBytes) ?? []))
        case .uuid: self = .text(try cell.decode(UUID.self).uuidString.lowercased())
        default:
            throw LifecycleError(.badInput, "\(table).\(cell.columnName) has PostgreSQL type \(cell.dataType), which the export cannot write")
        }
    }

    func bind(into bindings: inout PostgresBindings) {
        switch self {
        case .null: bindings.appendNull()
        case .integer(let number): bindings.append(number)
        case .real(let number): bindings.append(number)
        case .text(let text): bindings.append(text)
        case .timestamp(let date): bindings.append(date)
        case .boolean(let flag): bindings.append(flag)
        case .bytes(let data): bindings.append(ByteBuffer(bytes: data))
        }
    }
}

extension PostgresTransaction: ExportTransaction {
    public func insertExport(_ export: ExportRecord) throws {
        try execute("""
            INSERT INTO lifecycle.exports (id, account_id, job_id, format, state, requested_by, cutoff_at, blob_key, byte_size,
              omitted_photos, completed_at, expires_at, revoked_at, expired_at)
            VALUES (\(export.id), \(export.accountID), \(export.jobID), \(export.format), \(export.state.rawValue), \(export.requestedBy),
              \(export.cutoffAt), \(export.blobKey), \(export.byteSize), \(Int32(clamping: export.omittedPhotos)), \(export.completedAt),
              \(export.expiresAt), \(export.revokedAt), \(export.expiredAt))
            """)
    }

    public func export(id: String) throws -> ExportRecord? {
        try query("SELECT * FROM lifecycle.exports WHERE id = \(id)").first.map(ExportRecord.init(row:))
    }

    public func export(jobID: Int64) throws -> ExportRecord? {
        try query("SELECT * FROM lifecycle.exports WHERE job_id = \(jobID)").first.map(ExportRecord.init(row:))
    }

    public func exports(accountID: String) throws -> [ExportRecord] {
        try query("SELECT * FROM lifecycle.exports WHERE account_id = \(accountID) ORDER BY cutoff_at DESC, id DESC").map(ExportRecord.init(row:))
    }

    public func updateExport(_ export: ExportRecord) throws {
        try execute("""
            UPDATE lifecycle.exports SET state = \(export.state.rawValue), blob_key = \(export.blobKey), byte_size = \(export.byteSize),
              omitted_photos = \(Int32(clamping: export.omittedPhotos)), completed_at = \(export.completedAt),
              expires_at = \(export.expiresAt), revoked_at = \(export.revokedAt), expired_at = \(export.expiredAt)
            WHERE id = \(export.id)
            """)
    }

    public func exportCompletions(accountID: String, since: Date) throws -> [Date] {
        try query("""
            SELECT completed_at FROM lifecycle.exports
            WHERE account_id = \(accountID) AND completed_at > \(since) AND state <> 'revoked' ORDER BY completed_at
            """).map { try $0.decode(Date.self) }
    }

    public func exportsToExpire(now: Date, limit: Int) throws -> [ExportRecord] {
        try query("SELECT * FROM lifecycle.exports WHERE state = 'ready' AND expires_at <= \(now) ORDER BY expires_at, id LIMIT \(limit)")
            .map(ExportRecord.init(row:))
    }

    public func exportRows(table: AccountDataMap.Table, accountID: String, after cursor: ExportCursor?, limit: Int) throws -> ExportRowBatch {
        let order = quoted(table.orderBy)
        let id = quoted("id")
        let columns = table.columns.map(quoted).joined(separator: ", ")
        var sql = "SELECT \(columns), \(order), \(id) FROM \(quoted(table.name)) WHERE \(quoted(table.accountColumn)) = $1"
        var bindings = try binds(accountID)
        // NULLs first, as SQLite sorts them: a cursor on a NULL order value continues
        // among the NULLs by id, then takes every non-NULL row.
        switch cursor {
        case nil:
            break
        case .some(let cursor) where cursor.orderValue == .null:
            sql += " AND ((\(order) IS NULL AND \(id) > $2) OR \(order) IS NOT NULL)"
            cursor.id.bind(into: &bindings)
        case .some(let cursor):
            sql += " AND \(order) >= $2 AND (\(order) > $2 OR \(id) > $3)"
            cursor.orderValue.bind(into: &bindings)
            cursor.id.bind(into: &bindings)
        }
        sql += " ORDER BY \(order) NULLS FIRST, \(id) LIMIT $\(bindings.count + 1)"
        bindings.append(Int64(limit))

        let count = table.columns.count
        var values: [ExportValue] = []
        values.reserveCapacity(min(limit, 4_096) * count)
        let rows = try query(PostgresQuery(unsafeSQL: sql, binds: bindings))
        var next: ExportCursor?
        for (index, row) in rows.enumerated() {
            let cells = Array(row)
            for column in 0..<count {
                var value = try ExportValue(cell: cells[column], table: table.name)
                if table.timestampColumns.contains(table.columns[column]), case .text(let text) = value {
                    guard let date = JobRunner.ISO8601.parse(text) else {
                        throw LifecycleError(.badInput, "\(table.name).\(table.columns[column]) holds '\(text)', which is not a timestamp")
                    }
                    value = .timestamp(date)
                }
                values.append(value)
            }
            // Only a full batch has a next one; only its last row's keys are needed.
            if index == limit - 1 {
                next = ExportCursor(
                    orderValue: try ExportValue(cell: cells[count], table: table.name),
                    id: try ExportValue(cell: cells[count + 1], table: table.name))
            }
        }
        return ExportRowBatch(columnCount: count, values: values, next: next)
    }

    public func exportPhotos(accountID: String, afterID: String?, limit: Int) throws -> [PhotoRecord] {
        try query("SELECT * FROM photos WHERE account_id = \(accountID) AND id > \(afterID ?? "") ORDER BY id LIMIT \(limit)")
            .map(PhotoRecord.init(row:))
    }

    public func exportStatistics(accountID: String) throws -> ExportStatistics {
        let mesocycles: (Int64, Int64) = try query("""
            SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'completed' THEN 1 ELSE 0 END), 0)::int8
            FROM mesocycles WHERE account_id = \(accountID)
            """).first.map { row -> (Int64, Int64) in try row.decode((Int64, Int64).self) } ?? (0, 0)
        let meditation: (Int64, Int64) = try query("""
            SELECT COUNT(*), COALESCE(SUM(duration_seconds), 0)::int8 FROM meditation_sessions WHERE account_id = \(accountID)
            """).first.map { row -> (Int64, Int64) in try row.decode((Int64, Int64).self) } ?? (0, 0)
        return ExportStatistics(
            mesocyclesCompleted: Int(mesocycles.1), mesocyclesTotal: Int(mesocycles.0),
            meditationSessions: Int(meditation.0), meditationSeconds: Int(meditation.1))
    }

    public func insertOutboxMessage(_ message: OutboxMessage) throws -> OutboxMessage {
        try execute("""
            INSERT INTO lifecycle.outbox (unique_key, account_id, recipient, subject, body, state, attempts, last_error, created_at, delivered_at)
            VALUES (\(message.uniqueKey), \(message.accountID), \(message.recipient), \(message.subject), \(message.body),
              \(message.state.rawValue), \(Int32(clamping: message.attempts)), \(message.lastError), \(message.createdAt), \(message.deliveredAt))
            ON CONFLICT (unique_key) DO NOTHING
            """)
        guard let stored = try outboxMessage(uniqueKey: message.uniqueKey) else {
            throw LifecycleError(.internalError, "outbox message \(message.uniqueKey) vanished right after it was written")
        }
        return stored
    }

    public func outboxMessage(uniqueKey: String) throws -> OutboxMessage? {
        try query("SELECT * FROM lifecycle.outbox WHERE unique_key = \(uniqueKey)").first.map(OutboxMessage.init(row:))
    }

    public func outboxMessages(accountID: String) throws -> [OutboxMessage] {
        try query("SELECT * FROM lifecycle.outbox WHERE account_id = \(accountID) ORDER BY id").map(OutboxMessage.init(row:))
    }

    public func markOutboxDelivered(id: Int64, at: Date) throws {
        try execute("""
            UPDATE lifecycle.outbox SET state = 'delivered', attempts = attempts + 1, last_error = NULL, delivered_at = \(at) WHERE id = \(id)
            """)
    }

    public func markOutboxFailedAttempt(id: Int64, error: String, at: Date) throws {
        try execute("UPDATE lifecycle.outbox SET attempts = attempts + 1, last_error = \(String(error.prefix(2_000))) WHERE id = \(id) AND state = 'pending'")
    }
}
