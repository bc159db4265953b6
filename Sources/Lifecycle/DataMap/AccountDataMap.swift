import Foundation
import JobRunner
import Yams

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

    public init(jobsDirectory: String) throws {
        let path = (jobsDirectory as NSString).appendingPathComponent(Self.fileName)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw LifecycleError(.inputMissing, "\(path): the account data map is missing; it lists every table that holds account data (see Jobs/README.md)")
        }
        try self.init(yaml: text, source: path)
    }

    public init(yaml: String, source: String) throws {
        func fail(_ message: String) -> LifecycleError { LifecycleError(.badInput, "\(source): \(message)") }
        let document: Any?
        do {
            document = try Yams.load(yaml: yaml)
        } catch {
            throw fail("not valid YAML: \(error)")
        }
        guard let top = document as? [String: Any], let entries = top["tables"] as? [Any] else {
            throw fail("expected a top-level 'tables:' list")
        }
        let allowedKeys: Set<String> = ["table", "account_column", "export_file", "columns", "order_by", "timestamps"]
        var tables: [Table] = []
        for (index, entry) in entries.enumerated() {
            guard let fields = entry as? [String: Any] else { throw fail("tables[\(index)] must be a mapping") }
            if let unknown = Set(fields.keys).subtracting(allowedKeys).sorted().first {
                throw fail("tables[\(index)]: unknown key '\(unknown)' (known: \(allowedKeys.sorted().joined(separator: ", ")))")
            }
            guard let name = fields["table"] as? String, Self.isIdentifier(name) else {
                throw fail("tables[\(index)]: 'table' must be a plain SQL identifier")
            }
            let accountColumn = fields["account_column"] as? String ?? "account_id"
            let columns = fields["columns"] as? [String] ?? []
            let timestamps = fields["timestamps"] as? [String] ?? []
            let exportFile = fields["export_file"] as? String
            let orderBy = fields["order_by"] as? String ?? "id"
            for identifier in [accountColumn, orderBy] + columns + timestamps where !Self.isIdentifier(identifier) {
                throw fail("table \(name): '\(identifier)' is not a plain SQL identifier")
            }
            if let exportFile {
                guard BlobKey.isSafeSegment(exportFile), !exportFile.contains(".") else {
                    throw fail("table \(name): export_file must be letters, digits, '_' or '-'")
                }
                guard !columns.isEmpty else { throw fail("table \(name): an exported table needs its 'columns' listed") }
            }
            guard Set(timestamps).isSubset(of: Set(columns + [orderBy])) else {
                throw fail("table \(name): every 'timestamps' entry must be one of its columns")
            }
            tables.append(Table(
                name: name, accountColumn: accountColumn, exportFile: exportFile, columns: columns, orderBy: orderBy,
                timestampColumns: Set(timestamps)))
        }
        guard Set(tables.map(\.name)).count == tables.count else { throw fail("a table is listed twice") }
        let files = tables.compactMap(\.exportFile)
        guard Set(files).count == files.count else { throw fail("two tables share an export_file") }
        self.init(tables: tables, source: source)
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
