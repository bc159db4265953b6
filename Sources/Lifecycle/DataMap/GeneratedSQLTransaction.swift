import Foundation

/// Runs statements generated from the data map (`DataMapSQL`) inside one of the store's
/// transactions: the app's tables are read and erased through these three calls only.
public protocol GeneratedSQLTransaction {
    /// Every row of a query, each value read as the statement's `resultKinds` say.
    func rows(_ statement: SQLStatement) throws -> [[SQLValue]]
    /// Runs a statement and returns how many rows it changed.
    @discardableResult
    func execute(_ statement: SQLStatement) throws -> Int
    /// Streams a query's rows in batches of at most `batchSize` (a statement cursor on
    /// SQLite, a server-side cursor on PostgreSQL), so memory stays bounded whatever the
    /// account's size and every batch comes from the same snapshot.
    func forEachBatch(_ statement: SQLStatement, batchSize: Int, _ body: ([[SQLValue]]) throws -> Void) throws
}
