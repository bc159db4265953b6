import Foundation
import Lifecycle
import ObjectStorage

public enum BlobLocation {
    /// A blob store from its location: an `s3://` URL or a directory. A wrong location or
    /// missing credentials is `.badConfiguration`; a store that cannot be reached is
    /// `.unavailable`, found out before any work starts rather than half-way through a job.
    /// Messages name the setting as the CLI spells it (`--blobs`, `LIFECYCLE_BLOBS`).
    /// Refuses a location that cannot work, without touching it: an unknown scheme, a
    /// malformed `s3://` location, missing credentials. Checked before anything is opened,
    /// so a mistyped option is a usage error whatever else is wrong.
    public static func validate(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard S3Location.looksLikeLocation(text) else {
            if let scheme = text.range(of: "://").map({ text[..<$0.lowerBound] }), !scheme.contains("/") {
                throw LifecycleError(.badConfiguration, "--blobs '\(text)': '\(scheme)://' is not a blob store this tool knows; use a directory or s3://bucket/prefix?endpoint=URL&region=NAME")
            }
            return
        }
        do {
            _ = try S3Location(parsing: text, environment: environment)
            _ = try AWSCredentials.fromEnvironment(environment)
        } catch let error as S3ConfigurationError {
            throw LifecycleError(.badConfiguration, "--blobs / LIFECYCLE_BLOBS: \(error.message)")
        }
    }

    public static func open(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> any BlobStore {
        try validate(text, environment: environment)
        guard S3Location.looksLikeLocation(text) else {
            do {
                return try FileSystemBlobStore(root: text)
            } catch {
                throw LifecycleError(.unavailable, "cannot use blob directory \(text): \(error.localizedDescription)")
            }
        }
        let store: S3BlobStore
        do {
            store = try S3BlobStore(location: try S3Location(parsing: text, environment: environment), credentials: try AWSCredentials.fromEnvironment(environment))
        } catch let error as S3ConfigurationError {
            throw LifecycleError(.badConfiguration, "--blobs / LIFECYCLE_BLOBS: \(error.message)")
        }
        do {
            try await store.checkAvailable()
        } catch let error as BlobStoreError {
            throw LifecycleError(.unavailable, "blob store \(store.location.description): \(error.message)")
        }
        return store
    }
}
