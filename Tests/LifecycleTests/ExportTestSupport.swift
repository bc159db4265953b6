import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import Logging
import SQLiteBackend
import Testing

/// One throwaway installation for export tests: a SQLite store, a blob directory, a
/// Jobs directory with the shipped data map and an export policy the test chooses,
/// a signing key file (mode 0600) and a clock the test moves.
struct ExportTestbed<Store: LifecycleStore> {
    let root: String
    let store: Store
    let blobs: FileSystemBlobStore
    /// Where archives go: a folder apart from the blobs, as an installation's `--exports`.
    let exports: FileSystemBlobStore
    let clock: ManualTimeSource
    let jobsDirectory: String
    let services: LifecycleServices<Store>

    /// `policy` lines go into the `export:` section below the signing key.
    init(store: Store, policy: [String] = [], signingKey: Bool = true) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("export-tests-\(UUID().uuidString)").path
        jobsDirectory = root + "/Jobs"
        try FileManager.default.createDirectory(atPath: jobsDirectory + "/policies", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: ExportFixture.repositoryRoot + "/Jobs/account-data.yaml", toPath: jobsDirectory + "/account-data.yaml")
        var section = ["export:", "  default_format: zip"]
        if signingKey {
            let keyFile = root + "/signing.key"
            _ = FileManager.default.createFile(
                atPath: keyFile, contents: Data("0123456789abcdef0123456789abcdef-test-key\n".utf8), attributes: [.posixPermissions: 0o600])
            section.append("  signing_key_file: \"\(keyFile)\"")
        }
        section += policy.map { "  " + $0 }
        try (section.joined(separator: "\n") + "\n").write(toFile: jobsDirectory + "/policies/export.yaml", atomically: true, encoding: .utf8)
        self.store = store
        blobs = try FileSystemBlobStore(root: root + "/blobs")
        exports = try FileSystemBlobStore(root: root + "/exports")
        clock = ManualTimeSource(ExportFixture.start)
        services = LifecycleServices(
            store: store, blobs: blobs, policies: try PolicyBook(jobsDirectory: jobsDirectory), jobsDirectory: jobsDirectory,
            clock: clock, logger: Logger(label: "export-tests"), exports: exports)
    }

    /// Imports accounts the way operators do (JSONL plus photo files), with the demo photos.
    func importAccounts(_ lines: [String]) async throws {
        let folder = root + "/import-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in ["run.jpg", "trail.jpg", "portrait.heic"] {
            try FileManager.default.copyItem(atPath: ExportFixture.repositoryRoot + "/Jobs/demo/photos/" + name, toPath: folder + "/photos/" + name)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: folder + "/accounts.jsonl", atomically: true, encoding: .utf8)
        let report = try await AccountImporter(services: services).importFile(at: folder + "/accounts.jsonl")
        #expect(report.failures.isEmpty, "\(report.failures)")
    }

    /// Runs every due export job in this process, as `worker --once` would.
    @discardableResult
    func runWorker(kinds: Set<String> = [ExportJobs.exportKind]) async throws -> DrainSummary {
        let worker = Worker(
            store: store, registry: services.registry, policies: services.policies, clock: clock,
            options: WorkerOptions(concurrency: 1, kinds: kinds), logger: Logger(label: "export-tests"))
        return try await worker.drain()
    }

    /// Requests and runs an export; returns its row.
    func export(_ account: String, _ request: ExportRequest? = nil) async throws -> ExportRecord {
        let outcome = try await services.requestExport(request ?? ExportRequest(account: .operator(account)))
        try await runWorker()
        let job = try #require(try await store.job(id: outcome.job.id))
        #expect(job.state == .succeeded, "\(job.lastError ?? "")")
        return try #require(try await store.read { tx in try tx.export(jobID: outcome.job.id) })
    }

    func archivePath(_ export: ExportRecord) throws -> String {
        try exports.path(for: try #require(export.blobKey))
    }

    /// Unpacks an archive with bsdtar, an independent reader, and returns the archive root folder.
    func unpack(_ export: ExportRecord) async throws -> String {
        let target = root + "/unpacked-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        let result = try await ExportFixture.run("/usr/bin/bsdtar", ["-xf", try archivePath(export), "-C", target])
        #expect(result.status == 0, "\(result.output)")
        let folders = try FileManager.default.contentsOfDirectory(atPath: target)
        #expect(folders.count == 1)
        return target + "/" + (folders.first ?? "")
    }

    /// The top-level JSON object or array of a file.
    func json(_ path: String) throws -> Any {
        try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: path)))
    }

}

extension ExportTestbed where Store == SQLiteStore {
    /// On a SQLite file of its own.
    init(policy: [String] = [], signingKey: Bool = true) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("export-db-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try self.init(store: try SQLiteStore(path: directory + "/lifecycle.sqlite"), policy: policy, signingKey: signingKey)
    }
}

/// What the export tests share whatever the backend: import lines, the repository, outside tools.
enum ExportFixture {
    static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()
    static let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z

    static func account(id: String, state: String? = nil, entries: [(id: String, text: String)]? = nil) -> String {
        let entryList = (entries ?? [("\(id)-e1", "Tempo run 🏃 café 東京")]).enumerated().map { index, entry -> String in
            let photos = index == 0 ? #","photos":[{"id":"\#(id)-p1","file":"photos/run.jpg","taken_at":"2025-03-01T23:55:00Z"},{"id":"\#(id)-p2","file":"photos/trail.jpg"}]"# : ""
            return #"{"id":"\#(entry.id)","created_at":"2025-03-0\#(1 + index % 9)T08:00:00Z","text":\#(jsonString(entry.text))\#(photos)}"#
        }.joined(separator: ",")
        let pending = state == "pendingDeletion" ? #","state":"pendingDeletion","purge_after":"2026-02-01T00:00:00Z""# : ""
        return #"""
        {"id":"\#(id)","email":"\#(id)@example.com","password_hash":"$2b$04$abcdefghijklmnopqrstuu","first_name":"Zoë","last_name":"Ångström","timezone":"Asia/Tokyo","created_at":"2025-01-02T03:04:05Z","preferences":{"theme":"dark","font_size_offset":-2},"subscription":{"status":"premium"},"integrations":{"strava":true},"profile_photo":"photos/portrait.heic","entries":[\#(entryList)],"mesocycles":[{"id":"\#(id)-m1","status":"completed","started_at":"2025-01-01T00:00:00Z","completed_at":"2025-02-01T00:00:00Z"},{"id":"\#(id)-m2","status":"planned"}],"meditation_sessions":[{"id":"\#(id)-s1","started_at":"2025-03-02T06:00:00Z","duration_seconds":600},{"id":"\#(id)-s2","started_at":"2025-03-03T06:00:00Z","duration_seconds":930}]\#(pending)}
        """#
    }

    static func jsonString(_ text: String) -> String {
        String(decoding: try! JSONEncoder().encode(text), as: UTF8.self)
    }

    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("export-tool-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        if let stdin {
            let input = FileManager.default.temporaryDirectory.appendingPathComponent("export-stdin-\(UUID().uuidString)")
            try stdin.write(to: input, atomically: true, encoding: .utf8)
            process.standardInput = try FileHandle(forReadingFrom: input)
        }
        try process.run()
        await process.exited()
        try handle.close()
        return (process.terminationStatus, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }
}
