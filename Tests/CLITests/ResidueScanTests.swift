import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
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
        /// Her handle, in capitals, in a column of a mapped table (bob's status) that names a user.
        case unmappedTextColumn
        /// Her email, the key of the row that holds it: the row is named without repeating it.
        case keyOfItsRow
        /// Her email with a non-ASCII capital, copied exactly: SQLite's lower() leaves 'É' as it is.
        case nonASCII
        /// Her email in a table the map does not know.
        case unmappedTable
        /// Her integer key under `user_id` inside JSON (a bare 1 elsewhere is not her).
        case integerKeyInJSON

        var ddl: String {
            switch self {
            case .unmappedJSONColumn, .integerKeyInJSON: "CREATE TABLE webhooks (id integer PRIMARY KEY, body json, sent_at timestamp);"
            case .unmappedTextColumn: "ALTER TABLE statuses ADD COLUMN mentioned_user text;"
            case .unmappedTable, .nonASCII: "CREATE TABLE newsletter (id integer PRIMARY KEY, address varchar(254));"
            case .keyOfItsRow: "CREATE TABLE optouts (address varchar(254) PRIMARY KEY, at timestamp);"
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
            case .unmappedTextColumn:
                "UPDATE statuses SET mentioned_user = 'ADA' WHERE id = 14; UPDATE statuses SET mentioned_user = 'ada answers' WHERE id = 12;"
            case .unmappedTable: "INSERT INTO newsletter (id, address) VALUES (1, 'bob@example.com'), (2, 'Ada@Example.com');"
            case .keyOfItsRow: "INSERT INTO optouts (address) VALUES ('bob@example.com'), ('ada@example.COM');"
            case .nonASCII: """
                UPDATE members SET email = 'Élodie@Example.com' WHERE id = 1;
                INSERT INTO newsletter (id, address) VALUES (1, 'bob@example.com'), (2, 'Élodie@Example.com');
                """
            }
        }

        /// Where the scan finds her: table.column (row key).
        var named: String {
            switch self {
            case .unmappedJSONColumn: "webhooks.body (row 1)"
            case .integerKeyInJSON: "webhooks.body (row 2)"
            case .unmappedTextColumn: "statuses.mentioned_user (row 14)"
            case .unmappedTable, .nonASCII: "newsletter.address (row 2)"
            case .keyOfItsRow: "optouts.address (a row whose key holds the identifier)"
            }
        }

        var column: String { String(named.prefix { $0 != " " }) }
        var planted: String {
            switch self {
            case .unmappedJSONColumn, .integerKeyInJSON: "SELECT id FROM webhooks ORDER BY id"
            case .unmappedTextColumn: "SELECT mentioned_user FROM statuses WHERE id = 14"
            case .unmappedTable, .nonASCII: "SELECT id, address FROM newsletter ORDER BY id"
            case .keyOfItsRow: "SELECT address FROM optouts ORDER BY address"
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
            var milliseconds: Double?
            var pass_accounts: Int?
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
        #expect(dryRun.status == 77, "\(dryRun.stdout) \(dryRun.stderr)")
        #expect(dryRun.stdout.contains("would fail: residue scan found"), "\(dryRun.stdout)")
        #expect(dryRun.stdout.contains(planted.named), "\(dryRun.stdout)")
        let rehearsal = try await workspace.run(["map", "check", "--account", "1"])
        #expect(rehearsal.status == 77, "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect((rehearsal.stdout + rehearsal.stderr).contains(planted.named), "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect(try await ErasureGuaranteeTests().everything(workspace) == before)

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 77, "\(purge.stdout) \(purge.stderr)")
        let said = purge.stdout + purge.stderr
        #expect(said.contains("residue scan found") && said.contains(planted.named), "\(said)")
        // Where, never what: no message repeats the identifier it found.
        #expect(!said.lowercased().contains("@example.com") && !dryRun.stdout.lowercased().contains("ada@example.com"), "\(said)")
        // Stopped before any file went, her user row (the last batch) still there.
        #expect(app.files(workspace) == files)
        #expect(try await app.rows(workspace, "SELECT handle FROM members WHERE id = 1") == ["ada"])
        #expect(try await receipt(workspace) == nil)
        let state = backend == .postgres ? "lifecycle.subjects" : "lifecycle_subjects"
        #expect(try await app.rows(workspace, "SELECT state FROM \(state) WHERE subject_key = '1'") == ["purging"])
        let check = try await workspace.run(["jobs", "check"])
        #expect(check.status != 0 && (check.stdout + check.stderr).contains(planted.named), "\(check.stdout) \(check.stderr)")
        let stop = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "residue_found" })
        #expect(stop.detail?.contains(planted.named) == true && stop.detail?.lowercased().contains("example.com") == false, "\(stop)")

        // The next night's run starts no new job that would stop the same way: still 77, the
        // one dead job named, nothing else queued.
        let again = try await workspace.run(["purge"])
        #expect(again.status == 77, "\(again.stdout) \(again.stderr)")
        #expect((again.stdout + again.stderr).contains(planted.named), "\(again.stdout) \(again.stderr)")
        let jobs = backend == .postgres ? "lifecycle.jobs" : "lifecycle_jobs"
        #expect(try await app.rows(workspace, "SELECT state FROM \(jobs) WHERE kind = 'deletion.purge'") == ["dead"])

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
        #expect((residue.milliseconds ?? 0) > 0 && residue.pass_accounts == 1, "\(residue)")
    }

    /// A username is also a word: 'ada' as a tag, a content type's model, a permission's
    /// codename or another member's display name is not her, and does not stop her purge;
    /// only a column or JSON key that names a user makes it hers. (Her email, found anywhere,
    /// is hers: see the cases above.)
    @Test(arguments: Backend.allCases)
    func aUsernameWhereNoColumnNamesAUserIsNotHer(_ backend: Backend) async throws {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += """

            CREATE TABLE tags (id integer PRIMARY KEY, label text, meta json);
            CREATE TABLE content_types (id integer PRIMARY KEY, app_label varchar(100), model varchar(100));
            ALTER TABLE members ADD COLUMN display_name text;
            """
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, AppPurgeTests.socialSeed + """

            INSERT INTO tags (id, label, meta) VALUES (1, 'ada', '{"colour": "ada", "names": ["ada"], "count": 1}'), (2, 'ADA', NULL);
            INSERT INTO content_types (id, app_label, model) VALUES (1, 'people', 'ada');
            UPDATE members SET display_name = 'Ada' WHERE id = 2;
            """)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let rehearsal = try await workspace.run(["purge", "--dry-run"])
        #expect(rehearsal.status == 0, "\(rehearsal.stdout) \(rehearsal.stderr)")
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stdout) \(purge.stderr)")
        let residue = try #require(try await receipt(workspace)?.residue)
        #expect(residue.found == 0 && residue.tables_scanned >= 7, "\(residue)")
        #expect(try await app.rows(workspace, "SELECT label FROM tags ORDER BY id") == ["ada", "ADA"])
        #expect(try await app.rows(workspace, "SELECT display_name FROM members WHERE id = 2") == ["Ada"])
    }

    /// The same name under a key that says it is a user's, in JSON or a column, is hers.
    @Test(arguments: Backend.allCases)
    func aUsernameUnderAKeyThatNamesAUserIsHers(_ backend: Backend) async throws {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += "\nCREATE TABLE events (id integer PRIMARY KEY, payload json);\n"
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, AppPurgeTests.socialSeed + """

            INSERT INTO events (id, payload) VALUES (1, '{"kind": "ada"}'), (2, '{"kind": "login", "by": {"actor_username": "Ada"}}');
            """)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 77, "\(purge.stdout) \(purge.stderr)")
        #expect((purge.stdout + purge.stderr).contains("events.payload (row 2)"), "\(purge.stdout) \(purge.stderr)")
    }

    /// One statement per table serves a whole batch: 500 accounts, three of them with an
    /// identifier left somewhere, are scanned in as many statements as there are tables with
    /// a searched column, plus one per account only for the tables where something was
    /// found; each hit is the right account's, and the others have none.
    @Test func fiveHundredAccountsAreScannedInOnePassPerTable() async throws {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += "\nCREATE TABLE webhooks (id integer PRIMARY KEY, body json);\nCREATE TABLE newsletter (id integer PRIMARY KEY, address text);\n"
        let workspace = try await app.schemas.install(schema, .sqlite)
        var seed = "BEGIN;\n"
        for id in 1...500 {
            seed += "INSERT INTO members (id, handle, email, created_at) VALUES (\(id), 'member\(id)', 'm\(id)@example.com', '2025-01-01 00:00:00');\n"
        }
        seed += """
            INSERT INTO webhooks (id, body) VALUES (1, '{"to": ["M7@example.com"]}'), (2, '{"by": {"user_id": 250}}'), (3, '{"by": {"user_id": 9999}}');
            INSERT INTO newsletter (id, address) VALUES (1, 'm499@example.com'), (2, 'nobody@example.com');
            COMMIT;
            """
        try await app.seed(workspace, seed)
        let store = try workspace.store()
        let catalog = try await store.catalog()
        let map = try String(contentsOfFile: workspace.jobsDirectory + "/account-data.yaml", encoding: .utf8)
        let plan = try DataMapPlan(map: DataMap(yaml: map, source: "account-data.yaml"), catalog: catalog)
        let scan = ResidueScan(plan: plan, dialect: .sqlite)
        let batch = (1...500).map { scan.identifiers(key: String($0), lookupValues: ["member\($0)", "m\($0)@example.com"]) }
        let (summary, hits, statements) = try await store.read { tx in
            let counting = CountingTransaction(base: tx)
            let (summary, hits) = try scan.run(batch: batch, in: counting)
            return (summary, hits, counting.statements)
        }
        // The other members' own rows are passed over (key and lookups); every table read once.
        #expect(summary.found == 3, "\(summary)")
        #expect(hits[6].map(\.description) == ["webhooks.body (row 1)"])
        #expect(hits[249].map(\.description) == ["webhooks.body (row 2)"])
        #expect(hits[498].map(\.description) == ["newsletter.address (row 1)"])
        #expect(hits.enumerated().filter { ![6, 249, 498].contains($0.offset) }.allSatisfy { $0.element.isEmpty })
        // Two tables held something: each read again for every account of the batch.
        #expect(statements == summary.tablesScanned + 2 * 500, "\(statements) statements for \(summary.tablesScanned) tables")
        #expect(summary.rowsScanned == 3 + 2, "\(summary)")

        // Without anything to find, one statement a table, whatever the batch.
        let clean = Array(batch[100..<200])
        let (cleanSummary, cleanHits, cleanStatements) = try await store.read { tx in
            let counting = CountingTransaction(base: tx)
            let (summary, hits) = try scan.run(batch: clean, in: counting)
            return (summary, hits, counting.statements)
        }
        #expect(cleanHits.allSatisfy(\.isEmpty) && cleanStatements == cleanSummary.tablesScanned && cleanStatements >= 7, "\(cleanSummary)")
    }
}

/// The purges running at once share a pass: it starts when every purge that said it was on
/// its way has arrived or left, or when the first to arrive has waited long enough.
struct ResidueScanBatcherTests {
    /// Records the batches each pass served; every account's hits are empty.
    actor Passes {
        private(set) var batches: [[String]] = []
        func record(_ batch: [ResidueScan.Identifiers]) { batches.append(batch.map(\.key)) }
    }

    static let summary = try! JSONDecoder().decode(ResidueScan.Summary.self, from: Data(#"{"tables_scanned": 2, "columns_scanned": 3, "rows_scanned": 0, "found": 0}"#.utf8))

    func scan(_ key: String, _ batcher: ResidueScanBatcher, _ passes: Passes) async throws -> ResidueScanBatcher.Outcome {
        try await batcher.scan(ResidueScan.Identifiers(key: key, texts: ["\(key)@example.com"], integerKey: nil)) { batch in
            await passes.record(batch)
            return (Self.summary, batch.map { _ in [] })
        }
    }

    @Test func threePurgesOnTheirWayAreServedByOnePass() async throws {
        let batcher = ResidueScanBatcher(longestWait: .seconds(600))
        let passes = Passes()
        for _ in 1...3 { await batcher.approach() }
        let outcomes = try await withThrowingTaskGroup(of: ResidueScanBatcher.Outcome.self) { group in
            for key in ["1", "2", "3"] { group.addTask { try await scan(key, batcher, passes) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(await passes.batches.map { $0.sorted() } == [["1", "2", "3"]])
        #expect(outcomes.allSatisfy { $0.summary.passAccounts == 3 && $0.hits.isEmpty })
    }

    /// A purge that fails (or has nothing left to scan) leaves: the others do not wait for it.
    @Test func aPurgeThatLeavesDoesNotHoldThePassBack() async throws {
        let batcher = ResidueScanBatcher(longestWait: .seconds(600))
        let passes = Passes()
        for _ in 1...3 { await batcher.approach() }
        let outcomes = try await withThrowingTaskGroup(of: ResidueScanBatcher.Outcome.self) { group in
            for key in ["1", "2"] { group.addTask { try await scan(key, batcher, passes) } }
            group.addTask {
                await batcher.withdraw()
                return (Self.summary, [])
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(await passes.batches.map { $0.sorted() } == [["1", "2"]])
        #expect(outcomes.filter { $0.summary.passAccounts == 2 }.count == 2)
    }

    /// One purge slowed down (a large account) holds the others back only for `longestWait`;
    /// when it arrives, a pass of its own serves it. The time limit turns a wait limit that
    /// never ends the wait into a failure instead of a hang.
    @Test(.timeLimit(.minutes(10))) func aSlowPurgeHoldsThePassBackOnlyForTheLongestWait() async throws {
        let batcher = ResidueScanBatcher(longestWait: .milliseconds(20))
        let passes = Passes()
        for _ in 1...2 { await batcher.approach() }
        let first = try await scan("1", batcher, passes)
        #expect(first.summary.passAccounts == 1)
        #expect(await passes.batches == [["1"]])
        let slow = try await scan("2", batcher, passes)
        #expect(slow.summary.passAccounts == 1)
        #expect(await passes.batches == [["1"], ["2"]])
    }

    /// A failed pass fails every purge it served; the next pass runs for those after it.
    @Test func aFailedPassFailsThePurgesItServedAndNotTheNext() async throws {
        struct Unreadable: Error {}
        let batcher = ResidueScanBatcher(longestWait: .seconds(600))
        let passes = Passes()
        for _ in 1...2 { await batcher.approach() }
        let failures = await withTaskGroup(of: Bool.self) { group in
            for key in ["1", "2"] {
                group.addTask {
                    do {
                        _ = try await batcher.scan(ResidueScan.Identifiers(key: key, texts: [], integerKey: nil)) { _ in throw Unreadable() }
                        return false
                    } catch { return error is Unreadable }
                }
            }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(failures == 2)
        await batcher.approach()
        let after = try await scan("3", batcher, passes)
        #expect(after.summary.passAccounts == 1)
        #expect(await passes.batches == [["3"]])
    }
}

/// Counts the statements a scan sends through a real transaction.
final class CountingTransaction<Base: GeneratedSQLTransaction>: GeneratedSQLTransaction {
    let base: Base
    private(set) var statements = 0

    init(base: Base) { self.base = base }

    func rows(_ statement: SQLStatement) throws -> [[Lifecycle.SQLValue]] {
        statements += 1
        return try base.rows(statement)
    }

    func execute(_ statement: SQLStatement) throws -> Int { try base.execute(statement) }
    func exportPage(_ statement: SQLStatement, columns: Int, limit: Int) throws -> ExportPage { try base.exportPage(statement, columns: columns, limit: limit) }
    func tableAccess(_ tables: [DataMap.TableName]) throws -> [DataMap.TableName: SchemaCatalog.Access] { try base.tableAccess(tables) }
    func prepareErasure(settings: [DataMap.TransactionSetting]) throws { try base.prepareErasure(settings: settings) }
}
