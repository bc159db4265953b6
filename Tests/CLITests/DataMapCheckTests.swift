import ChildProcesses
import Foundation
import Testing

/// `lifecycle map check` against databases built with the apps' own DDL, never through
/// lifecycle: the shipped examples (Supabase, Django) and a schema with every shape the
/// map handles, on both backends. A broken map is refused naming what is wrong, and the
/// database is left exactly as it was.
@Suite(.serialized)
struct DataMapCheckTests {
    /// An app's schema and its map, as a test database and a Jobs folder.
    struct AppSchema {
        var ddl: String
        var map: String

        static func load(_ directory: String, ddl: String = "schema.sql", map: String = "account-data.yaml") throws -> AppSchema {
            AppSchema(
                ddl: try String(contentsOfFile: directory + "/" + ddl, encoding: .utf8),
                map: try String(contentsOfFile: directory + "/" + map, encoding: .utf8))
        }

        /// The product's app on Supabase's real `auth` and `storage` schemas (PostgreSQL only:
        /// Tests/Fixtures/supabase/platform.sql reproduces them from their migrations).
        static var supabase: AppSchema {
            get throws {
                var schema = try load(repositoryRoot + "/Jobs/examples/supabase")
                schema.ddl = try String(contentsOfFile: repositoryRoot + "/Tests/Fixtures/supabase/platform.sql", encoding: .utf8) + "\n" + schema.ddl
                return schema
            }
        }
        /// A Django-shaped schema written by hand whose user row stays as a tombstone (the
        /// example project, `Jobs/examples/django`, is migrated by Django itself).
        static var django: AppSchema { get throws { try load(repositoryRoot + "/Tests/CLITests/Schemas", ddl: "django-tombstone.sql", map: "django-tombstone.yaml") } }
        static var social: AppSchema { get throws { try load(repositoryRoot + "/Tests/CLITests/Schemas", ddl: "social.sql", map: "social.yaml") } }

        /// SQLite has no schemas and no now(): Supabase's auth.users becomes auth_users.
        func forSQLite() -> AppSchema {
            AppSchema(
                ddl: ddl.replacingOccurrences(of: "CREATE SCHEMA IF NOT EXISTS auth;", with: "")
                    .replacingOccurrences(of: "auth.users", with: "auth_users").replacingOccurrences(of: "public.", with: "")
                    .replacingOccurrences(of: "DEFAULT now()", with: "DEFAULT CURRENT_TIMESTAMP"),
                map: map.replacingOccurrences(of: "auth.users", with: "auth_users"))
        }
    }

    static let platformLoads = NSLock()

    /// Builds the app's database with its own DDL and a Jobs folder holding the map.
    func install(_ schema: AppSchema, _ backend: Backend) async throws -> Workspace {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("map-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        let schema = backend == .sqlite ? schema.forSQLite() : schema
        try schema.map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
        switch backend {
        case .sqlite:
            try await runTool("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", workspace.database], input: schema.ddl)
        case .postgres:
            let url = workspace.database, ddl = schema.ddl
            // Supabase's platform schemas create cluster-wide roles: two databases loading them
            // at once would race on the same role names.
            _ = try await onThreadOfItsOwn { try Self.platformLoads.withLock { try psqlQuery(url, ddl) } }
        }
        return workspace
    }

    /// The app's tables with their columns, lifecycle's own namespace (and SQLite's own
    /// bookkeeping) left out: compared before and after a command that must not alter them.
    func tables(_ workspace: Workspace) async throws -> String {
        switch workspace.backend {
        case .sqlite:
            return try await runTool("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", workspace.database, """
                SELECT name || ':' || sql FROM sqlite_master
                WHERE tbl_name NOT LIKE 'lifecycle\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name
                """])
        case .postgres:
            let url = workspace.database
            return try await onThreadOfItsOwn {
                try psqlQuery(url, """
                    SELECT string_agg(table_schema || '.' || table_name || '.' || column_name || ':' || data_type, ',' ORDER BY table_schema, table_name, column_name)
                    FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema', 'lifecycle')
                    """)
            }
        }
    }

    struct Summary: Decodable {
        struct Table: Decodable {
            var position: Int
            var table: String
            var owner: String
            var key: [String]
            var erase: String
        }
        var erase_order: [Table]
    }

    func check(_ workspace: Workspace) async throws -> (CommandResult, Summary?) {
        let result = try await workspace.run(["map", "check", "--json"])
        return (result, try? JSONDecoder().decode(Summary.self, from: Data(result.stdout.utf8)))
    }

    @Test
    func theSupabaseMapHoldsOnSupabasesRealSchemaAndOrdersPhotosBeforeTheirEntries() async throws {
        let workspace = try await install(try AppSchema.supabase, .postgres)
        let before = try await tables(workspace)
        let (result, summary) = try await check(workspace)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stderr.contains("warning:"), "\(result.stderr)")
        let order = try #require(summary).erase_order
        let names = order.map(\.table)
        let auth = "auth.users"
        #expect(Set(names).isSuperset(of: [auth, "auth.identities", "auth.sessions", "auth.refresh_tokens", "auth.mfa_factors", "auth.one_time_tokens",
                                           "auth.flow_state", "auth.audit_log_entries", "user_preferences", "user_integrations", "journal_entries",
                                           "journal_photos", "mesocycles", "meditation_sessions"]))
        #expect(names.firstIndex(of: "journal_photos")! < names.firstIndex(of: "journal_entries")!)
        #expect(order.first { $0.table == "journal_photos" }?.owner == "entry_id → journal_entries.id, user_id")
        #expect(order.first { $0.table == "user_integrations" }?.key == ["user_id", "provider"])
        #expect(order.first { $0.table == auth }?.erase.hasPrefix("mask email, encrypted_password") == true)
        #expect(try await tables(workspace) == before)
    }

    @Test(arguments: Backend.allCases)
    func theDjangoMapHoldsWithCommentsAndTheirFilesCascadedWithAPost(_ backend: Backend) async throws {
        let workspace = try await install(try AppSchema.django, backend)
        let before = try await tables(workspace)
        let (result, summary) = try await check(workspace)
        #expect(result.status == 0, "\(result.stderr)")
        let names = try #require(summary).erase_order.map(\.table)
        #expect(names == ["blog_attachment", "blog_comment", "blog_post", "auth_user_groups"])
        #expect(try await tables(workspace) == before)
    }

    @Test(arguments: Backend.allCases)
    func everyShapeOfTheSocialSchemaHolds(_ backend: Backend) async throws {
        let workspace = try await install(try AppSchema.social, backend)
        let (result, summary) = try await check(workspace)
        #expect(result.status == 0, "\(result.stderr)")
        let order = try #require(summary).erase_order
        let names = order.map(\.table)
        #expect(names.firstIndex(of: "media_variants")! < names.firstIndex(of: "media")!)
        #expect(names.firstIndex(of: "media")! < names.firstIndex(of: "statuses")!)
        #expect(names.firstIndex(of: "favourites")! < names.firstIndex(of: "statuses")!)
        #expect(order.first { $0.table == "media_variants" }?.owner == "media_id → media.id, status_id → statuses.id, member_id")
        #expect(order.first { $0.table == "media_variants" }?.key == ["media_id", "size"])
        #expect(order.first { $0.table == "messages" }?.erase == "per side")
    }

    @Test(arguments: Backend.allCases)
    func aBrokenMapIsRefusedWith65NamingWhatIsWrongAndNothingIsWritten(_ backend: Backend) async throws {
        let social = try AppSchema.social
        let cases: [(String, (String) -> String, String)] = [
            ("a missing column", { $0.replacingOccurrences(of: "columns: [id, in_reply_to_id, body, created_at]", with: "columns: [id, in_reply_to_id, text, created_at]") },
             "account-data.yaml:16: column 'text' is not a column of"),
            ("an unmapped table", { $0.replacingOccurrences(of: "  - table: favourites\n    owner: member_id\n", with: "  - table: favourites_gone\n    owner: member_id\n") },
             "table favourites_gone does not exist"),
            ("an unknown key", { $0.replacingOccurrences(of: "    order_by: sent_at", with: "    order_by: sent_at\n    retention: 30d") },
             "tables[5].retention: unknown key 'retention'"),
            ("an unhandled reference from other users' rows", { $0.replacingOccurrences(of: "    cascade: [favourites.status_id]\n", with: "") },
             "favourites.status_id → "),
            ("a NOT NULL column masked to null", { $0.replacingOccurrences(of: "  erase: delete\n", with: "  erase: {mask: {handle: null}}\n") },
             "members.handle is NOT NULL"),
            ("text masked into an integer column", { $0.replacingOccurrences(of: "mask: {member_id: null, body: null}", with: "mask: {member_id: \"nobody\", body: null}") },
             "statuses.member_id is \(backend == .sqlite ? "INTEGER" : "integer"), so its mask must be a number or true/false, not \"nobody\""),
        ]
        for (what, edit, expected) in cases {
            var schema = social
            schema.map = edit(social.map)
            #expect(schema.map != social.map, "\(what): the edit changed nothing")
            let workspace = try await install(schema, backend)
            let before = try await tables(workspace)
            let result = try await workspace.run(["map", "check"])
            #expect(result.status == 65, "\(what): \(result.stderr)")
            #expect(result.stderr.contains(expected), "\(what): \(result.stderr)")
            #expect(try await tables(workspace) == before, "\(what)")
        }

        // A table with a foreign key to the user that the map forgot is named with its path.
        var extra = social
        extra.ddl += "\nCREATE TABLE bookmarks (id integer PRIMARY KEY, status_id integer NOT NULL REFERENCES statuses(id), note text);\n"
        let workspace = try await install(extra, backend)
        let forgotten = try await workspace.run(["map", "check"])
        #expect(forgotten.status == 65)
        #expect(forgotten.stderr.contains("bookmarks.status_id references statuses"), "\(forgotten.stderr)")
        #expect(forgotten.stderr.contains("bookmarks.status_id → ") && forgotten.stderr.contains("statuses.member_id → "), "\(forgotten.stderr)")
        // NOT NULL: the rows cannot stay, so both ways of deleting them are offered as the
        // author's choice, and no `ignore:` (which would make every purge fail).
        #expect(forgotten.stderr.contains("status_id is NOT NULL, so those rows cannot stay: a choice only you can make"), "\(forgotten.stderr)")
        #expect(forgotten.stderr.contains("`- {table: bookmarks, owner: {via: status_id, parent: statuses}}` under `tables:` if they are hers"), "\(forgotten.stderr)")
        #expect(forgotten.stderr.contains("`bookmarks.status_id` to statuses's `cascade:` if they are other users'"), "\(forgotten.stderr)")
        #expect(!forgotten.stderr.contains("ignore:"), "\(forgotten.stderr)")
    }

    @Test(arguments: Backend.allCases)
    func aCycleBetweenTablesIsRefusedNamingIt(_ backend: Backend) async throws {
        var schema = try AppSchema.social
        schema.ddl += """

            CREATE TABLE albums (id integer PRIMARY KEY, member_id integer NOT NULL REFERENCES members(id), cover_id integer);
            CREATE TABLE pictures (id integer PRIMARY KEY, member_id integer NOT NULL REFERENCES members(id),
                                   album_id integer REFERENCES albums(id));
            """
        // SQLite cannot add a foreign key to an existing table: both tables get theirs in the DDL above on PostgreSQL by ALTER.
        if backend == .postgres {
            schema.ddl += "\nALTER TABLE albums ADD FOREIGN KEY (cover_id) REFERENCES pictures(id);\n"
        } else {
            schema.ddl = schema.ddl.replacingOccurrences(of: "cover_id integer);", with: "cover_id integer REFERENCES pictures(id));")
        }
        schema.map += """

              - table: albums
                owner: member_id
                cascade: [pictures.album_id, albums.cover_id]
              - table: pictures
                owner: member_id
                cascade: [albums.cover_id, pictures.album_id]
            """
        let workspace = try await install(schema, backend)
        let result = try await workspace.run(["map", "check"])
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("albums, ") && result.stderr.contains("pictures reference each other in a cycle"), "\(result.stderr)")
    }

    @Test func aMissingDatabaseIsRefusedAndNotCreated() async throws {
        let workspace = try await install(try AppSchema.social, .sqlite)
        try FileManager.default.removeItem(atPath: workspace.database)
        let result = try await workspace.run(["map", "check"])
        #expect(result.status == 66)
        #expect(!FileManager.default.fileExists(atPath: workspace.database))
    }

    /// An app's SQLite file as apps make it (0644) would hold lifecycle's secrets where every
    /// user of the machine can read them: refused, named, and nothing written until private.
    @Test func anAppFileOtherUsersCanReadIsRefusedForLifecyclesSecrets() async throws {
        let workspace = try await install(try AppSchema.social, .sqlite)
        chmod(workspace.database, 0o644)
        let before = try await tables(workspace)
        let refused = try await workspace.run(["init"])
        #expect(refused.status == 77, "\(refused.stderr)")
        #expect(refused.stderr.contains("open to every user of this machine (mode 644)") && refused.stderr.contains("chmod o-rwx"), "\(refused.stderr)")
        #expect(try await tables(workspace) == before)
        chmod(workspace.database, 0o640)
        #expect(try await workspace.run(["init"]).status == 0)
        chmod(workspace.database, 0o604)
        let later = try await workspace.run(["map", "check", "--account", "1"])
        #expect(later.status == 77 && later.stderr.contains("mode 604"), "\(later.stderr)")
    }

    /// A role that may not create lifecycle's schema is a grant to make, not a bug: 77,
    /// naming the GRANT (or the schema an administrator creates for it), nothing written;
    /// once granted, the same command goes through.
    @Test func initByARoleThatMayNotCreateTheSchemaNamesTheGrant() async throws {
        let workspace = try await install(try AppSchema.social, .postgres)
        let role = "installer_" + UUID().uuidString.prefix(8).lowercased()
        let url = try #require(workspace.postgresURL)
        _ = try psqlQuery(url, "CREATE ROLE \(role) LOGIN PASSWORD 'installer-secret'; GRANT SELECT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(role);")
        var asRole = workspace
        asRole.postgresURL = url.replacingOccurrences(of: #"postgres://[^@]+@"#, with: "postgres://\(role):installer-secret@", options: .regularExpression)
        asRole.initialisesOnFirstCommand = false
        let before = try await tables(workspace)
        let refused = try await asRole.run(["init"])
        #expect(refused.status == 77, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("GRANT CREATE ON DATABASE") && refused.stderr.contains("CREATE SCHEMA lifecycle AUTHORIZATION \"\(role)\""), "\(refused.stderr)")
        #expect(!refused.stderr.contains("bug"), "\(refused.stderr)")
        #expect(try psqlQuery(url, "SELECT count(*) FROM pg_namespace WHERE nspname = 'lifecycle'").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(try await tables(workspace) == before)
        _ = try psqlQuery(url, "CREATE SCHEMA lifecycle AUTHORIZATION \(role);")
        let granted = try await asRole.run(["init"])
        #expect(granted.status == 0, "\(granted.stdout) \(granted.stderr)")
    }
}

/// Runs a tool, feeding `input` on stdin; throws unless it exits 0.
@discardableResult
func runTool(_ path: String, _ arguments: [String], input: String? = nil) async throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let output = Pipe(), errors = Pipe(), stdin = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = input == nil ? FileHandle.nullDevice : stdin
    try process.run()
    if let input {
        try stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
        try stdin.fileHandleForWriting.close()
    }
    let (data, problem) = await onThreadOfItsOwn {
        (output.fileHandleForReading.readDataToEndOfFile(), errors.fileHandleForReading.readDataToEndOfFile())
    }
    await process.exited()
    guard process.terminationStatus == 0 else {
        throw CLITestFailure("\(path) exited \(process.terminationStatus): \(String(decoding: problem, as: UTF8.self))")
    }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}
