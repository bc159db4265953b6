import Foundation
import Lifecycle
import ObjectStorage

/// `--blobs` / LIFECYCLE_BLOBS: an `s3://` location or a directory. A wrong location or
/// missing credentials is a usage error (64); a store that cannot be reached is
/// unavailable (69), found out before any work starts rather than half-way through a job.
func openBlobStore(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> any BlobStore {
    guard S3Location.looksLikeLocation(text) else {
        if let scheme = text.range(of: "://").map({ text[..<$0.lowerBound] }), !scheme.contains("/") {
            throw CLIFailure(.usage, "--blobs '\(text)': '\(scheme)://' is not a blob store this tool knows; use a directory or s3://bucket/prefix?endpoint=URL&region=NAME")
        }
        do {
            return try FileSystemBlobStore(root: text)
        } catch {
            throw CLIFailure(.unavailable, "cannot use blob directory \(text): \(error.localizedDescription)")
        }
    }
    let store: S3BlobStore
    do {
        store = try S3BlobStore(location: try S3Location(parsing: text, environment: environment), credentials: try AWSCredentials.fromEnvironment(environment))
    } catch let error as S3ConfigurationError {
        throw CLIFailure(.usage, "--blobs / LIFECYCLE_BLOBS: \(error.message)")
    }
    do {
        try await store.checkAvailable()
    } catch let error as BlobStoreError {
        throw CLIFailure(.unavailable, "blob store \(store.location.description): \(error.message)")
    }
    return store
}
