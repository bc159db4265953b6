import AsyncHTTPClient
import ChildProcesses
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Lifecycle
import ObjectStorage
import Testing

let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A real `moto_server` on a free loopback port, one per test process. The suites that
/// need it carry the `.motoServer` trait, which starts it before them and stops it after
/// them whether they passed or not. A watchdog shell stops it too if this process dies
/// without cleaning up (SIGKILL), so no server outlives the run.
final class MotoServer: Sendable {
    let port: Int
    let endpoint: URL
    private let process: Process
    let logPath: String

    @TaskLocal static var current: MotoServer?

    static let credentials = AWSCredentials(accessKeyID: "lifecycle-test", secretAccessKey: "lifecycle-test-secret")

    /// The Makefile's venv first, then PATH.
    static func executable() throws -> String {
        let venv = repositoryRoot + "/.build-tools/venv/bin/moto_server"
        if FileManager.default.isExecutableFile(atPath: venv) { return venv }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(directory)/moto_server"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw TestFailure("moto_server not found in \(repositoryRoot)/.build-tools/venv/bin or on PATH: run `make test-deps` (it installs moto[server] into .build-tools/venv)")
    }

    private init(port: Int, process: Process, logPath: String) {
        self.port = port
        self.endpoint = URL(string: "http://127.0.0.1:\(port)")!
        self.process = process
        self.logPath = logPath
    }

    /// moto_server cannot report a port the kernel picked, so a free port is found here and
    /// bound by moto a moment later: another server or connection of the suite can take it in
    /// between, and then moto is started again on another one.
    static func start() async throws -> MotoServer {
        let executable = try executable()
        var attemptsLeft = 3
        while true {
            attemptsLeft -= 1
            do {
                return try await start(executable: executable, port: try freePort())
            } catch let failure as PortTaken {
                if attemptsLeft == 0 { throw TestFailure("moto_server found its port taken three times; the last: \(failure.log)") }
            }
        }
    }

    private struct PortTaken: Error { var log: String }

    private static func start(executable: String, port: Int) async throws -> MotoServer {
        let logPath = FileManager.default.temporaryDirectory.appendingPathComponent("moto-\(port)-\(UUID().uuidString).log").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // $1 moto_server, $2 port, $3 the test process: stop the server when either is gone.
        // SIGKILL, because the server inherits this process's blocked SIGTERM; its state is
        // all in memory, so nothing is lost.
        process.arguments = ["-c", """
            "$1" -H 127.0.0.1 -p "$2" & server=$!
            trap 'kill -9 $server 2>/dev/null; wait $server 2>/dev/null; exit 0' TERM INT EXIT
            while kill -0 "$3" 2>/dev/null && kill -0 $server 2>/dev/null; do sleep 1; done
            """, "moto-watchdog", executable, String(port), String(getpid())]
        process.standardOutput = FileHandle(forWritingAtPath: logPath)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        let server = MotoServer(port: port, process: process, logPath: logPath)
        do {
            // A deadline, not a wait: moto answers in about a second, but the suite starts it
            // while every other suite runs, and on two loaded cores its Python start-up alone
            // once took more than 60 s.
            try await server.waitUntilServing(timeout: 180)
        } catch {
            await server.stop()
            throw error
        }
        return server
    }

    /// Polls with real HTTP requests until one is answered; a bounded loop, not a fixed sleep.
    private func waitUntilServing(timeout: TimeInterval) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 2
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        while Date() < deadline {
            guard process.isRunning else {
                let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                if log.contains("Address already in use") { throw PortTaken(log: log) }
                throw TestFailure("moto_server exited before serving: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
            }
            if let (_, response) = try? await session.data(from: endpoint), response is HTTPURLResponse { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw TestFailure("moto_server did not answer on port \(port) within \(Int(timeout)) s: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
    }

    func stop() async {
        guard process.isRunning else { return }
        process.terminate()
        await process.exited()
    }

    /// A port nothing listens on right now (the kernel picks it).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else { throw TestFailure("bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A new bucket of its own for one test, so tests running in parallel never see each other's keys.
    /// `bucket`: another prefix of a bucket an earlier call made.
    func makeStore(bucket: String? = nil, prefix: String = "lifecycle", options: S3BlobStore.Options = S3Tests.smallPartOptions) async throws -> S3BlobStore {
        let bucket = bucket ?? String("t-" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(24))
        let store = try S3BlobStore(
            location: S3Location(bucket: bucket, prefix: prefix, region: "us-east-1", endpoint: endpoint),
            credentials: Self.credentials, options: options)
        try await store.createBucketIfMissing()
        return store
    }

    static func require() throws -> MotoServer {
        guard let current else { throw TestFailure("this test must run inside a suite with the .motoServer trait") }
        return current
    }
}

struct MotoServerTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let server = try await MotoServer.start()
        do {
            try await MotoServer.$current.withValue(server) { try await function() }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}

extension Trait where Self == MotoServerTrait {
    /// Starts moto_server for the suite and everything in it, and stops it afterwards.
    static var motoServer: Self { Self() }
}

/// Every suite that talks to S3 lives in here, so one moto_server serves them all.
@Suite(.motoServer)
struct S3Tests {
    /// Small enough that a test file of a few MiB goes up in several parts; 5 MiB is the
    /// smallest part S3 (and moto) accepts.
    static let smallPartOptions: S3BlobStore.Options = {
        var options = S3BlobStore.Options()
        options.multipartThreshold = 6 << 20
        options.partSize = 5 << 20
        options.readWindow = 1 << 20
        options.copyThreshold = 6 << 20
        options.copyPartSize = 5 << 20
        options.retry = S3RetryPolicy(attempts: 3, initialDelay: 0.05, maximumDelay: 0.5)
        return options
    }()
}

/// A Python fixture of this directory's `Fixtures/` (a proxy the S3 tests put between the
/// store and moto) run as a child process: started with its arguments, ready once it prints
/// "ready PORT" on its stdout, terminated when the test lets go of it. The script binds a
/// port the kernel picks: a free port found here and bound by the script later could be
/// taken in between by another server or connection of the suite. Not waited for: a deinit
/// cannot await, and the test's cooperative thread must not block on the child's exit
/// (Foundation reaps it). The scripts unblock SIGTERM themselves, since the test process
/// blocks it and children inherit the mask.
final class FixtureProcess: Sendable {
    /// The loopback port the script listens on.
    let port: Int
    private let process: Process

    init(script: String, arguments: [String] = [], describedAs description: String) async throws {
        let ready = Pipe()
        // A file, not the test process's own stderr (a child left running would hold `swift
        // test`'s pipe open) and not a pipe nobody drains: what a failed start printed.
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("fixture-\(UUID().uuidString).stderr")
        guard FileManager.default.createFile(atPath: errors.path, contents: nil) else {
            throw TestFailure("cannot create \(errors.path) for \(description)'s errors")
        }
        defer { try? FileManager.default.removeItem(at: errors) }
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", repositoryRoot + "/Tests/ObjectStorageTests/Fixtures/" + script] + arguments
        process.standardOutput = ready
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        let line = await firstLine(of: ready)
        let words = line.split(whereSeparator: \.isWhitespace)
        guard words.count == 2, words[0] == "ready", let port = Int(words[1]) else {
            process.terminate()
            let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw TestFailure("\(description) did not start (it printed '\(line)'; its stderr: '\(stderr.suffix(2000))')")
        }
        self.port = port
    }

    func stop() {
        if process.isRunning { process.terminate() }
    }

    /// What the script reports at `/__proxy/stats`, asked directly, never through a proxy
    /// the machine's environment may name.
    func stats<Stats: Decodable>(as: Stats.Type) async throws -> Stats {
        let answer = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/__proxy/stats"), timeout: .seconds(10))
        let body = try await answer.body.collect(upTo: 1 << 20)
        return try JSONDecoder().decode(Stats.self, from: Data(body.readableBytesView))
    }

    deinit { stop() }
}

/// What a child prints first on `pipe`, up to its newline (all of it if it exits sooner):
/// where a server listens. Reading blocks until then, so on a thread of its own.
func firstLine(of pipe: Pipe) async -> String {
    await onThreadOfItsOwn { () -> String in
        var bytes = Data()
        while !bytes.contains(UInt8(ascii: "\n")) {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            bytes.append(chunk)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
