import Foundation
import JobRunner
import Lifecycle
import Logging
import SQLiteBackend
import Testing

/// Jobs of different kinds on one account, staged at the moment where one would break
/// the other: the jobs, the store and the blobs are the real ones, only the moment is chosen.
struct JobsOnOneAccountTests {
    /// The profile photo's normalisation finishes (switches the row to the rendered JPEG
    /// and deletes the upload) after the export planned the upload and before it copies it.
    /// The export writes the archive again with the rendered photo instead of failing.
    @Test(arguments: Backend.allCases)
    func anExportWhosePhotoIsNormalisedMidCopyExportsTheNewerVersion(_ backend: Backend) async throws {
        try await anExportWhosePhotoIsNormalisedMidCopyExportsTheNewerVersion(store: try await backend.makeStore())
    }

    private func anExportWhosePhotoIsNormalisedMidCopyExportsTheNewerVersion<Store: LifecycleStore>(store: Store) async throws {
        let testbed = try ExportTestbed(store: store)
        try FileManager.default.copyItem(
            atPath: ExportFixture.repositoryRoot + "/Jobs/policies/photos.yaml", toPath: testbed.jobsDirectory + "/policies/photos.yaml")
        // The same directory: the photo fixture's blob store is the testbed's.
        let photos = try PhotoFixture(store: store, directory: testbed.root)
        let upload = try PhotoUpload.heic
        try await photos.addAccount("ada", upload: upload)
        let uploadKey = importedUploadKey("ada")

        // The export's services read and write the same files through a store that runs the
        // normalisation to its end when the export first reads the upload.
        let staged = StagedBlobStore(inner: photos.blobs, key: uploadKey)
        let services = try testbed.services(over: staged)
        let normalisation = try PhotoNormalizationService(services: services)
        let queued = try await normalisation.queue(account: "ada")
        #expect(queued.jobIDs.count == 1)
        staged.before = { _ = try await drain(services, clock: testbed.clock, kind: PhotoJobs.normalizeColumnKind) }

        let requested = try await services.requestExport(ExportRequest(account: "ada"))
        _ = try await drain(services, clock: testbed.clock, kind: ExportJobs.exportKind)

        #expect(staged.fired == 1)
        let rendered = try #require(try await photos.profileKey("ada"))
        #expect(rendered != uploadKey && rendered.hasSuffix(".jpg"))
        #expect(try await photos.blobs.info(key: uploadKey) == nil)
        #expect(try await store.job(id: try #require(queued.jobIDs.first))?.state == .succeeded)
        let job = try #require(try await store.job(id: requested.job.id))
        #expect(job.state == .succeeded, "\(job.lastError ?? "")")
        #expect(job.attempt == 1)

        // The archive holds the rendered photo, byte for byte, where the manifest says its key went.
        let export = try #require(try await store.read { tx in try tx.export(jobID: requested.job.id) })
        let unpacked = try await testbed.unpack(export)
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: unpacked + "/manifest.json"))) as? [String: Any]
        let listed = try #require(manifest?["files"] as? [[String: Any]])
        #expect(!listed.contains { $0["blob_key"] as? String == uploadKey }, "the upload the normalisation replaced")
        let profilePath = try #require(listed.first { $0["blob_key"] as? String == rendered }?["path"] as? String)
        let archived = try Data(contentsOf: URL(fileURLWithPath: unpacked + "/" + profilePath))
        #expect(archived == (try await photos.blobs.readAll(key: rendered)))
    }

    /// The account's purge begins and ends while its export copies the photos: the purge
    /// cancels the export (audited), the export stops without publishing anything, and no
    /// file of the account is left, neither in the blob store nor in the scratch folder.
    @Test(arguments: Backend.allCases)
    func aPurgeThatStartsDuringAnExportCancelsItAndLeavesNothing(_ backend: Backend) async throws {
        try await aPurgeThatStartsDuringAnExportCancelsItAndLeavesNothing(store: try await backend.makeStore())
    }

    private func aPurgeThatStartsDuringAnExportCancelsItAndLeavesNothing<Store: LifecycleStore>(store: Store) async throws {
        let testbed = try ExportTestbed(store: store)
        for policy in ["photos.yaml", "deletion.yaml"] {
            try FileManager.default.copyItem(
                atPath: ExportFixture.repositoryRoot + "/Jobs/policies/" + policy, toPath: testbed.jobsDirectory + "/policies/" + policy)
        }
        let photos = try PhotoFixture(store: store, directory: testbed.root)
        try await photos.addAccount("ada", upload: try PhotoUpload.jpeg)
        try await photos.addAccount("bob", upload: try PhotoUpload.jpeg)
        let entryPhoto = try await photos.photo("ada-p1")

        let staged = StagedBlobStore(inner: photos.blobs, key: entryPhoto.blobKey)
        let services = try testbed.services(over: staged)
        let deletion = try DeletionService(services: services, directory: try await services.directory())
        let purged = PurgeOutcome()
        staged.before = {
            _ = try await deletion.requestDeletionByOperator(account: "ada", operatorName: "ops", reason: "test", immediately: true)
            purged.record(try await drain(services, clock: testbed.clock, kind: DeletionJobs.purgeKind).succeeded)
        }

        let requested = try await services.requestExport(ExportRequest(account: "ada"))
        let exportRun = try await drain(services, clock: testbed.clock, kind: ExportJobs.exportKind)

        #expect(staged.fired == 1)
        #expect(purged.succeeded == 1)
        #expect(exportRun.cancelled == 1 && exportRun.dead == 0)
        #expect(try await store.job(id: requested.job.id)?.state == .cancelled)
        #expect(try await store.read { tx in try tx.account(id: "ada") }?.state == .purged)
        let audit = try await store.read { tx in try tx.auditEvents(accountID: "ada") }
        let cancel = try #require(audit.first { $0.action == "export.cancel" })
        #expect(cancel.outcome == "cancelled" && cancel.detail?.contains("\"export_job\":\(requested.job.id)") == true)
        #expect(try await photos.blobs.list(prefix: BlobKey.accountPrefix("ada"), after: nil, limit: 10).isEmpty)
        #expect(try await store.read { tx in try tx.exports(accountID: "ada") }.isEmpty)
        // The export's scratch folder (beside the export folder, a folder per export id) is
        // gone, and nothing of hers was published there.
        let snapshot = try #require(try await store.steps(of: requested.job.id).first { $0.step == "snapshot" }?.output)
        let exportID = try #require((try JSONSerialization.jsonObject(with: Data(snapshot.utf8)) as? [String: Any])?["exportID"] as? String)
        #expect(FileManager.default.fileExists(atPath: testbed.exports.root + "/.incoming/exports"), "where the build's scratch folder was")
        #expect(!FileManager.default.fileExists(atPath: testbed.exports.root + "/.incoming/exports/" + exportID))
        #expect(try await testbed.exports.list(prefix: BlobKey.accountPrefix("ada"), after: nil, limit: 10).isEmpty)
        // Bob's account was never touched.
        #expect(try await photos.blobs.list(prefix: BlobKey.accountPrefix("bob"), after: nil, limit: 10).count == 2)
    }

    /// The user asks for their data, then deletes their account before the export ran: the
    /// request cancels the export in its own transaction (audited), so it never starts.
    @Test(arguments: Backend.allCases)
    func aDeletionRequestCancelsTheQueuedExport(_ backend: Backend) async throws {
        try await aDeletionRequestCancelsTheQueuedExport(store: try await backend.makeStore())
    }

    private func aDeletionRequestCancelsTheQueuedExport(store: some LifecycleStore) async throws {
        let testbed = try ExportTestbed(store: store)
        try FileManager.default.copyItem(
            atPath: ExportFixture.repositoryRoot + "/Jobs/policies/deletion.yaml", toPath: testbed.jobsDirectory + "/policies/deletion.yaml")
        try await PhotoFixture(store: store, directory: testbed.root).addAccount("ada", upload: try PhotoUpload.jpeg)
        let fixture = (services: testbed.services, deletion: try DeletionService(services: testbed.services, directory: try await testbed.services.directory()))
        let export = try await fixture.services.requestExport(ExportRequest(account: "ada"))
        _ = try await fixture.deletion.requestDeletionByOperator(account: "ada", operatorName: "ops", reason: "ticket 7", immediately: false)
        #expect(try await store.job(id: export.job.id)?.state == .cancelled)
        let audit = try await store.read { tx in try tx.auditEvents(accountID: "ada") }
        #expect(audit.contains { $0.action == "export.cancel" && $0.actor == "deletion" && $0.detail?.contains("\(export.job.id)") == true })
        #expect(try await store.read { tx in try tx.exports(accountID: "ada") }.isEmpty)
    }

    /// What a worker killed mid-build leaves when the job is then cancelled (by the account's
    /// deletion) before it runs again: a `building` row, a temporary archive, a scratch
    /// folder. The hourly expiry job clears all three; a build still under way keeps its own.
    @Test(arguments: Backend.allCases)
    func theExpiryJobClearsWhatAnAbandonedBuildLeft(_ backend: Backend) async throws {
        try await theExpiryJobClearsWhatAnAbandonedBuildLeft(store: try await backend.makeStore())
    }

    private func theExpiryJobClearsWhatAnAbandonedBuildLeft(store: some LifecycleStore) async throws {
        let testbed = try ExportTestbed(store: store)
        try await PhotoFixture(store: store, directory: testbed.root).addAccount("ada", upload: try PhotoUpload.jpeg)
        try await PhotoFixture(store: store, directory: testbed.root).addAccount("bob", upload: try PhotoUpload.jpeg)
        let now = testbed.clock.now()
        var leftovers: [(id: String, folder: String)] = []
        for (account, cancelled) in [("ada", true), ("bob", false)] {
            let job = try await testbed.services.enqueue(EnqueueRequest(kind: ExportJobs.exportKind, uniqueKey: ExportJobs.uniqueKey(accountID: account))).job
            let id = "\(account)-build"
            try await store.write { tx in
                try tx.insertExport(ExportRecord(
                    id: id, accountID: account, jobID: job.id, format: "zip", state: .building, requestedBy: "user", cutoffAt: now))
            }
            if cancelled { _ = try await store.cancel(jobID: job.id, now: now) }
            let folder = testbed.exports.root + "/.incoming/exports/" + id
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: folder + "/photos.plan", contents: Data("{}".utf8)))
            leftovers.append((id, folder))
        }
        let stray = testbed.exports.root + "/.incoming/exports/no-such-export"
        try FileManager.default.createDirectory(atPath: stray, withIntermediateDirectories: true)
        // Where an export's archive waits until it is verified (ExportNames.temporaryKey).
        let temporaryKeys = ["ada", "bob"].map { "accounts/\($0)/exports/\($0)-build.partial.zip" }
        for key in temporaryKeys { _ = try await testbed.exports.put(key: key, data: Data("half an archive".utf8)) }

        _ = try await testbed.services.enqueue(EnqueueRequest(kind: ExportJobs.expiryKind))
        #expect(try await testbed.runWorker(kinds: [ExportJobs.expiryKind]).succeeded == 1)

        #expect(try await store.read { tx in try tx.export(id: "ada-build") }?.state == .expired)
        #expect(try await testbed.exports.info(key: temporaryKeys[0]) == nil)
        #expect(!FileManager.default.fileExists(atPath: leftovers[0].folder))
        #expect(!FileManager.default.fileExists(atPath: stray))
        // Bob's build is still live (its job queued): everything of it stays.
        #expect(try await store.read { tx in try tx.export(id: "bob-build") }?.state == .building)
        #expect(try await testbed.exports.info(key: temporaryKeys[1]) != nil)
        #expect(FileManager.default.fileExists(atPath: leftovers[1].folder))
    }
}

/// Runs every due job of one kind in this process, one at a time, as `worker --once --kind` would.
private func drain<Store: LifecycleStore>(_ services: LifecycleServices<Store>, clock: ManualTimeSource, kind: String) async throws -> DrainSummary {
    try await Worker(
        store: services.store, registry: services.registry, policies: services.policies, clock: clock,
        options: WorkerOptions(concurrency: 1, kinds: [kind])
    ).drain()
}

extension ExportTestbed {
    /// The testbed's installation with its files read and written through `blobs`, its archives in its export folder.
    func services(over blobs: any BlobStore) throws -> LifecycleServices<Store> {
        LifecycleServices(
            store: store, blobs: blobs, policies: try PolicyBook(jobsDirectory: jobsDirectory), jobsDirectory: jobsDirectory,
            clock: clock, logger: Logger(label: "jobs-on-one-account"), exports: exports)
    }
}

/// What the staged purge run did, read once the export's drain is over.
final class PurgeOutcome: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func record(_ succeeded: Int) { lock.withLock { count += succeeded } }
    var succeeded: Int { lock.withLock { count } }
}

/// The real file-system store, with one staged moment: the first read of `key` runs
/// `before` to its end, then reads. Everything else goes straight through.
final class StagedBlobStore: BlobStore, @unchecked Sendable {
    let inner: FileSystemBlobStore
    let key: String
    private let lock = NSLock()
    private var stage: (@Sendable () async throws -> Void)?
    private var firedCount = 0

    init(inner: FileSystemBlobStore, key: String) {
        self.inner = inner
        self.key = key
    }

    var before: (@Sendable () async throws -> Void)? {
        get { lock.withLock { stage } }
        set { lock.withLock { stage = newValue } }
    }

    var fired: Int { lock.withLock { firedCount } }

    func read(key: String, chunkSize: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) async throws {
        let run: (@Sendable () async throws -> Void)? = lock.withLock {
            guard key == self.key, let stage else { return nil }
            self.stage = nil
            firedCount += 1
            return stage
        }
        try await run?()
        try await inner.read(key: key, chunkSize: chunkSize, body)
    }

    func put(key: String, fromFile path: String, moving: Bool) async throws -> BlobInfo {
        try await inner.put(key: key, fromFile: path, moving: moving)
    }
    func put(key: String, data: Data) async throws -> BlobInfo { try await inner.put(key: key, data: data) }
    func info(key: String) async throws -> BlobInfo? { try await inner.info(key: key) }
    func list(prefix: String, after: String?, limit: Int) async throws -> [BlobInfo] {
        try await inner.list(prefix: prefix, after: after, limit: limit)
    }
    func delete(keys: [String]) async throws { try await inner.delete(keys: keys) }
    func move(from: String, to: String) async throws { try await inner.move(from: from, to: to) }
    func downloadURL(key: String, expiresAt: Date, now: Date) throws -> String? {
        try inner.downloadURL(key: key, expiresAt: expiresAt, now: now)
    }
}

/// Profile photos uploaded one over another (the API's `PUT …/photo`), their jobs run
/// together in whatever order the workers take them: the newest is the profile photo, a
/// rejected newest gives back the normalised one before it (none, when that was an upload
/// no job had settled), and every replaced upload and rendering is deleted.
struct ProfilePhotoReplacementTests {
    @Test(arguments: Backend.allCases)
    func uploadsOverEachOtherLeaveTheNewestAndNothingElse(_ backend: Backend) async throws {
        try await uploadsOverEachOtherLeaveTheNewestAndNothingElse(store: try await backend.makeStore())
    }

    private func uploadsOverEachOtherLeaveTheNewestAndNothingElse<Store: LifecycleStore>(store: Store) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.jpeg)
        let upload = ProfilePhotoUpload(services: fixture.services)
        func put(_ data: Data) async throws -> String {
            let path = fixture.directory + "/upload-\(UUID().uuidString)"
            try data.write(to: URL(fileURLWithPath: path))
            let staged = StagedPhotoUpload(path: path, size: Int64(data.count), sha256: photoSHA256(data), contentType: ContentSniffer.contentType(of: data))
            return try await upload.accept(account: try await upload.checkAccount("ada@example.com"), staged: staged).photoID
        }
        let directory = try await fixture.services.directory()
        func state() async throws -> ProfilePhotoState? {
            try await store.read { tx in try upload.state(of: "ada", directory: directory, in: tx) }
        }
        func files() throws -> Set<String> { Set(try fixture.blobStamps("ada").keys) }

        // A good one, then a damaged one over it before any job ran: the damaged one is
        // refused, and as the one before it was an upload no job had settled either, she is
        // left with no photo and the refusal's message; every upload is deleted.
        _ = try await put(try PhotoUpload.png)
        let damaged = try await put(try PhotoUpload.truncatedJPEG)
        #expect(try await fixture.profileKey("ada")?.hasSuffix("/" + damaged) == true)
        let first = try await fixture.drain()
        #expect(first.dead == 0 && first.retrying == 0)
        #expect(try await fixture.profileKey("ada") == nil)
        let refused = try await state()
        #expect(refused?.photoID == damaged && refused?.state == .rejected && refused?.message == "This photo could not be read. Please choose another photo.")
        let afterFirst = try files()
        #expect(afterFirst == ["photos/ada-p1"], "\(afterFirst.sorted())")

        // A good one over a normalised one that is refused gives the normalised one back.
        let good = try PhotoUpload.png
        _ = try await put(good)
        #expect(try await fixture.drain().succeeded == 1)
        let back = PhotoJobTests.renderedKey("ada", from: good)
        #expect(try await fixture.profileKey("ada") == back)
        _ = try await put(try PhotoUpload.truncatedJPEG)
        #expect(try await fixture.drain().succeeded == 1)
        #expect(try await fixture.profileKey("ada") == back)
        let afterRefusal = try files()
        #expect(afterRefusal == [String(back.dropFirst("accounts/ada/".count)), "photos/ada-p1"], "\(afterRefusal.sorted())")

        // Two good ones at once: whichever job runs first, only the newest is left.
        _ = try await put(try PhotoUpload.heic)
        let newest = try PhotoUpload.jpegWithGPS
        let newestID = try await put(newest)
        let second = try await fixture.drain()
        #expect(second.dead == 0 && second.succeeded == 2)
        let rendered = PhotoJobTests.renderedKey("ada", from: newest)
        #expect(try await fixture.profileKey("ada") == rendered)
        let settled = try await state()
        #expect(settled?.photoID == newestID && settled?.state == .normalized)
        let afterSecond = try files()
        #expect(afterSecond == [String(rendered.dropFirst("accounts/ada/".count)), "photos/ada-p1"], "replaced uploads and renders are deleted: \(afterSecond.sorted())")
    }
}
