import Foundation

/// What the export job reads and writes inside one database transaction.
public protocol ExportTransaction {
    func insertExport(_ export: ExportRecord) throws
    func export(id: String) throws -> ExportRecord?
    func export(jobID: Int64) throws -> ExportRecord?
    /// Newest first.
    func exports(accountID: String) throws -> [ExportRecord]
    func updateExport(_ export: ExportRecord) throws
    /// When each export of the account that completed after `since` completed
    /// (revoked exports excluded), oldest first: what the rate limit counts.
    func exportCompletions(accountID: String, since: Date) throws -> [Date]
    /// Ready exports whose `expiresAt` is at or before `now`, oldest first.
    func exportsToExpire(now: Date, limit: Int) throws -> [ExportRecord]
    /// Exports still `building` whose job has ended (cancelled or dead), in id order after `after`.
    func abandonedBuilds(after: String?, limit: Int) throws -> [ExportRecord]

    /// The account's photos in id order, starting after `afterID`.
    func exportPhotos(accountID: String, afterID: String?, limit: Int) throws -> [PhotoRecord]
    func exportStatistics(accountID: String) throws -> ExportStatistics

    /// Inserts the message unless one with its unique key exists; returns the stored one.
    func insertOutboxMessage(_ message: OutboxMessage) throws -> OutboxMessage
    func outboxMessage(uniqueKey: String) throws -> OutboxMessage?
    func outboxMessages(accountID: String) throws -> [OutboxMessage]
    func markOutboxDelivered(id: Int64, at: Date) throws
    func markOutboxFailedAttempt(id: Int64, error: String, at: Date) throws
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

/// The figures account.json shows under "statistics".
public struct ExportStatistics: Sendable, Equatable, Codable {
    public var mesocyclesCompleted: Int
    public var mesocyclesTotal: Int
    public var meditationSessions: Int
    public var meditationSeconds: Int

    public init(mesocyclesCompleted: Int, mesocyclesTotal: Int, meditationSessions: Int, meditationSeconds: Int) {
        self.mesocyclesCompleted = mesocyclesCompleted
        self.mesocyclesTotal = mesocyclesTotal
        self.meditationSessions = meditationSessions
        self.meditationSeconds = meditationSeconds
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
