import Foundation
import Imaging
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// The normalisation job in-process, on both backends: what it does to rows and blobs,
/// refusals, idempotence, recipe changes and races with a purge. The recipe itself (orientation
/// by pixels, colour, refusals of crafted files) is tested in ImagingTests.
struct PhotoJobTests {
    /// Where `render` puts the JPEG of an upload: in her folder of the map's photo prefix,
    /// named by the recipe and the upload's SHA-256.
    static func renderedKey(_ account: String, recipe: String = PhotoPolicy().recipeIdentifier, from bytes: Data) -> String {
        "accounts/\(account)/\(recipe)-\(photoSHA256(bytes).prefix(16)).jpg"
    }

    @Test(arguments: Backend.allCases)
    func eachAcceptedFormatIsRenderedSwitchedAndItsUploadDeleted(_ backend: Backend) async throws { try await eachAcceptedFormatIsRenderedSwitchedAndItsUploadDeleted(store: try await backend.makeStore()) }

    private func eachAcceptedFormatIsRenderedSwitchedAndItsUploadDeleted(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        let uploads: [(account: String, bytes: Data, side: Int)] = [
            ("heic", try PhotoUpload.heic, 1024),           // 1200×1200
            ("png", try PhotoUpload.png, 480),              // 640×480 with alpha: never enlarged
            ("jpeg", try PhotoUpload.jpeg, 768),            // 1024×768
            ("gps", try PhotoUpload.jpegWithGPS, 1024),     // GPS tags, orientation 6
        ]
        for upload in uploads { try await fixture.addAccount(upload.account, upload: upload.bytes) }

        let (queued, summary) = try await fixture.normalizeAll()
        #expect(queued.queued == 4)
        #expect(summary.normalized == 4 && summary.allFinished && summary.problems.isEmpty)
        #expect(summary.bytesBefore == Int64(uploads.map(\.bytes.count).reduce(0, +)) && summary.bytesAfter > 0)

        for upload in uploads {
            // Her column names the JPEG, in her folder, which the purge empties.
            let key = try #require(try await fixture.profileKey(upload.account))
            #expect(key == Self.renderedKey(upload.account, from: upload.bytes))
            #expect(key.hasPrefix(BlobKey.accountPrefix(upload.account)))
            try await IndependentReader.expectNormalized(try await fixture.blobs.readAll(key: key), side: upload.side)

            // The upload is gone.
            #expect(try await fixture.blobs.info(key: importedUploadKey(upload.account)) == nil)
            let job = try #require(try await fixture.jobs(upload: importedUploadKey(upload.account)).first)
            #expect(job.state == .succeeded && job.attempt == 1)
            #expect(try await fixture.stepNames(ofJob: job.id) == ["validate", "render", "switch", "delete-files"])

            // Journal photos are kept as uploaded, GPS and all: only the profile photo is normalised.
            let entry = try await fixture.photo("\(upload.account)-p1")
            #expect(entry.contentType == "image/jpeg")
            #expect(try await fixture.blobs.readAll(key: entry.blobKey) == (try PhotoUpload.jpegWithGPS))
        }
    }

    @Test(arguments: Backend.allCases)
    func aRefusedPhotoIsRecordedAndDeletedAndTheOthersGoOn(_ backend: Backend) async throws { try await aRefusedPhotoIsRecordedAndDeletedAndTheOthersGoOn(store: try await backend.makeStore()) }

    private func aRefusedPhotoIsRecordedAndDeletedAndTheOthersGoOn(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        var oversized = Data([0xFF, 0xD8, 0xFF, 0xE0])
        oversized.append(Data(count: 10_485_761 - oversized.count))
        try await fixture.addAccount("gif", upload: PhotoUpload.gif)
        try await fixture.addAccount("huge", upload: oversized)
        try await fixture.addAccount("cut", upload: try PhotoUpload.truncatedJPEG)
        try await fixture.addAccount("good", upload: try PhotoUpload.heic)

        let (_, summary) = try await fixture.normalizeAll()
        #expect(summary.normalized == 1 && summary.rejected == 3)
        // Rejections are outcomes, not failures: nothing retries or dies.
        #expect(summary.allFinished && summary.failed == 0 && summary.retrying == 0)
        let problems = Dictionary(summary.problems.map { ($0.accountID ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        #expect(problems["gif"]?.userMessage == "This file type is not supported. Please use JPG, PNG, or HEIC.")
        #expect(problems["huge"]?.userMessage == "Photo must be under 10MB.")
        #expect(problems["cut"]?.userMessage == "This photo could not be read. Please choose another photo.")

        let expectations: [(String, String)] = [
            // Refused from its header or size, before a pixel is decoded.
            ("gif", "unsupportedType: content is GIF"),
            ("huge", "tooLarge: input is 10485761 bytes, limit 10485760"),
            // Only decoding finds the damage.
            ("cut", "corrupt: "),
        ]
        for (account, reason) in expectations {
            #expect(problems[account]?.reason?.hasPrefix(reason) == true, "\(problems[account]?.reason ?? "nil")")
            let job = try #require(try await fixture.jobs(upload: importedUploadKey(account)).first)
            #expect(job.state == .succeeded)
            // She had no photo before it: her column is empty again, the refused upload deleted,
            // nothing rendered; the trail keeps what the uploader was told.
            #expect(try await fixture.profileKey(account) == nil)
            #expect(try fixture.blobStamps(account).keys.sorted() == ["photos/\(account)-p1"])
            let events = try await fixture.store.read { tx in try tx.auditEvents(accountID: account) }.filter { $0.action == "photo.normalize" }
            #expect(events.map(\.outcome) == ["rejected"])
            #expect(events.first?.detail?.contains(problems[account]?.userMessage ?? "?") == true)
        }
        #expect(try await fixture.profileKey("good") == Self.renderedKey("good", from: try PhotoUpload.heic))

        // Nothing is left to take again.
        #expect(try await fixture.service.queue(account: nil).jobIDs.isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func runningTwiceRendersNothingTheSecondTime(_ backend: Backend) async throws { try await runningTwiceRendersNothingTheSecondTime(store: try await backend.makeStore()) }

    private func runningTwiceRendersNothingTheSecondTime(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.heic)
        try await fixture.addAccount("grace", upload: try PhotoUpload.png)
        try await fixture.normalizeAll()
        let before = try ["ada", "grace"].map { try fixture.blobStamps($0) }

        let (again, summary) = try await fixture.normalizeAll()
        #expect(again.jobIDs.isEmpty && summary.normalized == 0)

        // Even a job queued by hand for a finished photo stops at validate: no JPEG of a JPEG.
        let rendered = try #require(try await fixture.profileKey("ada"))
        _ = try await fixture.services.enqueue(try PhotoJobs.normalizeRequest(account: "ada", upload: rendered, replaces: nil))
        let drained = try await fixture.drain()
        #expect(drained.succeeded == 1)
        let latest = try #require(try await fixture.jobs(upload: rendered).first)
        #expect(try await fixture.stepNames(ofJob: latest.id) == ["validate"])
        #expect(try await fixture.service.result(ofJob: latest.id)?.outcome == .upToDate)
        #expect(try await fixture.profileKey("ada") == rendered)
        #expect(try ["ada", "grace"].map { try fixture.blobStamps($0) } == before)
    }

    @Test(arguments: Backend.allCases)
    func aRecipeChangeRendersAgainFromTheStoredJPEGAndDeletesTheOldOne(_ backend: Backend) async throws { try await aRecipeChangeRendersAgainFromTheStoredJPEGAndDeletesTheOldOne(store: try await backend.makeStore()) }

    private func aRecipeChangeRendersAgainFromTheStoredJPEGAndDeletesTheOldOne(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.heic)
        try await fixture.normalizeAll()
        let first = try #require(try await fixture.profileKey("ada"))
        let firstJPEG = try await fixture.blobs.readAll(key: first)

        let changed = try fixture.withPhotosSection("  output_max_side: 512\n  recipe_version: 3")
        let (queued, summary) = try await changed.normalizeAll()
        #expect(queued.recipe == "v3-s512-q85" && queued.jobIDs.count == 1)
        #expect(summary.normalized == 1)
        let second = try #require(try await changed.profileKey("ada"))
        #expect(second == Self.renderedKey("ada", recipe: "v3-s512-q85", from: firstJPEG))
        try await IndependentReader.expectNormalized(try await changed.blobs.readAll(key: second), side: 512)
        // Only the current rendering is left.
        #expect(try fixture.blobStamps("ada").keys.filter { !$0.hasPrefix("photos/") } == [(second as NSString).lastPathComponent])

        // The old recipe version is "older", never "newer": a worker still on v2 renders nothing.
        let (stale, staleSummary) = try await fixture.normalizeAll()
        #expect(staleSummary.normalized == 0 && staleSummary.upToDate == stale.jobIDs.count)
        #expect(try await fixture.profileKey("ada") == second)
    }

    @Test(arguments: Backend.allCases)
    func anAccountInItsPurgeIsLeftToThePurge(_ backend: Backend) async throws { try await anAccountInItsPurgeIsLeftToThePurge(store: try await backend.makeStore()) }

    private func anAccountInItsPurgeIsLeftToThePurge(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("leaving", upload: try PhotoUpload.heic, state: .purging)
        let error = await lifecycleError { _ = try await fixture.service.queue(account: "leaving") }
        #expect(error?.category == .noSuchAccount)

        // A job queued before the purge began (or by a run over every account) finds the
        // account going and touches nothing.
        let upload = importedUploadKey("leaving")
        _ = try await fixture.services.enqueue(try PhotoJobs.normalizeRequest(account: "leaving", upload: upload, replaces: nil))
        let (_, summary) = try await fixture.normalizeAll()
        #expect(summary.normalized == 0 && summary.rejected == 0)
        let job = try #require(try await fixture.jobs(upload: upload).first)
        #expect(try await fixture.service.result(ofJob: job.id)?.outcome == .gone)
        #expect(try await fixture.profileKey("leaving") == upload)
        #expect(try fixture.blobStamps("leaving").keys.sorted() == ["photos/leaving-p1", "upload-import"])
    }

    @Test(arguments: Backend.allCases)
    func aMissingUploadKillsTheJobWithAMessageThatSaysWhatToDo(_ backend: Backend) async throws { try await aMissingUploadKillsTheJobWithAMessageThatSaysWhatToDo(store: try await backend.makeStore()) }

    private func aMissingUploadKillsTheJobWithAMessageThatSaysWhatToDo(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.heic)
        try await fixture.blobs.delete(keys: [importedUploadKey("ada")])
        let (_, summary) = try await fixture.normalizeAll()
        #expect(summary.failed == 1 && !summary.allFinished)
        let failure = try #require(summary.problems.first)
        #expect(failure.outcome == .failed)
        #expect(failure.reason?.contains("accounts/ada/upload-import") == true)
        #expect(failure.reason?.contains("is missing from the blob store") == true)
        #expect(failure.reason?.contains("lifecycle jobs retry") == true)
        #expect(try await fixture.profileKey("ada") == importedUploadKey("ada"))
    }

    @Test(arguments: Backend.allCases)
    func oneAccountOnlyAndUnknownAccounts(_ backend: Backend) async throws { try await oneAccountOnlyAndUnknownAccounts(store: try await backend.makeStore()) }

    private func oneAccountOnlyAndUnknownAccounts(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.heic)
        try await fixture.addAccount("grace", upload: try PhotoUpload.png)
        let (queued, summary) = try await fixture.normalizeAll(account: "ada@example.com")
        #expect(queued.jobIDs.count == 1 && summary.normalized == 1)
        #expect(try await fixture.profileKey("ada") == Self.renderedKey("ada", from: try PhotoUpload.heic))
        #expect(try await fixture.profileKey("grace") == importedUploadKey("grace"))
        let error = await lifecycleError { _ = try await fixture.service.queue(account: "nobody") }
        #expect(error?.category == .noSuchAccount)
    }

    @Test(arguments: Backend.allCases)
    func queueingWalksPagesAndGivesBackJobsAlreadyQueued(_ backend: Backend) async throws { try await queueingWalksPagesAndGivesBackJobsAlreadyQueued(store: try await backend.makeStore()) }

    private func queueingWalksPagesAndGivesBackJobsAlreadyQueued(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        for index in 0..<7 { try await fixture.addAccount("u\(index)", upload: try PhotoUpload.jpeg) }
        var service = try fixture.service
        service.pageSize = 3
        let first = try await service.queue(account: nil)
        #expect(first.queued == 7 && Set(first.jobIDs).count == 7)
        let second = try await service.queue(account: nil)
        #expect(second.queued == 0 && second.alreadyQueued == 7 && second.jobIDs == first.jobIDs)
    }
}

struct PhotoPolicyFileTests {
    @Test func theShippedPolicyIsTheProductRecipe() throws {
        let policy = try PhotoPolicy(policies: try PolicyBook(jobsDirectory: photoJobsDirectory))
        #expect(policy == PhotoPolicy(
            maxInputBytes: 10_485_760, maxSide: 16_384, maxPixels: 100_000_000, outputMaxSide: 1024, jpegQuality: 85, recipeVersion: 2))
        let job = try PolicyBook(jobsDirectory: photoJobsDirectory).policy(for: PhotoJobs.normalizeColumnKind)
        #expect(job.concurrency == 2)
    }

    @Test func aTypoOrAnOutOfRangeValueIsAnErrorNotADefault() async throws {
        let typo = try PhotoFixture(photosSection: "  jpeg_qualty: 90")
        let error = await lifecycleError { _ = try typo.service }
        #expect(error?.category == .badInput)
        #expect(error?.message.contains("unknown key(s) jpeg_qualty") == true)

        let outOfRange = try PhotoFixture(photosSection: "  jpeg_quality: 101")
        #expect(await lifecycleError { _ = try outOfRange.service }?.message.contains("jpeg_quality = 101 is outside 1...100") == true)

        // A worker with a broken policy fails the job (and retries): it never renders with a guess.
        try await outOfRange.addAccount("ada", upload: try PhotoUpload.heic)
        let upload = importedUploadKey("ada")
        _ = try await outOfRange.services.enqueue(try PhotoJobs.normalizeRequest(account: "ada", upload: upload, replaces: nil))
        let drained = try await outOfRange.drain()
        #expect(drained.retrying == 1)
        #expect(try await outOfRange.profileKey("ada") == upload)
    }
}
