import Crypto
import Dispatch
import Foundation
import Imaging
import JobRunner

/// Normalises the profile photo an app keeps in a column (the map's `profile_photo:`; the
/// reference app's `accounts.profile_photo_key`) with the product's recipe: square, at most
/// 1024², sRGB JPEG q85, no metadata. One photo per job keeps memory bounded however many
/// are queued. Steps, each safe to run again after a crash:
///
/// 1. `load-map` — reads the map and the catalog in every attempt, for the database step.
/// 2. `validate` — checks the upload's size and header without decoding pixels; a refusal
///    is recorded (an outcome, not a failure to retry).
/// 3. `render` — runs the recipe and stores the JPEG under a key from the recipe and the
///    upload's SHA-256 (a repeat writes the same bytes to the same key); damage only a
///    full decode finds is a refusal too.
/// 4. `switch` — a database step, under the account's lock: her column goes from the upload
///    to the JPEG, compare-and-set, so the app sees one or the other; a refused upload gives
///    the column back the photo it replaced. An app that changed the column meanwhile wins:
///    nothing is switched, and the JPEG goes.
/// 5. `delete-files` — the files step 4 let go (the upload, the photo it replaced, or an
///    abandoned JPEG), each only if no row of the map still names it.
struct ColumnPhotoJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<PhotoPolicy, any Error>
    let appData: AppDataCache

    var normalizeKind: JobKind<Store.Transaction> {
        JobKind(name: PhotoJobs.normalizeColumnKind, steps: [
            JobStep("load-map", external: loadMap, runsEveryAttempt: true),
            JobStep("validate", external: validate),
            JobStep("render", external: render),
            JobStep("switch", database: switchColumn),
            JobStep("delete-files", external: deleteFiles),
        ])
    }

    /// Deletes a removed photo's file ("Remove Photo"), once no row names it.
    var deleteFileKind: JobKind<Store.Transaction> {
        JobKind(name: PhotoJobs.deleteFileKind, steps: [
            JobStep("delete-file", external: { context in
                let payload = try context.payload(ColumnPhotoPayload.self)
                let deleted = try await deleteUnnamed([payload.upload], context: context)
                return try .output(Let(delete: [payload.upload], deleted: deleted))
            }),
        ])
    }

    struct Checked: Codable, Sendable {
        var refusal: Refusal?
        /// Her column no longer names the upload (replaced or removed since), or her account is being purged.
        var gone: Bool?
        /// The file is already a JPEG of this recipe version or a later one: nothing to render.
        var upToDate: Bool?
        var bytes: Int64?
        /// The upload's format and size, from its header.
        var format: String?
        var width: Int?
        var height: Int?
    }

    struct Rendered: Codable, Sendable {
        var refusal: Refusal?
        var key: String?
        var side: Int?
        var bytes: Int64?
        var gone: Bool?
    }

    /// What `switch` did, and the files it let go.
    struct Let: Codable, Sendable {
        var outcome: String?
        var delete: [String]
        var deleted: [String]?
    }

    // MARK: 1. load-map

    private func loadMap(_ context: StepContext) async throws -> StepResult {
        _ = try await appData.appData(services)
        return StepResult(output: nil, recorded: false)
    }

    private func data() throws -> AppData {
        guard let data = appData.loadedAppData, data.plan.profilePhoto != nil else {
            throw PermanentJobFailure("the data map has no `profile_photo:` any more, so there is no column to normalise the photo in")
        }
        return data
    }

    // MARK: 2. validate

    private func validate(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let payload = try context.payload(ColumnPhotoPayload.self)
        guard try await isCurrent(payload, now: context.now) else { return try await gone(payload, Checked(gone: true), context: context) }
        if ColumnProfilePhotos<Store>.isRendered(payload.upload, prefix: try data().plan.profilePhoto!.prefix, policy: policy) {
            return try .output(Checked(upToDate: true), finishesJob: true)
        }
        guard let stored = try await services.blobs.info(key: payload.upload) else {
            throw PermanentJobFailure(
                "account \(payload.account)'s photo upload \(BlobKey.quoted(payload.upload)) is missing from the blob store, so there is nothing to normalise; restore it and `lifecycle jobs retry \(context.job.id)` (Jobs/runbooks/photos.md)")
        }
        if stored.size > Int64(policy.maxInputBytes) {
            return try .output(Checked(refusal: Self.refusal(PhotoRejection.tooLarge(byteCount: Int(clamping: stored.size), limit: policy.maxInputBytes)), bytes: stored.size))
        }
        let bytes = try await services.blobs.readAll(key: payload.upload)
        try PhotoNormalizer.requireLibrary(for: bytes)
        let header: PhotoInfo
        do {
            header = try PhotoNormalizer(policy: policy).inspect(bytes)
        } catch {
            return try .output(Checked(refusal: Self.refusal(error), bytes: stored.size))
        }
        return try .output(Checked(bytes: stored.size, format: header.format.rawValue, width: header.width, height: header.height))
    }

    // MARK: 3. render

    private func render(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let payload = try context.payload(ColumnPhotoPayload.self)
        if let refusal = try context.output(of: "validate", as: Checked.self)?.refusal { return try .output(Rendered(refusal: refusal)) }
        guard try await services.blobs.info(key: payload.upload) != nil else {
            guard try await isCurrent(payload, now: context.now) else { return try await gone(payload, Rendered(gone: true), context: context) }
            throw PermanentJobFailure(
                "account \(payload.account)'s photo upload \(BlobKey.quoted(payload.upload)) disappeared after validation; restore it and `lifecycle jobs retry \(context.job.id)`")
        }
        let bytes = try await services.blobs.readAll(key: payload.upload)
        try PhotoNormalizer.requireLibrary(for: bytes)
        let outcome = await offTheCooperativePool { () -> Result<NormalizedPhoto, PhotoRejection> in
            Result { () throws(PhotoRejection) in try PhotoNormalizer(policy: policy).normalize(bytes) }
        }
        let normalized: NormalizedPhoto
        switch outcome {
        case .success(let photo): normalized = photo
        case .failure(let rejection): return try .output(Rendered(refusal: Self.refusal(rejection)))
        }
        // Looked at just before the write: a JPEG written for an account whose purge began
        // would land after the purge took her files.
        guard try await isCurrent(payload, now: context.now) else { return try await gone(payload, Rendered(gone: true), context: context) }
        let place = try data().plan.profilePhoto!
        let digest = FileDigest.hex(SHA256.hash(data: bytes))
        let key = place.prefix + BlobKey.segment(forID: payload.account) + "/\(policy.recipeIdentifier)-\(digest.prefix(16)).jpg"
        _ = try await services.blobs.put(key: key, data: normalized.jpegData)
        context.progress("\(payload.account) rendered \(normalized.width)×\(normalized.height)")
        return try .output(Rendered(key: key, side: normalized.width, bytes: Int64(normalized.jpegData.count)))
    }

    // MARK: 4. switch

    private func switchColumn(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let payload = try context.payload(ColumnPhotoPayload.self)
        guard let rendered = try context.output(of: "render", as: Rendered.self) else {
            throw PermanentJobFailure("job \(context.job.id): render recorded no output; `lifecycle jobs show \(context.job.id)`")
        }
        let data = try data()
        let directory = AccountDirectory<Store>(data: data)
        // Her lock first, as the upload and the purge's first step take it.
        let live = try directory.entry(id: payload.account, in: tx, locking: true, now: context.now)
            .map { $0.state == .active || $0.state == .pendingDeletion } ?? false
        let sql = data.sql
        if let refusal = rendered.refusal {
            context.logger.notice("profile photo rejected", metadata: ["account": "\(payload.account)", "reason": "\(refusal.code): \(refusal.detail)"])
            // The photo the upload replaced comes back, unless it is itself an upload no job
            // has settled (uploads sent one over another): its job found itself replaced and
            // ended, so it goes with this one, and she is left with no photo.
            let place = data.plan.profilePhoto!
            let previousUpload = payload.replaces.map { ColumnProfilePhotos<Store>.isUpload($0, prefix: place.prefix) } ?? false
            let back: SQLValue = previousUpload ? place.empty.sqlValue : payload.replaces.map(SQLValue.text) ?? place.empty.sqlValue
            let restored = live ? try tx.execute(sql.replaceProfilePhoto(key: payload.account, from: .text(payload.upload), to: back)) : 0
            try tx.recordAudit(AuditEvent(
                at: context.now, actor: "lifecycle", action: "photo.normalize", accountID: payload.account, outcome: "rejected",
                detail: [
                    "code": .string(refusal.code), "user_message": .string(refusal.userMessage), "job": .int(context.job.id),
                    "photo": .string(ColumnProfilePhotos<Store>.photoID(ofKey: payload.upload)),
                    // What her column holds now: the app API reports this refusal while it does.
                    "key": .string(restored == 1 ? back.text ?? "" : ""),
                ]))
            let letGo = [payload.upload] + (previousUpload && restored == 1 ? [payload.replaces!] : [])
            return try .output(Let(outcome: restored == 1 && back != place.empty.sqlValue ? "rejected, previous photo put back" : "rejected", delete: letGo))
        }
        guard let key = rendered.key else {
            throw PermanentJobFailure("job \(context.job.id): render recorded no JPEG; `lifecycle jobs show \(context.job.id)`")
        }
        guard live, try tx.execute(sql.replaceProfilePhoto(key: payload.account, from: .text(payload.upload), to: .text(key))) == 1 else {
            // Replaced, removed or purged meanwhile: whoever changed it owns the upload's fate.
            return try .output(Let(outcome: "abandoned", delete: key == payload.upload ? [] : [key]))
        }
        // What the app API reports of her photo (ColumnProfilePhotos.state) is read from the trail.
        try tx.recordAudit(AuditEvent(
            at: context.now, actor: "lifecycle", action: "photo.normalize", accountID: payload.account, outcome: "normalized",
            detail: [
                "job": .int(context.job.id), "photo": .string(ColumnProfilePhotos<Store>.photoID(ofKey: payload.upload)), "key": .string(key),
                "side": .int(rendered.side ?? 0),
            ]))
        return try .output(Let(outcome: "normalized", delete: [payload.upload] + (payload.replaces.map { [$0] } ?? []).filter { $0 != key }))
    }

    // MARK: 5. delete-files

    private func deleteFiles(_ context: StepContext) async throws -> StepResult {
        guard var done = try context.output(of: "switch", as: Let.self) else {
            throw PermanentJobFailure("job \(context.job.id): switch recorded no output; `lifecycle jobs show \(context.job.id)`")
        }
        done.deleted = try await deleteUnnamed(done.delete, context: context)
        return try .output(done)
    }

    // MARK: - Helpers

    /// Deletes each of `keys` no row of the map names in any file column (the same file can
    /// be another row's), never one of lifecycle's own, and checks it gone.
    private func deleteUnnamed(_ keys: [String], context: StepContext) async throws -> [String] {
        let data = try await appData.appData(services)
        let sql = data.sql
        let blobs = services.blobs
        let candidates = keys.filter { !$0.isEmpty && !BlobKey.isLifecycleOwn($0) && blobs.keyProblem($0) == nil }
        guard !candidates.isEmpty else { return [] }
        let named = try await services.store.read { tx in try sql.namedFiles(candidates, in: tx) }
        let doomed = candidates.filter { !named.contains(ExactText($0)) }
        try await blobs.delete(keys: doomed)
        for key in doomed where try await blobs.info(key: key) != nil {
            throw BlobStoreError("the blob store still has \(BlobKey.quoted(key)) after deleting it; the job will try again")
        }
        return doomed
    }

    /// Ends a job whose upload her column no longer names (replaced, removed, or her account
    /// purged): the photo the upload replaced goes all the same, unless a row names it, since
    /// nobody else will take it (a newer upload replaced this one, not that).
    private func gone<Output: Encodable>(_ payload: ColumnPhotoPayload, _ output: Output, context: StepContext) async throws -> StepResult {
        if let replaced = payload.replaces { _ = try await deleteUnnamed([replaced], context: context) }
        return try .output(output, finishesJob: true)
    }

    /// Her column still names the upload, and her account is not being purged.
    private func isCurrent(_ payload: ColumnPhotoPayload, now: Date) async throws -> Bool {
        let data = try await appData.appData(services)
        let directory = AccountDirectory<Store>(data: data)
        return try await services.store.read { tx in
            guard let entry = try directory.entry(id: payload.account, in: tx, locking: false, now: now),
                  entry.state == .active || entry.state == .pendingDeletion else { return false }
            return try ColumnProfilePhotos<Store>.current(payload.account, sql: data.sql, in: tx) == .text(payload.upload)
        }
    }

    private static func refusal(_ error: any Error) -> Refusal {
        let rejection = error as? PhotoRejection ?? .corrupt("\(error)")
        return Refusal(code: "\(rejection.code)", userMessage: rejection.userMessage, detail: rejection.operatorDetail)
    }
}

/// A refused upload, as a step records it: the code, the message the uploader is shown and
/// the detail for operators.
struct Refusal: Codable, Sendable {
    var code: String
    var userMessage: String
    var detail: String
}
