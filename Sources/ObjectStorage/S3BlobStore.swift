import Crypto
import Foundation
import JobRunner
import Lifecycle

/// Photos and export archives in an S3-compatible bucket, under an optional key prefix.
///
/// Memory stays bounded whatever a blob's size: uploads above `multipartThreshold` go
/// up in parts of `partSize` read from the file one at a time, reads are ranged GETs of
/// at most `readWindow` bytes each.
public struct S3BlobStore: BlobStore {
    public struct Options: Sendable, Equatable {
        /// Files larger than this go up as multipart uploads (default 16 MiB).
        public var multipartThreshold: Int64 = 16 << 20
        /// Bytes per uploaded part (default 16 MiB). S3 wants at least 5 MiB for every part
        /// but the last and at most 10,000 parts, so it grows for very large files.
        public var partSize: Int64 = 16 << 20
        /// Bytes fetched per ranged GET while reading (default 8 MiB).
        public var readWindow: Int = 8 << 20
        /// Objects larger than this are copied part by part (S3's single copy stops at 5 GiB).
        public var copyThreshold: Int64 = 5 << 30
        /// Bytes per copied part for large objects (default 512 MiB).
        public var copyPartSize: Int64 = 512 << 20
        public var retry = S3RetryPolicy()
        /// Seconds one request may stay silent before it counts as failed (default 120).
        public var requestTimeout: TimeInterval = 120

        public init() {}
    }

    public static let minimumPartSize: Int64 = 5 << 20
    public static let maximumParts: Int64 = 10_000
    /// Keys per DeleteObjects call: S3's limit.
    public static let deleteBatchSize = 1_000

    public let location: S3Location
    public let options: Options
    private let client: S3Client

    /// `environment` names the HTTP proxy to use, if any (`https_proxy`, `no_proxy`, …).
    public init(
        location: S3Location, credentials: AWSCredentials, options: Options = Options(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        guard options.partSize >= Self.minimumPartSize, options.copyPartSize >= Self.minimumPartSize else {
            throw S3ConfigurationError("S3 part sizes must be at least 5 MiB (S3 refuses smaller parts)")
        }
        guard options.readWindow > 0, options.multipartThreshold > 0 else {
            throw S3ConfigurationError("S3 read window and multipart threshold must be positive")
        }
        self.location = location
        self.options = options
        self.client = try S3Client(location: location, credentials: credentials, retry: options.retry, requestTimeout: options.requestTimeout,
            environment: environment)
    }

    // MARK: Keys

    private func objectKey(_ key: String) throws -> String {
        if let problem = BlobKey.problem(key) { throw BlobStoreError.invalidKey(key, problem) }
        return keyPrefix + key
    }

    private var keyPrefix: String { location.prefix.isEmpty ? "" : location.prefix + "/" }

    /// Where an operator finds the blob with the AWS tools: `s3://bucket/prefix/key`.
    public func describe(key: String) -> String { client.describe(key: keyPrefix + key) }

    // MARK: Bucket

    /// Checks that the endpoint answers, the bucket exists and the credentials may use it,
    /// so a command fails at once with the reason instead of half-way through a job.
    public func checkAvailable() async throws {
        let response = try await client.send("HEAD", key: nil, operation: "HEAD bucket", attempts: 2)
        switch response.status {
        case 200..<300: return
        case 404: throw BlobStoreError("bucket '\(location.bucket)' does not exist at \(client.origin): create it (e.g. `aws s3 mb s3://\(location.bucket)`), or fix --blobs / LIFECYCLE_BLOBS")
        case 301, 400: throw BlobStoreError("bucket '\(location.bucket)' answered HTTP \(response.status) at \(client.origin): check the region in --blobs (…?region=)")
        case 401, 403: throw BlobStoreError("access to bucket '\(location.bucket)' at \(client.origin) is denied (HTTP \(response.status)): check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the key's policy")
        default: throw client.failure(response, operation: "HEAD bucket", key: nil)
        }
    }

    /// Whether the bucket is there (HEAD answers 404 when it is not); any other refusal throws.
    public func bucketExists() async throws -> Bool {
        let response = try await client.send("HEAD", key: nil, operation: "HEAD bucket", attempts: 2)
        if response.status == 404 { return false }
        guard (200..<300).contains(response.status) else { throw client.failure(response, operation: "HEAD bucket", key: nil) }
        return true
    }

    /// Creates the bucket unless it exists: for first-time set-up and tests.
    public func createBucketIfMissing() async throws {
        if (try? await checkAvailable()) != nil { return }
        var body: Data?
        if location.region != "us-east-1" {
            body = Data("<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>\(location.region)</LocationConstraint></CreateBucketConfiguration>".utf8)
        }
        let response = try await client.send("PUT", key: nil, body: body, operation: "CreateBucket")
        guard response.isSuccess || response.errorCode == "BucketAlreadyOwnedByYou" else {
            throw client.failure(response, operation: "CreateBucket", key: nil)
        }
    }

    // MARK: Put

    public func put(key: String, fromFile path: String, moving: Bool) async throws -> BlobInfo {
        let objectKey = try objectKey(key)
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let size = (attributes[.size] as? NSNumber)?.int64Value else {
            throw BlobStoreError("cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BlobStoreError("cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        if size <= options.multipartThreshold {
            let data = try handle.readToEnd() ?? Data()
            guard Int64(data.count) == size else { throw BlobStoreError("'\(path)' changed size while it was being stored as '\(key)'") }
            try await putObject(objectKey, data: data)
        } else {
            try await multipartUpload(objectKey, from: handle, size: size, path: path)
        }
        // Moving only lets a local store rename; here the local file stays for its owner to remove.
        return BlobInfo(key: key, size: size)
    }

    public func put(key: String, data: Data) async throws -> BlobInfo {
        try await putObject(try objectKey(key), data: data)
        return BlobInfo(key: key, size: Int64(data.count))
    }

    private func putObject(_ objectKey: String, data: Data) async throws {
        let response = try await client.send(
            "PUT", key: objectKey, headers: [("Content-MD5", Data(Insecure.MD5.hash(data: data)).base64EncodedString())],
            body: data, operation: "PUT")
        guard response.isSuccess else { throw client.failure(response, operation: "PUT", key: objectKey) }
    }

    /// Parts are sent one after another, so at most one part is in memory. A failure
    /// aborts the upload: S3 keeps (and bills) the parts of an upload nobody completes.
    private func multipartUpload(_ objectKey: String, from handle: FileHandle, size: Int64, path: String) async throws {
        let partSize = Self.partSize(for: size, preferred: options.partSize)
        let uploadID = try await createMultipartUpload(objectKey)
        do {
            var parts: [(number: Int, etag: String)] = []
            var offset: Int64 = 0
            while offset < size {
                let data = try handle.read(upToCount: Int(min(partSize, size - offset))) ?? Data()
                guard !data.isEmpty else { throw BlobStoreError("'\(path)' became shorter while it was being stored as '\(objectKey)'") }
                let number = parts.count + 1
                let response = try await client.send(
                    "PUT", key: objectKey, query: [("partNumber", String(number)), ("uploadId", uploadID)],
                    headers: [("Content-MD5", Data(Insecure.MD5.hash(data: data)).base64EncodedString())],
                    body: data, operation: "UploadPart \(number)")
                guard response.isSuccess, let etag = response.headers["etag"] else {
                    throw client.failure(response, operation: "UploadPart \(number)", key: objectKey)
                }
                parts.append((number, etag))
                offset += Int64(data.count)
            }
            guard try handle.read(upToCount: 1)?.isEmpty ?? true else {
                throw BlobStoreError("'\(path)' grew while it was being stored as '\(objectKey)'")
            }
            try await completeMultipartUpload(objectKey, uploadID: uploadID, parts: parts)
        } catch {
            await abortMultipartUpload(objectKey, uploadID: uploadID)
            throw error
        }
    }

    /// The part size for a file of `size` bytes: the preferred one unless 10,000 parts of it cannot hold the file.
    public static func partSize(for size: Int64, preferred: Int64) -> Int64 {
        let needed = (size + maximumParts - 1) / maximumParts
        let mebibyte: Int64 = 1 << 20
        return max(preferred, minimumPartSize, (needed + mebibyte - 1) / mebibyte * mebibyte)
    }

    private func createMultipartUpload(_ objectKey: String) async throws -> String {
        let response = try await client.send("POST", key: objectKey, query: [("uploads", "")], operation: "CreateMultipartUpload")
        guard response.isSuccess, let uploadID = XMLElement.parse(response.body)?.value("UploadId"), !uploadID.isEmpty else {
            throw client.failure(response, operation: "CreateMultipartUpload", key: objectKey)
        }
        return uploadID
    }

    private func completeMultipartUpload(_ objectKey: String, uploadID: String, parts: [(number: Int, etag: String)]) async throws {
        let body = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            + parts.map { "<Part><PartNumber>\($0.number)</PartNumber><ETag>\(XMLElement.escape($0.etag))</ETag></Part>" }.joined()
            + "</CompleteMultipartUpload>"
        let response = try await client.send(
            "POST", key: objectKey, query: [("uploadId", uploadID)], headers: [("Content-Type", "application/xml")],
            body: Data(body.utf8), operation: "CompleteMultipartUpload")
        // S3 may answer 200 and still report an error in the body of a long-running completion.
        guard response.isSuccess, XMLElement.parse(response.body)?.name != "Error" else {
            throw client.failure(response, operation: "CompleteMultipartUpload", key: objectKey)
        }
    }

    /// Runs in a task of its own: an upload given up because its job was cancelled must
    /// still be aborted, and a cancelled task would not send the request.
    private func abortMultipartUpload(_ objectKey: String, uploadID: String) async {
        let client = self.client
        await Task.detached {
            _ = try? await client.send("DELETE", key: objectKey, query: [("uploadId", uploadID)], operation: "AbortMultipartUpload")
        }.value
    }

    /// Multipart uploads begun under the store's prefix and neither completed nor aborted.
    public func pendingMultipartUploads() async throws -> [String] {
        let response = try await client.send("GET", key: nil, query: [("uploads", ""), ("prefix", keyPrefix)], operation: "ListMultipartUploads")
        guard response.isSuccess, let root = XMLElement.parse(response.body) else {
            throw client.failure(response, operation: "ListMultipartUploads", key: nil)
        }
        return root.all("Upload").compactMap { $0.value("Key") }
    }

    // MARK: Read

    public func info(key: String) async throws -> BlobInfo? {
        try await head(try objectKey(key)).map { BlobInfo(key: key, size: $0.size) }
    }

    /// Size and ETag (a multipart object's ETag ends in `-<parts>`).
    public func objectMetadata(key: String) async throws -> (size: Int64, etag: String)? {
        try await head(try objectKey(key))
    }

    private func head(_ objectKey: String) async throws -> (size: Int64, etag: String)? {
        let response = try await client.send("HEAD", key: objectKey, operation: "HEAD")
        if response.status == 404 { return nil }
        guard response.isSuccess, let length = response.headers["content-length"].flatMap({ Int64($0) }) else {
            throw client.failure(response, operation: "HEAD", key: objectKey)
        }
        return (length, response.headers["etag"] ?? "")
    }

    /// Ranged GETs pinned to the ETag seen first: a blob replaced half-way through fails
    /// the read instead of mixing two versions.
    public func read(key: String, chunkSize: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) async throws {
        let objectKey = try objectKey(key)
        guard chunkSize > 0 else { throw BlobStoreError("chunk size must be positive (got \(chunkSize))") }
        guard let (size, etag) = try await head(objectKey) else { throw BlobStoreError.notFound(key) }
        let window = Int64(max(chunkSize, options.readWindow / chunkSize * chunkSize))
        var offset: Int64 = 0
        while offset < size {
            let end = min(size, offset + window) - 1
            var headers: [(name: String, value: String)] = [("Range", "bytes=\(offset)-\(end)")]
            if !etag.isEmpty { headers.append(("If-Match", etag)) }
            // A server that ignores Range sends the whole object: only its first end + 1 bytes are kept.
            let response = try await client.send("GET", key: objectKey, headers: headers, operation: "GET", bodyLimit: Int(end) + 1)
            switch response.status {
            case 206, 200:
                break
            case 404:
                throw BlobStoreError.notFound(key)
            case 412:
                throw BlobStoreError("blob '\(key)' was replaced while it was being read; read it again")
            default:
                throw client.failure(response, operation: "GET", key: objectKey)
            }
            // A server that ignores Range sends the whole object with 200: take the part asked for.
            let expected = Int(end - offset + 1)
            let piece = response.status == 200 ? response.body.dropFirst(Int(offset)).prefix(expected) : response.body[...]
            guard piece.count == expected else {
                throw BlobStoreError("S3 GET of '\(key)' returned \(piece.count) bytes for a range of \(expected)")
            }
            try piece.withUnsafeBytes { bytes in
                var start = 0
                while start < bytes.count {
                    let count = min(chunkSize, bytes.count - start)
                    try body(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + count)]))
                    start += count
                }
            }
            offset = end + 1
        }
    }

    // MARK: List

    public func list(prefix: String, after: String?, limit: Int) async throws -> [BlobInfo] {
        guard limit > 0 else { return [] }
        var found: [BlobInfo] = []
        var token: String?
        repeat {
            // URL-encoded keys: XML 1.0 cannot carry every character a key may hold (most
            // control characters), and its parsers turn a carriage return into a line feed.
            var query: [(name: String, value: String)] = [
                ("list-type", "2"), ("prefix", keyPrefix + prefix), ("max-keys", String(min(1_000, limit - found.count))),
                ("encoding-type", "url"),
            ]
            if let token {
                query.append(("continuation-token", token))
            } else if let after {
                query.append(("start-after", keyPrefix + after))
            }
            let response = try await client.send("GET", key: nil, query: query, operation: "ListObjectsV2")
            guard response.isSuccess, let root = XMLElement.parse(response.body) else {
                throw client.failure(response, operation: "ListObjectsV2", key: keyPrefix + prefix)
            }
            let encoded = root.value("EncodingType") == "url"
            for entry in root.all("Contents") {
                guard let listed = entry.value("Key"), let fullKey = encoded ? URIEncoding.decodeListedKey(listed) : listed,
                      fullKey.hasExactPrefix(keyPrefix) else { continue }
                found.append(BlobInfo(key: fullKey.droppingExactPrefix(keyPrefix), size: entry.value("Size").flatMap { Int64($0) } ?? 0))
            }
            token = root.value("IsTruncated") == "true" ? root.value("NextContinuationToken") : nil
        } while token != nil && found.count < limit
        return Array(found.prefix(limit))
    }

    // MARK: Delete

    /// DeleteObjects in batches of 1,000. Keys S3 reports as failed are sent again with
    /// the retry policy's backoff; an absent key counts as deleted, as S3 itself says.
    public func delete(keys: [String]) async throws {
        var objectKeys = try keys.map(objectKey)
        // A key XML 1.0 cannot carry goes in a DELETE of its own; S3 answers 204 whether it was there or not.
        for key in objectKeys where !XMLElement.canCarry(key) {
            let response = try await client.send("DELETE", key: key, operation: "DELETE")
            guard response.isSuccess || response.status == 404 else { throw client.failure(response, operation: "DELETE", key: key) }
        }
        objectKeys.removeAll { !XMLElement.canCarry($0) }
        var start = 0
        while start < objectKeys.count {
            let batch = Array(objectKeys[start..<min(objectKeys.count, start + Self.deleteBatchSize)])
            try await deleteBatch(batch)
            start += batch.count
        }
    }

    private func deleteBatch(_ keys: [String]) async throws {
        var remaining = keys
        var attempt = 0
        while true {
            attempt += 1
            let body = "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
                + remaining.map { "<Object><Key>\(XMLElement.escape($0))</Key></Object>" }.joined() + "</Delete>"
            let data = Data(body.utf8)
            let response = try await client.send(
                "POST", key: nil, query: [("delete", "")],
                headers: [("Content-MD5", Data(Insecure.MD5.hash(data: data)).base64EncodedString()), ("Content-Type", "application/xml")],
                body: data, operation: "DeleteObjects")
            guard response.isSuccess, let root = XMLElement.parse(response.body), root.name != "Error" else {
                throw client.failure(response, operation: "DeleteObjects", key: remaining.first)
            }
            let failed = root.all("Error").compactMap { error -> (key: String, code: String, message: String)? in
                guard let key = error.value("Key") else { return nil }
                return (key, error.value("Code") ?? "", error.value("Message") ?? "")
            }.filter { $0.code != "NoSuchKey" }
            if failed.isEmpty { return }
            guard attempt < client.retry.attempts else {
                let first = failed[0]
                throw BlobStoreError("S3 DeleteObjects left \(failed.count) key(s) after \(attempt) attempt(s), e.g. '\(first.key)': \(first.code) \(first.message)")
            }
            remaining = failed.map(\.key)
            try await Task.sleep(nanoseconds: UInt64(client.retry.delay(afterAttempt: attempt) * 1_000_000_000))
        }
    }

    // MARK: Move

    /// A server-side copy, then the delete of the source. Run again after a crash between
    /// the two, it finds the source gone and the destination there, and is done.
    public func move(from: String, to: String) async throws {
        let source = try objectKey(from)
        let destination = try objectKey(to)
        guard let (size, _) = try await head(source) else {
            if try await head(destination) != nil { return }
            throw BlobStoreError("cannot move blob '\(from)' to '\(to)': '\(from)' does not exist")
        }
        if size > options.copyThreshold {
            try await multipartCopy(from: source, to: destination, size: size)
        } else {
            let response = try await client.send(
                "PUT", key: destination, headers: [("x-amz-copy-source", copySource(source))], operation: "CopyObject")
            // A copy can fail after S3 has sent 200: the error is then in the body.
            guard response.isSuccess, XMLElement.parse(response.body)?.name != "Error" else {
                throw client.failure(response, operation: "CopyObject", key: destination)
            }
        }
        try await deleteBatch([source])
    }

    private func copySource(_ objectKey: String) -> String {
        URIEncoding.encode("/\(location.bucket)/\(objectKey)", keepingSlashes: true)
    }

    private func multipartCopy(from source: String, to destination: String, size: Int64) async throws {
        let partSize = Self.partSize(for: size, preferred: options.copyPartSize)
        let uploadID = try await createMultipartUpload(destination)
        do {
            var parts: [(number: Int, etag: String)] = []
            var offset: Int64 = 0
            while offset < size {
                let end = min(size, offset + partSize) - 1
                let number = parts.count + 1
                let response = try await client.send(
                    "PUT", key: destination, query: [("partNumber", String(number)), ("uploadId", uploadID)],
                    headers: [("x-amz-copy-source", copySource(source)), ("x-amz-copy-source-range", "bytes=\(offset)-\(end)")],
                    operation: "UploadPartCopy \(number)")
                guard response.isSuccess, let root = XMLElement.parse(response.body), root.name != "Error", let etag = root.value("ETag") else {
                    throw client.failure(response, operation: "UploadPartCopy \(number)", key: destination)
                }
                parts.append((number, etag))
                offset = end + 1
            }
            try await completeMultipartUpload(destination, uploadID: uploadID, parts: parts)
        } catch {
            await abortMultipartUpload(destination, uploadID: uploadID)
            throw error
        }
    }

    // MARK: Download links

    public var downloadURLLifetimeLimit: TimeInterval? { TimeInterval(SigV4Signer.maximumPresignedLifetime) }

    /// Signed as of seven days before `expiresAt`, for seven days: the URL stops working at
    /// `expiresAt` exactly, and signing again (a rerun of the link step, `exports list`)
    /// gives the same URL. S3 accepts a signing time in the past; it cannot sign further ahead.
    public func downloadURL(key: String, expiresAt: Date, now: Date) throws -> String? {
        let objectKey = try objectKey(key)
        let lifetime = SigV4Signer.maximumPresignedLifetime
        let expires = expiresAt.timeIntervalSince1970.rounded(.down)
        guard expires - now.timeIntervalSince1970 <= TimeInterval(lifetime) else {
            throw BlobStoreError("an S3 download link lasts at most 7 days, but this one would have to last until \(ISO8601.format(expiresAt)); set export.link_lifetime_days to 7 or less in Jobs/policies/export.yaml")
        }
        return client.presignedGET(key: objectKey, expiresIn: lifetime, signedAt: Date(timeIntervalSince1970: expires - TimeInterval(lifetime)))
    }
}
