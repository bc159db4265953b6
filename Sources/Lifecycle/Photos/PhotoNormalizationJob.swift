import Crypto
import Dispatch
import Foundation
import Imaging
import JobRunner

/// Turns one uploaded profile photo into the product's form (square, at most
/// 1024², sRGB JPEG q85, no metadata) and removes the upload. Four steps, each
/// safe to run again after a crash:
///
/// 1. `validate` — reads the upload and checks its header (size, type by content,
///    dimensions) without decoding pixels. A refused photo is marked `rejected`
///    with the reason and the job ends there, successfully: a bad upload is an
///    outcome, not a failure to retry.
/// 2. `render` — runs the recipe and stores the JPEG under a key derived from the
///    upload's SHA-256 and the recipe, so a repeat writes identical bytes to the
///    same key. Damage only a full decode finds (a truncated file) is refused here.
/// 3. `switch` — points the photo row at the rendered JPEG, in the transaction that
///    records the step: the app sees the upload or the JPEG, never neither.
/// 4. `delete-original` — deletes the upload, so no original with its GPS tags
///    stays on the server. Deleting a deleted key changes nothing.
/// 5. `retire-replaced` — a photo uploaded over an earlier one (the API's upload) ends
///    that one: if this photo is the account's profile photo, the rows of its other
///    profile photos go, in the transaction that records the step, with their keys in
///    its output; if a newer upload has replaced this one meanwhile, it is this row that
///    goes. A retired photo's own job, if still running, finds its row gone and removes
///    what it rendered (the `switch` step's abandoned path).
/// 6. `delete-replaced` — deletes the blobs step 5 recorded.
///
/// One photo per job keeps memory bounded however many photos are queued: a
/// worker holds at most its concurrency's worth of photos at once.
struct PhotoNormalizationJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<PhotoPolicy, any Error>

    var kind: JobKind<Store.Transaction> {
        JobKind(name: PhotoJobs.normalizeKind, steps: [
            JobStep("validate", external: validate),
            JobStep("render", external: render),
            JobStep("switch", database: switchToRendered),
            JobStep("delete-original", external: deleteOriginal),
            JobStep("retire-replaced", database: retireReplaced),
            JobStep("delete-replaced", external: deleteReplaced),
        ])
    }

    // MARK: 1. validate

    /// Reads only; its one write (a rejection) sets the same state and reason
    /// however often it runs, because the same bytes are refused for the same reason.
    private func validate(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let photoID = try context.payload(PhotoPayload.self).photo
        let (photo, account) = try await services.store.read { tx in
            let photo = try tx.photo(id: photoID)
            let live = try photo.map { try tx.account(id: $0.accountID) != nil && Self.isLive(try tx.subject(key: $0.accountID)) } ?? false
            return (photo, live)
        }
        guard let photo, photo.role == .profile, account else {
            // Purged (or being purged) since the job was queued: the purge removes the upload.
            return try .output(Validation(end: .init(reason: .gone)), finishesJob: true)
        }
        if photo.normalizationState == .normalized, (photo.recipeVersion ?? 0) >= policy.recipeVersion {
            return try .output(Validation(end: .init(reason: .upToDate)), finishesJob: true)
        }
        guard let stored = try await services.blobs.info(key: photo.blobKey) else {
            // Replaced by a newer upload since it was read: that upload's job removed it.
            if try await services.store.read({ tx in try tx.photo(id: photoID) }) == nil {
                return try .output(Validation(end: .init(reason: .gone)), finishesJob: true)
            }
            throw PermanentJobFailure(
                "profile photo \(photo.id) of account \(photo.accountID): its blob \(photo.blobKey) is missing, so there is nothing to normalise; restore the upload and `lifecycle jobs retry \(context.job.id)` (Jobs/runbooks/photos.md)")
        }
        let original = Original(accountID: photo.accountID, key: photo.blobKey, bytes: stored.size)
        // Refused by its size before reading it: a huge blob is never loaded.
        if stored.size > Int64(policy.maxInputBytes) {
            return try await refuse(.tooLarge(byteCount: Int(clamping: stored.size), limit: policy.maxInputBytes), photo: photo, context: context)
        }
        let bytes = try await services.blobs.readAll(key: photo.blobKey)
        // Outside the refusal below: a missing libvips (or, for a HEIC, HEIF module) fails
        // this attempt, not the upload.
        try PhotoNormalizer.requireLibrary(for: bytes)
        let header: PhotoInfo
        do {
            header = try PhotoNormalizer(policy: policy).inspect(bytes)
        } catch {
            return try await refuse(error, photo: photo, context: context)
        }
        var accepted = original
        accepted.format = header.format.rawValue
        accepted.width = header.width
        accepted.height = header.height
        accepted.orientation = header.orientation
        return try .output(Validation(original: accepted))
    }

    // MARK: 2. render

    /// Deterministic: the key comes from the bytes read here and the recipe, and the
    /// recipe gives equal output for equal input, so a repeat overwrites the blob with
    /// itself. The blob store writes to a temporary name and renames: a crash leaves
    /// the whole JPEG or none.
    private func render(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let photoID = try context.payload(PhotoPayload.self).photo
        guard let original = try context.output(of: "validate", as: Validation.self)?.original else {
            throw PermanentJobFailure("job \(context.job.id): the validate step recorded no upload to render; `lifecycle jobs show \(context.job.id)`")
        }
        guard let bytes = try await readUpload(original, photoID: photoID, job: context.job.id) else {
            return try .output(Rendering(end: .init(reason: .gone)), finishesJob: true)
        }
        let inputSHA256 = FileDigest.hex(SHA256.hash(data: bytes))
        try PhotoNormalizer.requireLibrary(for: bytes)
        let outcome = await offTheCooperativePool { () -> Result<NormalizedPhoto, PhotoRejection> in
            Result { () throws(PhotoRejection) in try PhotoNormalizer(policy: policy).normalize(bytes) }
        }
        let normalized: NormalizedPhoto
        switch outcome {
        case .success(let photo): normalized = photo
        case .failure(let rejection):
            guard let photo = try await services.store.read({ tx in try tx.photo(id: photoID) }) else {
                return try .output(Rendering(end: .init(reason: .gone)), finishesJob: true)
            }
            return try await refuse(rejection, photo: photo, context: context)
        }
        // A job resumed here can find the account's purge begun since `validate` while the
        // upload is not yet deleted: a JPEG written now would land under the prefix the purge
        // is deleting and fail its check that nothing is left. Looked at just before the
        // write, the window is the write alone.
        guard try await photoIsLive(photoID, accountID: original.accountID) else {
            return try .output(Rendering(end: .init(reason: .gone)), finishesJob: true)
        }
        let key = PhotoJobs.renderedKey(accountID: original.accountID, photoID: photoID, recipe: policy, inputSHA256: inputSHA256)
        let stored = try await services.blobs.put(key: key, data: normalized.jpegData)
        let rendered = RenderedPhoto(
            blobKey: key, byteSize: stored.size, sha256: FileDigest.hex(SHA256.hash(data: normalized.jpegData)),
            recipeVersion: policy.recipeVersion)
        context.progress("\(photoID) rendered \(normalized.width)×\(normalized.height)")
        return try .output(Rendering(rendered: rendered, side: normalized.width, recipe: policy.recipeIdentifier, inputSHA256: inputSHA256))
    }

    // MARK: 3. switch

    /// A database step: the row change and the step's done-mark commit together, so
    /// the switch happens exactly once. The photo keeps its id, so the account's
    /// `profile_photo_id` needs no change.
    private func switchToRendered(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let photoID = try context.payload(PhotoPayload.self).photo
        guard let original = try context.output(of: "validate", as: Validation.self)?.original,
              let rendered = try context.output(of: "render", as: Rendering.self)?.rendered else {
            throw PermanentJobFailure("job \(context.job.id): validate or render recorded no output; `lifecycle jobs show \(context.job.id)`")
        }
        // The account's row is locked first (PostgreSQL: FOR UPDATE), then the photo read:
        // a newer upload's job retiring this photo holds the same lock, so the photo read
        // here is never one it has just deleted.
        guard let account = try tx.account(id: original.accountID), Self.isLive(try tx.lockSubject(key: account.id, now: context.now)),
              let photo = try tx.photo(id: photoID) else {
            // The account went into its purge meanwhile, or a newer upload retired this
            // photo: leave the rows, and let the next step remove the JPEG this job added.
            return try .output(Switch(abandoned: true))
        }
        guard photo.blobKey == original.key else {
            throw PermanentJobFailure(
                "profile photo \(photoID) now points at \(photo.blobKey), not the upload \(original.key) this job rendered; nothing was switched. Normalise it again with `lifecycle photos normalize --account \(photo.accountID)`")
        }
        try tx.switchToRendered(photoID: photoID, rendered: rendered)
        return try .output(Switch(abandoned: false))
    }

    // MARK: 4. delete-original

    /// Idempotent: the blob store treats deleting a missing key as done.
    private func deleteOriginal(_ context: StepContext) async throws -> StepResult {
        guard let original = try context.output(of: "validate", as: Validation.self)?.original,
              let rendered = try context.output(of: "render", as: Rendering.self)?.rendered,
              let switched = try context.output(of: "switch", as: Switch.self) else {
            throw PermanentJobFailure("job \(context.job.id): an earlier step recorded no output; `lifecycle jobs show \(context.job.id)`")
        }
        // After an abandoned switch the upload is still the photo's blob (the purge takes
        // it); the rendered JPEG is the blob nobody points at.
        if switched.abandoned {
            try await services.blobs.delete(keys: [rendered.blobKey])
            return try .output(Cleanup(deleted: rendered.blobKey))
        }
        guard original.key != rendered.blobKey else { return .done }
        try await services.blobs.delete(keys: [original.key])
        return try .output(Cleanup(deleted: original.key))
    }

    // MARK: 5. retire-replaced

    private func retireReplaced(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let photoID = try context.payload(PhotoPayload.self).photo
        guard let original = try context.output(of: "validate", as: Validation.self)?.original,
              try context.output(of: "switch", as: Switch.self)?.abandoned == false else {
            return try .output(Retired(account: nil, photos: [], keys: []))
        }
        // Account first, under its lock, as in `switch`.
        guard let account = try tx.account(id: original.accountID), Self.isLive(try tx.lockSubject(key: account.id, now: context.now)),
              let photo = try tx.photo(id: photoID) else {
            return try .output(Retired(account: original.accountID, photos: [], keys: []))
        }
        let profiles = try tx.photos(accountID: account.id).filter { $0.role == .profile }
        let retired: [PhotoRecord]
        if account.profilePhotoID == photoID {
            retired = profiles.filter { $0.id != photoID }
        } else if let current = account.profilePhotoID, profiles.first(where: { $0.id == current })?.normalizationState == .normalized {
            // Replaced, and the replacement is done: this one is no longer wanted. While the
            // replacement is pending (or was rejected) this one stays, so the account keeps a
            // photo; the replacement's own job retires it when it succeeds.
            retired = [photo]
        } else {
            retired = []
        }
        try tx.deletePhotos(ids: retired.map(\.id))
        return try .output(Retired(account: account.id, photos: retired.map(\.id), keys: retired.map(\.blobKey)))
    }

    // MARK: 6. delete-replaced

    private func deleteReplaced(_ context: StepContext) async throws -> StepResult {
        guard let retired = try context.output(of: "retire-replaced", as: Retired.self) else {
            throw PermanentJobFailure("job \(context.job.id): retire-replaced recorded no output; `lifecycle jobs show \(context.job.id)`")
        }
        // Only files under the account's own prefix: a row naming another account's file
        // must never have this job delete it.
        guard let account = retired.account else { return .done }
        let owned = retired.keys.filter { BlobKey.isSafe($0) && $0.hasExactPrefix(BlobKey.accountPrefix(account)) }
        if !owned.isEmpty { try await services.blobs.delete(keys: owned) }
        return .done
    }

    // MARK: - Helpers

    /// Not in its purge, by lifecycle's record of its deletion (none: active). Taken with
    /// the record's lock in a write, which the purge's first step takes too: a switch either
    /// lands before the purge begins (and the purge erases what it wrote) or sees it begun.
    private static func isLive(_ record: SubjectRecord?) -> Bool {
        [.active, .pendingDeletion].contains(record?.state ?? .active)
    }

    /// The upload, or nil when it is gone because the account's purge has begun. The
    /// upload is deleted only after the switch, so a missing one is otherwise a fault.
    /// Whether the photo still exists and its account is not in its purge.
    private func photoIsLive(_ photoID: String, accountID: String) async throws -> Bool {
        try await services.store.read { tx in
            try tx.photo(id: photoID) != nil && [.active, .pendingDeletion].contains(try tx.deletionState(key: accountID))
        }
    }

    private func readUpload(_ original: Original, photoID: String, job: JobID) async throws -> Data? {
        if try await services.blobs.info(key: original.key) != nil {
            return try await services.blobs.readAll(key: original.key)
        }
        guard try await photoIsLive(photoID, accountID: original.accountID) else { return nil }
        throw PermanentJobFailure(
            "profile photo \(photoID): its upload \(original.key) disappeared after validation; restore it and `lifecycle jobs retry \(job)` (Jobs/runbooks/photos.md)")
    }

    /// Marks the photo rejected and ends the job successfully. The reason leads with
    /// the rejection code, which names the message the uploader saw.
    private func refuse(_ rejection: PhotoRejection, photo: PhotoRecord, context: StepContext) async throws -> StepResult {
        let reason = "\(rejection.code): \(rejection.operatorDetail)"
        try await services.store.write { tx in try tx.markRejected(photoID: photo.id, reason: reason) }
        context.logger.notice("profile photo rejected", metadata: [
            "photo": "\(photo.id)", "account": "\(photo.accountID)", "reason": "\(reason)",
        ])
        let refusal = Refusal(code: "\(rejection.code)", userMessage: rejection.userMessage, detail: rejection.operatorDetail)
        let upload = Original(accountID: photo.accountID, key: photo.blobKey, bytes: photo.byteSize)
        return try .output(Validation(end: .init(reason: .rejected, refusal: refusal), original: upload), finishesJob: true)
    }
}

// MARK: - Step outputs (small JSON kept with each finished step)

/// How a job that ended before its last step ended.
struct PhotoJobEnd: Codable, Sendable {
    enum Reason: String, Codable, Sendable {
        /// The photo was refused; its row says why.
        case rejected
        /// Already normalised under this recipe version: nothing rendered.
        case upToDate = "up-to-date"
        /// The photo or its account is gone (or being purged).
        case gone
    }

    var reason: Reason
    var refusal: Refusal?
}

struct Refusal: Codable, Sendable {
    var code: String
    var userMessage: String
    var detail: String
}

/// The upload as validate found it.
struct Original: Codable, Sendable {
    var accountID: String
    var key: String
    var bytes: Int64
    var format: String?
    var width: Int?
    var height: Int?
    var orientation: Int?
}

/// Output of `validate`. A refusal in `render` records the same shape, which
/// `Rendering` also decodes: both carry the end under `end`.
struct Validation: Codable, Sendable {
    var end: PhotoJobEnd?
    var original: Original?
}

struct Rendering: Codable, Sendable {
    var end: PhotoJobEnd?
    var rendered: RenderedPhoto?
    var side: Int?
    var recipe: String?
    var inputSHA256: String?
}

struct Switch: Codable, Sendable {
    var abandoned: Bool
}

struct Cleanup: Codable, Sendable {
    var deleted: String
}

struct Retired: Codable, Sendable {
    var account: String?
    var photos: [String]
    var keys: [String]
}
