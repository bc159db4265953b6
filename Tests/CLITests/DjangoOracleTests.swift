import Foundation
import PostgresTesting
import Testing

/// Django itself is the oracle of `map init --django`: a project from PyPI or the example,
/// migrated for real, its users made through the ORM; one copy of the database has Django's
/// own `User.delete()` run for ada (and File.delete() for every file of a row it deleted),
/// the other lifecycle's purge with the map `map init --django` generated, unedited. Table
/// by table, row by row, file by file, the two must be the same, but for what the presets
/// erase beyond Django's rules, each named here with why. Then Django's test client renders
/// the admin and the site's pages on what the purge left: every other user's page answers.
@Suite(.serialized)
struct DjangoOracleTests {
    struct Project: Sendable {
        var folder: String
        var settings: String
        var python: String
        /// How ada signs in (USERNAME_FIELD), which names her to Django and to lifecycle.
        var ada = "ada"
        /// Migrates and seeds DB and MEDIA; returns the seed's JSON.
        var build: @Sendable (_ database: String, _ media: String) async throws -> String
    }

    static let example = Project(
        folder: repositoryRoot + "/Jobs/examples/django", settings: "example_site.settings", python: repositoryRoot + "/.build-tools/venv/bin/python",
        build: { database, media in try await runTool(repositoryRoot + "/Jobs/examples/django/build.sh", [database, media]) })

    static let oscar = Project(
        folder: repositoryRoot + "/Tests/Fixtures/oscar_site", settings: "oscar_site.settings", python: repositoryRoot + "/.build-tools/oscar-venv/bin/python",
        build: { database, media in
            let manage = [
                "LIFECYCLE_DJANGO_DB=\(database)", "LIFECYCLE_DJANGO_MEDIA=\(media)", "PYTHONDONTWRITEBYTECODE=1", "PYTHONWARNINGS=ignore",
                repositoryRoot + "/.build-tools/oscar-venv/bin/python", repositoryRoot + "/Tests/Fixtures/oscar_site/manage.py",
            ]
            _ = try await runTool("/usr/bin/env", manage + ["migrate", "--noinput"])
            return try await runTool("/usr/bin/env", manage + ["seed_shop"])
        })

    struct Comparison: Decodable {
        struct Difference: Decodable {
            var only_in_django: [String]
            var only_in_lifecycle: [String]
        }
        var tables: Int
        var rows: Int
        var tables_equal: Int
        var differences: [String: Difference]
        var files: Int
        var files_only_in_django: [[String]]
        var files_only_in_lifecycle: [[String]]
    }

    struct Page: Decodable {
        var page: String
        var status: Int
    }

    struct Outcome {
        var workspace: Workspace
        var map: String
        var seeded: String
        var comparison: Comparison
        var pages: [Page]
        var receipt: String
    }

    static let members = Project(
        folder: repositoryRoot + "/Tests/Fixtures/members_site", settings: "members_site.settings", python: repositoryRoot + "/.build-tools/venv/bin/python",
        ada: "ada@example.com", build: { database, media in
            let manage = [
                "LIFECYCLE_DJANGO_DB=\(database)", "LIFECYCLE_DJANGO_MEDIA=\(media)", "PYTHONDONTWRITEBYTECODE=1",
                repositoryRoot + "/.build-tools/venv/bin/python", repositoryRoot + "/Tests/Fixtures/members_site/manage.py",
            ]
            _ = try await runTool("/usr/bin/env", manage + ["migrate", "--noinput"])
            return try await runTool("/usr/bin/env", manage + ["seed_members"])
        })

    static let oracle = repositoryRoot + "/Tests/Fixtures/django-oracle/oracle.py"

    /// The whole comparison for `project` on `backend`, ada being the user who goes.
    /// `chosen`: the PROTECT relations (APP.MODEL.FIELD) whose `decide:` the map answers by
    /// deleting her rows, which Django's copy deletes first.
    func compare(
        _ project: Project, _ backend: Backend, chosen: [String] = [], pages: (String) throws -> [String] = { _ in [] }
    ) async throws -> Outcome {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        let seeded = try await project.build(workspace.database, workspace.blobs)

        // Django's copy, made before lifecycle touches the database.
        let django: (database: String, media: String)
        switch backend {
        case .sqlite:
            django = (workspace.root + "/django.sqlite", workspace.root + "/django-media")
            try FileManager.default.copyItem(atPath: workspace.database, toPath: django.database)
        case .postgres:
            let cluster = try await ThrowawayPostgres.shared()
            let source = try #require(URLComponents(string: workspace.database)?.path.dropFirst())
            let copy = "oracle_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            _ = try psqlQuery(cluster.url(database: "postgres"), "CREATE DATABASE \(copy) TEMPLATE \(source)")
            django = (cluster.url(database: copy), workspace.root + "/django-media")
        }
        _ = try await runTool("/bin/cp", ["-a", workspace.blobs, django.media])
        let environment = { (database: String, media: String) in ["LIFECYCLE_DJANGO_DB=\(database)", "LIFECYCLE_DJANGO_MEDIA=\(media)", "PYTHONWARNINGS=ignore"] }
        _ = try await runTool("/usr/bin/env", environment(django.database, django.media) + [
            project.python, Self.oracle, "--project", project.folder, "--settings", project.settings, "delete", project.ada,
        ] + chosen.flatMap { ["--first", $0] })

        // Lifecycle's copy: the map as `map init --django` writes it, then a purge.
        let generated = try await workspace.run(
            ["map", "init", "--django", project.folder + "/manage.py", "--python", project.python],
            environment: ["LIFECYCLE_DJANGO_DB": workspace.database, "LIFECYCLE_DJANGO_MEDIA": workspace.blobs])
        #expect(generated.status == (chosen.isEmpty ? 0 : 65), "\(generated.stdout) \(generated.stderr)")
        var map = try String(contentsOfFile: jobs + "/account-data.yaml", encoding: .utf8)
        let decisions = map.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("decide:") }
        #expect(decisions.count == chosen.count, "\(map)")
        for relation in chosen {
            #expect(decisions.contains { $0.contains("\(relation) on_delete=PROTECT") }, "\(relation): \(decisions)")
        }
        // Each choice made as written (her rows deleted with her): the `decide:` line goes.
        map = map.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("decide:") }.joined(separator: "\n")
        try map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
        let request = try await workspace.run(["delete", project.ada, "--operator", "oracle", "--reason", "the oracle's comparison", "--immediately"])
        #expect(request.status == 0, "\(request.stderr)")
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        struct Users: Decodable { var users: [String: Int] }
        let ada = try #require(try JSONDecoder().decode(Users.self, from: Data(seeded.utf8)).users["ada"])
        let receipt = try #require(try await workspace.auditRows(of: String(ada)).first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")
        #expect(receipt.contains(#""found":0"#), "\(receipt)")

        let compared = try await runTool(project.python, [Self.oracle, "compare", django.database, django.media, workspace.database, workspace.blobs])
        let comparison = try JSONDecoder().decode(Comparison.self, from: Data(compared.utf8))
        let rendered = try await runTool("/usr/bin/env", environment(workspace.database, workspace.blobs) + [
            project.python, Self.oracle, "--project", project.folder, "--settings", project.settings, "render",
        ] + (try pages(seeded)).flatMap { ["--page", $0] })
        return Outcome(
            workspace: workspace, map: map, seeded: seeded, comparison: comparison,
            pages: try JSONDecoder().decode([Page].self, from: Data(rendered.utf8)), receipt: receipt)
    }

    @Test(arguments: Backend.allCases)
    func theExampleProjectsGeneratedMapErasesWhatDjangosOwnDeleteDoes(_ backend: Backend) async throws {
        let outcome = try await compare(Self.example, backend)
        struct Seeded: Decodable {
            var users: [String: Int]
            var sessions: [String: String]
        }
        let seeded = try JSONDecoder().decode(Seeded.self, from: Data(outcome.seeded.utf8))
        let ada = try #require(seeded.users["ada"])
        let comparison = outcome.comparison
        #expect(comparison.tables >= 20 && comparison.rows > 100, "\(comparison.tables) tables, \(comparison.rows) rows")
        // What the presets erase beyond Django's rules, and nothing else: her session (Django's
        // delete leaves it, holding her id) and the admin log's entries about her account
        // (a generic relation Django's delete does not follow).
        #expect(Set(comparison.differences.keys).isSubset(of: ["django_session", "django_admin_log"]), "\(comparison.differences)")
        for (table, difference) in comparison.differences {
            #expect(difference.only_in_lifecycle.isEmpty, "\(table): \(difference.only_in_lifecycle)")
            for row in difference.only_in_django {
                if table == "django_session" {
                    #expect(row.contains(try #require(seeded.sessions["ada"])), "\(row)")
                } else {
                    #expect(row.contains(#""object_id": "\#(ada)""#), "\(row)")
                }
            }
        }
        #expect(comparison.differences["django_session"]?.only_in_django.count == 1)
        #expect(comparison.files > 0 && comparison.files_only_in_django.isEmpty && comparison.files_only_in_lifecycle.isEmpty,
                "\(comparison.files_only_in_django) \(comparison.files_only_in_lifecycle)")
        #expect(outcome.pages.count > 10 && outcome.pages.allSatisfy { $0.status == 200 }, "\(outcome.pages.filter { $0.status != 200 })")
    }

    @Test(arguments: Backend.allCases)
    func djangoOscarsGeneratedMapErasesWhatDjangosOwnDeleteDoes(_ backend: Backend) async throws {
        struct Seeded: Decodable {
            struct Page: Decodable {
                var url: String
                var owner: String?
            }
            var users: [String: Int]
            var pages: [Page]
        }
        let outcome = try await compare(Self.oscar, backend) { seeded in
            try JSONDecoder().decode(Seeded.self, from: Data(seeded.utf8)).pages.map(\.url)
        }
        let seeded = try JSONDecoder().decode(Seeded.self, from: Data(outcome.seeded.utf8))
        let comparison = outcome.comparison
        // Every table the same: orders kept with the customer nulled, her baskets, addresses,
        // reviews (and the others' votes on them), wish lists, alerts, notifications, gone.
        #expect(comparison.tables > 80 && comparison.rows > 500, "\(comparison.tables) tables, \(comparison.rows) rows")
        #expect(comparison.differences.isEmpty, "\(comparison.differences)")
        #expect(comparison.tables_equal == comparison.tables)
        #expect(comparison.files_only_in_django.isEmpty && comparison.files_only_in_lifecycle.isEmpty)
        #expect(outcome.map.contains("erase: {mask: {user_id: null}}"), "orders are kept, unlinked: \(outcome.map)")
        #expect(outcome.map.contains("{column: order_order.basket_id, set: null}"), "\(outcome.map)")
        #expect(try await outcome.workspace.query("SELECT COUNT(*) FROM order_order WHERE user_id IS NULL").first?.first == "1")
        // Her own pages are gone; every other page, the orders dashboard's page of her kept
        // order among them, renders.
        let ownedByAda = Set(seeded.pages.filter { $0.owner == "ada" }.map(\.url))
        #expect(!ownedByAda.isEmpty)
        for page in outcome.pages {
            #expect(page.status == (ownedByAda.contains(page.page) ? 404 : 200), "\(page.page): \(page.status)")
        }
        #expect(outcome.pages.count > seeded.pages.count + 50)
    }

    /// A project with its own user model (signing in by email), a GenericRelation on it, a
    /// PROTECT (asked for, then chosen: her invoices go), a SET_DEFAULT beside a CASCADE on
    /// one table with other users' rows under it (deleted, or unlinked by SET_NULL), many-to-
    /// many tables and files on the user row and her documents, and a model inheriting
    /// another's table (whose parent row the map cannot yet erase, and says so).
    @Test(arguments: Backend.allCases)
    func aCustomUserModelsGeneratedMapErasesWhatDjangosOwnDeleteDoes(_ backend: Backend) async throws {
        let outcome = try await compare(Self.members, backend, chosen: ["members.Invoice.member"])
        let comparison = outcome.comparison
        #expect(comparison.tables > 10 && comparison.rows > 50, "\(comparison.tables) tables, \(comparison.rows) rows")
        // The one rule a map cannot write yet, and the map says so: Django deletes the place
        // row of her studio (multi-table inheritance); the purge leaves it, naming no one.
        #expect(Array(comparison.differences.keys) == ["members_place"], "\(comparison.differences)")
        #expect(comparison.differences["members_place"]?.only_in_django.isEmpty == true)
        #expect(comparison.differences["members_place"]?.only_in_lifecycle.count == 1
            && comparison.differences["members_place"]?.only_in_lifecycle.first?.contains("ada's studio") == true, "\(comparison.differences)")
        #expect(outcome.map.contains("multi-table inheritance"), "\(outcome.map)")
        #expect(comparison.files >= 4 && comparison.files_only_in_django.isEmpty && comparison.files_only_in_lifecycle.isEmpty,
                "\(comparison.files_only_in_django) \(comparison.files_only_in_lifecycle)")
        for line in [
            "subject:\n  table: members_member", "lookup: [email]", "blobs: [avatar]",
            "match: {app_label: members, model: member}", "{column: reviewer_id, erase: {mask: {reviewer_id: null}}}",
            "{column: members_pin.document_id, set: null}", "- table: members_member_teams", "- table: django_admin_log",
        ] {
            #expect(outcome.map.contains(line) || outcome.map.contains(line.replacingOccurrences(of: "members_member_teams", with: "members_team_members")), "\(line): \(outcome.map)")
        }
        #expect(outcome.pages.count > 10 && outcome.pages.allSatisfy { $0.status == 200 }, "\(outcome.pages.filter { $0.status != 200 })")
    }
}
