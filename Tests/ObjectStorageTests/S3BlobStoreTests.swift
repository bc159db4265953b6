import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Lifecycle
import ObjectStorage
import Synchronization
import Testing

extension S3Tests {
    @Suite struct S3BlobStoreTests {
        @Test func anUnreachableEndpointIsAClearError() async throws {
            var options = S3BlobStore.Options()
            options.retry = S3RetryPolicy(attempts: 2, initialDelay: 0.01, maximumDelay: 0.02)
            let port = try MotoServer.freePort()
            let store = try S3BlobStore(
                location: S3Location(bucket: "nowhere", endpoint: URL(string: "http://127.0.0.1:\(port)")),
                credentials: MotoServer.credentials, options: options)
            await #expect {
                try await store.checkAvailable()
            } throws: { error in
                let message = "\(error)"
                return error is BlobStoreError && message.contains("127.0.0.1:\(port)") && message.contains("connection refused")
            }
            await #expect(throws: BlobStoreError.self) { _ = try await store.put(key: "a/b", data: Data("x".utf8)) }
        }

        @Test func aMissingBucketIsNamed() async throws {
            let server = try MotoServer.require()
            let store = try S3BlobStore(
                location: S3Location(bucket: "no-such-bucket-\(UUID().uuidString.prefix(8).lowercased())", endpoint: server.endpoint),
                credentials: MotoServer.credentials)
            await #expect {
                try await store.checkAvailable()
            } throws: { error in
                "\(error)".contains("does not exist")
            }
        }

        @Test func thePrefixKeepsInstallationsApartInOneBucket() async throws {
            let server = try MotoServer.require()
            let first = try await server.makeStore(prefix: "one")
            let second = try S3BlobStore(
                location: S3Location(bucket: first.location.bucket, prefix: "one-two", endpoint: server.endpoint), credentials: MotoServer.credentials)
            _ = try await first.put(key: "accounts/a/photos/p", data: Data("1".utf8))
            _ = try await second.put(key: "accounts/a/photos/p", data: Data("22".utf8))
            #expect(try await first.list(prefix: "", after: nil, limit: 10) == [BlobInfo(key: "accounts/a/photos/p", size: 1)])
            #expect(try await second.list(prefix: "accounts/", after: nil, limit: 10) == [BlobInfo(key: "accounts/a/photos/p", size: 2)])
            #expect(first.describe(key: "accounts/a/photos/p") == "s3://\(first.location.bucket)/one/accounts/a/photos/p")
        }

        /// moto does not check signatures (the SigV4 tests do); this checks the URL's shape,
        /// that it reaches the object without any other credentials, and its expiry rules.
        @Test func aDownloadURLIsPresignedForTheExportsLifetime() async throws {
            let store = try await MotoServer.require().makeStore()
            _ = try await store.put(key: "accounts/u-1/exports/e-1.zip", data: Data("archive bytes".utf8))
            let now = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
            let expiresAt = now.addingTimeInterval(7 * 86_400)
            let url = try #require(try store.downloadURL(key: "accounts/u-1/exports/e-1.zip", expiresAt: expiresAt, now: now))
            let components = try #require(URLComponents(string: url))
            #expect(components.path == "/\(store.location.bucket)/lifecycle/accounts/u-1/exports/e-1.zip")
            let items = Dictionary(uniqueKeysWithValues: (components.queryItems ?? []).map { ($0.name, $0.value ?? "") })
            #expect(items["X-Amz-Expires"] == "604800")
            #expect(items["X-Amz-Date"] == "20260101T000000Z")
            #expect(items["X-Amz-Credential"] == "lifecycle-test/20260101/us-east-1/s3/aws4_request")
            #expect(items["X-Amz-Signature"]?.count == 64)
            // Deterministic: signing again, later, gives the same URL.
            #expect(try store.downloadURL(key: "accounts/u-1/exports/e-1.zip", expiresAt: expiresAt, now: now.addingTimeInterval(3_600)) == url)
            // A shorter lifetime ends at the same instant: signed seven days before it.
            let shorter = try #require(try store.downloadURL(key: "accounts/u-1/exports/e-1.zip", expiresAt: now.addingTimeInterval(86_400), now: now))
            #expect(shorter.contains("X-Amz-Date=20251226T000000Z"))
            // Longer than S3 allows: refused, with what to change.
            #expect {
                try store.downloadURL(key: "accounts/u-1/exports/e-1.zip", expiresAt: now.addingTimeInterval(8 * 86_400), now: now)
            } throws: { error in
                "\(error)".contains("link_lifetime_days")
            }
            let (body, response) = try await URLSession.shared.data(from: try #require(URL(string: url)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(body == Data("archive bytes".utf8))
        }

        /// An upload given up half-way leaves no parts behind for S3 to keep.
        @Test func aCancelledMultipartUploadIsAborted() async throws {
            let store = try await MotoServer.require().makeStore()
            let source = try Scratch.file(size: 150 << 20, seed: 3)
            let upload = Task { try await store.put(key: "accounts/u-1/exports/big.zip", fromFile: source.path, moving: false) }
            var started = false
            let deadline = Date().addingTimeInterval(60)
            while !started, Date() < deadline {
                started = try await !store.pendingMultipartUploads().isEmpty
                if !started { await Task.yield() }
            }
            #expect(started, "the multipart upload never appeared")
            upload.cancel()
            let outcome = await upload.result
            #expect(throws: (any Error).self) { try outcome.get() }
            #expect(try await store.pendingMultipartUploads().isEmpty)
            #expect(try await store.info(key: "accounts/u-1/exports/big.zip") == nil)
        }

        @Test func aReadFailsWhenTheBlobIsReplacedHalfWay() async throws {
            let store = try await MotoServer.require().makeStore()
            let first = try Scratch.file(size: 3 << 20, seed: 1)
            let second = try Scratch.file(size: 3 << 20, seed: 2)
            _ = try await store.put(key: "accounts/u-1/photos/p", fromFile: first.path, moving: false)
            let replacement = ReplacementOutcome()
            let refusal = await #expect(throws: BlobStoreError.self) {
                try await store.read(key: "accounts/u-1/photos/p", chunkSize: 1 << 20) { _ in
                    guard replacement.begin() else { return }
                    // Synchronously from the callback: the next ranged GET must see a new ETag.
                    let semaphore = DispatchSemaphore(value: 0)
                    Task.detached {
                        do {
                            _ = try await store.put(key: "accounts/u-1/photos/p", fromFile: second.path, moving: false)
                            replacement.finish(failure: nil)
                        } catch {
                            replacement.finish(failure: "\(error)")
                        }
                        semaphore.signal()
                    }
                    semaphore.wait()
                }
            }
            // A replacement that failed would leave nothing to detect: the read's error would
            // then be some other fault, not the one under test.
            #expect(replacement.result == .stored, "the replacement did not store: \(replacement.result)")
            #expect(refusal?.message == "blob 'accounts/u-1/photos/p' was replaced while it was being read; read it again")
            // Read again, it is the replacement whole.
            var reread = Data()
            try await store.read(key: "accounts/u-1/photos/p", chunkSize: 1 << 20) { reread.append(contentsOf: $0) }
            #expect(reread == (try Data(contentsOf: URL(fileURLWithPath: second.path))))
        }
    }
}

/// What the replacement put made of its attempt, told from its detached task to the test.
private final class ReplacementOutcome: Sendable {
    enum Result: Equatable { case notStarted, running, stored, failed(String) }
    private let state = Mutex(Result.notStarted)

    var result: Result { state.withLock { $0 } }

    /// True once only: the replacement happens at the first chunk.
    func begin() -> Bool {
        state.withLock { state in
            guard state == .notStarted else { return false }
            state = .running
            return true
        }
    }

    func finish(failure: String?) {
        state.withLock { $0 = failure.map(Result.failed) ?? .stored }
    }
}
