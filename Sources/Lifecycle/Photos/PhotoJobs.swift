import Dispatch
import Foundation
import Imaging
import JobRunner

public enum PhotoJobs {
    /// Normalises one profile photo (PhotoNormalizationJob.swift).
    public static let normalizeKind = "photos.normalize"
    /// Normalises a profile photo an app keeps in a column (ColumnPhotoJob.swift).
    public static let normalizeColumnKind = "photos.normalize-column"
    /// Deletes a removed profile photo's file once no row names it (ColumnPhotoJob.swift).
    public static let deleteFileKind = "photos.delete-file"

    public static func kinds<Store: LifecycleStore>(for services: LifecycleServices<Store>) -> [JobKind<Store.Transaction>] {
        let policy = Result { try PhotoPolicy(policies: services.policies) }
        let column = ColumnPhotoJob(services: services, policy: policy, appData: AppDataCache())
        return [PhotoNormalizationJob(services: services, policy: policy).kind, column.normalizeKind, column.deleteFileKind]
    }

    /// One live job per photo, whatever the recipe version: the job reads the recipe
    /// when it runs, so a job queued before a recipe change renders under the new one,
    /// and import, `photos normalize` and overlapping runs all find the same job.
    public static func uniqueKey(photoID: String) -> String { "photo:\(photoID)" }

    public static func normalizeRequest(photoID: String) throws -> EnqueueRequest {
        try EnqueueRequest(kind: normalizeKind, payload: PhotoPayload(photo: photoID), uniqueKey: uniqueKey(photoID: photoID))
    }

    /// Where the rendered JPEG of a photo lives: under the account's prefix (purge
    /// removes it with the rest), named by the recipe and the SHA-256 of the bytes it
    /// was rendered from. The same input under the same recipe always lands on the
    /// same key, so a render repeated after a crash rewrites the same blob. A folder
    /// per photo keeps every segment short, however long the photo id.
    public static func renderedKey(accountID: String, photoID: String, recipe: PhotoPolicy, inputSHA256: String) -> String {
        "accounts/\(accountID)/profile-photos/\(BlobKey.segment(forID: photoID))/\(recipe.recipeIdentifier)-\(inputSHA256.prefix(16)).jpg"
    }
}

/// The recipe is synchronous and CPU-bound (about 0.1 s for a 12 MP JPEG, more for
/// HEIC). Run on a Dispatch thread, it leaves the cooperative pool's threads — one per
/// core — free for heartbeats and the other job's database work.
func offTheCooperativePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global(qos: .userInitiated).async { continuation.resume(returning: body()) }
    }
}

/// A normalisation job's payload: only the photo id, so the queue holds no personal data.
public struct PhotoPayload: Codable, Sendable, Equatable {
    public var photo: String

    public init(photo: String) { self.photo = photo }
}

extension PhotoPolicy {
    public static let sectionName = "photos"

    /// The `photos:` section of Jobs/policies/photos.yaml; a missing key keeps Imaging's default.
    public init(policies: PolicyBook) throws {
        let section = try policies.section(Self.sectionName)
        try section.requireOnly(["max_input_bytes", "max_side", "max_pixels", "output_max_side", "jpeg_quality", "recipe_version"])
        let defaults = PhotoPolicy()
        self.init(
            maxInputBytes: try section.int("max_input_bytes", default: defaults.maxInputBytes, in: 1...1_073_741_824),
            maxSide: try section.int("max_side", default: defaults.maxSide, in: 1...1_000_000),
            maxPixels: try section.int("max_pixels", default: defaults.maxPixels, in: 1...10_000_000_000),
            outputMaxSide: try section.int("output_max_side", default: defaults.outputMaxSide, in: 1...16_384),
            jpegQuality: try section.int("jpeg_quality", default: defaults.jpegQuality, in: 1...100),
            recipeVersion: try section.int("recipe_version", default: defaults.recipeVersion, in: 1...1_000_000))
    }
}
