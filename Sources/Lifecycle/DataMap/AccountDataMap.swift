import Foundation
import JobRunner

/// Every table that holds an account's data, read from `Jobs/account-data.yaml`.
/// The export job writes the exported tables; the purge job deletes every table in
/// the listed order (children before parents). One map, so a new table cannot be
/// exported but forgotten by the purge, or the other way round.
public struct AccountDataMap: Sendable, Equatable {
    public struct Table: Sendable, Equatable {
        /// Table name in the database.
        public var name: String
        /// Column holding the account id.
        public var accountColumn: String
        /// File stem in the export archive (`<file>.json`, `<file>.csv`); nil keeps the table out of exports.
        public var exportFile: String?
        /// Columns exported, in this order (never secrets such as password hashes or session tokens).
        public var columns: [String]
        /// Export row order.
        public var orderBy: String
        /// Columns holding timestamps, written as ISO-8601 UTC.
        public var timestampColumns: Set<String>

        public var isExported: Bool { exportFile != nil }
    }

    public var tables: [Table]
    public let source: String

    public var exportedTables: [Table] { tables.filter(\.isExported) }

    public static let fileName = "account-data.yaml"

    public init(tables: [Table], source: String) {
        self.tables = tables
        self.source = source
    }

    /// The reference app's tables, from the format-2 map in `<jobsDirectory>/account-data.yaml`.
    public init(jobsDirectory: String) throws {
        try self.init(DataMap(jobsDirectory: jobsDirectory))
    }

    public init(yaml: String, source: String) throws {
        try self.init(DataMap(yaml: yaml, source: source))
    }

    /// The reference app's export and purge read a table by the column holding the
    /// account id; a map that owns rows through parents or two users' columns describes
    /// another app's schema (`lifecycle map check` checks those against their database).
    public init(_ map: DataMap) throws {
        var tables: [Table] = []
        for table in map.tables {
            guard case .column(let owner) = table.ownership else {
                throw LifecycleError(.badInput, """
                    \(map.source):\(table.line): table \(table.name) is owned through a parent or by several users' columns; \
                    the reference app's tables each name the account in one column (`owner: account_id`)
                    """)
            }
            tables.append(Table(
                name: table.name.name, accountColumn: owner, exportFile: table.exportFile, columns: table.columns,
                orderBy: table.orderBy.first ?? "id", timestampColumns: Set(table.timestamps)))
        }
        self.init(tables: tables, source: map.source)
    }

    /// Letters, digits and underscores, not starting with a digit: safe to quote as an identifier.
    static func isIdentifier(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, !("0"..."9").contains(first), text.count <= 63 else { return false }
        return text.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    /// Refuses a map that misses a table the database holds account data in: purge would leave it behind.
    public func requireCovers(accountTables: [String]) throws {
        let missing = Set(accountTables).subtracting(tables.map(\.name)).sorted()
        guard missing.isEmpty else {
            throw LifecycleError(.badInput, "\(source): table(s) \(missing.joined(separator: ", ")) hold account data but are not in the map; add them so export and purge cover them")
        }
    }
}
