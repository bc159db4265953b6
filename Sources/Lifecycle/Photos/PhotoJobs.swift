import Dispatch
import Foundation
import Imaging
import JobRunner

public enum PhotoJobs {
    /// Normalises a profile photo in the column the data map names (ColumnPhotoJob.swift).
    public static let normalizeColumnKind = "photos.normalize-column"
    /// Deletes a removed profile photo's file once no row names it (ColumnPhotoJob.swift).
    public static let deleteFileKind = "photos.delete-file"

    public static func kinds<Store: LifecycleStore>(for services: LifecycleServices<Store>) -> [JobKind<Store.Transaction>] {
        let policy = Result { try PhotoPolicy(policies: services.policies) }
        let column = ColumnPhotoJob(services: services, policy: policy, appData: AppDataCache())
        return [column.normalizeKind, column.deleteFileKind]
    }

    /// One live job per upload, whatever the recipe version: the job reads the recipe when
    /// it runs, so a job queued before a recipe change renders under the new one, and the
    /// upload, import, `photos normalize` and overlapping runs all find the same job.
    public static func normalizeRequest(account: String, upload: String, replaces: String?) throws -> EnqueueRequest {
        try EnqueueRequest(
            kind: normalizeColumnKind, payload: ColumnPhotoPayload(account: account, upload: upload, replaces: replaces), uniqueKey: "photo:\(upload)")
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
