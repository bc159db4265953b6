import Foundation
import GRDB
import JobRunner
import Lifecycle
import LifecycleRuntime
import SQLiteBackend
import Testing

/// The repository's Jobs/ folder (policies, the reference app's data map), found from this file.
let shippedJobs: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path + "/Jobs"
}()

let password = "correct horse battery staple"
let epoch = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
let day: TimeInterval = 86_400

/// A fresh folder for one installation, with a copy of the shipped Jobs folder the test may change.
struct Workspace {
    let root: String
    let jobs: String
    let clock = ManualTimeSource(epoch)

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("runtime-\(UUID().uuidString)").path
        jobs = root + "/Jobs"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: shippedJobs, toPath: jobs)
    }

    var configuration: LifecycleConfiguration {
        LifecycleConfiguration(database: root + "/app/lifecycle.sqlite", blobs: root + "/blobs", jobsDirectory: jobs, clock: clock)
    }

    /// The configuration of an installation `initialize()` has made, as an app sets one up once.
    func installed() async throws -> LifecycleConfiguration {
        let configuration = self.configuration
        _ = try await configuration.initialize()
        return configuration
    }

    /// One account as an app's import would bring it: a journal entry and a file under its blob prefix.
    func importLine(_ id: String) throws -> String {
        let line = """
            {"id": "\(id)", "email": "\(id)@example.com", "password_hash": "$2b$04$Wd0dEsiS6/8yONvHwEEae.LfGSs/AKzG3YawF6CS.ukfXvr/45rre", \
            "first_name": "Ada", "entries": [{"id": "\(id)-e1", "created_at": "2025-03-01T08:00:00Z", "text": "Tempo run"}]}
            """
        let path = root + "/\(id).jsonl"
        try (line + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

// The bodies an app backend would write: generic over the store, so one body runs on SQLite and PostgreSQL alike.

struct ImportAccounts: InstallationBody {
    let file: String

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ImportReport {
        let importer = try await AccountImporter(services: services)
        let report = try await importer.importFile(at: file)
        for id in report.imported {
            _ = try await services.blobs.put(key: "accounts/\(id)/exports/export-\(id).zip", data: Data(repeating: 0x50, count: 100))
        }
        return report
    }
}

struct RequestDeletion: InstallationBody {
    let account: String
    let password: String

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> DeletionRequestResult {
        try await DeletionService(services: services, directory: try await services.directory())
            .requestDeletion(account: .app(account), password: password)
    }
}

struct Purge: InstallationBody {
    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> PurgeRunReport {
        try await PurgeDrain(services: services).run()
    }
}

/// Opens and closes the installation, touching no table.
struct Open: InstallationBody {
    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> String {
        services.store.location
    }
}

struct Look: InstallationBody {
    let account: String

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> (account: Account?, blobs: [String]) {
        let blobs = try await services.blobs.list(prefix: "accounts/\(account)/", after: nil, limit: 1000).map(\.key)
        return (try await services.account(account), blobs)
    }
}

/// Runs `body` and returns the LifecycleError it throws, or nil if it throws none.
func lifecycleError(_ body: () async throws -> Void) async -> LifecycleError? {
    do {
        try await body()
        return nil
    } catch let error as LifecycleError {
        return error
    } catch {
        // What a body throws comes back as thrown; the app gives it a category like this.
        return LifecycleError(classifying: error)
    }
}

@Suite struct EmbeddingTests {
    @Test func anAppDeletesAnAccountAndThePurgeDrainRemovesItAfterTheGracePeriod() async throws {
        let workspace = try Workspace()
        let configuration = try await workspace.installed()

        let imported = try await configuration.withInstallation(ImportAccounts(file: try workspace.importLine("ada")))
        #expect(imported.imported == ["ada"])
        #expect(FileManager.default.fileExists(atPath: configuration.database))

        let wrong = await lifecycleError { _ = try await configuration.withInstallation(RequestDeletion(account: "ada", password: "guess")) }
        #expect(wrong?.category == .permissionDenied)

        let request = try await configuration.withInstallation(RequestDeletion(account: "email:ada@example.com", password: password))
        #expect(request.outcome == .requested && request.accountID == "ada")
        #expect(request.purgeAfter == epoch.addingTimeInterval(30 * day))

        // Inside the grace period the drain finds nothing due.
        workspace.clock.advance(by: 30 * day - 1)
        let early = try await configuration.withInstallation(Purge())
        #expect(early.sweep.due == 0 && early.run.purged.isEmpty)
        #expect(try await configuration.withInstallation(Look(account: "ada")).account?.state == .pendingDeletion)

        workspace.clock.advance(by: 1)
        let report = try await configuration.withInstallation(Purge())
        #expect(report.sweep.due == 1)
        #expect(report.run.purged == ["ada"])
        #expect(report.run.failures.isEmpty && report.run.skipped.isEmpty && report.run.handedBack.isEmpty)

        let after = try await configuration.withInstallation(Look(account: "ada"))
        let tombstone = try #require(after.account)
        #expect(tombstone.state == .purged && tombstone.email == nil && tombstone.passwordHash == nil && tombstone.firstName == nil)
        #expect(after.blobs.isEmpty)

        // Nothing is due any more: a second run purges nothing and fails nothing.
        let again = try await configuration.withInstallation(Purge())
        #expect(again.run.purged.isEmpty && again.run.failures.isEmpty)
    }

    @Test func policiesAndTheDataMapAreReadOnceWhenTheInstallationOpens() async throws {
        struct SpoilJobsThenDelete: InstallationBody {
            let jobs: String

            func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> DeletionRequestResult {
                try FileManager.default.removeItem(atPath: jobs + "/account-data.yaml")
                try "deletion: [not, a, section".write(toFile: jobs + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
                #expect(try services.dataMapDocument().lifecycleOwnsSchema)
                _ = try await services.directory()
                return try await RequestDeletion(account: "ada", password: password).run(services: services)
            }
        }
        let workspace = try Workspace()
        let configuration = try await workspace.installed()
        _ = try await configuration.withInstallation(ImportAccounts(file: try workspace.importLine("ada")))

        let result = try await configuration.withInstallation(SpoilJobsThenDelete(jobs: workspace.jobs))
        #expect(result.outcome == .requested)

        // Opened again (with its map back), the spoilt policy file fails only what reads it, naming the file:
        try FileManager.default.copyItem(atPath: shippedJobs + "/account-data.yaml", toPath: workspace.jobs + "/account-data.yaml")
        // looking at the account reads no policy, a deletion request does.
        #expect(try await configuration.withInstallation(Look(account: "ada")).account?.state == .pendingDeletion)
        let refused = await lifecycleError { _ = try await configuration.withInstallation(RequestDeletion(account: "ada", password: password)) }
        #expect(refused?.category == .badInput)
        #expect(refused?.message.hasPrefix("\(workspace.jobs)/policies/deletion.yaml: ") == true)
    }

    @Test func aMapThatCannotBeReadFailsWhereItIsNeededWithItsOwnMessage() async throws {
        struct CheckMap: InstallationBody {
            func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> Bool {
                try await services.directory().lifecycleOwnsSchema
            }
        }
        let workspace = try Workspace()
        let configuration = try await workspace.installed()
        try FileManager.default.removeItem(atPath: workspace.jobs + "/account-data.yaml")
        let error = await lifecycleError { _ = try await configuration.withInstallation(CheckMap()) }
        #expect(error?.category == .inputMissing)
        #expect(error?.message.hasPrefix("\(workspace.jobs)/account-data.yaml: the account data map is missing") == true)
    }

    @Test func anAppsOwnDatabaseGetsLifecyclesTablesOnly() async throws {
        let workspace = try Workspace()
        let map = workspace.jobs + "/account-data.yaml"
        let shipped = try String(contentsOfFile: map, encoding: .utf8)
        let appMap = shipped.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("app:") }.joined(separator: "\n")
        #expect(appMap != shipped)
        try appMap.write(toFile: map, atomically: true, encoding: .utf8)

        // An app's own SQLite file exists before lifecycle is pointed at it.
        try FileManager.default.createDirectory(atPath: workspace.root + "/app", withIntermediateDirectories: true)
        _ = try await GRDB.DatabaseQueue(path: workspace.configuration.database).write { db in
            try db.execute(sql: "CREATE TABLE users (id TEXT PRIMARY KEY, email TEXT)")
        }
        // Private, as lifecycle asks of a file it keeps secrets in (the app's umask may not be).
        chmod(workspace.configuration.database, 0o600)
        try """
            version: 2
            subject:
              table: users
              key: id
              lookup: [email]
              columns: [id, email]
            tables: []
            """.write(toFile: map, atomically: true, encoding: .utf8)
        let report = try await workspace.configuration.initialize()
        #expect(report.created && !report.referenceSchema)
        _ = try await workspace.configuration.withInstallation(Open())
        let (catalog, location) = try await workspace.configuration.readCatalog()
        #expect(location == "SQLite file \(workspace.configuration.database)")
        #expect(catalog.table(.init(name: "accounts")) == nil)
        #expect(catalog.table(.init(name: SQLDialect.sqlite.ownTable("jobs"))) != nil)

        // The reference app's map: its schema is created too.
        let reference = try Workspace()
        _ = try await reference.installed().withInstallation(Open())
        #expect(try await reference.configuration.readCatalog().catalog.table(.init(name: "accounts")) != nil)
    }

    @Test func theEnvironmentTheCLIReadsBuildsTheConfiguration() async throws {
        let defaults = try LifecycleConfiguration(environment: [:])
        #expect(defaults.database == "./lifecycle.sqlite" && defaults.blobs == "./blobs" && defaults.jobsDirectory == "./Jobs")
        #expect(defaults.clock is SystemTimeSource)

        let environment = [
            "LIFECYCLE_DATABASE": "postgres://lifecycle@db.internal/app", "LIFECYCLE_BLOBS": "s3://bucket/prefix",
            "LIFECYCLE_JOBS_DIR": "/srv/jobs", "LIFECYCLE_NOW": "2026-01-31T03:00:00Z",
        ]
        let configured = try LifecycleConfiguration(environment: environment)
        #expect(configured.database == "postgres://lifecycle@db.internal/app" && configured.usesPostgres)
        #expect(configured.blobs == "s3://bucket/prefix" && configured.jobsDirectory == "/srv/jobs")
        let now = configured.clock.now().timeIntervalSince(try #require(ISO8601.parse("2026-01-31T03:00:00Z")))
        #expect(now >= 0 && now < 60)

        // Values given explicitly (the CLI's options) win over the environment.
        let given = try LifecycleConfiguration(environment: environment, database: "/var/lib/app.sqlite")
        #expect(given.database == "/var/lib/app.sqlite" && !given.usesPostgres && given.blobs == "s3://bucket/prefix")

        let clock = await lifecycleError { _ = try LifecycleConfiguration(environment: ["LIFECYCLE_NOW": "yesterday"]) }
        #expect(clock?.category == .badConfiguration)
        #expect(clock?.message == "LIFECYCLE_NOW must be an ISO-8601 timestamp like 2026-01-31T03:00:00Z (got 'yesterday')")
    }

    @Test func aLocationThatCannotWorkIsRefusedBeforeAnythingRuns() async throws {
        let workspace = try Workspace()
        var configuration = try await workspace.installed()
        configuration.blobs = "ftp://files.example.com/blobs"
        let blobs = await lifecycleError { _ = try await configuration.withInstallation(Look(account: "ada")) }
        #expect(blobs?.category == .badConfiguration)
        #expect(blobs?.message.hasPrefix("--blobs 'ftp://files.example.com/blobs': 'ftp://' is not a blob store this tool knows") == true)

        configuration = workspace.configuration
        configuration.database = "postgres://"
        let database = await lifecycleError { _ = try await configuration.withInstallation(Look(account: "ada")) }
        #expect(database?.category == .badConfiguration)
        #expect(database?.message.hasPrefix("--database (or LIFECYCLE_DATABASE): ") == true)

        // A database path that is a folder: the SQLite file cannot be opened there.
        configuration = workspace.configuration
        configuration.database = workspace.root
        // Named as what it is, not as a missing installation: it exists and cannot be opened.
        let folder = await lifecycleError { _ = try await configuration.withInstallation(Look(account: "ada")) }
        #expect(folder?.category == .unavailable)
        #expect(folder?.message.contains(workspace.root) == true)
    }

    @Test func copyStoreRefusesWhatItCannotCopyFrom() async throws {
        let workspace = try Workspace()
        let missing = await lifecycleError {
            _ = try await StoreCopier.copy(from: workspace.configuration, toDatabase: "postgres://lifecycle@localhost/app", toBlobs: nil)
        }
        #expect(missing?.category == .inputMissing)
        #expect(missing?.message == "\(workspace.configuration.database): no lifecycle installation to copy from (pass the installation's --database)")
        #expect(!FileManager.default.fileExists(atPath: workspace.configuration.database))

        var configuration = workspace.configuration
        configuration.database = "postgres://lifecycle@localhost/source"
        let fromPostgres = await lifecycleError {
            _ = try await StoreCopier.copy(from: configuration, toDatabase: "postgres://lifecycle@localhost/app", toBlobs: nil)
        }
        #expect(fromPostgres?.category == .badConfiguration)
    }

    @Test func backendErrorsAreGivenTheirCategory() {
        #expect(LifecycleError(classifying: JobRunnerError.noSuchJob(7)).category == .badInput)
        #expect(LifecycleError(classifying: SQLiteStoreError(message: "cannot open")).category == .unavailable)
        #expect(LifecycleError(classifying: CancellationError()).category == .internalError)
        let own = LifecycleError(.tryLater, "later")
        #expect(LifecycleError(classifying: own).message == "later")
    }
}
