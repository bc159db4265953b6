import Foundation

/// Runs statements generated from the data map (`DataMapSQL`) inside one of the store's
/// transactions: the app's tables are read and erased through these two calls only.
public protocol GeneratedSQLTransaction {
    /// Every row of a query, each value read as the statement's `resultKinds` say.
    func rows(_ statement: SQLStatement) throws -> [[SQLValue]]
    /// Runs a statement and returns how many rows it changed.
    @discardableResult
    func execute(_ statement: SQLStatement) throws -> Int
}
