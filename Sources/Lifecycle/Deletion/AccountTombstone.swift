import Foundation
import JobRunner

/// What the reference app's `accounts` row becomes when its purge ends: the id, the state
/// and the purge date stay; every other column is emptied, columns added after this was
/// written included, so a new personal column cannot survive a purge by being forgotten.
/// One rule for both backends, from the column kinds each catalog reports: a nullable
/// column becomes NULL, a required date the purge date (it says nothing about the person),
/// a required number or boolean zero / false.
public enum AccountTombstone {
    static let kept: Set<String> = ["id", "state", "purged_at"]

    public static func statement(columns: [SchemaCatalog.Column], dialect: SQLDialect, accountID: String, purgedAt: Date) throws -> SQLStatement {
        var builder = SQLBuilder(dialect)
        var assignments = ["state = 'purged'", "purged_at = \(builder.bind(.timestamp(purgedAt)))"]
        for column in columns where !kept.contains(column.name) {
            let name = dialect.quote(column.name)
            guard column.isNotNull else {
                assignments.append("\(name) = NULL")
                continue
            }
            switch column.kind {
            case .timestamp: assignments.append("\(name) = \(builder.bind(.timestamp(purgedAt)))")
            case .integer, .real: assignments.append("\(name) = 0")
            case .boolean: assignments.append("\(name) = \(dialect == .postgres ? "FALSE" : "0")")
            case .text, .bytes, .other:
                throw PermanentJobFailure(
                    "accounts.\(column.name) is NOT NULL and not a date or number, so the tombstone cannot empty it; make it nullable in a migration")
            }
        }
        builder.append("UPDATE accounts SET \(assignments.joined(separator: ", ")) WHERE id = \(builder.bind(.text(accountID))) AND state = 'purging'")
        return builder.statement()
    }
}
