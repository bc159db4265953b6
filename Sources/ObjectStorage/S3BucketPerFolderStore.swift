import Foundation
import Lifecycle
import Synchronization

/// Blobs on a server that keeps one bucket per first folder of a key (`s3://*?endpoint=…`):
/// Supabase Storage's S3 protocol, where each Storage bucket is an S3 bucket and an
/// object's name is its key there. The app's rows (and `storage.objects`' `bucket_id` and
/// `name`) name `avatars/<uid>/photo.png`; it lives in bucket `avatars` as `<uid>/photo.png`.
/// Each bucket gets its own `S3BlobStore`, made the first time a key names it.
public final class S3BucketPerFolderStore: BlobStore, Sendable {
    public let template: S3Location
    private let credentials: AWSCredentials
    private let options: S3BlobStore.Options
    private let environment: [String: String]
    private let state = Mutex(State())

    private struct State {
        var stores: [String: S3BlobStore] = [:]
        /// Buckets seen to exist: a bucket is not removed under a running purge.
        var existing: Set<String> = []
    }

    public init(
        template: S3Location, credentials: AWSCredentials, options: S3BlobStore.Options = S3BlobStore.Options(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.template = template
        self.credentials = credentials
        self.options = options
        self.environment = environment
    }

    /// The bucket a key names, the store for it and the key inside it.
    private func route(_ key: String) throws -> (bucket: String, store: S3BlobStore, key: String) {
        if let problem = keyProblem(key) { throw BlobStoreError.invalidKey(key, problem) }
        let slash = key.firstIndex(of: "/")!
        let bucket = String(key[..<slash])
        return (bucket, try store(for: bucket), String(key[key.index(after: slash)...]))
    }

    private func store(for bucket: String) throws -> S3BlobStore {
        try state.withLock { state in
            if let store = state.stores[bucket] { return store }
            var location = template
            location.bucket = bucket
            location.prefix = ""
            let store = try S3BlobStore(location: location, credentials: credentials, options: options, environment: environment)
            state.stores[bucket] = store
            return store
        }
    }

    private func exists(_ bucket: String, _ store: S3BlobStore) async throws -> Bool {
        if state.withLock({ $0.existing.contains(bucket) }) { return true }
        guard try await store.bucketExists() else { return false }
        _ = state.withLock { $0.existing.insert(bucket) }
        return true
    }

    /// A key needs a first folder that is a bucket name, and a rest the bucket's store takes.
    public func keyProblem(_ key: String) -> String? {
        if let problem = BlobKey.problem(key) { return problem }
        guard let slash = key.firstIndex(of: "/") else {
            return "with one bucket per folder (s3://*) a key's first folder names its bucket, and this key has none"
        }
        let bucket = key[..<slash]
        guard S3Location.isValidBucketName(String(bucket)) else {
            return "its first folder '\(bucket)' names its bucket (s3://*), and is not a valid bucket name"
        }
        return nil
    }

    public func describe(key: String) -> String {
        guard let (_, store, inner) = try? route(key) else { return "s3://\(key)" }
        return store.describe(key: inner)
    }

    public func put(key: String, fromFile path: String, moving: Bool) async throws -> BlobInfo {
        let (bucket, store, inner) = try route(key)
        return Self.outer(bucket, try await store.put(key: inner, fromFile: path, moving: moving))
    }

    public func put(key: String, data: Data) async throws -> BlobInfo {
        let (bucket, store, inner) = try route(key)
        return Self.outer(bucket, try await store.put(key: inner, data: data))
    }

    public func info(key: String) async throws -> BlobInfo? {
        let (bucket, store, inner) = try route(key)
        return try await store.info(key: inner).map { Self.outer(bucket, $0) }
    }

    public func read(key: String, chunkSize: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) async throws {
        let (_, store, inner) = try route(key)
        try await store.read(key: inner, chunkSize: chunkSize, body)
    }

    /// Lists inside one bucket: the prefix names it (`avatars/<uid>/`). A prefix that names
    /// none would list every bucket on the server, which this store does not do.
    public func list(prefix: String, after: String?, limit: Int) async throws -> [BlobInfo] {
        guard let slash = prefix.firstIndex(of: "/"), S3Location.isValidBucketName(String(prefix[..<slash])) else {
            throw BlobStoreError("listing '\(prefix)' would span buckets: with one bucket per folder (s3://*) a listing names its bucket as the prefix's first folder")
        }
        let bucket = String(prefix[..<slash])
        let store = try store(for: bucket)
        // A folder that is not there holds nothing: lifecycle's own `accounts/<id>/`, which
        // no Storage bucket is, lists empty rather than failing every purge.
        guard try await exists(bucket, store) else { return [] }
        let innerAfter = after.flatMap { $0.hasPrefix(bucket + "/") ? String($0.dropFirst(bucket.count + 1)) : nil }
        return try await store.list(prefix: String(prefix[prefix.index(after: slash)...]), after: innerAfter, limit: limit)
            .map { Self.outer(bucket, $0) }
    }

    public func delete(keys: [String]) async throws {
        var byBucket: [String: [String]] = [:]
        for key in keys {
            let (bucket, _, inner) = try route(key)
            byBucket[bucket, default: []].append(inner)
        }
        for (bucket, inner) in byBucket.sorted(by: { $0.key < $1.key }) { try await store(for: bucket).delete(keys: inner) }
    }

    /// Within one bucket, as a publish step moves an archive beside itself.
    public func move(from: String, to: String) async throws {
        let (source, store, fromInner) = try route(from)
        let (destination, _, toInner) = try route(to)
        guard source == destination else {
            throw BlobStoreError("cannot move '\(from)' to '\(to)': with one bucket per folder (s3://*) a move stays in its bucket")
        }
        try await store.move(from: fromInner, to: toInner)
    }

    public var downloadURLLifetimeLimit: TimeInterval? { TimeInterval(SigV4Signer.maximumPresignedLifetime) }

    public func downloadURL(key: String, expiresAt: Date, now: Date) throws -> String? {
        let (_, store, inner) = try route(key)
        return try store.downloadURL(key: inner, expiresAt: expiresAt, now: now)
    }

    private static func outer(_ bucket: String, _ info: BlobInfo) -> BlobInfo { BlobInfo(key: bucket + "/" + info.key, size: info.size) }
}
