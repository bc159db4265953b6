import Foundation
import JobRunner
import Lifecycle
import Testing

/// "Verified — nothing anywhere" (DESIGN.md): after erasure and before any file goes, every
/// readable table is searched for the account's identifiers. Each case plants one of ada's
/// (her email, her handle, her integer key under a key that names a user) where the social
/// app's map does not look: the rehearsal names it first, changing nothing; the purge stops
/// there with exit 77 (its job dead, not retried blindly), every file kept and the account
/// still purging, the table, column and row named; once the map allows the column with a
/// reason and the job is retried the purge goes through, and the receipt lists what was
/// scanned and allowed.
@Suite(.serialized)
struct ResidueScanTests {
    let app = AppPurgeTests()

    enum Planted: String, CaseIterable, Sendable {
        /// Her email two levels down in an unmapped JSON column.
        case unmappedJSONColumn
        /// Her handle, in capitals, in a column of a mapped table (bob's status) that names nobody.
        case unmappedTextColumn
        /// Her email in a table the map does not know.
        case unmappedTable
        /// Her integer key under `user_id` inside JSON (a bare 1 elsewhere is not her).
        case integerKeyInJSON

        var ddl: String {
            switch self {
            case .unmappedJSONColumn, .integerKeyInJSON: "CREATE TABLE webhooks (id integer PRIMARY KEY, body json, sent_at timestamp);"
            case .unmappedTextColumn: "ALTER TABLE statuses ADD COLUMN mood text;"
            case .unmappedTable: "CREATE TABLE newsletter (id integer PRIMARY KEY, address varchar(254));"
            }
        }

        var rows: String {
            switch self {
            case .unmappedJSONColumn: """
                INSERT INTO webhooks (id, body) VALUES (1, '{"event": "signup", "data": {"contact": ["x", {"email": "ada@example.com"}]}}'),
                  (2, '{"event": "signup", "data": {"contact": [{"email": "bob@example.com"}]}}'), (3, '[1, "not ada"]');
                """
            case .integerKeyInJSON: """
                INSERT INTO webhooks (id, body) VALUES (1, '{"count": 1, "items": [1, 2]}'), (2, '{"event": "x", "by": {"user_id": 1}}'),
                  (3, '{"by": {"user_id": 2}}');
                """
            case .unmappedTextColumn: "UPDATE statuses SET mood = 'ADA' WHERE id = 14; UPDATE statuses SET mood = 'ada answers' WHERE id = 12;"
            case .unmappedTable: "INSERT INTO newsletter (id, address) VALUES (1, 'bob@example.com'), (2, 'Ada@Example.com');"
            }
        }

        /// Where the scan finds her: table.column (row key).
        var named: String {
            switch self {
            case .unmappedJSONColumn: "webhooks.body (row 1)"
            case .integerKeyInJSON: "webhooks.body (row 2)"
            case .unmappedTextColumn: "statuses.mood (row 14)"
            case .unmappedTable: "newsletter.address (row 2)"
            }
        }

        var column: String { String(named.prefix { $0 != " " }) }
        var planted: String {
            switch self {
            case .unmappedJSONColumn, .integerKeyInJSON: "SELECT id FROM webhooks ORDER BY id"
            case .unmappedTextColumn: "SELECT mood FROM statuses WHERE id = 14"
            case .unmappedTable: "SELECT id, address FROM newsletter ORDER BY id"
            }
        }
    }

    struct Receipt: Decodable {
        struct Residue: Decodable {
            var tables_scanned: Int
            var columns_scanned: Int
            var rows_scanned: Int
            var found: Int
            var allowed: [String]?
            var reason: String?
        }
        var residue: Residue?
    }

    func receipt(_ workspace: Workspace) async throws -> Receipt? {
        guard let detail = try await workspace.auditRows(of: "1").first(where: { $0.action == "account.purge" && $0.outcome == "purged" })?.detail else {
            return nil
        }
        return try JSONDecoder().decode(Receipt.self, from: Data(detail.utf8))
    }

    func install(_ backend: Backend, _ planted: Planted) async throws -> Workspace {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += "\n" + planted.ddl + "\n"
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, AppPurgeTests.socialSeed + "\n" + planted.rows)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in AppPurgeTests.socialFiles { _ = try await blobs.put(key: key, data: Data("file \(key)".utf8)) }
        return workspace
    }

    @Test(arguments: Backend.allCases, Planted.allCases)
    func anIdentifierLeftWhereTheMapDoesNotLookStopsThePurgeUntilTheMapAllowsIt(_ backend: Backend, _ planted: Planted) async throws {
        let workspace = try await install(backend, planted)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let before = try await ErasureGuaranteeTests().everything(workspace)
        let plantedBefore = try await app.rows(workspace, planted.planted)
        let files = app.files(workspace)

        let dryRun = try await workspace.run(["purge", "--dry-run"])
        #expect(dryRun.status == 75, "\(dryRun.stdout) \(dryRun.stderr)")
        #expect(dryRun.stdout.contains("would fail: residue scan found"), "\(dryRun.stdout)")
        #expect(dryRun.stdout.contains(planted.named), "\(dryRun.stdout)")
        let rehearsal = try await workspace.run(["map", "check", "--account", "ada@example.com"])
        #expect(rehearsal.status == 75, "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect((rehearsal.stdout + rehearsal.stderr).contains(planted.named), "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect(try await ErasureGuaranteeTests().everything(workspace) == before)

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 77, "\(purge.stdout) \(purge.stderr)")
        let said = purge.stdout + purge.stderr
        #expect(said.contains("residue scan found") && said.contains(planted.named), "\(said)")
        // Stopped before any file went, her user row (the last batch) still there.
        #expect(app.files(workspace) == files)
        #expect(try await app.rows(workspace, "SELECT handle FROM members WHERE id = 1") == ["ada"])
        #expect(try await receipt(workspace) == nil)
        let state = backend == .postgres ? "lifecycle.subjects" : "lifecycle_subjects"
        #expect(try await app.rows(workspace, "SELECT state FROM \(state) WHERE subject_key = '1'") == ["purging"])
        let check = try await workspace.run(["jobs", "check"])
        #expect(check.status != 0 && (check.stdout + check.stderr).contains(planted.named), "\(check.stdout) \(check.stderr)")

        // Not a blind retry: dead after its one attempt, named by `jobs check`, until retried.
        let job = try #require(said.firstMatch(of: /purge job #(\d+) is dead/)?.output.1).description
        let map = workspace.jobsDirectory + "/account-data.yaml"
        let reason = "kept by the mail provider's contract; erased there by its own job"
        try (try String(contentsOfFile: map, encoding: .utf8) + "\nresidue:\n  allow: [\(planted.column)]\n  reason: \(reason)\n")
            .write(toFile: map, atomically: true, encoding: .utf8)
        #expect(try await workspace.run(["jobs", "retry", job]).status == 0)
        let allowed = try await workspace.run(["purge"], environment: ErasureGuaranteeTests.later)
        #expect(allowed.status == 0, "\(allowed.stdout) \(allowed.stderr)")
        #expect(allowed.stdout.contains("1 purged"), "\(allowed.stdout)")
        try await app.expectAdaPurged(workspace, catalog: try await app.appCatalog(workspace))
        #expect(try await app.rows(workspace, planted.planted) == plantedBefore)
        let residue = try #require(try await receipt(workspace)?.residue)
        #expect(residue.found == 0)
        #expect(residue.allowed == [planted.column] && residue.reason == reason, "\(residue)")
        // Every table of the social app but the user table (gone) and those holding no text, at least.
        #expect(residue.tables_scanned >= 5 && residue.columns_scanned >= residue.tables_scanned && residue.rows_scanned > 0, "\(residue)")
    }

    /// An allowance must say why (the receipt lists it), and name a column that exists: a
    /// misspelt one would allow nothing, silently.
    @Test(arguments: Backend.allCases)
    func anAllowanceWithoutAReasonOrOfNoColumnIsRefused(_ backend: Backend) async throws {
        let social = try DataMapCheckTests.AppSchema.social.map
        #expect(throws: LifecycleError.self) { try DataMap(yaml: social + "\nresidue:\n  allow: [statuses.body]\n", source: "map.yaml") }
        let workspace = try await app.installSocial(backend)
        let map = workspace.jobsDirectory + "/account-data.yaml"
        try (social + "\nresidue:\n  allow: [statuses.bdy]\n  reason: kept\n").write(toFile: map, atomically: true, encoding: .utf8)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 65, "\(check.stdout) \(check.stderr)")
        #expect(check.stderr.contains("residue: allow: statuses.bdy is not a column"), "\(check.stderr)")
    }

    /// Without anything planted the scan passes, and says what it read.
    @Test(arguments: Backend.allCases)
    func aCleanPurgeReportsWhatTheScanRead(_ backend: Backend) async throws {
        let workspace = try await app.installSocial(backend)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stdout) \(purge.stderr)")
        let residue = try #require(try await receipt(workspace)?.residue)
        #expect(residue.found == 0 && residue.allowed == nil)
        #expect(residue.tables_scanned >= 5 && residue.rows_scanned > 0, "\(residue)")
    }
}
