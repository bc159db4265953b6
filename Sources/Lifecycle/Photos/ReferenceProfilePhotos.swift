import Foundation
import Imaging
import JobRunner

/// The reference app's profile photo: a row of its photos table that `accounts.profile_photo_id`
/// names, normalised by PhotoNormalizationJob, which also retires the photo it replaced.
struct ReferenceProfilePhotos<Store: LifecycleStore>: ProfilePhotoPlace {
    let services: LifecycleServices<Store>
    let directory: AccountDirectory<Store>

    /// Stores the staged file (moving it) and records the photo. A failure after the blob
    /// was written removes it again: nothing half-done stays.
    func accept(account accountID: String, staged: StagedPhotoUpload) async throws -> ProfilePhotoUpload<Store>.Accepted {
        let policy = try services.policies.policy(for: PhotoJobs.normalizeKind)
        let photoID = "\(accountID).profile-\(UUID().uuidString.lowercased().prefix(13))"
        let key = BlobKey.photo(accountID: accountID, photoID: photoID)
        let stored = try await services.blobs.put(key: key, fromFile: staged.path, moving: true)
        let now = services.clock.now()
        let store = services.store
        do {
            return try await store.write { tx in
                guard let entry = try directory.entry(id: accountID, in: tx, locking: true, now: now) else {
                    throw LifecycleError.noSuchAccount(accountID)
                }
                // Checked again under the account's lock: a purge that began meanwhile wins.
                try ProfilePhotoUpload<Store>.refuseUnlessActive(entry.id, entry.state)
                let photo = PhotoRecord(
                    id: photoID, accountID: accountID, entryID: nil, role: .profile, blobKey: key, contentType: staged.contentType,
                    byteSize: stored.size, sha256: staged.sha256, takenAt: nil, createdAt: now, normalizationState: .pending)
                _ = try tx.insertPhoto(photo)
                try tx.setProfilePhoto(accountID: accountID, photoID: photoID, now: now)
                let job = try store.enqueue(try PhotoJobs.normalizeRequest(photoID: photoID), policy: policy, now: now, in: tx).job
                try tx.recordAudit(AuditEvent(
                    at: now, actor: "app", action: "photo.upload", accountID: accountID, outcome: "queued",
                    detail: ["photo": .string(photoID), "bytes": .int(Int(stored.size)), "content_type": .string(staged.contentType), "job": .int(job.id)]))
                return .init(
                    account: accountID, photoID: photoID, jobID: job.id, bytes: stored.size, contentType: staged.contentType,
                    state: NormalizationState.pending.rawValue)
            }
        } catch {
            // Removed only when the row is known absent: a commit whose answer was lost may
            // have landed, and then the file is the photo's.
            let absent = (try? await store.read { tx in try tx.photo(id: photoID) == nil }) ?? false
            if absent { try? await services.blobs.delete(keys: [key]) }
            throw error
        }
    }

    /// "Remove Photo": the account has no profile photo from this commit on, and the
    /// file's deletion is queued with it (a job per file, so a crash never leaves one).
    func remove(account reference: AccountReference) async throws -> ColumnProfilePhotos<Store>.Removed {
        let policy = try services.policies.policy(for: PhotoJobs.deleteFileKind)
        let now = services.clock.now()
        let store = services.store
        return try await store.write { tx in
            guard let id = try directory.find(reference, in: tx), let entry = try directory.entry(id: id, in: tx, locking: true, now: now) else {
                throw LifecycleError.noSuchAccount(reference)
            }
            try ProfilePhotoUpload<Store>.refuseUnlessActive(entry.id, entry.state)
            // A replacement still pending is her photo-to-be: it goes too.
            let photos = try tx.photos(accountID: id).filter { $0.role == .profile }
            guard try tx.account(id: id)?.profilePhotoID != nil || !photos.isEmpty else {
                return .init(account: id, removed: false, jobID: nil)
            }
            try tx.setProfilePhoto(accountID: id, photoID: nil, now: now)
            try tx.deletePhotos(ids: photos.map(\.id))
            var jobs: [JobID] = []
            for key in Set(photos.map(\.blobKey)).sorted() {
                let payload = ColumnPhotoPayload(account: id, upload: key, replaces: nil)
                jobs.append(try store.enqueue(try EnqueueRequest(kind: PhotoJobs.deleteFileKind, payload: payload), policy: policy, now: now, in: tx).job.id)
            }
            try tx.recordAudit(AuditEvent(
                at: now, actor: "app", action: "photo.remove", accountID: id, outcome: "queued",
                detail: ["photos": .array(photos.map { .string($0.id) }), "jobs": .array(jobs.map { .int($0) })]))
            return .init(account: id, removed: true, jobID: jobs.first)
        }
    }

    /// Her photo row's normalisation state.
    func state(of accountID: String, data: AppData, in tx: Store.Transaction) throws -> ProfilePhotoState? {
        guard let photo = try tx.account(id: accountID)?.profilePhotoID.flatMap({ try tx.photo(id: $0) }) else { return nil }
        let state = photo.normalizationState ?? .pending
        return ProfilePhotoState(
            photoID: photo.id, state: state, message: state == .rejected ? PhotoRejection.userMessage(forReason: photo.normalizationReason ?? "") : nil)
    }

    /// Its photos table is its own schema's: always there.
    func requireReady() async throws {}
}
