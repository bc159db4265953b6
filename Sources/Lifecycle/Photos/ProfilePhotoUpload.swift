import Foundation
import Imaging
import JobRunner

/// A new profile photo from the app (the API's upload), its removal and its state. The
/// bytes arrive already checked for size and type by content (the two refusals the
/// uploader sees at once) and staged in a private file; here they are stored where the
/// column the map's `profile_photo:` names (ColumnProfilePhotos), in one transaction with the job that
/// normalises them, so a photo is never stored without its job. The photo it replaces is
/// removed by that job once the new one is settled, never before: until then the app
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
        // The map must say where the photo goes before a byte of it is read.
        _ = try await photos.place()
        let now = services.clock.now()
        return try await services.store.read { tx in
            guard let id = try directory.find(reference, in: tx), let entry = try directory.entry(id: id, in: tx, locking: false, now: now) else {
                throw LifecycleError.noSuchAccount(reference)
            }
            try Self.refuseUnlessActive(entry.id, entry.state)
            return entry.id
        }
    }

    /// Where the map keeps her photo: the column `profile_photo:` names.
    private var photos: ColumnProfilePhotos<Store> { ColumnProfilePhotos(services: services, cache: cache) }

    /// Stores the staged file (moving it) and makes it her photo, with its normalisation job,
    /// in one transaction; a type the product does not take is refused there. A failure after
    /// the file was stored removes it again: nothing half-done stays.
    public func accept(account accountID: String, staged: StagedPhotoUpload) async throws -> Accepted {
        try await photos.accept(account: accountID, staged: staged)
    }

    /// "Remove Photo": the account has no profile photo from this commit on, and the
    /// file's deletion is queued with it (a job per file, so a crash never leaves one).
    public func remove(account reference: AccountReference) async throws -> ColumnProfilePhotos<Store>.Removed {
        try await photos.remove(account: reference)
    }

    /// The account's profile photo as the app API shows it: `pending`, `normalized`, or
    /// `rejected` with the message for the uploader; nil when there is none to speak of.
    public func state(of accountID: String, directory: AccountDirectory<Store>, in tx: Store.Transaction) throws -> ProfilePhotoState? {
        try ColumnProfilePhotos<Store>.state(of: accountID, data: directory.data, in: tx)
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
