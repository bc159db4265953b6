import ArgumentParser
import Foundation
import Lifecycle
import LifecycleRuntime

struct MapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "map", abstract: "Check the account data map against the database.",
        subcommands: [CheckMapCommand.self])
}

struct CheckMapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check Jobs/account-data.yaml against the live database and print the erase order.",
        discussion: """
            Reads the database's catalog without writing anything (not even lifecycle's own tables), then checks
            that every table and column the map names exists, that every table referencing the user is mapped or
            ignored, that no foreign key from another user's rows blocks a purge, and derives the order rows are
            erased in. Exit 0 when the map holds, 65 naming the file, line and table when it does not, 66 when the
            database file does not exist, 69 when the server cannot be reached.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await guarded {
            let map = try DataMap(jobsDirectory: options.jobsDirectory)
            options.bootstrapLogging()
            // Built directly, not from the environment: a check never tells time, so LIFECYCLE_NOW is not read.
            let installation = LifecycleConfiguration(database: options.databasePath, blobs: options.blobDirectory, jobsDirectory: options.jobsDirectory)
            let (catalog, location) = try await installation.readCatalog()
            let plan = try DataMapPlan(map: map, catalog: catalog)
            let summary = MapSummary(plan, location: location)
            if options.json {
                try Terminal.printJSON(summary)
            } else {
                summary.print()
            }
            return .ok
        }
    }
}

/// What `map check` prints: the plan in erase order, one JSON style with every command.
struct MapSummary: Encodable {
    struct Subject: Encodable {
        var table: String
        var key: String
        var keyType: String
        var lookup: [String]
        var password: String?
        var erase: String
        var blobs: [String]

        enum CodingKeys: String, CodingKey {
            case table, key, keyType = "key_type", lookup, password, erase, blobs
        }
    }

    struct Table: Encodable {
        var position: Int
        var table: String
        var owner: String
        var key: [String]
        var erase: String
        var exportFile: String?
        var blobs: [String]
        var cascade: [String]

        enum CodingKeys: String, CodingKey {
            case position, table, owner, key, erase, exportFile = "export_file", blobs, cascade
        }
    }

    var source: String
    var database: String
    var subject: Subject
    var eraseOrder: [Table]
    var ignored: [String]

    enum CodingKeys: String, CodingKey {
        case source, database, subject, eraseOrder = "erase_order", ignored
    }

    init(_ plan: DataMapPlan, location: String) {
        source = plan.map.source
        database = location
        let subject = plan.subject
        // Tables of the default schema (public, main) by their plain names.
        func shown(_ name: DataMap.TableName) -> String { name.schema == plan.catalog.defaultSchema ? name.name : name.description }
        func describe(_ owner: DataMapPlan.Owner) -> String {
            switch owner {
            case .column(let column): return column
            case .parent(let via, let parent, let column, let next): return "\(via) → \(shown(parent)).\(column), \(describe(next))"
            case .sides(let sides): return sides.map { "\($0.column) (\(Self.describe($0.erase)))" }.joined(separator: " | ")
            }
        }
        self.subject = Subject(
            table: shown(subject.table), key: subject.key, keyType: plan.subjectKeyKind == .integer ? "integer" : "text",
            lookup: subject.lookup,
            password: subject.password.map { password in
                password.table.map { "\(shown($0)).\(password.column) (by \(password.key ?? "?"))" } ?? password.column
            },
            erase: Self.describe(subject.erase), blobs: subject.blobs)
        eraseOrder = plan.tables.enumerated().map { index, table in
            Table(
                position: index + 1, table: shown(table.table.name), owner: describe(table.owner), key: table.key,
                erase: { if case .sides = table.owner { "per side" } else { Self.describe(table.table.erase) } }(), exportFile: table.table.exportFile, blobs: table.table.blobs,
                cascade: table.cascades.map { "\(shown($0.table)).\($0.column)" })
        }
        ignored = plan.map.ignored.map { "\($0.table): \($0.reason)" }
    }

    static func describe(_ erase: DataMap.Erase) -> String {
        switch erase {
        case .delete: return "delete"
        case .mask(let mask): return "mask \(mask.map(\.column).joined(separator: ", "))"
        case .deleteUnlessReferenced(let references, let mask):
            return "delete unless referenced by \(references.map(\.description).joined(separator: ", ")), else mask \(mask.map(\.column).joined(separator: ", "))"
        }
    }

    func print() {
        Terminal.line("\(source) holds for \(database)")
        Terminal.line("subject: \(subject.table), key \(subject.key) (\(subject.keyType))" + (subject.lookup.isEmpty ? "" : ", lookup \(subject.lookup.joined(separator: ", "))")
            + (subject.password.map { ", password \($0)" } ?? ""))
        Terminal.line("erase order (every table before the tables it references):")
        for table in eraseOrder {
            var detail = "owner \(table.owner); \(table.erase)"
            if !table.cascade.isEmpty { detail += "; cascade \(table.cascade.joined(separator: ", "))" }
            if !table.blobs.isEmpty { detail += "; files in \(table.blobs.joined(separator: ", "))" }
            if let file = table.exportFile { detail += "; exported as \(file).json/.csv" }
            Terminal.line("  \(table.position). \(table.table): \(detail)")
        }
        Terminal.line("  \(eraseOrder.count + 1). \(subject.table) (the user row): \(subject.erase)")
        for entry in ignored { Terminal.line("ignored: \(entry)") }
    }
}
