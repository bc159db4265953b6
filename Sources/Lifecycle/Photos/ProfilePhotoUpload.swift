import Foundation
import Imaging
import JobRunner

/// A new profile photo from the app (the API's upload). The bytes arrive already checked
/// for size and type by content (the two refusals the uploader sees at once) and staged in
/// a private file; here they are stored, and one transaction adds the photo row, makes it
/// the account's profile photo and queues its normalisation, so a photo is never stored
/// without its job. The photo it replaces is removed by that job once the new one is
/// settled (PhotoNormalizationJob, `retire-replaced`), never before: until then the app
/// still has a picture, and an export running meanwhile re-reads what changed.
public struct ProfilePhotoUpload<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    private let cache: AppDataCache

    /// `cache`: a server's, kept between requests; without it each call reads the data map and catalog again.
    public init(services: LifecycleServices<Store>, cache: AppDataCache = AppDataCache()) {
        self.services = services
        self.cache = cache
    }

    public struct Accepted: Sendable, Encodable {
        public var account: String
        public var photoID: String
        public var jobID: JobID
        public var bytes: Int64
        public var contentType: String
        public var state: String

        enum CodingKeys: String, CodingKey {
            case account, photoID = "photo_id", jobID = "job_id", bytes, contentType = "content_type", state
        }
    }

    /// The most a photo may be, from Jobs/policies/photos.yaml (the product says 10 MB).
    public func maxBytes() throws -> Int { try PhotoPolicy(policies: services.policies).maxInputBytes }

    /// Refusals for an account that cannot take a photo now, before a byte is read.
    public func checkAccount(_ reference: AccountReference) async throws -> String {
        let directory = try await services.directory(cache: cache)
        // An app's map must say where the photo goes before a byte of it is read.
        if !directory.isReferenceApp { _ = try await ColumnProfilePhotos(services: services, cache: cache).place() }
        let now = services.clock.now()
        return try await services.store.read { tx in
            guard let id = try directory.find(reference, in: tx), let entry = try directory.entry(id: id, in: tx, locking: false, now: now) else {
                throw LifecycleError.noSuchAccount(reference)
            }
            try Self.refuseUnlessActive(entry.id, entry.state)
            return entry.id
        }
    }

    /// Stores the staged file (moving it) and records the photo. A failure after the blob
    /// was written removes it again: nothing half-done stays.
    public func accept(account accountID: String, staged: StagedPhotoUpload) async throws -> Accepted {
        guard StagedPhotoUpload.acceptedContentTypes.contains(staged.contentType) else {
            throw PhotoRejection.unsupportedType("content is \(staged.contentType)")
        }
        let directory = try await services.directory(cache: cache)
        guard directory.isReferenceApp else {
            return try await ColumnProfilePhotos(services: services, cache: cache).accept(account: accountID, staged: staged)
        }
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
                try Self.refuseUnlessActive(entry.id, entry.state)
                let photo = PhotoRecord(
                    id: photoID, accountID: accountID, entryID: nil, role: .profile, blobKey: key, contentType: staged.contentType,
                    byteSize: stored.size, sha256: staged.sha256, takenAt: nil, createdAt: now, normalizationState: .pending)
                _ = try tx.insertPhoto(photo)
                try tx.setProfilePhoto(accountID: accountID, photoID: photoID, now: now)
                let job = try store.enqueue(try PhotoJobs.normalizeRequest(photoID: photoID), policy: policy, now: now, in: tx).job
                try tx.recordAudit(AuditEvent(
                    at: now, actor: "app", action: "photo.upload", accountID: accountID, outcome: "queued",
                    detail: ["photo": .string(photoID), "bytes": .int(Int(stored.size)), "content_type": .string(staged.contentType), "job": .int(job.id)]))
                return Accepted(
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
    public func remove(account reference: AccountReference) async throws -> ColumnProfilePhotos<Store>.Removed {
        let directory = try await services.directory(cache: cache)
        guard directory.isReferenceApp else { return try await ColumnProfilePhotos(services: services, cache: cache).remove(account: reference) }
        let policy = try services.policies.policy(for: PhotoJobs.deleteFileKind)
        let now = services.clock.now()
        let store = services.store
        return try await store.write { tx in
            guard let id = try directory.find(reference, in: tx), let entry = try directory.entry(id: id, in: tx, locking: true, now: now) else {
                throw LifecycleError.noSuchAccount(reference)
            }
            try Self.refuseUnlessActive(entry.id, entry.state)
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

    /// The account's profile photo as the app API shows it: the reference app's photo row,
    /// or what the trail says of the latest upload to the map's column.
    public static func state(of accountID: String, directory: AccountDirectory<Store>, in tx: Store.Transaction) throws -> ProfilePhotoState? {
        guard directory.isReferenceApp else { return try ColumnProfilePhotos<Store>.state(of: accountID, data: directory.data, in: tx) }
        guard let photo = try tx.account(id: accountID)?.profilePhotoID.flatMap({ try tx.photo(id: $0) }) else { return nil }
        let state = photo.normalizationState ?? .pending
        return ProfilePhotoState(
            photoID: photo.id, state: state, message: state == .rejected ? PhotoRejection.userMessage(forReason: photo.normalizationReason ?? "") : nil)
    }

    static func refuseUnlessActive(_ id: String, _ state: AccountState) throws {
        switch state {
        case .active: return
        case .pendingDeletion:
            throw LifecycleError(.permissionDenied, "account \(id) is scheduled for deletion; sign in again to restore it before changing the profile photo")
        case .purging, .purged:
            throw LifecycleError(.noSuchAccount, "account \(id) is deleted (\(state.rawValue))")
        }
    }
}

/// An upload's bytes in a private file, with what was learnt while writing it.
public struct StagedPhotoUpload: Sendable {
    /// The file types the product accepts, by content: "JPG, PNG, or HEIC".
    public static var acceptedContentTypes: Set<String> { ["image/jpeg", "image/png", "image/heic"] }

    public var path: String
    public var size: Int64
    public var sha256: String
    public var contentType: String

    public init(path: String, size: Int64, sha256: String, contentType: String) {
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.contentType = contentType
    }
}
