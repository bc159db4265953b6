import Foundation
import PostgresTesting
import Testing

/// `map init` from the database alone: on a schema whose foreign keys CASCADE, SET NULL,
/// RESTRICT and NO ACTION (chains of them), the map it writes asks exactly for the choices
/// the database leaves open, passes `map check` once they are written, and its purge does
/// what `DELETE FROM users WHERE id = …` does with the database's own actions (the same
/// choices made by hand first), row for row.
@Suite(.serialized)
struct MapInitTests {
    let app = AppPurgeTests()

    static let schema = """
        CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, username TEXT NOT NULL, password_hash TEXT NOT NULL,
            avatar_path TEXT);
        CREATE TABLE teams (id INTEGER PRIMARY KEY, name TEXT NOT NULL, created_by INTEGER REFERENCES users (id) ON DELETE SET NULL);
        CREATE TABLE memberships (team_id INTEGER NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
            user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE, PRIMARY KEY (team_id, user_id));
        CREATE TABLE projects (id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            team_id INTEGER REFERENCES teams (id) ON DELETE SET NULL, title TEXT NOT NULL);
        CREATE TABLE tasks (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
            assignee_id INTEGER REFERENCES users (id) ON DELETE SET NULL, title TEXT NOT NULL);
        CREATE TABLE task_comments (id INTEGER PRIMARY KEY, task_id INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
            author_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE, body TEXT NOT NULL);
        CREATE TABLE task_links (id INTEGER PRIMARY KEY, task_id INTEGER REFERENCES tasks (id) ON DELETE SET NULL, url TEXT NOT NULL);
        CREATE TABLE invoices (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE RESTRICT, amount INTEGER NOT NULL);
        CREATE TABLE audit_events (id INTEGER PRIMARY KEY, actor_id INTEGER REFERENCES users (id), action TEXT NOT NULL);
        """

    /// ada (1) owns a project whose tasks bob and cy comment on and link to; she is
    /// assigned one of bob's tasks, created a team bob's project belongs to, has an invoice
    /// and audit events.
    static let seed = """
        INSERT INTO users VALUES (1, 'ada@example.com', 'ada', 'x', 'avatars/ada.png'), (2, 'bob@example.com', 'bob', 'x', NULL),
            (3, 'cy@example.com', 'cy', 'x', NULL);
        INSERT INTO teams VALUES (1, 'engines', 1), (2, 'looms', 2);
        INSERT INTO memberships VALUES (1, 1), (1, 2), (2, 1), (2, 3);
        INSERT INTO projects VALUES (1, 1, 1, 'ada''s engine'), (2, 2, 1, 'bob''s tables'), (3, 3, NULL, 'cy''s notes');
        INSERT INTO tasks VALUES (1, 1, 2, 'gears'), (2, 1, NULL, 'cards'), (3, 2, 1, 'logarithms'), (4, 3, 3, 'ink');
        INSERT INTO task_comments VALUES (1, 1, 2, 'bob on ada''s gears'), (2, 2, 3, 'cy on ada''s cards'), (3, 3, 1, 'ada on bob''s task'),
            (4, 4, 2, 'bob on cy''s ink');
        INSERT INTO task_links VALUES (1, 1, 'https://bob.example/gears'), (2, 3, 'https://bob.example/logs'), (3, NULL, 'https://cy.example');
        INSERT INTO invoices VALUES (1, 1, 100), (2, 2, 200);
        INSERT INTO audit_events VALUES (1, 1, 'signed in'), (2, 2, 'signed in'), (3, NULL, 'system');
        """

    func workspace(_ backend: Backend) async throws -> Workspace {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("map-init-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        try await app.seed(workspace, Self.schema + Self.seed)
        if backend == .sqlite { _ = try await runTool("/bin/chmod", ["o-rwx", workspace.database]) }
        return workspace
    }

    /// The database's own delete, on a copy: the choices the map makes by hand made first.
    func oracleCopy(_ workspace: Workspace, user: String = "1", before: String) async throws -> String {
        let delete = "PRAGMA foreign_keys = ON;\n" + before + "\nDELETE FROM users WHERE id = '\(user)';\n"
        switch workspace.backend {
        case .sqlite:
            let copy = workspace.root + "/oracle.sqlite"
            try FileManager.default.copyItem(atPath: workspace.database, toPath: copy)
            _ = try await runTool("/usr/bin/sqlite3", [copy], input: delete)
            return copy
        case .postgres:
            let cluster = try await ThrowawayPostgres.shared()
            let source = try #require(URLComponents(string: workspace.database)?.path.dropFirst())
            let name = "oracle_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            _ = try psqlQuery(cluster.url(database: "postgres"), "CREATE DATABASE \(name) TEMPLATE \(source)")
            let url = cluster.url(database: name)
            _ = try psqlQuery(url, delete.replacingOccurrences(of: "PRAGMA foreign_keys = ON;\n", with: ""))
            return url
        }
    }

    @Test(arguments: Backend.allCases)
    func theGeneratedMapAsksForTheOpenChoicesAndThenPurgesAsTheDatabasesOwnDeleteWould(_ backend: Backend) async throws {
        let workspace = try await workspace(backend)
        let generated = try await workspace.run(["map", "init", "--json"])
        // Written, with the two choices the database leaves open named, and refused until made.
        #expect(generated.status == 65, "\(generated.stdout) \(generated.stderr)")
        struct Summary: Decodable {
            var tables: Int
            var decisions: [String]
            var check: String
        }
        let summary = try JSONDecoder().decode(Summary.self, from: Data(generated.stdout.utf8))
        #expect(summary.decisions.count == 2, "\(summary.decisions)")
        #expect(summary.decisions.contains { $0.hasPrefix("invoices:") && $0.contains("RESTRICT") }, "\(summary.decisions)")
        #expect(summary.decisions.contains { $0.hasPrefix("audit_events:") && $0.contains("NO ACTION") }, "\(summary.decisions)")
        #expect(summary.check.contains("2 choices are still to make"), "\(summary.check)")
        let path = workspace.jobsDirectory + "/account-data.yaml"
        var map = try String(contentsOfFile: path, encoding: .utf8)
        let refused = try await workspace.run(["map", "check"])
        #expect(refused.status == 65 && refused.stderr.contains("invoices") && refused.stderr.contains("audit_events"), "\(refused.stderr)")
        // What it derived from the actions, as written.
        #expect(map.contains("- table: projects\n    owner: owner_id\n    cascade: [tasks.project_id, task_comments.task_id, {column: task_links.task_id, set: null}]"), "\(map)")
        #expect(map.contains("- table: teams\n    owner: created_by\n    erase: {mask: {created_by: null}}"), "\(map)")
        #expect(map.contains("{column: assignee_id, erase: {mask: {assignee_id: null}}}") || map.contains("owner: assignee_id\n    erase: {mask: {assignee_id: null}}"), "\(map)")
        #expect(map.contains("task_comments.author_id") || map.contains("- table: task_comments\n    owner: author_id"), "\(map)")
        #expect(map.contains("users.avatar_path"), "the file column is pointed out: \(map)")
        #expect(map.contains("  lookup: [email, username]\n  ignore_case: [email]\n"), "\(map)")

        // The choices: her invoices go with her, the audit events stay without her id.
        var lines = map.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("decide:") }
        let audit = try #require(lines.firstIndex(of: "  - table: audit_events"))
        lines.insert("    erase: {mask: {actor_id: null}}", at: audit + 2)
        map = lines.joined(separator: "\n")
        try map.write(toFile: path, atomically: true, encoding: .utf8)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stderr)\n\(map)")
        #expect(check.stdout.contains("lookup email, username (whatever the case: email)"), "\(check.stdout)")

        let oracle = try await oracleCopy(workspace, before: "DELETE FROM invoices WHERE user_id = 1;\nUPDATE audit_events SET actor_id = NULL WHERE actor_id = 1;")
        // After the oracle's copy: the first command that is not `map` sets up lifecycle's own tables.
        let shown = try await workspace.run(["accounts", "show", "ADA@Example.COM", "--json"])
        #expect(shown.stdout.contains(#""key":"1""#), "the generated map finds an address in another case: \(shown.stdout) \(shown.stderr)")
        let request = try await workspace.run(["delete", "1", "--operator", "sam", "--reason", "the oracle", "--immediately"])
        #expect(request.status == 0, "\(request.stderr)")
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        let receipt = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")

        let compared = try await runTool(repositoryRoot + "/.build-tools/venv/bin/python", [
            DjangoOracleTests.oracle, "compare", oracle, workspace.root + "/none", workspace.database, workspace.root + "/none",
        ])
        let comparison = try JSONDecoder().decode(DjangoOracleTests.Comparison.self, from: Data(compared.utf8))
        #expect(comparison.tables == 9 && comparison.rows > 15, "\(comparison.tables) \(comparison.rows)")
        #expect(comparison.differences.isEmpty, "\(comparison.differences)")
    }
}

extension MapInitTests {
    /// The product's app on Supabase's `auth` and `storage` schemas as their own migrations
    /// make them (PostgreSQL): `map init` recognises the platform (its preset), the profile
    /// table keyed by auth.users' id as the user, and the app's tables through the keys into
    /// either; the purge then leaves `public` as `DELETE FROM users` would have.
    @Test
    func onSupabaseTheGeneratedMapUsesThePresetAndPurgesThePublicSchemaAsTheDatabaseWould() async throws {
        let workspace = try await DataMapCheckTests().install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try FileManager.default.removeItem(atPath: workspace.jobsDirectory + "/account-data.yaml")
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users"))
        let generated = try await workspace.run(["map", "init"])
        let path = workspace.jobsDirectory + "/account-data.yaml"
        var map = try String(contentsOfFile: path, encoding: .utf8)
        // The app declares its foreign keys without ON DELETE: each table that names her is a
        // choice (deleted with her, as written, or kept unlinked), asked for by name.
        #expect(generated.status == 65, "\(generated.stdout) \(generated.stderr)")
        let tables = ["user_preferences", "user_integrations", "journal_entries", "journal_photos", "mesocycles", "meditation_sessions"]
        for table in tables {
            #expect(map.contains("- table: \(table)\n"), "\(table): \(map)")
            #expect(generated.stdout.contains("  - \(table): "), "\(table): \(generated.stdout)")
        }
        #expect(map.contains("include: [supabase]") && map.contains("subject:\n  table: users\n  key: id"), "\(map)")
        #expect(map.contains("password: {table: auth.users, key: id, column: encrypted_password}"), "\(map)")
        #expect(map.contains("owner: {via: entry_id, parent: journal_entries}"), "\(map)")
        #expect(!map.contains("- table: auth.") && !map.contains("- table: storage."), "the platform's tables are the preset's: \(map)")
        #expect(map.contains("journal_photos.storage_path") && map.contains("users.avatar_path"), "file columns pointed out: \(map)")
        // Chosen as written: her rows go with her.
        map = map.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("decide:") }.joined(separator: "\n")
        try map.write(toFile: path, atomically: true, encoding: .utf8)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stderr)")

        let ada = AppPurgeTests.ada
        let oracle = try await oracleCopy(workspace, user: ada, before: """
            DELETE FROM journal_photos WHERE entry_id IN (SELECT id FROM journal_entries WHERE user_id = '\(ada)');
            DELETE FROM journal_entries WHERE user_id = '\(ada)';
            DELETE FROM user_preferences WHERE user_id = '\(ada)';
            DELETE FROM user_integrations WHERE user_id = '\(ada)';
            DELETE FROM mesocycles WHERE user_id = '\(ada)';
            DELETE FROM meditation_sessions WHERE user_id = '\(ada)';
            """)
        let request = try await workspace.run(["delete", ada, "--operator", "sam", "--reason", "the oracle", "--immediately"])
        #expect(request.status == 0, "\(request.stderr)")
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        let receipt = try #require(try await workspace.auditRows(of: ada).first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")
        let compared = try await runTool(repositoryRoot + "/.build-tools/venv/bin/python", [
            DjangoOracleTests.oracle, "compare", oracle, workspace.root + "/none", workspace.database, workspace.root + "/none",
        ])
        let comparison = try JSONDecoder().decode(DjangoOracleTests.Comparison.self, from: Data(compared.utf8))
        #expect(comparison.tables >= 7 && comparison.differences.isEmpty, "\(comparison.differences)")
    }

    /// A document she only reviewed (SET NULL) stays with what hangs off it; one in her
    /// folder (CASCADE) goes with its comments. The comments are owned through no parent
    /// she is only a masked side of.
    @Test(arguments: Backend.allCases)
    func rowsUnderARowSheIsOnlyUnlinkedFromAreNotHers(_ backend: Backend) async throws {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("map-init-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        try await app.seed(workspace, """
            CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);
            CREATE TABLE folders (id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE);
            CREATE TABLE documents (id INTEGER PRIMARY KEY, folder_id INTEGER NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
                reviewer_id INTEGER REFERENCES users (id) ON DELETE SET NULL, title TEXT NOT NULL);
            CREATE TABLE doc_comments (id INTEGER PRIMARY KEY, document_id INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
                body TEXT NOT NULL);
            INSERT INTO users VALUES (1, 'ada@example.com'), (2, 'bob@example.com');
            INSERT INTO folders VALUES (1, 1), (2, 2);
            INSERT INTO documents VALUES (1, 1, 2, 'ada''s'), (2, 2, 1, 'bob''s, reviewed by ada');
            INSERT INTO doc_comments VALUES (1, 1, 'on ada''s'), (2, 2, 'on bob''s');
            """)
        if backend == .sqlite { _ = try await runTool("/bin/chmod", ["o-rwx", workspace.database]) }
        let generated = try await workspace.run(["map", "init"])
        let map = try String(contentsOfFile: jobs + "/account-data.yaml", encoding: .utf8)
        #expect(generated.status == 0, "\(generated.stdout) \(generated.stderr)\n\(map)")
        #expect(!map.contains("parent: documents"), "\(map)")
        let oracle = try await oracleCopy(workspace, before: "")
        _ = try await workspace.run(["delete", "1", "--operator", "sam", "--reason", "the oracle", "--immediately"])
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(try await app.rows(workspace, "SELECT id, reviewer_id FROM documents") == ["2|∅"])
        #expect(try await app.rows(workspace, "SELECT id FROM doc_comments") == ["2"])
        let compared = try await runTool(repositoryRoot + "/.build-tools/venv/bin/python", [
            DjangoOracleTests.oracle, "compare", oracle, workspace.root + "/none", workspace.database, workspace.root + "/none",
        ])
        let comparison = try JSONDecoder().decode(DjangoOracleTests.Comparison.self, from: Data(compared.utf8))
        #expect(comparison.differences.isEmpty, "\(comparison.differences)")
    }
}
