import Foundation
import GRDB
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

struct PurgeJobTests {
    @Test(arguments: Backend.allCases)
    func aPurgeLeavesOnlyTheTombstoneAndAReceiptAndTouchesNoOtherAccount(_ backend: Backend) async throws { try await aPurgeLeavesOnlyTheTombstoneAndAReceiptAndTouchesNoOtherAccount(store: try await backend.makeStore()) }

    private func aPurgeLeavesOnlyTheTombstoneAndAReceiptAndTouchesNoOtherAccount(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        let blobCount = try await fixture.addAccount("ada", entries: 3)
        try await fixture.addAccount("bob")
        let bobRows = try await fixture.rows("bob")
        let bobBlobs = try await fixture.blobKeys("bob")
        _ = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        // What the purge will find: the request signed her out (the map's `on_deletion:`).
        let adaRows = try await fixture.rows("ada").filter { $0.value > 0 }
        #expect(adaRows["sessions"] == nil && adaRows["journal_entries"] == 3)

        // Inside the grace period the run does nothing.
        fixture.clock.advance(by: 30 * day - 1)
        #expect(try await fixture.purge().processed == 0)
        #expect(try await fixture.account("ada")?.state == .pendingDeletion)

        fixture.clock.advance(by: 1)
        let summary = try await fixture.purge()
        #expect(summary.succeeded == 1)
        #expect(summary.allSucceeded)

        let tombstone = try #require(try await fixture.account("ada"))
        #expect(tombstone.state == .purged)
        let record = try #require(try await fixture.deletionRecord("ada"))
        #expect(record.state == .purged && record.purgedAt == fixture.clock.now())
        #expect(tombstone.email == nil && tombstone.passwordHash == nil && tombstone.firstName == nil && tombstone.lastName == nil)
        #expect(tombstone.displayName == nil && tombstone.bio == nil && tombstone.profilePhotoKey == nil && tombstone.timezone == nil)
        #expect(tombstone.primarySport == nil && tombstone.morningReminderTime == nil && tombstone.subscriptionStatus == nil)
        #expect(tombstone.integrations == Integrations())
        #expect(try await fixture.rows("ada").values.allSatisfy { $0 == 0 })
        #expect(try await fixture.blobKeys("ada").isEmpty)
        #expect(!FileManager.default.fileExists(atPath: fixture.blobs.root + "/accounts/ada"))

        let receipt = try #require(try await fixture.audit("ada").last)
        #expect(receipt.action == DeletionAudit.purge && receipt.outcome == "purged")
        let detail = try JSONSerialization.jsonObject(with: Data(try #require(receipt.detail).utf8)) as? [String: Any]
        #expect(detail?["blobs"] as? Int == blobCount)
        #expect(detail?["rows_total"] as? Int == adaRows.values.reduce(0, +) + 1)
        #expect(foundRows(detail) == adaRows.merging(["accounts": 1]) { $1 })
        #expect(detail?["user"] as? String == "masked")
        #expect(try await fixture.store.read { tx in try tx.purgeInventory(accountID: "ada") } == nil)

        #expect(try await fixture.rows("bob") == bobRows)
        #expect(try await fixture.blobKeys("bob") == bobBlobs)
        #expect(try await fixture.account("bob")?.state == .active)
        // A second run finds nothing to do.
        #expect(try await fixture.purge().processed == 0)
    }

    /// A job writing under the account's prefix as the purge began can land its file after
    /// the purge's deletion pass: the purge deletes it too and succeeds on that attempt,
    /// instead of finding a survivor and waiting out its backoff.
    @Test(arguments: Backend.allCases)
    func aFileLandingUnderThePrefixDuringThePurgeIsDeletedInTheSameAttempt(_ backend: Backend) async throws {
        try await aFileLandingUnderThePrefixDuringThePurgeIsDeletedInTheSameAttempt(store: try await backend.makeStore())
    }

    private func aFileLandingUnderThePrefixDuringThePurgeIsDeletedInTheSameAttempt(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store) { LateWriterBlobStore(base: $0, prefix: BlobKey.accountPrefix("ada")) }
        try await fixture.addAccount("ada")
        _ = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        fixture.clock.advance(by: 30 * day)
        let summary = try await fixture.purge()
        #expect(summary.succeeded == 1)
        #expect(try await fixture.account("ada")?.state == .purged)
        #expect(try await fixture.blobKeys("ada").isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func aPurgeJobForcedToRunEarlyDoesNothing(_ backend: Backend) async throws { try await aPurgeJobForcedToRunEarlyDoesNothing(store: try await backend.makeStore()) }

    private func aPurgeJobForcedToRunEarlyDoesNothing(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        let request = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        // `jobs retry` on a waiting job runs it now: the first step must still refuse.
        _ = try await fixture.store.retry(jobID: try #require(request.purgeJobID), now: fixture.clock.now())
        let summary = try await fixture.worker().drain()
        #expect(summary.succeeded == 1)
        #expect(try await fixture.account("ada")?.state == .pendingDeletion)
        #expect(try await fixture.blobKeys("ada").count == 4)
        let steps = try await fixture.store.steps(of: try #require(request.purgeJobID))
        #expect(steps.map(\.step) == ["lock-and-mark"])
        #expect(steps.first?.output?.contains("notDue") == true)
        // Restore is still possible, and the next sweep after the purge date catches the account again.
        fixture.clock.advance(by: 31 * day)
        #expect(try await fixture.purge().succeeded == 1)
        #expect(try await fixture.account("ada")?.state == .purged)
    }

    @Test(arguments: Backend.allCases)
    func aRestoreThatLandsAfterTheClaimMakesThePurgeANoOp(_ backend: Backend) async throws { try await aRestoreThatLandsAfterTheClaimMakesThePurgeANoOp(store: try await backend.makeStore()) }

    private func aRestoreThatLandsAfterTheClaimMakesThePurgeANoOp(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        let request = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        let jobID = try #require(request.purgeJobID)
        fixture.clock.advance(by: 10 * day)
        // A worker holds the job (claimed, first step not yet run) when the user signs in.
        let owner = "racing-worker"
        _ = try await fixture.store.retry(jobID: jobID, now: fixture.clock.now())
        let claimed = try await fixture.store.claim(
            quota: [DeletionJobs.purgeKind: 1], leases: [DeletionJobs.purgeKind: 60], owner: owner, now: fixture.clock.now())
        #expect(claimed.map(\.record.id) == [jobID])
        _ = try await fixture.deletion.restore(account: "ada")
        #expect(try await fixture.store.job(id: jobID)?.cancelRequested == true)
        // The lease runs out; another worker picks the job up and its first step stands down.
        fixture.clock.advance(by: 61)
        _ = try await fixture.worker().drain()
        #expect(try await fixture.store.job(id: jobID)?.state.isFinal == true)
        #expect(try await fixture.account("ada")?.state == .active)
        #expect(try await fixture.blobKeys("ada").count == 4)
    }

    @Test(arguments: Backend.allCases)
    func aDeadPurgeIsStartedAgainByTheNextSweepAndResumes(_ backend: Backend) async throws { try await aDeadPurgeIsStartedAgainByTheNextSweepAndResumes(store: try await backend.makeStore()) }

    private func aDeadPurgeIsStartedAgainByTheNextSweepAndResumes(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada", entries: 4, state: .pendingDeletion, purgeAfter: deletionEpoch)
        let inventoryRows = try await fixture.rows("ada")
        // A first attempt got through its first step and half the blobs, then its job died.
        let first = try await fixture.services.enqueue(try DeletionJobs.purgeRequest(accountID: "ada", runAt: deletionEpoch))
        let owner = "crashed-worker"
        _ = try await fixture.store.claim(
            quota: [DeletionJobs.purgeKind: 1], leases: [DeletionJobs.purgeKind: 60], owner: owner, now: fixture.clock.now())
        // What its lock-and-mark step committed: the move to purging and the row inventory.
        let now = fixture.clock.now()
        try await fixture.store.write { tx in
            let begun = try tx.beginSubjectPurge(key: "ada", now: now)
            #expect(begun)
        }
        let keys = try await fixture.blobKeys("ada")
        try await fixture.blobs.delete(keys: Array(keys.prefix(3)))
        _ = try await fixture.store.markFailed(jobID: first.job.id, owner: owner, error: "disk on fire", retryAt: nil, now: fixture.clock.now())
        #expect(try await fixture.deletionRecord("ada")?.state == .purging)
        #expect(await lifecycleError { _ = try await fixture.deletion.restore(account: "ada") }?.message.contains("purge already started") == true)

        fixture.clock.advance(by: day)
        let summary = try await fixture.purge()
        #expect(summary.succeeded == 1)
        #expect(try await fixture.account("ada")?.state == .purged)
        #expect(try await fixture.blobKeys("ada").isEmpty)
        #expect(try await fixture.rows("ada").values.allSatisfy { $0 == 0 })
        let jobs = try await fixture.purgeJobs("ada")
        #expect(jobs.map(\.state).sorted { $0.rawValue < $1.rawValue } == [.dead, .succeeded])
        // The receipt counts every row the purge found, the files the first attempt deleted too.
        let receipt = try #require(try await fixture.audit("ada").last?.detail)
        let detail = try JSONSerialization.jsonObject(with: Data(receipt.utf8)) as? [String: Any]
        #expect(foundRows(detail) == inventoryRows.filter { $0.value > 0 }.merging(["accounts": 1]) { $1 })
        #expect(detail?["blobs"] as? Int == 5)
    }

    @Test(arguments: Backend.allCases)
    func smallBatchesSpanTablesAndStillRemoveEverything(_ backend: Backend) async throws { try await smallBatchesSpanTablesAndStillRemoveEverything(store: try await backend.makeStore()) }

    private func smallBatchesSpanTablesAndStillRemoveEverything(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store, deletionPolicy: "purge_row_batch: 3\npurge_blob_batch: 2\n")
        try await fixture.addAccount("ada", entries: 7, sessions: 5)
        try await fixture.addAccount("bob", entries: 7)
        let bob = try await fixture.rows("bob")
        _ = try await fixture.deletion.requestDeletionByOperator(account: "ada", operatorName: "ops", reason: "test", immediately: true)
        let expected = try await fixture.rows("ada")
        try await fixture.purge()
        #expect(try await fixture.account("ada")?.state == .purged)
        #expect(try await fixture.rows("ada").values.allSatisfy { $0 == 0 })
        #expect(try await fixture.blobKeys("ada").isEmpty)
        #expect(try await fixture.rows("bob") == bob)
        // Every batch counted once: the receipt (the last step's output) matches what there was.
        let jobID = try #require(try await fixture.purgeJobs("ada").first?.id)
        let steps = try await fixture.store.steps(of: jobID)
        #expect(steps.map(\.step).sorted() == ["lock-and-mark", "verify"])
        let receipt = try #require(steps.first { $0.step == "verify" }?.output)
        let detail = try JSONSerialization.jsonObject(with: Data(receipt.utf8)) as? [String: Any]
        #expect(foundRows(detail) == expected.filter { $0.value > 0 }.merging(["accounts": 1]) { $1 })
    }

    @Test(arguments: Backend.allCases, [false, true])
    func aPurgeRemovesLifecyclesOwnRowsAboutTheAccountAndKeepsTheAuditTrail(_ backend: Backend, batched: Bool) async throws {
        try await aPurgeRemovesLifecyclesOwnRowsAboutTheAccountAndKeepsTheAuditTrail(store: try await backend.makeStore(), batched: batched)
    }

    /// Export records and their messages are lifecycle's own tables, not in the data map:
    /// the purge removes the account's itself, whether its rows go in batches or at once.
    private func aPurgeRemovesLifecyclesOwnRowsAboutTheAccountAndKeepsTheAuditTrail(store: some LifecycleStore, batched: Bool) async throws {
        let fixture = try await DeletionFixture(store: store, deletionPolicy: batched ? "purge_row_batch: 3\n" : nil)
        let now = fixture.clock.now()
        for id in ["ada", "bob"] {
            try await fixture.addAccount(id)
            try await fixture.store.write { tx in
                for index in 1...2 {
                    try tx.insertExport(ExportRecord(
                        id: "\(id)-x\(index)", accountID: id, jobID: nil, format: "zip", state: .ready, requestedBy: "user", cutoffAt: now))
                    _ = try tx.insertOutboxMessage(OutboxMessage(
                        uniqueKey: "export-ready:\(id)-x\(index)", accountID: id, recipient: "\(id)@example.com", subject: "s", body: "b",
                        createdAt: now))
                }
            }
        }
        let adaRows = try await fixture.rows("ada")
        #expect(adaRows["exports"] == 2 && adaRows["outbox"] == 2)
        _ = try await fixture.deletion.requestDeletionByOperator(account: "ada", operatorName: "ops", reason: "test", immediately: true)
        #expect(try await fixture.purge().succeeded == 1)

        let (exports, messages) = try await fixture.store.read { tx in
            (try tx.exports(accountID: "ada").count + tx.outboxMessages(accountID: "ada").count,
             try tx.exports(accountID: "bob").count + tx.outboxMessages(accountID: "bob").count)
        }
        #expect(exports == 0)
        #expect(messages == 4)
        let receipt = try #require(try await fixture.audit("ada").last)
        #expect(receipt.action == DeletionAudit.purge)
        let detail = try JSONSerialization.jsonObject(with: Data(try #require(receipt.detail).utf8)) as? [String: Any]
        let ownRows = adaRows.filter { ["exports", "outbox"].contains($0.key) }.map { ("lifecycle." + $0.key, $0.value) }
        #expect(foundRows(detail) == adaRows.filter { $0.value > 0 && !["exports", "outbox", "sessions"].contains($0.key) }
            .merging(ownRows) { $1 }.merging(["accounts": 1]) { $1 })
        // The trail of the deletion itself outlives the account.
        #expect(try await fixture.audit("ada").count > 1)
    }

    /// Rows are picked by SQLite's rowid where a table has one: a WITHOUT ROWID table goes by
    /// its key, and one whose own columns are named rowid and _rowid_ (one of them generated,
    /// which SQLite's table_info leaves out) by the rowid's third name. Picked by the column
    /// holding NULL the purge would erase nothing and fail; by the generated one, the same in
    /// every row, it would erase the other account's rows too.
    @Test func rowDeletionFollowsTheDataMapIncludingWithoutRowIDTablesAndAColumnAddedToTheMask() async throws {
        let map = try String(contentsOfFile: deletionJobsDirectory + "/account-data.yaml", encoding: .utf8)
            .replacingOccurrences(
                of: "\nparts:\n",
                with: "\n  - table: badges\n    owner: account_id\n  - table: streaks\n    owner: account_id\nparts:\n")
            .replacingOccurrences(of: "      state: purged\n", with: "      state: purged\n      nickname: null\n")
        let fixture = try await DeletionFixture(dataMap: map) { db in
            try db.execute(sql: """
                CREATE TABLE badges (account_id TEXT NOT NULL, badge TEXT NOT NULL, PRIMARY KEY (account_id, badge)) WITHOUT ROWID;
                CREATE TABLE streaks (
                    id TEXT PRIMARY KEY, account_id TEXT NOT NULL, rowid INTEGER, _rowid_ INTEGER AS (1) VIRTUAL);
                ALTER TABLE accounts ADD COLUMN nickname TEXT;
                """)
        }
        let catalog = try await fixture.store.catalog()
        #expect(catalog.table(.init(schema: "main", name: "badges"))?.rowID == nil)
        #expect(catalog.table(.init(schema: "main", name: "streaks"))?.rowID == "oid")
        #expect(catalog.table(.init(schema: "main", name: "journal_entries"))?.rowID == "rowid")
        for id in ["ada", "bob"] {
            try await fixture.addAccount(id)
            try fixture.store.writeSync { tx in
                for badge in ["early-bird", "streak-7", "streak-30"] {
                    try tx.db.execute(sql: "INSERT INTO badges VALUES (?, ?)", arguments: [id, badge])
                    try tx.db.execute(sql: "INSERT INTO streaks (id, account_id) VALUES (?, ?)", arguments: ["\(id)-\(badge)", id])
                }
                try tx.db.execute(sql: "UPDATE accounts SET nickname = 'the countess' WHERE id = ?", arguments: [id])
            }
        }
        _ = try await fixture.deletion.requestDeletionByOperator(account: "ada", operatorName: "ops", reason: "test", immediately: true)
        #expect(try await fixture.purge().succeeded == 1)
        let (adaBadges, bobBadges, adaStreaks, bobStreaks, nickname) = try fixture.store.writeSync { tx in
            (try Int.fetchOne(tx.db, sql: "SELECT COUNT(*) FROM badges WHERE account_id = 'ada'"),
             try Int.fetchOne(tx.db, sql: "SELECT COUNT(*) FROM badges WHERE account_id = 'bob'"),
             try Int.fetchOne(tx.db, sql: "SELECT COUNT(*) FROM streaks WHERE account_id = 'ada'"),
             try Int.fetchOne(tx.db, sql: "SELECT COUNT(*) FROM streaks WHERE account_id = 'bob'"),
             try String.fetchOne(tx.db, sql: "SELECT nickname FROM accounts WHERE id = 'ada'"))
        }
        #expect(adaBadges == 0)
        #expect(bobBadges == 3)
        #expect(adaStreaks == 0)
        #expect(bobStreaks == 3)
        #expect(nickname == nil)
    }

    /// Nothing irreversible before the rows are gone: a database that refuses part of the
    /// erasure leaves every row and every file of the account, names the table and the
    /// cause, and the purge goes through once the cause is gone.
    @Test func aRefusedRowErasureLeavesEveryRowAndFileThenSucceedsOnceFixed() async throws {
        let fixture = try await DeletionFixture { db in
            try db.execute(sql: "CREATE TRIGGER keep_entries BEFORE DELETE ON journal_entries BEGIN SELECT RAISE(ABORT, 'entries are kept'); END")
        }
        try await fixture.addAccount("ada", entries: 3, state: .pendingDeletion, purgeAfter: deletionEpoch)
        let (rows, files) = (try await fixture.rows("ada"), try await fixture.blobKeys("ada"))
        #expect(files.count == 5)

        let first = try await fixture.purge()
        #expect(first.succeeded == 0 && first.retrying == 1)
        #expect(try await fixture.rows("ada") == rows)
        #expect(try await fixture.blobKeys("ada") == files)
        #expect(try await fixture.deletionRecord("ada")?.state == .purging)
        let error = try #require(try await fixture.purgeJobs("ada").first?.lastError)
        #expect(error.contains("journal_entries") && error.contains("entries are kept") && error.contains("no file has been deleted"), "\(error)")

        try fixture.store.writeSync { tx in try tx.db.execute(sql: "DROP TRIGGER keep_entries") }
        fixture.clock.advance(by: day)
        #expect(try await fixture.purge().succeeded == 1)
        #expect(try await fixture.account("ada")?.state == .purged)
        #expect(try await fixture.rows("ada").values.allSatisfy { $0 == 0 })
        #expect(try await fixture.blobKeys("ada").isEmpty)
        let receipt = try #require(try await fixture.audit("ada").last?.detail)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")
    }

    /// Rows of the account written while the erasure runs (here by a trigger that puts each
    /// deleted session back once) are erased too before the account is called purged: the
    /// erasure goes on until a pass finds nothing, and the receipt counts every row.
    @Test func rowsWrittenBackDuringTheErasureAreErasedBeforeTheAccountIsPurged() async throws {
        let fixture = try await DeletionFixture { db in
            try db.execute(sql: """
                CREATE TRIGGER sessions_come_back AFTER DELETE ON sessions WHEN old.id NOT LIKE 'again-%'
                BEGIN INSERT INTO sessions (id, account_id, created_at) VALUES ('again-' || old.id, old.account_id, old.created_at); END
                """)
        }
        try await fixture.addAccount("ada", sessions: 2, state: .pendingDeletion, purgeAfter: deletionEpoch)
        try await fixture.addAccount("bob")
        let bob = try await fixture.rows("bob")

        #expect(try await fixture.purge().succeeded == 1)
        #expect(try await fixture.account("ada")?.state == .purged)
        #expect(try await fixture.rows("ada").values.allSatisfy { $0 == 0 })
        #expect(try await fixture.rows("bob") == bob)
        let receipt = try #require(try await fixture.audit("ada").last?.detail)
        let detail = try JSONSerialization.jsonObject(with: Data(receipt.utf8)) as? [String: Any]
        #expect((foundRows(detail)?["sessions"] ?? 0) >= 2)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")
    }

    /// A table the map leaves out that holds the account's key is found by the residue scan
    /// after the mapped rows are erased: the purge stops for good (dead) naming it, before
    /// the user row or any file goes, and the account stays purging until the map covers it.
    @Test func aTableTheMapMissesStopsThePurgeBeforeTheUserRowOrAnyFileGoes() async throws {
        let fixture = try await DeletionFixture(dataMap: try String(contentsOfFile: deletionJobsDirectory + "/account-data.yaml", encoding: .utf8)) { db in
            try db.execute(sql: "CREATE TABLE streaks (id INTEGER PRIMARY KEY, account_id TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO streaks (account_id) VALUES ('ada')")
        }
        try await fixture.addAccount("ada", state: .pendingDeletion, purgeAfter: deletionEpoch)
        let files = try await fixture.blobKeys("ada")
        let summary = try await fixture.purge()
        #expect(summary.succeeded == 0)
        let job = try #require(try await fixture.purgeJobs("ada").first)
        #expect(job.state == .dead)
        #expect(job.lastError?.contains("streaks") == true, "\(job.lastError ?? "")")
        #expect(try await fixture.account("ada")?.email == "ada@example.com")
        #expect(try await fixture.blobKeys("ada") == files)
        #expect(try await fixture.deletionRecord("ada")?.state == .purging)
    }

    @Test(arguments: Backend.allCases)
    func dryRunPreviewListsDueAccountsWithRowsAndBlobsAndChangesNothing(_ backend: Backend) async throws { try await dryRunPreviewListsDueAccountsWithRowsAndBlobsAndChangesNothing(store: try await backend.makeStore()) }

    private func dryRunPreviewListsDueAccountsWithRowsAndBlobsAndChangesNothing(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("due", entries: 3, state: .pendingDeletion, purgeAfter: deletionEpoch.addingTimeInterval(-day))
        try await fixture.addAccount("later", state: .pendingDeletion, purgeAfter: deletionEpoch.addingTimeInterval(day))
        try await fixture.addAccount("active")
        let previews = try await PurgeSweep(services: fixture.services, directory: try await fixture.services.directory()).preview(limit: nil)
        #expect(previews.map(\.accountID) == ["due"])
        // What the purge would erase: every row found, the user row masked.
        let due = try await fixture.rows("due").filter { $0.value > 0 }.merging(["accounts": 1]) { $1 }
        #expect(previews.first?.rows.filter { $0.value > 0 } == due)
        #expect(previews.first?.blobs == 5)
        #expect(previews.first?.blobBytes == Int64(4 * 4 + 100))
        #expect(try await fixture.purgeJobs("due").isEmpty)
        #expect(try await fixture.deletionRecord("due")?.state == .pendingDeletion)
    }

    /// What a purge receipt says it found of each table (`before`), tables it found none of left out.
    private func foundRows(_ detail: [String: Any]?) -> [String: Int]? {
        (detail?["rows"] as? [String: [String: Int]])?.compactMapValues { $0["before"] }.filter { $0.value > 0 }
    }
}

/// A blob store with a writer racing the purge: right after the first delete under `prefix`,
/// a new file lands there, as from a photo normalisation that looked at the account just
/// before the purge marked it.
private final class LateWriterBlobStore: BlobStore, @unchecked Sendable {
    let base: FileSystemBlobStore
    let prefix: String
    private let lock = NSLock()
    private var written = false

    init(base: FileSystemBlobStore, prefix: String) {
        self.base = base
        self.prefix = prefix
    }

    func put(key: String, fromFile path: String, moving: Bool) async throws -> BlobInfo { try await base.put(key: key, fromFile: path, moving: moving) }
    func put(key: String, data: Data) async throws -> BlobInfo { try await base.put(key: key, data: data) }
    func info(key: String) async throws -> BlobInfo? { try await base.info(key: key) }
    func read(key: String, chunkSize: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) async throws {
        try await base.read(key: key, chunkSize: chunkSize, body)
    }
    func list(prefix: String, after: String?, limit: Int) async throws -> [BlobInfo] { try await base.list(prefix: prefix, after: after, limit: limit) }
    func move(from: String, to: String) async throws { try await base.move(from: from, to: to) }

    func delete(keys: [String]) async throws {
        try await base.delete(keys: keys)
        let first = lock.withLock {
            defer { written = true }
            return !written && keys.contains { $0.hasPrefix(prefix) }
        }
        if first { _ = try await base.put(key: prefix + "profile-photos/late/v2-s1024.jpg", data: Data("late".utf8)) }
    }
}
