import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// The repository root, found from this file, for the shipped Jobs/ folder and demo photos.
let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

/// The `lifecycle` executable SwiftPM built next to the test bundle.
let lifecycleBinary: String = {
    if let explicit = ProcessInfo.processInfo.environment["LIFECYCLE_BIN"] { return explicit }
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var directory = testBinary.deletingLastPathComponent()
    // The test runner may be the .xctest bundle itself or a binary inside it.
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("lifecycle").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory.deleteLastPathComponent()
    }
    return repositoryRoot + "/.build/debug/lifecycle"
}()

struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// One throwaway installation: a SQLite file and a blob directory in a temp folder.
struct Workspace {
    let root: String
    /// A `postgres://` URL runs the commands against PostgreSQL instead of the SQLite file.
    var postgresURL: String?
    var database: String { postgresURL ?? root + "/lifecycle.sqlite" }
    var blobs: String { root + "/blobs" }
    /// Where the installation keeps export archives by default: beside the SQLite file; on
    /// PostgreSQL beside the blob directory, unless `--exports` says otherwise.
    var exportArchives: String { postgresURL == nil ? database + ".exports" : blobs + ".exports" }
    var jobsDirectory: String
    /// A workspace is an installation: its first command is preceded by `lifecycle init`
    /// (after the test has put an app's tables in place), unless the test is about a
    /// database that was never initialised.
    var initialisesOnFirstCommand = true
    private let initialised = InitialisedDatabases()

    init(jobsDirectory: String = repositoryRoot + "/Jobs") throws {
        // The app databases the tests make with sqlite3 and Django are private, as lifecycle
        // asks of a SQLite file it keeps secrets in (its own files are private whatever the umask).
        umask(0o077)
        root = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        self.jobsDirectory = jobsDirectory
    }

    /// Runs `lifecycle init` once per database, for tests that start a command with `process`.
    func ensureInitialised() async throws {
        guard initialisesOnFirstCommand, !initialised.contains(database) else { return }
        let result = try await runAsIs(["init"])
        guard result.status == 0 else { throw CLITestFailure("lifecycle init failed (\(result.status)): \(result.stderr)") }
        initialised.insert(database)
    }

    /// Commands that run without an installation (or make one).
    static func needsInstallation(_ command: [String]) -> Bool {
        guard let first = command.first else { return false }
        if ["init", "demo", "map", "help", "--help", "--version", "copy-store"].contains(first) { return false }
        return !(first == "photos" && command.dropFirst().first == "normalize-file")
    }

    func arguments(_ command: [String]) -> [String] {
        command + ["--database", database, "--blobs", blobs, "--jobs-dir", jobsDirectory]
    }

    /// Starts `lifecycle` with the workspace's options. `stdinPath` feeds a file (a FIFO,
    /// /dev/zero) instead of `stdin`'s text; `wrapper` runs it through another command
    /// (`unshare …`, `sh -c …`) that execs the binary given as its next argument.
    func process(
        _ command: [String], environment: [String: String] = [:], stdin: String? = nil, stdinPath: String? = nil,
        wrapper: [String] = []
    ) throws -> (Process, String, String) {
        let process = Process()
        if let tool = wrapper.first {
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = Array(wrapper.dropFirst()) + [lifecycleBinary] + arguments(command)
        } else {
            process.executableURL = URL(fileURLWithPath: lifecycleBinary)
            process.arguments = arguments(command)
        }
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "LIFECYCLE_NOW")
        for (key, value) in environment { env[key] = value }
        process.environment = env
        // Files, not pipes: a chatty child can never block on a full pipe.
        let id = UUID().uuidString
        let out = root + "/stdout-\(id)"
        let err = root + "/stderr-\(id)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        if let stdinPath {
            process.standardInput = FileHandle(forReadingAtPath: stdinPath)
        } else if let stdin {
            let input = root + "/stdin-\(id)"
            try stdin.write(toFile: input, atomically: true, encoding: .utf8)
            process.standardInput = FileHandle(forReadingAtPath: input)
        } else {
            process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        }
        try process.run()
        return (process, out, err)
    }

    @discardableResult
    func run(
        _ command: [String], environment: [String: String] = [:], stdin: String? = nil, stdinPath: String? = nil,
        wrapper: [String] = []
    ) async throws -> CommandResult {
        if Self.needsInstallation(command) { try await ensureInitialised() }
        return try await runAsIs(command, environment: environment, stdin: stdin, stdinPath: stdinPath, wrapper: wrapper)
    }

    private func runAsIs(
        _ command: [String], environment: [String: String] = [:], stdin: String? = nil, stdinPath: String? = nil,
        wrapper: [String] = []
    ) async throws -> CommandResult {
        let (process, out, err) = try process(command, environment: environment, stdin: stdin, stdinPath: stdinPath, wrapper: wrapper)
        await process.exited()
        return CommandResult(
            status: process.terminationStatus,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// Opened as the CLI opens it: an app's own database (a map without `app: reference`)
    /// gets lifecycle's tables only, never the reference app's.
    func store() throws -> SQLiteStore { try SQLiteStore(path: database, referenceSchema: servesReferenceApp) }

    var servesReferenceApp: Bool { (try? DataMap(jobsDirectory: jobsDirectory).lifecycleOwnsSchema) ?? true }
}

/// The databases a test process has initialised, shared by a workspace's copies.
final class InitialisedDatabases: @unchecked Sendable {
    private let lock = NSLock()
    private var databases: Set<String> = []

    func contains(_ database: String) -> Bool { lock.withLock { databases.contains(database) } }
    func insert(_ database: String) { _ = lock.withLock { databases.insert(database) } }
}

/// Waits for a condition another process brings about, checking every 50 ms, up to a deadline.
func eventually(timeout: TimeInterval = 60, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(nanoseconds: 50_000_000)
    }
    return false
}

func iso(_ date: Date) -> String { ISO8601.format(date) }

/// `jobs list --json`: the paused kinds and the jobs.
struct ListedJobs: Decodable {
    var jobs: [JobRecord]
    var pausedKinds: [PausedKind]

    enum CodingKeys: String, CodingKey { case jobs, pausedKinds = "paused_kinds" }

    static func from(_ stdout: String) throws -> ListedJobs { try JobJSON.decode(ListedJobs.self, from: stdout) }
}
