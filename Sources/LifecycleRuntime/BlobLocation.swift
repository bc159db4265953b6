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
    public static func validate(
        _ text: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        option: String = "--blobs", variable: String = "LIFECYCLE_BLOBS"
    ) throws {
        guard S3Location.looksLikeLocation(text) else {
            if let scheme = text.range(of: "://").map({ text[..<$0.lowerBound] }), !scheme.contains("/") {
                throw LifecycleError(.badConfiguration, "\(option) '\(text)': '\(scheme)://' is not a blob store this tool knows; use a directory or s3://bucket/prefix?endpoint=URL&region=NAME")
            }
            return
        }
        do {
            _ = try S3Location(parsing: text, environment: environment)
            _ = try AWSCredentials.fromEnvironment(environment)
        } catch let error as S3ConfigurationError {
            throw LifecycleError(.badConfiguration, "\(option) / \(variable): \(error.message)")
        }
    }

    /// Refuses an export location that is the blob store or lies inside it: an app that
    /// serves its files from there (Django's `MEDIA_URL`, a public Storage bucket) would hand
    /// any archive to whoever asks, past its link's signature and expiry.
    public static func requireApart(exports: String, blobs: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let refusal = LifecycleError(.badConfiguration, """
            --exports / LIFECYCLE_EXPORTS '\(exports)' is inside the blob store '\(blobs)' (--blobs / LIFECYCLE_BLOBS), \
            where an app may serve files to anyone: export archives must live apart from it. Choose a folder (or S3 prefix) \
            outside it; nothing was changed
            """)
        switch (S3Location.looksLikeLocation(exports), S3Location.looksLikeLocation(blobs)) {
        case (false, false):
            func resolved(_ path: String) -> String {
                URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
            }
            let (inner, outer) = (resolved(exports), resolved(blobs))
            if inner == outer || inner.hasPrefix(outer.hasSuffix("/") ? outer : outer + "/") { throw refusal }
            // Spelling is not identity: a symlink to the blob store under a path that does
            // not exist yet, a bind mount, a second name for it. Any existing folder on the
            // way from the export location up to / that is the blob store's folder (same
            // device and inode) puts the archives inside it.
            guard let store = fileIdentity(blobs) else { return }
            var folder = URL(fileURLWithPath: exports).standardizedFileURL
            while true {
                if fileIdentity(folder.path) == store { throw refusal }
                let parent = folder.deletingLastPathComponent()
                if parent.path == folder.path { break }
                folder = parent
            }
        case (true, true):
            guard let inner = try? S3Location(parsing: exports, environment: environment),
                  let outer = try? S3Location(parsing: blobs, environment: environment), inner.endpoint == outer.endpoint else { return }
            // One bucket per folder: every bucket of that server is the app's.
            if outer.bucket == S3Location.bucketPerFolder || inner.bucket == S3Location.bucketPerFolder { throw refusal }
            guard inner.bucket == outer.bucket else { return }
            if outer.prefix.isEmpty || inner.prefix == outer.prefix || inner.prefix.hasPrefix(outer.prefix + "/") { throw refusal }
        default:
            return
        }
    }

    /// A folder's device and inode, following symlinks; nil when it does not exist.
    private static func fileIdentity(_ path: String) -> [UInt64]? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return [UInt64(status.st_dev), UInt64(status.st_ino)]
    }

    public static func open(
        _ text: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        option: String = "--blobs", variable: String = "LIFECYCLE_BLOBS"
    ) async throws -> any BlobStore {
        try validate(text, environment: environment, option: option, variable: variable)
        guard S3Location.looksLikeLocation(text) else {
            do {
                return try FileSystemBlobStore(root: text)
            } catch {
                throw LifecycleError(.unavailable, "\(option) / \(variable): cannot use directory \(text): \(error.localizedDescription)")
            }
        }
        let store: S3BlobStore
        do {
            let location = try S3Location(parsing: text, environment: environment)
            if location.bucket == S3Location.bucketPerFolder {
                // Its buckets are the keys' first folders: each is reached, and checked by its
                // answer, when a key first names it.
                return S3BucketPerFolderStore(template: location, credentials: try AWSCredentials.fromEnvironment(environment), environment: environment)
            }
            store = try S3BlobStore(location: location, credentials: try AWSCredentials.fromEnvironment(environment))
        } catch let error as S3ConfigurationError {
            throw LifecycleError(.badConfiguration, "\(option) / \(variable): \(error.message)")
        }
        do {
            try await store.checkAvailable()
        } catch let error as BlobStoreError {
            throw LifecycleError(.unavailable, "blob store \(store.location.description): \(error.message)")
        }
        return store
    }
}

extension LifecycleServices {
    /// Where an export archive's key lives, for an operator to find it: a file's path, or
    /// the s3:// location of an object; nil for a store that cannot say.
    public func exportLocation(of key: String) -> String? {
        (try? (exports as? FileSystemBlobStore)?.path(for: key)) ?? (exports as? S3BlobStore)?.describe(key: key)
    }
}
