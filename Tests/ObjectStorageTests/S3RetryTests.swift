import ChildProcesses
import Foundation
import Lifecycle
import ObjectStorage
import Testing

/// The real moto_server behind a proxy that answers like an overloaded S3 on cue
/// (Fixtures/faulty_s3_proxy.py): 5xx answers and keys a DeleteObjects failed to delete.
final class FaultyS3Proxy: Sendable {
    let endpoint: URL
    private let process: FixtureProcess

    /// `rules`: FAULT:METHOD:QUERY:COUNT, as the script documents.
    init(upstream: MotoServer, rules: [String]) async throws {
        process = try await FixtureProcess(
            script: "faulty_s3_proxy.py", arguments: [String(upstream.port)] + rules, describedAs: "the fault-injecting S3 proxy")
        endpoint = URL(string: "http://127.0.0.1:\(process.port)")!
    }

    struct Stats: Decodable {
        struct Rule: Decodable {
            var fault: String
            var method: String
            var query: String
            var hit: Int
        }
        var rules: [Rule]
        var forwarded: Int
    }

    func stats() async throws -> Stats {
        try await process.stats(as: Stats.self)
    }

    /// A store on a fresh bucket of moto's, reached through the proxy.
    func store(on server: MotoServer, attempts: Int) async throws -> S3BlobStore {
        let direct = try await server.makeStore()
        var options = S3Tests.smallPartOptions
        options.retry = S3RetryPolicy(attempts: attempts, initialDelay: 0.01, maximumDelay: 0.05)
        return try S3BlobStore(
            location: S3Location(bucket: direct.location.bucket, prefix: direct.location.prefix, region: "us-east-1", endpoint: endpoint),
            credentials: MotoServer.credentials, options: options)
    }
}

extension S3Tests {
    @Suite struct S3RetryTests {
        @Test func deleteObjectsAnswered503IsRetriedUntilTheKeysAreGone() async throws {
            let server = try MotoServer.require()
            let proxy = try await FaultyS3Proxy(upstream: server, rules: ["503:POST:delete:2"])
            let store = try await proxy.store(on: server, attempts: 4)
            let keys = (0..<5).map { "accounts/a/photos/p\($0)" }
            for key in keys { _ = try await store.put(key: key, data: Data(key.utf8)) }
            try await store.delete(keys: keys)
            #expect(try await store.list(prefix: "accounts/a/", after: nil, limit: 10).isEmpty)
            #expect(try await proxy.stats().rules.first?.hit == 2)
        }

        @Test func keysADeleteObjectsReportsAsFailedAreSentAgain() async throws {
            let server = try MotoServer.require()
            let proxy = try await FaultyS3Proxy(upstream: server, rules: ["keyerror:POST:delete:1"])
            let store = try await proxy.store(on: server, attempts: 4)
            let keys = (0..<4).map { "accounts/b/photos/p\($0)" }
            for key in keys { _ = try await store.put(key: key, data: Data(key.utf8)) }
            try await store.delete(keys: keys)
            // The withheld key survived the first call; only a second call can have removed it.
            #expect(try await store.list(prefix: "accounts/b/", after: nil, limit: 10).isEmpty)
            #expect(try await proxy.stats().rules.first?.hit == 1)
        }

        @Test func aPutAnswered500IsRetriedAndStoresTheBytesOnce() async throws {
            let server = try MotoServer.require()
            let proxy = try await FaultyS3Proxy(upstream: server, rules: ["500:PUT::1"])
            let store = try await proxy.store(on: server, attempts: 3)
            let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let info = try await store.put(key: "accounts/c/photos/p", data: bytes)
            #expect(info.size == Int64(bytes.count))
            #expect(try await store.readAll(key: "accounts/c/photos/p") == bytes)
            #expect(try await proxy.stats().rules.first?.hit == 1)
        }

        @Test func aServerThatKeepsFailingIsAClearErrorAndDeletesNothingHalfWay() async throws {
            let server = try MotoServer.require()
            let proxy = try await FaultyS3Proxy(upstream: server, rules: ["503:POST:delete:100"])
            let store = try await proxy.store(on: server, attempts: 3)
            let keys = (0..<3).map { "accounts/d/photos/p\($0)" }
            for key in keys { _ = try await store.put(key: key, data: Data(key.utf8)) }
            await #expect {
                try await store.delete(keys: keys)
            } throws: { error in
                let message = "\(error)"
                return error is BlobStoreError && message.contains("DeleteObjects") && message.contains("3 attempt(s)") && message.contains("503")
            }
            #expect(try await proxy.stats().rules.first?.hit == 3)
            #expect(try await store.list(prefix: "accounts/d/", after: nil, limit: 10).count == 3)
        }
    }
}
