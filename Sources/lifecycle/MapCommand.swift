import ArgumentParser
import Foundation
import LifecycleRuntime

struct MapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "map", abstract: "Write a starting account data map, or check one against the database.",
        subcommands: [InitMapCommand.self, CheckMapCommand.self])
}

struct InitMapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Write a starting Jobs/account-data.yaml from the app's own rules (never over an existing one).",
        discussion: """
            From the database's foreign keys (PostgreSQL or SQLite): every table that reaches the user table, \
            decided by the database's own ON DELETE (CASCADE: deleted with its parent; SET NULL: kept, the column \
            masked; NO ACTION and RESTRICT: a `decide:` line, which `map check` refuses until the choice is written). \
            With --django PATH/manage.py, from Django's own model metadata, read by the project's `manage.py shell` \
            (nothing to install in the project): exactly what `user.delete()` does, each relation's on_delete \
            (PROTECT, RESTRICT, DO_NOTHING and SET(…) left to decide), many-to-many tables, GenericRelations on the \
            user model, a custom AUTH_USER_MODEL, and FileField/ImageField columns as `blobs:`. The presets of the \
            platforms and apps lifecycle knows (Supabase, Django, django-allauth, simplejwt, knox) are included.

            Exit 0 with the map written and checked, 65 when it is written but has choices to make or fails the \
            check (each named), 73 when the file exists already, 66/69 as `map check`.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(name: .customLong("django"), help: ArgumentHelp("The Django project's manage.py: the map follows its models.", valueName: "manage.py"))
    var django: String?
    @Option(name: .customLong("python"), help: ArgumentHelp("The project's Python (its virtualenv's bin/python; env LIFECYCLE_PYTHON, else python3).", valueName: "path"))
    var python: String?
    @Option(name: .customLong("user-table"), help: ArgumentHelp("The user table, when it is not recognised (users, accounts, auth_user, Supabase's profile).", valueName: "table"))
    var userTable: String?

    struct Summary: Encodable {
        var path: String
        var source: String
        var tables: Int
        var lines: Int
        var presets: [String]
        var decisions: [String]
        var check: String

        enum CodingKeys: String, CodingKey { case path, source, tables, lines, presets, decisions, check }
    }

    func run() async throws {
        try await guarded {
            let path = (options.jobsDirectory as NSString).appendingPathComponent(DataMap.fileName)
            if FileManager.default.fileExists(atPath: path) {
                throw CLIFailure(.cannotCreate, "\(path) exists already; `map init` never overwrites a map: move it aside, or run `lifecycle map check` on it")
            }
            options.bootstrapLogging()
            let installation = LifecycleConfiguration(database: options.databasePath, blobs: options.blobDirectory, jobsDirectory: options.jobsDirectory)
            let (catalog, _) = try await installation.readCatalog()
            let graph: RelationGraph
            let presets: [String]
            if let django {
                let python = python ?? ProcessInfo.processInfo.environment["LIFECYCLE_PYTHON"] ?? "python3"
                graph = try DjangoModelReader(managePy: django, python: python).read()
                presets = graph.djangoPresets()
            } else {
                graph = try RelationGraph(catalog: catalog, user: userTable)
                presets = RelationGraph.presets(for: catalog)
            }
            let result = try DataMapGenerator(graph: graph, catalog: catalog, presets: presets).generate()
            try FileManager.default.createDirectory(atPath: options.jobsDirectory, withIntermediateDirectories: true)
            do {
                try Data(result.yaml.utf8).write(to: URL(fileURLWithPath: path), options: .withoutOverwriting)
            } catch {
                throw CLIFailure(.cannotCreate, "cannot write \(path): \(error)")
            }
            var check = "ok"
            do {
                _ = try DataMapPlan(map: try DataMap(yaml: result.yaml, source: path), catalog: catalog)
            } catch {
                check = LifecycleError(classifying: error).message
            }
            let summary = Summary(path: path, source: graph.source, tables: result.tables, lines: result.lineCount, presets: presets, decisions: result.decisions, check: check)
            if options.json {
                try Terminal.printJSON(summary)
            } else {
                print("Wrote \(path) from \(graph.source): \(result.lineCount) lines, \(result.tables) table(s) of the app's\(presets.isEmpty ? "" : ", with the presets \(presets.joined(separator: ", "))").")
                if !result.decisions.isEmpty {
                    print("\(result.decisions.count) choice(s) to make (`decide:` lines):")
                    for decision in result.decisions { print("  - \(decision)") }
                } else if check == "ok" {
                    print("It passes `lifecycle map check`. Read it through, then run `lifecycle map check --account KEY` to rehearse a purge.")
                } else {
                    print("`lifecycle map check` refuses it as written:\n\(check)")
                }
            }
            return check == "ok" ? .ok : .dataError
        }
    }
}

struct CheckMapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check Jobs/account-data.yaml against the live database and print the erase order.",
        discussion: """
            Reads the database's catalog without writing anything (not even lifecycle's own tables), then checks \
            that every table and column the map names exists; that every foreign key, column by column, into \
            every row a purge deletes or keeps masked (and into the rows the database deletes with them) is \
            mapped, ignored with a reason (never where that would make the purge fail), or handled by the \
            database; that no foreign key from another user's rows blocks a purge; that this role can see and \
            change every row the map names (row level security it does not bypass, or a missing privilege, is \
            refused naming the table); and derives the order rows are erased in. Columns that look like they hold \
            the user's key without a foreign key (by name and type, in every schema; keys inside JSON columns, \
            from their first rows) are listed as warnings, each with the line that maps or ignores it.

            --account KEY rehearses that account's purge for real, inside a transaction that is rolled back, \
            and reports per table what would be deleted and masked, or which table the database refuses and why.

            Exit 0 when the map holds (warnings or not, unless --strict), 65 naming the file, line and table \
            when it does not (or, with --strict, when there are warnings), 66 when the database file does not \
            exist, 69 when the server cannot be reached, 75 when the rehearsal of --account would fail, 77 when \
            the role lacks a privilege or is held back by row level security, or when the rehearsal's residue scan \
            finds the account's identifiers where the map neither erases nor allows them.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .customLong("strict"), help: "Treat warnings (columns that look like the user's key, unmapped) as errors: exit 65.")
    var strict = false
    @Option(name: .customLong("account"), help: "Rehearse this account's purge in a transaction that is rolled back (needs an installation).")
    var account: String?

    func run() async throws {
        try await guarded {
            let map = try DataMap(jobsDirectory: options.jobsDirectory)
            options.bootstrapLogging()
            // Built directly, not from the environment: a check never tells time, so LIFECYCLE_NOW is not read.
            let installation = LifecycleConfiguration(database: options.databasePath, blobs: options.blobDirectory, jobsDirectory: options.jobsDirectory)
            let (catalog, location) = try await installation.readCatalog()
            let plan = try DataMapPlan(map: map, catalog: catalog)
            try LifecycleConfiguration.requireAccess(plan, location: location)
            var suspects = plan.suspects
            let lookInto = plan.jsonColumnsToLookInto
            if !lookInto.isEmpty {
                let sql = DataMapSQL(plan: plan, dialect: installation.usesPostgres ? .postgres : .sqlite)
                let keys = try await installation.readRows(lookInto.map { sql.jsonKeysSample(table: $0.table, column: $0.column, rows: 200) })
                for (column, found) in zip(lookInto, keys) {
                    if let suspect = plan.jsonSuspect(table: column.table, column: column.column, keys: found) { suspects.append(suspect) }
                }
            }
            var rehearsal: MapSummary.Rehearsal?
            if let account {
                rehearsal = try await installation.withInstallation(Rehearse(reference: account))
            }
            let summary = MapSummary(plan, location: location, suspects: suspects, rehearsal: rehearsal)
            if options.json {
                try Terminal.printJSON(summary)
            } else {
                summary.print()
            }
            // Found residue is not a retry, in the rehearsal as in the purge: 77 as `purge` says it.
            if let refused = rehearsal?.refused { return refused.contains(ResidueScan.marker) ? .permissionDenied : .tryLater }
            return strict && !suspects.isEmpty ? .dataError : .ok
        }
    }

    /// One account's purge, rehearsed on the installation.
    struct Rehearse: InstallationBody {
        let reference: String

        func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> MapSummary.Rehearsal {
            let directory = try await services.directory()
            let data = directory.data
            guard let key = try await services.store.read({ tx in try directory.find(.operator(reference), in: tx) }) else {
                throw LifecycleError.noSuchAccount(reference)
            }
            let rehearsal = try await AppErasure.rehearse(key: key, data: data, store: services.store)
            return MapSummary.Rehearsal(account: key, rows: rehearsal.rows, files: rehearsal.files, refused: rehearsal.refused, rowsLeft: rehearsal.rowsLeft)
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
        var ignoreCase: [String]
        var password: String?
        var erase: String
        var blobs: [String]
        /// The user's own folders of the blob store, emptied by the purge.
        var blobPrefixes: [String]

        enum CodingKeys: String, CodingKey {
            case table, key, keyType = "key_type", lookup, ignoreCase = "ignore_case", password, erase, blobs, blobPrefixes = "blob_prefixes"
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
        /// A file catalog's columns, joined by '/' into each row's file.
        var fileKey: [String]
        var cascade: [String]

        enum CodingKeys: String, CodingKey {
            case position, table, owner, key, erase, exportFile = "export_file", blobs, fileKey = "file_key", cascade
        }
    }

    struct Warning: Encodable {
        var table: String
        var column: String
        var type: String
        var jsonKey: String?
        var why: String
        var add: String

        enum CodingKeys: String, CodingKey {
            case table, column, type, jsonKey = "json_key", why, add
        }
    }

    struct Rehearsal: Encodable, Sendable {
        var account: String
        var rows: [String: PurgeCounts]
        var files: Int
        var refused: String?
        var rowsLeft: Int

        enum CodingKeys: String, CodingKey {
            case account, rows, files, refused, rowsLeft = "rows_left"
        }
    }

    var source: String
    var database: String
    var subject: Subject
    var eraseOrder: [Table]
    var ignored: [String]
    /// References through which the database deletes rows itself (ON DELETE CASCADE).
    var deletedByDatabase: [String]
    var warnings: [Warning]
    /// File columns no index leads (each purge then reads the table to find shared files).
    var unindexedFileColumns: [String]
    var rehearsal: Rehearsal?
    /// Presets the map includes, and their tables this database does not have (left out).
    var presets: [String]
    var presetTablesLeftOut: [String]
    /// What requesting deletion does in the app: rows removed, values set (put back by a restore).
    var onDeletion: [String]
    /// What a user may delete and keep the account: each part's tables (in erase order) and user-row columns.
    var parts: [Part]

    struct Part: Encodable {
        var name: String
        var label: String
        var tables: [String]
        var userColumns: [String]

        enum CodingKeys: String, CodingKey { case name, label, tables, userColumns = "user_columns" }
    }

    enum CodingKeys: String, CodingKey {
        case source, database, subject, eraseOrder = "erase_order", ignored, deletedByDatabase = "deleted_by_database", warnings,
             unindexedFileColumns = "unindexed_file_columns", rehearsal, presets, presetTablesLeftOut = "preset_tables_left_out",
             onDeletion = "on_deletion", parts
    }

    init(_ plan: DataMapPlan, location: String, suspects: [DataMapPlan.Suspect] = [], rehearsal: Rehearsal? = nil) {
        source = plan.map.source
        database = location
        let subject = plan.subject
        // Tables of the default schema (public, main) by their plain names.
        func shown(_ name: DataMap.TableName) -> String { name.schema == plan.catalog.defaultSchema ? name.name : name.description }
        func describe(_ owner: DataMapPlan.Owner) -> String {
            switch owner {
            case .column(let column): return column
            case .value(let value): return value.description
            case .parent(let via, let parent, let column, let next): return "\(via) → \(shown(parent)).\(column), \(describe(next))"
            case .sides(let sides): return sides.map { "\($0.value.description) (\(Self.describe($0.erase)))" }.joined(separator: " | ")
            }
        }
        self.subject = Subject(
            table: shown(subject.table), key: subject.key, keyType: plan.subjectKeyKind == .integer ? "integer" : "text",
            lookup: subject.lookup, ignoreCase: subject.ignoreCase,
            password: subject.password.map { password in
                password.table.map { "\(shown($0)).\(password.column) (by \(password.key ?? "?"))" } ?? password.column
            },
            erase: Self.describe(subject.erase), blobs: subject.blobs, blobPrefixes: subject.blobPrefixes.map(\.template))
        eraseOrder = plan.tables.enumerated().map { index, table in
            Table(
                position: index + 1, table: shown(table.table.name), owner: describe(table.owner), key: table.key,
                erase: { if case .sides = table.owner { "per side" } else { Self.describe(table.table.erase) } }(), exportFile: table.table.exportFile, blobs: table.table.blobs,
                fileKey: table.table.fileKey, cascade: table.cascades.map { cascade in
                    "\(shown(cascade.table)).\(cascade.column)" + (cascade.setValue.map { " set to \($0.shownInMap)" } ?? "")
                })
        }
        ignored = plan.map.ignored.map { "\($0.description): \($0.reason)" }
        deletedByDatabase = plan.deletedByDatabase.map { "\($0) (ON DELETE CASCADE)" }
        warnings = suspects.map {
            Warning(table: shown($0.table), column: $0.column, type: $0.declaredType, jsonKey: $0.jsonKey, why: $0.why, add: $0.suggestion)
        }
        unindexedFileColumns = plan.unindexedFileColumns.map { "\(shown($0.table)).\($0.column)" }
        self.rehearsal = rehearsal
        presets = plan.map.presets
        presetTablesLeftOut = plan.presetTablesLeftOut
        onDeletion = plan.onDeletion.remove.map { removal in
            let by = removal.parent.map { "\(removal.owner.column) → \(shown($0)) (removed first)" } ?? removal.owner.description
            return "remove the rows of \(shown(removal.table)) by \(by)"
        }
            + plan.onDeletion.set.map { "set \($0.values.map(\.column).joined(separator: ", ")) of \(shown($0.table)) by \($0.owner.description) (put back by a restore)" }
            + plan.onDeletion.insert.map { "insert a row into \(shown($0.table)) for each row of \(shown($0.source)) by \($0.sourceOwner.description) that \($0.link) does not reference yet" }
        parts = plan.parts.map { part in
            let tables = Set(part.tables)
            return Part(
                name: part.name, label: part.label, tables: plan.tables.filter { tables.contains($0.table.name) }.map { shown($0.table.name) },
                userColumns: part.userColumns.map(\.column))
        }
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
            + (subject.ignoreCase.isEmpty ? "" : " (whatever the case: \(subject.ignoreCase.joined(separator: ", ")))")
            + (subject.password.map { ", password \($0)" } ?? ""))
        Terminal.line("erase order (every table before the tables it references):")
        for table in eraseOrder {
            var detail = "owner \(table.owner); \(table.erase)"
            if !table.cascade.isEmpty { detail += "; cascade \(table.cascade.joined(separator: ", "))" }
            if !table.blobs.isEmpty { detail += "; files in \(table.blobs.joined(separator: ", "))" }
            if !table.fileKey.isEmpty { detail += "; a file catalog: each row is the file \(table.fileKey.joined(separator: " / ")), deleted with it" }
            if let file = table.exportFile { detail += "; exported as \(file).json/.csv" }
            Terminal.line("  \(table.position). \(table.table): \(detail)")
        }
        Terminal.line("  \(eraseOrder.count + 1). \(subject.table) (the user row): \(subject.erase)")
        if !subject.blobPrefixes.isEmpty {
            Terminal.line("the user's folders, emptied after erasure but for files a kept row names: \(subject.blobPrefixes.joined(separator: ", "))")
        }
        for entry in ignored { Terminal.line("ignored: \(entry)") }
        for entry in deletedByDatabase { Terminal.line("deleted by the database: \(entry)") }
        if !presets.isEmpty { Terminal.line("presets: \(presets.joined(separator: ", "))") }
        for entry in presetTablesLeftOut { Terminal.line("left out (not in this database): \(entry)") }
        for entry in onDeletion { Terminal.line("on deletion request: \(entry)") }
        for part in parts {
            let columns = part.userColumns.isEmpty ? "" : "; sets \(part.userColumns.joined(separator: ", ")) of the user row"
            Terminal.line("part \(part.name) (\"\(part.label)\"): deletes \(part.tables.joined(separator: ", "))\(columns)")
        }
        if let rehearsal {
            Terminal.line("rehearsal of account \(rehearsal.account) (rolled back, nothing changed):")
            if let refused = rehearsal.refused {
                Terminal.line("  would fail: \(refused)")
            } else {
                for (table, count) in rehearsal.rows.sorted(by: { $0.key < $1.key }) {
                    Terminal.line("  \(table): \(count.deleted) deleted, \(count.masked) masked")
                }
                Terminal.line("  \(rehearsal.files) file(s) named by the erased rows; the verification read would find \(rehearsal.rowsLeft) row(s) left")
            }
        }
        for column in unindexedFileColumns {
            Terminal.note("note: no index leads with \(column): each purge reads the whole table to see whether a row it keeps still names a file it would delete; an index on it avoids that")
        }
        for warning in warnings {
            let what = warning.jsonKey.map { "\(warning.table).\(warning.column) (\(warning.type), key '\($0)')" } ?? "\(warning.table).\(warning.column) (\(warning.type))"
            Terminal.note("warning: \(what) \(warning.why); add \(warning.add)")
        }
    }
}
