import Foundation
import GRDB
import JobRunner
import Lifecycle
import PostgresBackend
import PostgresTesting
import SQLiteBackend
import Testing

/// The repository's Jobs/ folder (policies, data map), found from this file.
let deletionJobsDirectory: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path + "/Jobs"
}()

/// bcrypt (cost 4) of "correct horse battery staple", as the demo accounts carry it.
let demoPasswordHash = "$2b$04$Wd0dEsiS6/8yONvHwEEae.LfGSs/AKzG3YawF6CS.ukfXvr/45rre"
let demoPassword = "correct horse battery staple"
let deletionEpoch = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
let day: TimeInterval = 86_400

/// The backends the deletion and purge behaviours are checked against.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres

    var testDescription: String { rawValue }

    /// Lifecycle's own table `name` as the backend names it (`lifecycle_jobs` in SQLite,
    /// `lifecycle.jobs` in PostgreSQL), for the tests' own SQL. The app's tables keep their names.
    func ownTable(_ name: String) -> String {
        switch self {
        case .sqlite: SQLDialect.sqlite.ownTable(name)
        case .postgres: SQLDialect.postgres.ownTable(name)
        }
    }

    /// A fresh, empty store: a SQLite file in its own directory, or a database of its
    /// own on the test process's throwaway PostgreSQL cluster.
    func makeStore() async throws -> any LifecycleStore {
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycle-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            return try SQLiteStore(path: directory + "/lifecycle.sqlite")
        case .postgres:
            let cluster = try await ThrowawayPostgres.shared()
            return try await PostgresStore(url: cluster.url(database: try await cluster.createDatabase(), pool: 4))
        }
    }
}

/// One throwaway installation with a hand-driven clock: store, blobs, services,
/// and the deletion service over them.
struct DeletionFixture<Store: LifecycleStore> {
    let directory: String
    let store: Store
    let blobs: FileSystemBlobStore
    let clock: ManualTimeSource
    let services: LifecycleServices<Store>
    let deletion: DeletionService<Store>
    /// The map and the catalog `rows` counts with, read once: the schema does not change
    /// under a fixture, and reading the catalog for every count was most of a timeline's time.
    let appData = AppDataCache()

    /// `deletionPolicy` (lines of `key: value`) replaces the `deletion:` section of the shipped policy file.
    /// `blobStore` gives the jobs a store of its own around the fixture's (`blobs`).
    init(
        store: Store, deletionPolicy: String? = nil, dataMap: String? = nil,
        blobStore: (FileSystemBlobStore) -> any BlobStore = { $0 }
    ) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("deletion-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var jobs = deletionJobsDirectory
        if deletionPolicy != nil || dataMap != nil {
            jobs = directory + "/Jobs"
            try FileManager.default.createDirectory(atPath: jobs + "/policies", withIntermediateDirectories: true)
            for file in try FileManager.default.contentsOfDirectory(atPath: deletionJobsDirectory + "/policies") {
                try FileManager.default.copyItem(atPath: deletionJobsDirectory + "/policies/" + file, toPath: jobs + "/policies/" + file)
            }
            let map = try dataMap ?? String(contentsOfFile: deletionJobsDirectory + "/account-data.yaml", encoding: .utf8)
            try map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
            if let deletionPolicy {
                let shipped = try String(contentsOfFile: jobs + "/policies/deletion.yaml", encoding: .utf8)
                let jobSection = shipped.components(separatedBy: "\ndeletion:")[0]
                let indented = deletionPolicy.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
                try (jobSection + "\ndeletion:\n" + indented + "\n").write(toFile: jobs + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
            }
        }
        self.store = store
        blobs = try FileSystemBlobStore(root: directory + "/blobs")
        clock = ManualTimeSource(deletionEpoch)
        services = LifecycleServices(
            store: store, blobs: blobStore(blobs), policies: try PolicyBook(jobsDirectory: jobs), jobsDirectory: jobs, clock: clock,
            logger: .init(label: "test"))
        deletion = try DeletionService(services: services, directory: try await services.directory())
    }

    /// An account with rows in every table of the shipped schema and blobs under its
    /// prefix: journal photos, a profile photo, and an export archive. With `purgeAfter`, its
    /// deletion was asked for at the clock's time (`state` pendingDeletion, or purging: a
    /// purge started), as a request does it; its `sessions` were signed in after that.
    @discardableResult
    func addAccount(
        _ id: String, entries: Int = 2, sessions: Int = 2, state: AccountState = .active, purgeAfter: Date? = nil,
        passwordHash: String? = demoPasswordHash
    ) async throws -> Int {
        let now = clock.now()
        let account = Account(
            id: id, email: "\(id)@example.com", passwordHash: passwordHash, firstName: "Ada", lastName: "Lovelace",
            displayName: "Ada", bio: "Runs at dawn", profilePhotoKey: "accounts/\(id)/v2-s1024-q85-0123456789abcdef.jpg", primarySport: "running",
            morningReminderTime: "07:30:00", timezone: "Europe/London", subscriptionStatus: "premium",
            integrations: Integrations(strava: true), state: .active, createdAt: now, updatedAt: now)
        var photos: [PhotoRecord] = []
        for index in 0..<entries {
            photos.append(PhotoRecord(
                id: "\(id)-p\(index)", accountID: id, entryID: "\(id)-e\(index)", role: .entry,
                blobKey: BlobKey.photo(accountID: id, photoID: "\(id)-p\(index)"), contentType: "image/jpeg", byteSize: 4,
                sha256: "x", takenAt: now, createdAt: now))
        }
        let records = photos
        let directory = try await services.directory(cache: appData)
        try await store.write { tx in
            _ = try tx.insertAccount(account, preferences: Preferences())
            if let purgeAfter, state != .active {
                _ = try directory.markPendingDeletion(id: id, requestedAt: now, purgeAfter: purgeAfter, in: tx)
                _ = try directory.revokeSessions(id: id, at: now, in: tx)
                if state == .purging {
                    let begun = try tx.beginSubjectPurge(key: id, now: max(now, purgeAfter))
                    #expect(begun)
                }
            }
            for index in 0..<entries {
                _ = try tx.insertEntry(JournalEntry(id: "\(id)-e\(index)", accountID: id, createdAt: now, text: "entry \(index)"))
                _ = try tx.insertMeditationSession(MeditationSession(id: "\(id)-m\(index)", accountID: id, startedAt: now, durationSeconds: 60))
            }
            for record in records { _ = try tx.insertPhoto(record) }
            _ = try tx.insertMesocycle(Mesocycle(id: "\(id)-c", accountID: id, status: "active", startedAt: now, completedAt: nil))
            for index in 0..<sessions {
                _ = try tx.insertSession(SignInSession(id: "\(id)-s\(index)", accountID: id, createdAt: now))
            }
        }
        for key in records.map(\.blobKey) + [account.profilePhotoKey!] { _ = try await blobs.put(key: key, data: Data([0xFF, 0xD8, 0xFF, 0xD9])) }
        _ = try await blobs.put(key: "accounts/\(id)/exports/export-\(id).zip", data: Data(repeating: 0x50, count: 100))
        return records.count + 2
    }

    /// The nightly run in-process: the sweep, then every due purge job.
    @discardableResult
    func purge() async throws -> DrainSummary {
        _ = try await PurgeSweep(services: services, directory: try await services.directory()).enqueueDuePurges()
        return try await worker().drain()
    }

    func worker() -> Worker<Store> {
        Worker(store: store, registry: services.registry, policies: services.policies, clock: clock,
               options: WorkerOptions(concurrency: 2, kinds: [DeletionJobs.purgeKind]))
    }

    /// The reference app's row of the account (its `state` is what the app shows).
    func account(_ id: String) async throws -> Account? {
        try await store.read { tx in try tx.account(id: id) }
    }

    /// Lifecycle's record of the account's deletion (nil: nothing recorded, it is active).
    func deletionRecord(_ id: String) async throws -> SubjectRecord? {
        try await store.read { tx in try tx.subject(key: id) }
    }

    /// Rows of the account in every table of the data map, and in lifecycle's own tables
    /// that go with the account (exports, outbox): what a purge removes.
    func rows(_ id: String) async throws -> [String: Int] {
        let own = try await store.read { tx in try tx.lifecycleRowCounts(accountID: id) }
        return try await services.rowCounts(accountID: id, cache: appData).merging(own, uniquingKeysWith: +)
    }

    func blobKeys(_ id: String) async throws -> [String] {
        try await blobs.list(prefix: BlobKey.accountPrefix(id), after: nil, limit: 100_000).map(\.key)
    }

    func audit(_ id: String) async throws -> [AuditEvent] {
        try await store.read { tx in try tx.auditEvents(accountID: id) }
    }

    func purgeJobs(_ id: String) async throws -> [JobRecord] {
        try await store.jobs(matching: JobFilter(kinds: [DeletionJobs.purgeKind], uniqueKey: DeletionJobs.purgeKey(accountID: id)))
    }
}

extension DeletionFixture where Store == SQLiteStore {
    /// On a SQLite file of its own; `prepare` runs first, for tests that need schema of their own.
    init(deletionPolicy: String? = nil, dataMap: String? = nil, prepare: (Database) throws -> Void = { _ in }) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("deletion-db-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: directory + "/lifecycle.sqlite")
        try store.writeSync { tx in try prepare(tx.db) }
        try await self.init(store: store, deletionPolicy: deletionPolicy, dataMap: dataMap)
    }
}

extension OwnStateTransaction {
    /// Moves lifecycle's record of the account along deletion's own transitions, due at
    /// `now`, up to `state`: requested, its purge begun, purged. False if a step found the
    /// record elsewhere.
    func moveDeletion(key: String, to state: AccountState, at now: Date) throws -> Bool {
        guard state != .active else { return true }
        guard try markSubjectPending(key: key, requestedAt: now, purgeAfter: now) else { return false }
        if state == .pendingDeletion { return true }
        guard try beginSubjectPurge(key: key, now: now) else { return false }
        return state == .purging ? true : try markSubjectPurged(key: key, at: now)
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
        return LifecycleError(.internalError, "unexpected \(type(of: error)): \(error)")
    }
}
