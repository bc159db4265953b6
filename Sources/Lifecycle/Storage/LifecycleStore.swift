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

/// A backend: the job queue and the account data, in one database so that a
/// step's domain writes and its done-mark share a transaction.
public protocol LifecycleStore: JobStore
where Transaction: OwnStateTransaction {
    func read<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T
    /// Where the data lives, for messages ("SQLite file ./lifecycle.sqlite").
    var location: String { get }
    /// The database's tables, columns and foreign keys, for checking an app's data map.
    func catalog() async throws -> SchemaCatalog
    /// The SQL dialect statements generated from the data map are written in.
    var dialect: SQLDialect { get }
}
