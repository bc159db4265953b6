import Foundation
import GRDB
import JobRunner
import Lifecycle
import PostgresBackend
import PostgresNIO
import PostgresTesting
import SQLiteBackend
import Testing

/// Lifecycle's own state lives in its own namespace (`lifecycle_` tables in SQLite, the
/// `lifecycle` schema in PostgreSQL), apart from the app's tables, and an installation
/// made by the release before it is carried over in place.
struct NamespaceTests {
    /// The reference app's tables: the only ones lifecycle creates outside its namespace.
    static let referenceTables: Set<String> = ["accounts", "preferences", "sessions", "journal_entries", "photos", "mesocycles", "meditation_sessions"]
    /// Lifecycle's own tables, by their name inside the namespace.
    static let ownTables: Set<String> = [
        "jobs", "job_steps", "job_schedules", "runner_probe_effects", "audit_events", "exports", "outbox", "purge_inventory",
        "deletion_attempts", "subjects", "purge_progress", "purge_files", "grace_values", "paused_kinds", "holds", "settings", "lookup_digests",
        "part_deletion_rows", "encoded_owners", "encoded_indexes", "unreported_stops",
    ]
    /// Every migration, in order. SQLite has two of its own: its ready index took the
    /// shape PostgreSQL's always had, and its unique-key index stopped naming the state.
    static func migrations(of store: some LifecycleStore) -> [String] {
        [
            "v1-job-runner", "v1-reference-schema", "v2-exports", "v2-deletion", "v3-deletion-attempts", "v4-lifecycle-namespace",
            "v5-app-subjects", "v6-operations",
        ] + (store is SQLiteStore
            ? ["v7-ready-by-kind", "v8-unique-key-index-without-state", "v9-kind-state-index-settled-only", "v10-job-state-tests-without-in-lists", "v11-purge-files", "v12-grace-values", "v13-photos-by-blob-key", "v14-part-deletion-rows", "v15-encoded-owners", "v16-unreported-stops", "v17-reference-deletion-state", "v18-reference-profile-photo-column", "v19-profile-photo-key-index"]
            : ["v7-purge-files", "v8-grace-values", "v9-sign-in-restore", "v10-photos-by-blob-key", "v11-part-deletion-rows", "v12-encoded-owners", "v13-unreported-stops", "v14-reference-deletion-state", "v15-reference-profile-photo-column"])
    }
    /// The reference tables with an account_id column: what the data map must cover.

    // MARK: A fresh installation

    @Test(arguments: Backend.allCases)
    func aFreshInstallationHasNoTableOfItsOwnOutsideItsNamespace(_ backend: Backend) async throws {
        try await aFreshInstallationHasNoTableOfItsOwnOutsideItsNamespace(store: try await backend.makeStore(), backend)
    }

    private func aFreshInstallationHasNoTableOfItsOwnOutsideItsNamespace(store: some LifecycleStore, _ backend: Backend) async throws {
        let tables = try await Catalog.tables(store)
        let outside = tables.filter { !$0.isOwn && !Self.referenceTables.contains($0.name) }
        #expect(outside.isEmpty, "tables outside lifecycle's namespace that are not the reference app's: \(outside)")
        #expect(Set(tables.filter { !$0.isOwn }.map(\.name)) == Self.referenceTables)
        let bookkeeping = backend == .sqlite ? "migrations" : "schema_migrations"
        #expect(Set(tables.filter(\.isOwn).map(\.name)) == Self.ownTables.union([bookkeeping]))
        // Index and sequence names share the namespace with the app's too.
        #expect(try await Catalog.objectsOutsideNamespace(store).isEmpty)
        #expect(try await Catalog.appliedMigrations(store) == Self.migrations(of: store))
    }

    @Test(arguments: Backend.allCases)
    func theAppsOwnTablesOfTheSameNamesAreLeftAlone(_ backend: Backend) async throws {
        switch backend {
        case .sqlite:
            let path = try temporaryDatabasePath()
            // An app that keeps jobs of its own, and migrates with GRDB too.
            let app = try DatabaseQueue(path: path)
            try await app.write { db in
                try db.execute(sql: """
                    CREATE TABLE jobs (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
                    INSERT INTO jobs (title) VALUES ('barista');
                    CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                    INSERT INTO grdb_migrations VALUES ('app-v1');
                    """)
            }
            try app.close()
            let store = try SQLiteStore(path: path)
            try await theAppsOwnTablesOfTheSameNamesAreLeftAlone(store: store, appRecord: "SELECT identifier FROM grdb_migrations")
        case .postgres:
            let url = try await emptyPostgresDatabase()
            // An app that keeps jobs of its own, and migrates with Rails.
            try await Catalog.execute(try await PostgresStore(PostgresLocation(url: url), migrating: false), """
                CREATE TABLE jobs (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, title TEXT NOT NULL);
                INSERT INTO jobs (title) VALUES ('barista');
                CREATE TABLE schema_migrations (version TEXT PRIMARY KEY);
                INSERT INTO schema_migrations VALUES ('app-v1');
                """)
            let store = try await PostgresStore(url: url)
            try await theAppsOwnTablesOfTheSameNamesAreLeftAlone(store: store, appRecord: "SELECT version FROM schema_migrations")
        }
    }

    private func theAppsOwnTablesOfTheSameNamesAreLeftAlone(store: some LifecycleStore, appRecord: String) async throws {
        #expect(try await Catalog.texts(store, "SELECT title FROM jobs") == ["barista"])
        #expect(try await Catalog.texts(store, appRecord) == ["app-v1"])
        #expect(try await Catalog.appliedMigrations(store) == Self.migrations(of: store))
        let job = try await store.write { tx in
            try store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: deletionEpoch, in: tx)
        }
        #expect(job.created && job.job.id == 1)
        #expect(try await Catalog.texts(store, "SELECT title FROM jobs") == ["barista"])
    }

    /// A part deletion finds the files kept rows still name by blob key: the reference app's
    /// photos have an index for it, and an app's own table of that name gets none, even
    /// when the upgrade that brings the index opens the app's installation as the reference
    /// app's (which a map that cannot be read does).
    @Test(arguments: Backend.allCases)
    func theReferencePhotosAreFoundByBlobKeyAndAnAppsOwnPhotosTableIsLeftAlone(_ backend: Backend) async throws {
        let appTable = "CREATE TABLE photos (id INTEGER PRIMARY KEY, blob_key TEXT NOT NULL)"
        let reference: any LifecycleStore
        let app: any LifecycleStore
        let upgraded: () async throws -> any LifecycleStore
        let indexes: String
        let photoKeyIndexes: String
        switch backend {
        case .sqlite:
            reference = try await Backend.sqlite.makeStore()
            let path = try temporaryDatabasePath()
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in try db.execute(sql: appTable) }
            try queue.close()
            app = try SQLiteStore(path: path, referenceSchema: false)
            try await Catalog.execute(app, "DELETE FROM lifecycle_migrations WHERE name = 'v13-photos-by-blob-key'")
            upgraded = { try SQLiteStore(path: path, referenceSchema: true) }
            indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'photos' AND sql LIKE '%blob_key%'"
            photoKeyIndexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'accounts' AND sql LIKE '%profile_photo_key%'"
        case .postgres:
            reference = try await Backend.postgres.makeStore()
            let url = try await emptyPostgresDatabase()
            try await Catalog.execute(try await PostgresStore(PostgresLocation(url: url), migrating: false), appTable)
            app = try await PostgresStore(url: url, referenceSchema: false)
            try await Catalog.execute(app, "DELETE FROM lifecycle.schema_migrations WHERE name = 'v10-photos-by-blob-key'")
            upgraded = { try await PostgresStore(url: url, referenceSchema: true) }
            indexes = "SELECT indexname FROM pg_indexes WHERE tablename = 'photos' AND indexdef LIKE '%blob_key%' AND schemaname <> 'lifecycle'"
            photoKeyIndexes = "SELECT indexname FROM pg_indexes WHERE tablename = 'accounts' AND indexdef LIKE '%profile_photo_key%' AND schemaname <> 'lifecycle'"
        }
        #expect(try await Catalog.texts(reference, indexes) == ["photos_blob_key"])
        // A purge asks whether a kept row still names a file in every file column, hers among them.
        #expect(try await Catalog.texts(reference, photoKeyIndexes) == ["accounts_profile_photo_key"])
        #expect(try await Catalog.texts(app, indexes) == [])
        let reopened = try await upgraded()
        #expect(try await Catalog.texts(reopened, indexes) == [])
        #expect(try await Catalog.appliedMigrations(reopened) == Self.migrations(of: reopened))
    }

    /// The index a part deletion looks files up by arrives on a photos table that may be
    /// large: it is built CONCURRENTLY, which PostgreSQL refuses inside a transaction, so
    /// the migrations' transaction never holds the app's writes while it builds. A build
    /// cut short leaves an INVALID index, which the next open drops and builds again.
    @Test func theBlobKeyIndexIsBuiltConcurrentlyAndABuildCutShortIsBuiltAgain() async throws {
        let url = try await emptyPostgresDatabase()
        let store = try await PostgresStore(url: url)
        let validity = """
            SELECT i.indisvalid::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'photos_blob_key'
            """
        #expect(try await Catalog.texts(store, validity) == ["true"])
        // Two photos share a key, so a unique build fails after creating its entry: the
        // INVALID index an interrupted CREATE INDEX CONCURRENTLY leaves behind.
        try await Catalog.execute(store, """
            DROP INDEX photos_blob_key;
            INSERT INTO accounts (id, created_at, updated_at) VALUES ('a1', now(), now());
            INSERT INTO photos (id, account_id, role, blob_key, content_type, byte_size, sha256, created_at)
            VALUES ('p1', 'a1', 'entry', 'same', 'image/jpeg', 1, 'x', now()), ('p2', 'a1', 'entry', 'same', 'image/jpeg', 1, 'x', now())
            """)
        #expect(throws: (any Error).self) { try Self.psql(url, "CREATE UNIQUE INDEX CONCURRENTLY photos_blob_key ON photos(blob_key)") }
        #expect(try await Catalog.texts(store, validity) == ["false"])
        let reopened = try await PostgresStore(url: url)
        #expect(try await Catalog.texts(reopened, validity) == ["true"])
        let definition = "SELECT indexdef FROM pg_indexes WHERE indexname = 'photos_blob_key'"
        #expect(try await Catalog.texts(reopened, definition).first?.contains("UNIQUE") == false)
    }

    /// One statement through psql, outside any transaction (the URL's `pool` is the toolkit's own).
    private static func psql(_ url: String, _ sql: String) throws {
        let connection = String(url[..<(url.range(of: "&pool=")?.lowerBound ?? url.endIndex)])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ThrowawayPostgres.binDirectory + "/psql")
        process.arguments = ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", connection, "-c", sql]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw LifecycleError(.internalError, "psql exited \(process.terminationStatus) for: \(sql)") }
    }

    // MARK: An installation made by the previous release

    @Test(arguments: Backend.allCases)
    func anInstallationOfThePreviousReleaseIsUpgradedInPlace(_ backend: Backend) async throws {
        switch backend {
        case .sqlite:
            let path = try temporaryDatabasePath()
            try Self.previousSQLiteInstallation(at: path)
            try await anInstallationOfThePreviousReleaseIsUpgradedInPlace(
                upgraded: try SQLiteStore(path: path), reopened: { try SQLiteStore(path: path) },
                fresh: try await Backend.sqlite.makeStore() as! SQLiteStore)
        case .postgres:
            let url = try await emptyPostgresDatabase()
            try await Self.previousPostgresInstallation(at: url)
            try await anInstallationOfThePreviousReleaseIsUpgradedInPlace(
                upgraded: try await PostgresStore(url: url), reopened: { try await PostgresStore(url: url) },
                fresh: try await Backend.postgres.makeStore() as! PostgresStore)
        }
    }

    private func anInstallationOfThePreviousReleaseIsUpgradedInPlace<Store: LifecycleStore>(
        upgraded store: Store, reopened: () async throws -> Store, fresh: Store
    ) async throws {
        // Every row is there, under the new names, read by the new code.
        #expect(try await store.jobs(matching: JobFilter(limit: 10)).map(\.kind).sorted() == ["export", "purge", "runner.probe"])
        #expect(try await store.steps(of: 1).map(\.step) == ["gather", "write-archive"])
        let (exports, outbox, audit, inventory) = try await store.read { tx in
            (try tx.exports(accountID: "ada"), try tx.outboxMessages(accountID: "ada"), try tx.auditEvents(accountID: "ada"),
             try tx.purgeInventory(accountID: "bob"))
        }
        #expect(exports.map(\.id) == ["e-1"])
        #expect(exports.first?.jobID == 1 && exports.first?.state == .ready)
        #expect(outbox.map(\.uniqueKey) == ["export-ready:e-1", "export-ready:e-2"])
        #expect(audit.map(\.action) == ["export.request", "deletion.request"])
        #expect(inventory?.rows == ["journal_entries": 2])
        #expect(try await Catalog.texts(store, "SELECT COUNT(*) FROM \(own(store, "job_schedules"))") == ["1"])
        #expect(try await Catalog.texts(store, "SELECT COUNT(*) FROM \(own(store, "runner_probe_effects"))") == ["1"])
        #expect(try await Catalog.texts(store, "SELECT COUNT(*) FROM \(own(store, "deletion_attempts"))") == ["1"])
        #expect(try await store.read { tx in try tx.account(id: "ada")?.email } == "ada@example.com")
        // The accounts' deletion state moved to lifecycle's records, as every app's is kept.
        let (pending, purged, untouched) = try await store.read { tx in
            (try tx.subject(key: "cy"), try tx.subject(key: "dee"), try tx.subject(key: "ada"))
        }
        #expect(pending?.state == .pendingDeletion && pending?.purgeAfter == deletionEpoch.addingTimeInterval(19 * day))
        #expect(pending?.deletionRequestedAt == deletionEpoch)
        #expect(purged?.state == .purged && purged?.purgedAt == deletionEpoch.addingTimeInterval(-31 * day))
        #expect(untouched == nil)
        // The app still shows the pending account as pending, and a restore puts back what it showed before.
        #expect(try await store.read { tx in try tx.account(id: "cy")?.state } == .pendingDeletion)
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("upgrade-\(UUID().uuidString)").path
        let services = LifecycleServices(
            store: store, blobs: try FileSystemBlobStore(root: jobs + "/blobs"), policies: try PolicyBook(jobsDirectory: deletionJobsDirectory),
            jobsDirectory: deletionJobsDirectory, clock: ManualTimeSource(deletionEpoch), logger: .init(label: "upgrade"))
        let deletion = try DeletionService(services: services, directory: try await services.directory())
        _ = try await deletion.restore(account: "cy")
        #expect(try await store.read { tx in try tx.account(id: "cy")?.state } == .active)
        #expect(try await store.read { tx in try tx.subject(key: "cy")?.state } == .active)

        // The old names are gone, the bookkeeping with them; nothing is left but the app's tables.
        let tables = try await Catalog.tables(store)
        #expect(Set(tables.filter { !$0.isOwn }.map(\.name)) == Self.referenceTables)
        #expect(try await Catalog.objectsOutsideNamespace(store).isEmpty)
        #expect(try await Catalog.appliedMigrations(store) == Self.migrations(of: store))
        #expect(try await Catalog.integrityProblems(store).isEmpty)

        // Identity columns and AUTOINCREMENT go on from where they were: outbox #3 was
        // deleted before the upgrade and its id is not handed out again.
        let message = try await store.write { tx in
            try tx.insertOutboxMessage(OutboxMessage(
                uniqueKey: "export-ready:e-3", accountID: "ada", recipient: nil, subject: "s", body: "b", createdAt: deletionEpoch))
        }
        #expect(message.id == 4)
        let job = try await store.write { tx in
            try store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: deletionEpoch, in: tx)
        }
        #expect(job.job.id == 4)
        // The reference from job_steps now names the renamed table: deleting a job takes its steps.
        try await Catalog.execute(store, "DELETE FROM \(own(store, "jobs")) WHERE id = 1")
        #expect(try await store.steps(of: 1).isEmpty)
        // An export record and its message no longer need an account row.
        try await store.write { tx in
            try tx.insertExport(ExportRecord(
                id: "e-9", accountID: "not-in-accounts", jobID: nil, format: "zip", state: .building, requestedBy: "ops", cutoffAt: deletionEpoch))
        }

        // The same layout as a fresh installation's, table by table, index by index.
        #expect(try await Catalog.schema(store) == (try await Catalog.schema(fresh)))

        // Starting again changes nothing.
        let schema = try await Catalog.schema(store)
        let applied = try await Catalog.texts(store, "SELECT name FROM \(own(store, store is SQLiteStore ? "migrations" : "schema_migrations")) ORDER BY name")
        let again = try await reopened()
        #expect(try await Catalog.schema(again) == schema)
        #expect(try await Catalog.texts(again, "SELECT name FROM \(own(again, again is SQLiteStore ? "migrations" : "schema_migrations")) ORDER BY name") == applied)
        #expect(try await again.jobs(matching: JobFilter(limit: 10)).count == 3)
    }

    private func own(_ store: some LifecycleStore, _ name: String) -> String {
        store is SQLiteStore ? SQLDialect.sqlite.ownTable(name) : SQLDialect.postgres.ownTable(name)
    }

    // MARK: The previous release's installations

    /// Built as that release built it: its migrations through GRDB's migrator (which
    /// records them in `grdb_migrations`), then rows in every table of its own.
    static func previousSQLiteInstallation(at path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        for migration in PreviousRelease.sqlite {
            migrator.registerMigration(migration.name) { db in try db.execute(sql: migration.sql) }
        }
        try migrator.migrate(queue)
        try queue.write { db in
            try db.execute(sql: """
                INSERT INTO accounts (id, email, created_at, updated_at) VALUES
                  ('ada', 'ada@example.com', '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000'),
                  ('bob', 'bob@example.com', '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000');
                INSERT INTO accounts (id, email, state, deletion_requested_at, purge_after, purged_at, created_at, updated_at) VALUES
                  ('cy', 'cy@example.com', 'pendingDeletion', '2026-01-01 00:00:00.000', '2026-01-20 00:00:00.000', NULL,
                   '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000'),
                  ('dee', NULL, 'purged', NULL, NULL, '2025-12-01 00:00:00.000', '2025-01-01 00:00:00.000', '2025-12-01 00:00:00.000');
                INSERT INTO jobs (kind, unique_key, state, max_attempts, run_at, created_at, updated_at) VALUES
                  ('export', 'export:ada', 'succeeded', 3, '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000'),
                  ('purge', 'purge:bob', 'queued', 5, '2026-02-01 00:00:00.000', '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000'),
                  ('runner.probe', NULL, 'dead', 1, '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000');
                INSERT INTO job_steps (job_id, step, output, finished_at) VALUES
                  (1, 'gather', '{}', '2026-01-01 00:00:01.000'), (1, 'write-archive', NULL, '2026-01-01 00:00:02.000');
                INSERT INTO job_schedules (name, last_slot) VALUES ('purge-sweep', '2026-01-01 03:00:00.000');
                INSERT INTO runner_probe_effects (job_id, step, recorded_at) VALUES (3, 'write', '2026-01-01 00:00:00.000');
                INSERT INTO audit_events (at, actor, action, account_id, outcome) VALUES
                  ('2026-01-01 00:00:00.000', 'operator:sam', 'export.request', 'ada', 'queued'),
                  ('2026-01-01 00:00:01.000', 'user', 'deletion.request', 'ada', 'refused');
                INSERT INTO exports (id, account_id, job_id, format, state, requested_by, cutoff_at, completed_at, expires_at) VALUES
                  ('e-1', 'ada', 1, 'zip', 'ready', 'user', '2026-01-01 00:00:00.000', '2026-01-01 00:00:02.000', '2026-01-08 00:00:02.000');
                INSERT INTO outbox (unique_key, account_id, subject, body, state, created_at) VALUES
                  ('export-ready:e-1', 'ada', 's', 'b', 'pending', '2026-01-01 00:00:02.000'),
                  ('export-ready:e-2', 'ada', 's', 'b', 'delivered', '2026-01-01 00:00:03.000'),
                  ('export-ready:gone', 'ada', 's', 'b', 'delivered', '2026-01-01 00:00:04.000');
                DELETE FROM outbox WHERE unique_key = 'export-ready:gone';
                INSERT INTO purge_inventory (account_ref, rows, started_at) VALUES ('bob', '{"journal_entries":2}', '2026-01-01 00:00:00.000');
                INSERT INTO deletion_attempts (account_ref, started_at) VALUES ('ada', '2026-01-01 00:00:00.000');
                """)
        }
        try queue.close()
    }

    /// Built as that release built it: its statements in the current schema, recorded in
    /// `schema_migrations` there, then rows in every table of its own.
    static func previousPostgresInstallation(at url: String) async throws {
        let server = try await PostgresStore(PostgresLocation(url: url), migrating: false)
        var statements = ["CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"]
        for migration in PreviousRelease.postgres {
            statements += migration.statements
            statements.append("INSERT INTO schema_migrations (name) VALUES ('\(migration.name)')")
        }
        statements += [
            """
            INSERT INTO accounts (id, email, created_at, updated_at) VALUES
              ('ada', 'ada@example.com', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
              ('bob', 'bob@example.com', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')
            """,
            """
            INSERT INTO accounts (id, email, state, deletion_requested_at, purge_after, purged_at, created_at, updated_at) VALUES
              ('cy', 'cy@example.com', 'pendingDeletion', '2026-01-01T00:00:00Z', '2026-01-20T00:00:00Z', NULL,
               '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
              ('dee', NULL, 'purged', NULL, NULL, '2025-12-01T00:00:00Z', '2025-01-01T00:00:00Z', '2025-12-01T00:00:00Z')
            """,
            """
            INSERT INTO jobs (kind, unique_key, state, max_attempts, run_at, created_at, updated_at) VALUES
              ('export', 'export:ada', 'succeeded', 3, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
              ('purge', 'purge:bob', 'queued', 5, '2026-02-01T00:00:00Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
              ('runner.probe', NULL, 'dead', 1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')
            """,
            """
            INSERT INTO job_steps (job_id, step, output, finished_at) VALUES
              (1, 'gather', '{}', '2026-01-01T00:00:01Z'), (1, 'write-archive', NULL, '2026-01-01T00:00:02Z')
            """,
            "INSERT INTO job_schedules (name, last_slot) VALUES ('purge-sweep', '2026-01-01T03:00:00Z')",
            "INSERT INTO runner_probe_effects (job_id, step, recorded_at) VALUES (3, 'write', '2026-01-01T00:00:00Z')",
            """
            INSERT INTO audit_events (at, actor, action, account_id, outcome) VALUES
              ('2026-01-01T00:00:00Z', 'operator:sam', 'export.request', 'ada', 'queued'),
              ('2026-01-01T00:00:01Z', 'user', 'deletion.request', 'ada', 'refused')
            """,
            """
            INSERT INTO exports (id, account_id, job_id, format, state, requested_by, cutoff_at, completed_at, expires_at) VALUES
              ('e-1', 'ada', 1, 'zip', 'ready', 'user', '2026-01-01T00:00:00Z', '2026-01-01T00:00:02Z', '2026-01-08T00:00:02Z')
            """,
            """
            INSERT INTO outbox (unique_key, account_id, subject, body, state, created_at) VALUES
              ('export-ready:e-1', 'ada', 's', 'b', 'pending', '2026-01-01T00:00:02Z'),
              ('export-ready:e-2', 'ada', 's', 'b', 'delivered', '2026-01-01T00:00:03Z'),
              ('export-ready:gone', 'ada', 's', 'b', 'delivered', '2026-01-01T00:00:04Z')
            """,
            "DELETE FROM outbox WHERE unique_key = 'export-ready:gone'",
            "INSERT INTO purge_inventory (account_ref, rows, started_at) VALUES ('bob', '{\"journal_entries\":2}', '2026-01-01T00:00:00Z')",
            "INSERT INTO deletion_attempts (account_ref, started_at) VALUES ('ada', '2026-01-01T00:00:00Z')",
        ]
        let all = statements
        try await server.write { tx in
            for statement in all { try tx.execute(PostgresQuery(unsafeSQL: statement)) }
        }
    }

    private func temporaryDatabasePath() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("namespace-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory + "/lifecycle.sqlite"
    }

    private func emptyPostgresDatabase() async throws -> String {
        let cluster = try await ThrowawayPostgres.shared()
        return cluster.url(database: try await cluster.createDatabase(), pool: 2)
    }
}

/// What the catalog of either backend says, in the same terms for both.
enum Catalog {
    struct Table: CustomStringConvertible {
        var name: String
        /// In lifecycle's namespace (the name is then without the `lifecycle_` prefix).
        var isOwn: Bool
        var description: String { isOwn ? "lifecycle:" + name : name }
    }

    /// Every table but the database's own catalog.
    static func tables(_ store: some LifecycleStore) async throws -> [Table] {
        if store is SQLiteStore {
            return try await texts(store, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").map { name in
                name.hasPrefix(SQLDialect.sqlite.ownTable(""))
                    ? Table(name: String(name.dropFirst(SQLDialect.sqlite.ownTable("").count)), isOwn: true) : Table(name: name, isOwn: false)
            }
        }
        let current = try await texts(store, "SELECT current_schema()").first ?? "public"
        return try await texts(store, """
            SELECT table_schema || '.' || table_name FROM information_schema.tables
            WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
            """).map { qualified in
            let parts = qualified.split(separator: ".", maxSplits: 1).map(String.init)
            // A table in any schema but the current one and lifecycle's is reported whole, and fails the checks.
            return parts[0] == SQLDialect.ownSchema ? Table(name: parts[1], isOwn: true)
                : parts[0] == current ? Table(name: parts[1], isOwn: false) : Table(name: qualified, isOwn: false)
        }
    }

    /// Indexes, sequences and constraints of lifecycle's tables named outside its namespace.
    static func objectsOutsideNamespace(_ store: some LifecycleStore) async throws -> [String] {
        if store is SQLiteStore {
            return try await texts(store, """
                SELECT type || ' ' || name FROM sqlite_master
                WHERE tbl_name LIKE 'lifecycle\\_%' ESCAPE '\\' AND name NOT LIKE 'lifecycle\\_%' ESCAPE '\\'
                  AND name NOT LIKE 'sqlite\\_autoindex\\_lifecycle\\_%' ESCAPE '\\'
                UNION ALL
                SELECT 'sequence ' || name FROM sqlite_sequence WHERE name NOT LIKE 'lifecycle\\_%' ESCAPE '\\'
                """)
        }
        return try await texts(store, """
            SELECT 'index ' || schemaname || '.' || indexname FROM pg_indexes
            WHERE tablename IN ('jobs', 'job_steps', 'job_schedules', 'runner_probe_effects', 'audit_events', 'exports', 'outbox',
                                'purge_inventory', 'deletion_attempts', 'schema_migrations')
              AND schemaname <> 'lifecycle' AND schemaname NOT LIKE 'pg\\_%'
            UNION ALL
            SELECT 'sequence ' || schemaname || '.' || sequencename FROM pg_sequences WHERE schemaname <> 'lifecycle'
            """)
    }

    /// SQLite: integrity_check and foreign_key_check. PostgreSQL: references from
    /// lifecycle's tables to any table outside its schema.
    static func integrityProblems(_ store: some LifecycleStore) async throws -> [String] {
        if store is SQLiteStore {
            let integrity = try await texts(store, "PRAGMA integrity_check").filter { $0 != "ok" }
            let keys = try await texts(store, "SELECT \"table\" || ' row ' || rowid || ' → ' || parent FROM pragma_foreign_key_check")
            let appKeys = try await texts(store, """
                SELECT m.name || ' → ' || f."table" FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f
                WHERE m.type = 'table' AND m.name LIKE 'lifecycle\\_%' ESCAPE '\\' AND f."table" NOT LIKE 'lifecycle\\_%' ESCAPE '\\'
                """)
            return integrity + keys + appKeys
        }
        return try await texts(store, """
            SELECT conrelid::regclass::text || ' → ' || confrelid::regclass::text FROM pg_constraint
            WHERE contype = 'f' AND connamespace = 'lifecycle'::regnamespace
              AND (SELECT relnamespace FROM pg_class WHERE oid = confrelid) <> 'lifecycle'::regnamespace
            """)
    }

    static func appliedMigrations(_ store: some LifecycleStore) async throws -> [String] {
        switch store {
        case let sqlite as SQLiteStore: try sqlite.appliedMigrations
        case let postgres as PostgresStore: try await postgres.appliedMigrations
        default: []
        }
    }

    /// The layout of every table (the app's and lifecycle's): columns, keys, constraints,
    /// indexes, sequences, one line each, sorted. Quotes and spacing in SQLite's stored
    /// SQL are normalised: a renamed table's is rewritten with its name quoted.
    static func schema(_ store: some LifecycleStore) async throws -> [String] {
        if let sqlite = store as? SQLiteStore {
            return try await sqlite.read { tx in
                let db = tx.db
                var lines: [String] = []
                func normalised(_ sql: String?) -> String {
                    (sql ?? "-").replacingOccurrences(of: "\"", with: "")
                        .split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
                }
                for row in try Row.fetchAll(db, sql: "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_stat%' ESCAPE '\\'") {
                    let name: String = row["name"]
                    lines.append("\(row["type"] as String) \(name) on \(row["tbl_name"] as String): \(normalised(row["sql"]))")
                    if (row["type"] as String) == "table" {
                        for column in try Row.fetchAll(db, sql: "SELECT * FROM pragma_table_info(?)", arguments: [name]) {
                            lines.append("column \(name) \(column)")
                        }
                        for key in try Row.fetchAll(db, sql: "SELECT * FROM pragma_foreign_key_list(?)", arguments: [name]) {
                            lines.append("reference \(name) \(key)")
                        }
                        for list in try Row.fetchAll(db, sql: "SELECT name, wr, strict FROM pragma_table_list(?)", arguments: [name]) {
                            lines.append("kind \(name) \(list)")
                        }
                    } else if (row["type"] as String) == "index" {
                        for column in try Row.fetchAll(db, sql: "SELECT * FROM pragma_index_xinfo(?)", arguments: [name]) {
                            lines.append("index column \(name) \(column)")
                        }
                    }
                }
                return lines.sorted()
            }
        }
        return try await texts(store, """
            SELECT 'column ' || table_schema || '.' || table_name || ' ' || ordinal_position || ' ' || column_name || ' ' || data_type
                   || ' ' || is_nullable || ' ' || COALESCE(column_default, '-') || ' ' || is_identity || ' ' || COALESCE(identity_generation, '-')
            FROM information_schema.columns WHERE table_schema IN (current_schema(), 'lifecycle')
            UNION ALL
            SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
            FROM pg_constraint WHERE connamespace IN (current_schema()::regnamespace, 'lifecycle'::regnamespace)
            UNION ALL
            SELECT 'index ' || schemaname || '.' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname IN (current_schema(), 'lifecycle')
            UNION ALL
            SELECT 'sequence ' || schemaname || '.' || sequencename || ' ' || data_type::text FROM pg_sequences
            WHERE schemaname IN (current_schema(), 'lifecycle')
            UNION ALL
            SELECT 'owned sequence ' || c.relname || '.' || a.attname || ' ' || pg_get_serial_sequence(c.oid::regclass::text, a.attname)
            FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
            WHERE c.relnamespace IN (current_schema()::regnamespace, 'lifecycle'::regnamespace) AND c.relkind = 'r' AND a.attidentity <> ''
            """).sorted()
    }

    /// The first column of each row as text (NULL as "NULL"), in the order the query gives them.
    static func texts(_ store: some LifecycleStore, _ sql: String) async throws -> [String] {
        switch store {
        case let sqlite as SQLiteStore:
            return try await sqlite.read { tx in
                try Row.fetchAll(tx.db, sql: sql).map { row -> String in
                    let value = row[0] as DatabaseValue
                    switch value.storage {
                    case .null: return "NULL"
                    case .int64(let number): return String(number)
                    case .double(let number): return String(number)
                    case .string(let text): return text
                    case .blob(let data): return data.base64EncodedString()
                    }
                }
            }
        case let postgres as PostgresStore:
            return try await postgres.read { tx in
                try tx.query(PostgresQuery(unsafeSQL: "SELECT q.c::text FROM (\(sql)) AS q(c)")).map { try $0.decode(String?.self) ?? "NULL" }
            }
        default:
            throw LifecycleError(.internalError, "no SQL for \(type(of: store))")
        }
    }

    static func execute(_ store: some LifecycleStore, _ sql: String) async throws {
        switch store {
        case let sqlite as SQLiteStore:
            try await sqlite.write { tx in try tx.db.execute(sql: sql) }
        case let postgres as PostgresStore:
            // The extended protocol takes one statement at a time.
            for statement in sql.components(separatedBy: ";\n").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }).filter({ !$0.isEmpty }) {
                try await postgres.write { tx in _ = try tx.execute(PostgresQuery(unsafeSQL: statement.hasSuffix(";") ? String(statement.dropLast()) : statement)) }
            }
        default:
            throw LifecycleError(.internalError, "no SQL for \(type(of: store))")
        }
    }
}
