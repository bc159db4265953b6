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

    public func abandonedBuilds(after: String?, limit: Int) throws -> [ExportRecord] {
        try query("""
            SELECT e.* FROM lifecycle.exports e JOIN lifecycle.jobs j ON j.id = e.job_id
            WHERE e.state = 'building' AND j.state IN ('cancelled', 'dead') AND e.id > \(after ?? "") ORDER BY e.id LIMIT \(limit)
            """).map(ExportRecord.init(row:))
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
