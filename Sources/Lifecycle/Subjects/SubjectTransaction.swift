import Foundation

/// Lifecycle's own record of an account of an app's database: its deletion state, keyed
/// by the subject's key. The app's tables hold no lifecycle column; an account lifecycle
/// has never recorded anything about is active.
public struct SubjectRecord: Sendable, Codable, Equatable {
    public var key: String
    public var state: AccountState
    public var deletionRequestedAt: Date?
    public var purgeAfter: Date?
    public var purgedAt: Date?

    public init(key: String, state: AccountState, deletionRequestedAt: Date? = nil, purgeAfter: Date? = nil, purgedAt: Date? = nil) {
        self.key = key
        self.state = state
        self.deletionRequestedAt = deletionRequestedAt
        self.purgeAfter = purgeAfter
        self.purgedAt = purgedAt
    }

    enum CodingKeys: String, CodingKey {
        case key, state, deletionRequestedAt = "deletion_requested_at", purgeAfter = "purge_after", purgedAt = "purged_at"
    }
}

/// The deletion states of an app's accounts, in lifecycle's namespace. Every change is a
/// compare-and-set that returns whether the account was in the state it starts from, so
/// a restore and a purge (or two purge workers) can never both win.
public protocol SubjectTransaction {
    /// Takes the account's row lock for the rest of a write transaction (creating its
    /// record, active, if there is none): deletion attempts of one account take turns.
    func lockSubject(key: String, now: Date) throws -> SubjectRecord
    /// nil when lifecycle holds nothing about the account (it is active).
    func subject(key: String) throws -> SubjectRecord?
    /// active → pendingDeletion.
    func markSubjectPending(key: String, requestedAt: Date, purgeAfter: Date) throws -> Bool
    /// A pending account's purge date moved (an operator's "delete now").
    func moveSubjectPurgeDate(key: String, purgeAfter: Date) throws -> Bool
    /// pendingDeletion with `purge_after > now` → active.
    func restoreSubject(key: String, now: Date) throws -> Bool
    /// pendingDeletion with `purge_after <= now` → purging.
    func beginSubjectPurge(key: String, now: Date) throws -> Bool
    /// purging → purged.
    func markSubjectPurged(key: String, at: Date) throws -> Bool
    /// Accounts whose purge is due (pending past their date, or an interrupted purge), in key order after `after`.
    func subjectsDueForPurge(now: Date, after: String?, limit: Int) throws -> [DuePurge]

    /// Adds to what the purge has erased of one table (in the same transaction as the
    /// batch, so a purge resumed after a crash reports every row exactly once).
    func addPurgeProgress(key: String, table: String, deleted: Int, masked: Int) throws
    /// Rows deleted and masked per table so far; removed with `takePurgeProgress`.
    func purgeProgress(key: String) throws -> [String: PurgeCounts]
    func takePurgeProgress(key: String) throws -> [String: PurgeCounts]

    /// Records files a purge deletes once nothing names them, pending: in the transaction
    /// that erases the rows naming them. A file recorded again is pending again (a row
    /// written since named it, so whether it is still shared is looked at anew).
    func recordPurgeFiles(key: String, files: [String]) throws
    /// Records files found by listing the user's folders (`blob_prefixes:`), pending; one
    /// already recorded (named by an erased row, or listed by an earlier attempt) stays as it
    /// is. Returns how many were new, so each is counted once however often the purge runs.
    func recordListedPurgeFiles(key: String, files: [String]) throws -> Int
    /// Pending files in key order after `after`.
    func pendingPurgeFiles(key: String, after: String?, limit: Int) throws -> [String]
    /// Settles files: deleted (with their size; a size found before is kept) or kept
    /// (another row still names them).
    func settlePurgeFiles(key: String, files: [PurgeFile]) throws
    /// What the purge did with its files; removed with `takePurgeFiles`.
    func takePurgeFiles(key: String) throws -> PurgeFileTotals

    /// Keeps the values `on_deletion: set:` is about to replace, for a restore to put back.
    /// A value already kept stays: the one there now is the one deletion set.
    func recordGraceValues(key: String, values: [GraceValue]) throws
    /// The kept values, removed: by a restore that puts them back, or a purge that starts.
    func takeGraceValues(key: String) throws -> [GraceValue]
}

/// One value an account's deletion request replaced in the app's database (`on_deletion:
/// set:`), as text, with the row it was in by its primary key (a JSON array of the key's
/// values as text).
public struct GraceValue: Sendable, Equatable {
    public var table: String
    public var row: String
    public var column: String
    public var value: String?

    public init(table: String, row: String, column: String, value: String?) {
        self.table = table
        self.row = row
        self.column = column
        self.value = value
    }
}

public struct PurgeFile: Sendable, Equatable {
    public enum State: String, Sendable { case deleted, kept }
    public var key: String
    public var state: State
    public var bytes: Int64

    public init(key: String, state: State, bytes: Int64) {
        self.key = key
        self.state = state
        self.bytes = bytes
    }
}

public struct PurgeFileTotals: Sendable, Equatable {
    public var deleted: Int
    public var bytes: Int64
    /// Still named by a row the purge keeps (another account's, or one kept masked).
    public var kept: Int
    /// Never settled: the purge must not end with any.
    public var pending: Int

    public init(deleted: Int = 0, bytes: Int64 = 0, kept: Int = 0, pending: Int = 0) {
        self.deleted = deleted
        self.bytes = bytes
        self.kept = kept
        self.pending = pending
    }
}

public struct PurgeCounts: Sendable, Codable, Equatable {
    public var deleted: Int
    public var masked: Int

    public init(deleted: Int = 0, masked: Int = 0) {
        self.deleted = deleted
        self.masked = masked
    }
}
