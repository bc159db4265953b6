import Foundation

/// What the export job reads and writes inside one database transaction.
extension OwnStateTransaction {
    public func insertExport(_ export: ExportRecord) throws {
        try change("""
            INSERT INTO \(table: .exports) (id, account_id, job_id, format, state, requested_by, cutoff_at, blob_key, byte_size,
              omitted_photos, completed_at, expires_at, revoked_at, expired_at)
            VALUES (\(export.id), \(export.accountID), \(export.jobID.map(SQLValue.integer) ?? .null), \(export.format), \(export.state.rawValue),
              \(export.requestedBy), \(export.cutoffAt), \(export.blobKey), \(export.byteSize.map(SQLValue.integer) ?? .null), \(export.omittedPhotos),
              \(export.completedAt), \(export.expiresAt), \(export.revokedAt), \(export.expiredAt))
            """)
    }

    public func export(id: String) throws -> ExportRecord? {
        try selectExports("SELECT \(columns: exportColumns) FROM \(table: .exports) WHERE id = \(id)").first
    }

    public func export(jobID: Int64) throws -> ExportRecord? {
        try selectExports("SELECT \(columns: exportColumns) FROM \(table: .exports) WHERE job_id = \(jobID)").first
    }

    /// Newest first.
    public func exports(accountID: String) throws -> [ExportRecord] {
        try selectExports("SELECT \(columns: exportColumns) FROM \(table: .exports) WHERE account_id = \(accountID) ORDER BY cutoff_at DESC, id DESC")
    }

    public func updateExport(_ export: ExportRecord) throws {
        try change("""
            UPDATE \(table: .exports) SET state = \(export.state.rawValue), blob_key = \(export.blobKey),
              byte_size = \(export.byteSize.map(SQLValue.integer) ?? .null), omitted_photos = \(export.omittedPhotos),
              completed_at = \(export.completedAt), expires_at = \(export.expiresAt), revoked_at = \(export.revokedAt), expired_at = \(export.expiredAt)
            WHERE id = \(export.id)
            """)
    }

    /// When each export of the account that completed after `since` completed
    /// (revoked exports excluded), oldest first: what the rate limit counts.
    public func exportCompletions(accountID: String, since: Date) throws -> [Date] {
        try select("""
            SELECT completed_at FROM \(table: .exports)
            WHERE account_id = \(accountID) AND completed_at > \(since) AND state <> 'revoked' ORDER BY completed_at
            """, from: .exports, .timestamp).map { try $0.date(0) }
    }

    /// Ready exports whose `expiresAt` is at or before `now`, oldest first.
    public func exportsToExpire(now: Date, limit: Int) throws -> [ExportRecord] {
        try selectExports("""
            SELECT \(columns: exportColumns) FROM \(table: .exports) WHERE state = 'ready' AND expires_at <= \(now) ORDER BY expires_at, id LIMIT \(limit)
            """)
    }

    /// Exports still `building` whose job has ended (cancelled or dead), in id order after `after`.
    public func abandonedBuilds(after: String?, limit: Int) throws -> [ExportRecord] {
        try selectExports("""
            SELECT \(columns: exportColumns) FROM \(table: .exports)
            WHERE state = 'building' AND id > \(after ?? "") AND job_id IN (SELECT id FROM \(table: .jobs) WHERE state IN ('cancelled', 'dead'))
            ORDER BY id LIMIT \(limit)
            """)
    }

    /// Exports by state: how many, and their archives' bytes.
    public func exportVolume() throws -> [ExportVolume] {
        try select("""
            SELECT state, COUNT(*), CAST(COALESCE(SUM(byte_size), 0) AS BIGINT) FROM \(table: .exports) GROUP BY state ORDER BY state
            """, from: .exports, .text, .integer, .integer
        ).map { ExportVolume(state: try $0.text(0), count: Int(try $0.integer(1)), bytes: try $0.integer(2)) }
    }

    private func selectExports(_ sql: OwnSQL) throws -> [ExportRecord] {
        try select(sql, from: .exports, reading: exportColumns).map { row in
            guard let state = ExportState(rawValue: try row.text(4)) else {
                throw LifecycleError(.internalError, "export \(try row.text(0)) has the unknown state '\(try row.text(4))'; the database was changed outside lifecycle")
            }
            return ExportRecord(
                id: try row.text(0), accountID: try row.text(1), jobID: try row.optionalInteger(2), format: try row.text(3), state: state,
                requestedBy: try row.text(5), cutoffAt: try row.date(6), blobKey: try row.optionalText(7), byteSize: try row.optionalInteger(8),
                omittedPhotos: Int(try row.integer(9)), completedAt: try row.optionalDate(10), expiresAt: try row.optionalDate(11),
                revokedAt: try row.optionalDate(12), expiredAt: try row.optionalDate(13))
        }
    }

    /// Inserts the message unless one with its unique key exists; returns the stored one.
    public func insertOutboxMessage(_ message: OutboxMessage) throws -> OutboxMessage {
        try change("""
            INSERT INTO \(table: .outbox) (unique_key, account_id, recipient, subject, body, state, attempts, last_error, created_at, delivered_at)
            VALUES (\(message.uniqueKey), \(message.accountID), \(message.recipient), \(message.subject), \(message.body),
              \(message.state.rawValue), \(message.attempts), \(message.lastError), \(message.createdAt), \(message.deliveredAt))
            ON CONFLICT (unique_key) DO NOTHING
            """)
        guard let stored = try outboxMessage(uniqueKey: message.uniqueKey) else {
            throw LifecycleError(.internalError, "outbox message \(message.uniqueKey) vanished right after it was written")
        }
        return stored
    }

    public func outboxMessage(uniqueKey: String) throws -> OutboxMessage? {
        try selectOutbox("SELECT \(columns: outboxColumns) FROM \(table: .outbox) WHERE unique_key = \(uniqueKey)").first
    }

    public func outboxMessages(accountID: String) throws -> [OutboxMessage] {
        try selectOutbox("SELECT \(columns: outboxColumns) FROM \(table: .outbox) WHERE account_id = \(accountID) ORDER BY id")
    }

    public func markOutboxDelivered(id: Int64, at: Date) throws {
        try change("""
            UPDATE \(table: .outbox) SET state = 'delivered', attempts = attempts + 1, last_error = NULL, delivered_at = \(at) WHERE id = \(id)
            """)
    }

    public func markOutboxFailedAttempt(id: Int64, error: String, at: Date) throws {
        try change("""
            UPDATE \(table: .outbox) SET attempts = attempts + 1, last_error = \(String(error.prefix(2_000))) WHERE id = \(id) AND state = 'pending'
            """)
    }

    private func selectOutbox(_ sql: OwnSQL) throws -> [OutboxMessage] {
        try select(sql, from: .outbox, reading: outboxColumns).map { row in
            guard let state = OutboxState(rawValue: try row.text(6)) else {
                throw LifecycleError(.internalError, "outbox message \(try row.integer(0)) has the unknown state '\(try row.text(6))'; the database was changed outside lifecycle")
            }
            return OutboxMessage(
                id: try row.integer(0), uniqueKey: try row.text(1), accountID: try row.text(2), recipient: try row.optionalText(3),
                subject: try row.text(4), body: try row.text(5), state: state, attempts: Int(try row.integer(7)),
                lastError: try row.optionalText(8), createdAt: try row.date(9), deliveredAt: try row.optionalDate(10))
        }
    }
}

public enum ExportState: String, Sendable, Codable, CaseIterable {
    /// The job is writing or checking the archive; no link exists yet.
    case building
    /// Published: the archive is in the blob store and the link works until `expiresAt`.
    case ready
    /// Past `expiresAt`: the expiry job deleted the archive.
    case expired
    /// An operator revoked the link and the archive was deleted.
    case revoked
}

/// One export of one account: the row `exports list` shows and the download link points at.
public struct ExportRecord: Sendable, Codable, Equatable {
    public var id: String
    public var accountID: String
    public var jobID: Int64?
    /// `zip` or `tar.gz`.
    public var format: String
    public var state: ExportState
    /// `user`, or `operator:<name>` for exports run on a support ticket.
    public var requestedBy: String
    /// The instant the export was cut: it names the archive and stamps its files.
    public var cutoffAt: Date
    public var blobKey: String?
    public var byteSize: Int64?
    public var omittedPhotos: Int
    public var completedAt: Date?
    public var expiresAt: Date?
    public var revokedAt: Date?
    public var expiredAt: Date?

    public init(
        id: String, accountID: String, jobID: Int64?, format: String, state: ExportState, requestedBy: String,
        cutoffAt: Date, blobKey: String? = nil, byteSize: Int64? = nil, omittedPhotos: Int = 0, completedAt: Date? = nil,
        expiresAt: Date? = nil, revokedAt: Date? = nil, expiredAt: Date? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.jobID = jobID
        self.format = format
        self.state = state
        self.requestedBy = requestedBy
        self.cutoffAt = cutoffAt
        self.blobKey = blobKey
        self.byteSize = byteSize
        self.omittedPhotos = omittedPhotos
        self.completedAt = completedAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.expiredAt = expiredAt
    }

    enum CodingKeys: String, CodingKey {
        case id, accountID = "account_id", jobID = "job_id", format, state, requestedBy = "requested_by", cutoffAt = "cutoff_at", blobKey = "blob_key", byteSize = "byte_size", omittedPhotos = "omitted_photos", completedAt = "completed_at", expiresAt = "expires_at", revokedAt = "revoked_at", expiredAt = "expired_at"
    }
}

/// A database value as the export writes it.
public enum ExportValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case timestamp(Date)
    case boolean(Bool)
    /// Binary columns are written as base64 text.
    case bytes(Data)
}

/// Rows of one table, value after value, in one array: the export reads 100,000s of
/// rows and one allocation per batch beats one per row.
public struct ExportRowBatch: Sendable, Equatable {
    public var columnCount: Int
    public var values: [ExportValue]

    public init(columnCount: Int, values: [ExportValue]) {
        self.columnCount = columnCount
        self.values = values
    }

    public var rowCount: Int { columnCount == 0 ? 0 : values.count / columnCount }

    public func row(_ index: Int) -> ArraySlice<ExportValue> {
        values[(index * columnCount)..<((index + 1) * columnCount)]
    }
}

public enum OutboxState: String, Sendable, Codable {
    /// Waiting: for the configured mail command to succeed, or for the app to deliver it.
    case pending
    case delivered
}

/// A message to a user, written in the same transaction as the event it reports,
/// under a unique key so that a repeated step never sends it twice.
public struct OutboxMessage: Sendable, Codable, Equatable {
    public var id: Int64?
    public var uniqueKey: String
    public var accountID: String
    public var recipient: String?
    public var subject: String
    public var body: String
    public var state: OutboxState
    public var attempts: Int
    public var lastError: String?
    public var createdAt: Date
    public var deliveredAt: Date?

    public init(
        id: Int64? = nil, uniqueKey: String, accountID: String, recipient: String?, subject: String, body: String,
        state: OutboxState = .pending, attempts: Int = 0, lastError: String? = nil, createdAt: Date, deliveredAt: Date? = nil
    ) {
        self.id = id
        self.uniqueKey = uniqueKey
        self.accountID = accountID
        self.recipient = recipient
        self.subject = subject
        self.body = body
        self.state = state
        self.attempts = attempts
        self.lastError = lastError
        self.createdAt = createdAt
        self.deliveredAt = deliveredAt
    }
}

private let exportColumns = OwnColumns([
    "id": .text, "account_id": .text, "job_id": .integer, "format": .text, "state": .text, "requested_by": .text, "cutoff_at": .timestamp,
    "blob_key": .text, "byte_size": .integer, "omitted_photos": .integer, "completed_at": .timestamp, "expires_at": .timestamp,
    "revoked_at": .timestamp, "expired_at": .timestamp,
])

private let outboxColumns = OwnColumns([
    "id": .integer, "unique_key": .text, "account_id": .text, "recipient": .text, "subject": .text, "body": .text, "state": .text,
    "attempts": .integer, "last_error": .text, "created_at": .timestamp, "delivered_at": .timestamp,
])
