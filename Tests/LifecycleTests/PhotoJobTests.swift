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

        for upload in uploads {
            let id = "\(upload.account).profile"
            let photo = try await fixture.photo(id)
            #expect(photo.normalizationState == .normalized)
            #expect(photo.recipeVersion == 2 && photo.normalizationReason == nil)
            #expect(photo.contentType == "image/jpeg")
            #expect(photo.blobKey == PhotoJobs.renderedKey(
                accountID: upload.account, photoID: id, recipe: PhotoPolicy(), inputSHA256: photoSHA256(upload.bytes)))
            #expect(photo.blobKey.hasPrefix(BlobKey.accountPrefix(upload.account)))
            let stored = try await fixture.blobs.readAll(key: photo.blobKey)
            #expect(Int64(stored.count) == photo.byteSize && photoSHA256(stored) == photo.sha256)
            try await IndependentReader.expectNormalized(stored, side: upload.side)

            // The upload is gone; the account still points at the same photo row.
            #expect(try await fixture.blobs.info(key: BlobKey.photo(accountID: upload.account, photoID: id)) == nil)
            #expect(try await fixture.store.read { tx in try tx.account(id: upload.account)?.profilePhotoID } == id)
            let job = try #require(try await fixture.jobs(photo: id).first)
            #expect(job.state == .succeeded && job.attempt == 1)
            #expect(try await fixture.stepNames(ofJob: job.id) == ["validate", "render", "switch", "delete-original", "retire-replaced", "delete-replaced"])

            // Entry photos are kept as uploaded, GPS and all: only profile photos are normalised.
            let entry = try await fixture.photo("\(upload.account)-p1")
            #expect(entry.normalizationState == nil && entry.contentType == "image/jpeg")
            #expect(try await fixture.blobs.readAll(key: entry.blobKey) == (try PhotoUpload.jpegWithGPS))
        }
    }

    @Test(arguments: Backend.allCases)
    func aRefusedPhotoIsMarkedRejectedAndTheOthersGoOn(_ backend: Backend) async throws { try await aRefusedPhotoIsMarkedRejectedAndTheOthersGoOn(store: try await backend.makeStore()) }

    private func aRefusedPhotoIsMarkedRejectedAndTheOthersGoOn(store: some LifecycleStore) async throws {
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
        let messages = Dictionary(summary.problems.map { ($0.photoID, $0.userMessage ?? "") }, uniquingKeysWith: { first, _ in first })
        #expect(messages["gif.profile"] == "This file type is not supported. Please use JPG, PNG, or HEIC.")
        #expect(messages["huge.profile"] == "Photo must be under 10MB.")
        #expect(messages["cut.profile"] == "This photo could not be read. Please choose another photo.")

        let expectations: [(String, String, [String])] = [
            // Refused from its header or size: the job ends at validate.
            ("gif", "unsupportedType: content is GIF", ["validate"]),
            ("huge", "tooLarge: input is 10485761 bytes, limit 10485760", ["validate"]),
            // Only decoding finds the damage: refused at render, nothing stored for it.
            ("cut", "corrupt: ", ["validate", "render"]),
        ]
        for (account, reason, steps) in expectations {
            let photo = try await fixture.photo("\(account).profile")
            #expect(photo.normalizationState == .rejected)
            #expect(photo.normalizationReason?.hasPrefix(reason) == true, "\(photo.normalizationReason ?? "nil")")
            let job = try #require(try await fixture.jobs(photo: photo.id).first)
            #expect(job.state == .succeeded)
            #expect(try await fixture.stepNames(ofJob: job.id) == steps)
            // The upload stays for investigation (the runbook says how); nothing was rendered.
            #expect(try await fixture.blobs.info(key: photo.blobKey) != nil)
            #expect(try fixture.blobStamps(account).keys.allSatisfy { !$0.hasPrefix("profile-photos/") })
        }
        #expect(try await fixture.photo("good.profile").normalizationState == .normalized)

        // Rejected photos are not picked up again unless asked for.
        #expect(try await fixture.service.queue(account: nil).jobIDs.isEmpty)
        #expect(try await fixture.service.queue(account: nil, includeRejected: true).jobIDs.count == 3)
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

        // Even a job queued by hand for a finished photo stops at validate.
        _ = try await fixture.services.enqueue(try PhotoJobs.normalizeRequest(photoID: "ada.profile"))
        let drained = try await fixture.drain()
        #expect(drained.succeeded == 1)
        let latest = try #require(try await fixture.jobs(photo: "ada.profile").first)
        #expect(try await fixture.stepNames(ofJob: latest.id) == ["validate"])
        #expect(try await fixture.service.result(ofJob: latest.id)?.outcome == .upToDate)
        #expect(try ["ada", "grace"].map { try fixture.blobStamps($0) } == before)
    }

    @Test(arguments: Backend.allCases)
    func aRecipeChangeRendersAgainFromTheStoredJPEGAndDeletesTheOldOne(_ backend: Backend) async throws { try await aRecipeChangeRendersAgainFromTheStoredJPEGAndDeletesTheOldOne(store: try await backend.makeStore()) }

    private func aRecipeChangeRendersAgainFromTheStoredJPEGAndDeletesTheOldOne(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.heic)
        try await fixture.normalizeAll()
        let first = try await fixture.photo("ada.profile")

        let changed = try fixture.withPhotosSection("  output_max_side: 512\n  recipe_version: 3")
        let (queued, summary) = try await changed.normalizeAll()
        #expect(queued.recipe == "v3-s512-q85" && queued.jobIDs.count == 1)
        #expect(summary.normalized == 1)
        let second = try await changed.photo("ada.profile")
        #expect(second.recipeVersion == 3)
        #expect(second.blobKey == PhotoJobs.renderedKey(
            accountID: "ada", photoID: "ada.profile", recipe: try PhotoNormalizationService(services: changed.services).policy,
            inputSHA256: first.sha256))
        try await IndependentReader.expectNormalized(try await changed.blobs.readAll(key: second.blobKey), side: 512)
        // Only the current rendering is left.
        #expect(try fixture.blobStamps("ada").keys.filter { $0.hasPrefix("profile-photos/") }
            == ["profile-photos/ada.profile/" + (second.blobKey as NSString).lastPathComponent])

        // The old recipe version is "older", never "newer": v1 workers find nothing to do.
        #expect(try await fixture.service.queue(account: nil).jobIDs.isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func anAccountInItsPurgeIsLeftToThePurge(_ backend: Backend) async throws { try await anAccountInItsPurgeIsLeftToThePurge(store: try await backend.makeStore()) }

    private func anAccountInItsPurgeIsLeftToThePurge(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("leaving", upload: try PhotoUpload.heic, state: .purging)
        #expect(try await fixture.service.queue(account: nil).jobIDs.isEmpty)
        let error = await lifecycleError { _ = try await fixture.service.queue(account: "leaving") }
        #expect(error?.category == .noSuchAccount)

        // A job queued before the purge began finds the account going and touches nothing.
        _ = try await fixture.services.enqueue(try PhotoJobs.normalizeRequest(photoID: "leaving.profile"))
        _ = try await fixture.drain()
        let job = try #require(try await fixture.jobs(photo: "leaving.profile").first)
        #expect(try await fixture.service.result(ofJob: job.id)?.outcome == .gone)
        #expect(try await fixture.photo("leaving.profile").normalizationState == .pending)
        #expect(try fixture.blobStamps("leaving").keys.sorted() == ["photos/leaving-p1", "photos/leaving.profile"])
    }

    @Test(arguments: Backend.allCases)
    func aMissingUploadKillsTheJobWithAMessageThatSaysWhatToDo(_ backend: Backend) async throws { try await aMissingUploadKillsTheJobWithAMessageThatSaysWhatToDo(store: try await backend.makeStore()) }

    private func aMissingUploadKillsTheJobWithAMessageThatSaysWhatToDo(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.heic)
        try await fixture.blobs.delete(keys: [BlobKey.photo(accountID: "ada", photoID: "ada.profile")])
        let (_, summary) = try await fixture.normalizeAll()
        #expect(summary.failed == 1 && !summary.allFinished)
        let failure = try #require(summary.problems.first)
        #expect(failure.outcome == .failed)
        #expect(failure.reason?.contains("its blob accounts/ada/photos/ada.profile is missing") == true)
        #expect(failure.reason?.contains("lifecycle jobs retry") == true)
        #expect(try await fixture.photo("ada.profile").normalizationState == .pending)
    }

    @Test(arguments: Backend.allCases)
    func oneAccountOnlyAndUnknownAccounts(_ backend: Backend) async throws { try await oneAccountOnlyAndUnknownAccounts(store: try await backend.makeStore()) }

    private func oneAccountOnlyAndUnknownAccounts(store: some LifecycleStore) async throws {
        let fixture = try PhotoFixture(store: store)
        try await fixture.addAccount("ada", upload: try PhotoUpload.heic)
        try await fixture.addAccount("grace", upload: try PhotoUpload.png)
        let (queued, summary) = try await fixture.normalizeAll(account: "ada@example.com")
        #expect(queued.jobIDs.count == 1 && summary.normalized == 1)
        #expect(try await fixture.photo("ada.profile").normalizationState == .normalized)
        #expect(try await fixture.photo("grace.profile").normalizationState == .pending)
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
        let job = try PolicyBook(jobsDirectory: photoJobsDirectory).policy(for: PhotoJobs.normalizeKind)
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
        _ = try await outOfRange.services.enqueue(try PhotoJobs.normalizeRequest(photoID: "ada.profile"))
        let drained = try await outOfRange.drain()
        #expect(drained.retrying == 1)
        #expect(try await outOfRange.photo("ada.profile").normalizationState == .pending)
    }
}
