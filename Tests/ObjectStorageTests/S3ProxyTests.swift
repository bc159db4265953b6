import ChildProcesses
import Foundation
import Lifecycle
import ObjectStorage
import Testing

/// A tunnelling egress proxy (Fixtures/connect_proxy.py) between the store and moto_server.
final class ConnectProxy: Sendable {
    let port: Int
    private let process: FixtureProcess

    init() async throws {
        process = try await FixtureProcess(script: "connect_proxy.py", describedAs: "the CONNECT proxy")
        port = process.port
    }

    func stop() { process.stop() }

    struct Tunnel: Decodable, Equatable {
        var target: String
        var authorization: String
    }

    func tunnels() async throws -> [Tunnel] {
        struct Stats: Decodable { var tunnels: [Tunnel] }
        return try await process.stats(as: Stats.self).tunnels
    }
}

extension S3Tests {
    @Suite struct S3ProxyTests {
        /// A store on `server`'s bucket of `direct`, with `environment` naming proxies.
        func store(like direct: S3BlobStore, server: MotoServer, environment: [String: String]) throws -> S3BlobStore {
            try S3BlobStore(
                location: S3Location(bucket: direct.location.bucket, prefix: direct.location.prefix, region: "us-east-1", endpoint: server.endpoint),
                credentials: MotoServer.credentials, options: S3Tests.smallPartOptions, environment: environment)
        }

        @Test func requestsGoThroughTheProxyTheEnvironmentNamesWithItsCredentials() async throws {
            let server = try MotoServer.require()
            let proxy = try await ConnectProxy()
            defer { proxy.stop() }
            let direct = try await server.makeStore()
            let proxied = try store(like: direct, server: server, environment: ["http_proxy": "http://ops:s3cret@127.0.0.1:\(proxy.port)"])
            let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            _ = try await proxied.put(key: "through/proxy", data: bytes)
            #expect(try await direct.readAll(key: "through/proxy") == bytes)
            #expect(try await proxied.readAll(key: "through/proxy") == bytes)
            let tunnels = try await proxy.tunnels()
            #expect(!tunnels.isEmpty)
            let expected = ConnectProxy.Tunnel(
                target: "127.0.0.1:\(server.port)", authorization: "Basic " + Data("ops:s3cret".utf8).base64EncodedString())
            #expect(tunnels.allSatisfy { $0 == expected }, "\(tunnels)")
        }

        @Test func noProxyKeepsTheEndpointDirect() async throws {
            let server = try MotoServer.require()
            let proxy = try await ConnectProxy()
            defer { proxy.stop() }
            let direct = try await server.makeStore()
            let store = try store(
                like: direct, server: server, environment: ["http_proxy": "127.0.0.1:\(proxy.port)", "no_proxy": "localhost,127.0.0.1"])
            _ = try await store.put(key: "direct", data: Data("x".utf8))
            #expect(try await direct.readAll(key: "direct") == Data("x".utf8))
            #expect(try await proxy.tunnels().isEmpty)
        }
    }
}
