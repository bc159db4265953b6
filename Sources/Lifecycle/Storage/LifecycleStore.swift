import Foundation
import JobRunner

/// How an insert of an imported row ended: rows are keyed by id, so importing the
/// same data again finds them present and changes nothing.
public enum InsertOutcome: Sendable, Equatable {
    case inserted
    case alreadyPresent
    /// The id exists but belongs to another account: the import line is refused.
    case belongsToAnotherAccount(String)
}

/// The account data the domain reads and writes inside one database transaction.
/// Synchronous on purpose: a database-only job step runs inside the transaction
/// that also records the step as done.
public protocol AccountTransaction {
    /// In a write transaction the row stays locked against other writers until commit:
    /// the deletion checks rely on it to take turns per account.
    func account(id: String) throws -> Account?
    /// The account's state alone, with the same lock as `account(id:)`: the purge checks
    /// it in every transaction, and reading the whole row each time cost it a twentieth.
    func accountState(id: String) throws -> AccountState?
    func account(email: String) throws -> Account?
    func preferences(accountID: String) throws -> Preferences?

    func insertAccount(_ account: Account, preferences: Preferences?) throws -> InsertOutcome
    func insertEntry(_ entry: JournalEntry) throws -> InsertOutcome
    func insertPhoto(_ photo: PhotoRecord) throws -> InsertOutcome
    func insertMesocycle(_ mesocycle: Mesocycle) throws -> InsertOutcome
    func insertMeditationSession(_ session: MeditationSession) throws -> InsertOutcome
    func insertSession(_ session: SignInSession) throws -> InsertOutcome
    func setProfilePhoto(accountID: String, photoID: String?, now: Date) throws

    func photo(id: String) throws -> PhotoRecord?
    func photos(accountID: String) throws -> [PhotoRecord]
    func sessions(accountID: String) throws -> [SignInSession]

    func recordAudit(_ event: AuditEvent) throws
    func auditEvents(accountID: String) throws -> [AuditEvent]
}

/// A backend: the job queue and the account data, in one database so that a
/// step's domain writes and its done-mark share a transaction.
public protocol LifecycleStore: JobStore
where Transaction: AccountTransaction & ExportTransaction & DeletionTransaction & PhotoTransaction
    & GeneratedSQLTransaction & SubjectTransaction & HoldTransaction & LookupDigestTransaction & OverviewTransaction {
    func read<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T
    /// Where the data lives, for messages ("SQLite file ./lifecycle.sqlite").
    var location: String { get }
    /// Tables with an account id column that the account data map must cover.
    func accountTables() async throws -> [String]
    /// The database's tables, columns and foreign keys, for checking an app's data map.
    func catalog() async throws -> SchemaCatalog
    /// The SQL dialect statements generated from the data map are written in.
    var dialect: SQLDialect { get }
}
