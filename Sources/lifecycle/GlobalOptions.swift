import ArgumentParser
import Foundation
import JobRunner
import Lifecycle
import Logging
import PostgresBackend
import SQLiteBackend

enum LogFormat: String, ExpressibleByArgument, CaseIterable { case text, json }

/// Options every command takes, written after the command name.
struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "SQLite database file, or postgres://user:password@host:port/database for PostgreSQL (env LIFECYCLE_DATABASE).",
        valueName: "path-or-url"))
    var database: String?

    @Option(help: ArgumentHelp(
        "Where photos and export archives live: a directory, or s3://bucket/prefix?endpoint=URL&region=NAME with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set (env LIFECYCLE_BLOBS).",
        valueName: "dir|s3-url"))
    var blobs: String?

    @Option(name: .customLong("jobs-dir"), help: ArgumentHelp("Directory with policies and the data map (env LIFECYCLE_JOBS_DIR).", valueName: "dir"))
    var jobsDir: String?

    @Flag(help: "Machine-readable JSON on stdout.")
    var json = false

    @Option(name: .customLong("log-format"), help: "Log lines on stderr as text or one JSON object per line.")
    var logFormat: LogFormat = .text

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = ProcessInfo.processInfo.environment["LIFECYCLE_LOG_LEVEL"] ?? "info"

    private var environment: [String: String] { ProcessInfo.processInfo.environment }

    var databasePath: String { database ?? environment["LIFECYCLE_DATABASE"] ?? "./lifecycle.sqlite" }
    var blobDirectory: String { blobs ?? environment["LIFECYCLE_BLOBS"] ?? "./blobs" }
    var jobsDirectory: String { jobsDir ?? environment["LIFECYCLE_JOBS_DIR"] ?? "./Jobs" }

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical (got '\(logLevel)')")
        }
    }

    /// The clock every command uses. `LIFECYCLE_NOW` starts it at another instant
    /// (it then keeps ticking), for tests and what-if runs.
    func clock() throws -> any TimeSource {
        guard let text = environment["LIFECYCLE_NOW"], !text.isEmpty else { return SystemTimeSource() }
        guard let start = ISO8601.parse(text) else {
            throw CLIFailure(.usage, "LIFECYCLE_NOW must be an ISO-8601 timestamp like 2026-01-31T03:00:00Z (got '\(text)')")
        }
        return ShiftedTimeSource(startingAt: start)
    }

    func bootstrapLogging() {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let format = logFormat
        Terminal.jsonStderr = format == .json
        LoggingBootstrap.once(format: format, level: level)
    }

    func logger(_ label: String) -> Logger {
        bootstrapLogging()
        return Logger(label: label)
    }

    var usesPostgres: Bool { PostgresLocation.isURL(databasePath) }

    /// Opens the SQLite store (running migrations), the blob store and the policies: for
    /// `demo`, whose tour builds an embedded installation of its own.
    func services() async throws -> LifecycleServices<SQLiteStore> {
        if usesPostgres {
            throw CLIFailure(.usage, """
                `demo` builds a fresh embedded installation (a SQLite file and a blob directory) and does not run on \
                PostgreSQL: pass --database PATH for a new SQLite file; every other command runs on PostgreSQL too
                """)
        }
        return try await services(store: try SQLiteStore(path: databasePath))
    }

    /// Whether the data map is the reference app's, whose schema lifecycle creates itself.
    /// Any other map describes an app's own database, where lifecycle creates its own tables
    /// only. A map that cannot be read is reported by the command that needs it.
    var servesReferenceApp: Bool { (try? DataMap(jobsDirectory: jobsDirectory).isReferenceApp) ?? true }

    /// Runs a command on whichever backend `--database` names.
    func withServices(_ command: some StoreCommand) async throws -> ExitStatus {
        guard usesPostgres else {
            do {
                let store = try SQLiteStore(path: databasePath, referenceSchema: servesReferenceApp)
                return try await command.run(services: try await services(store: store))
            } catch {
                // A full disk or a damaged file is named with the file, wherever it surfaced.
                throw SQLiteStoreError.classify(error, path: databasePath) ?? error
            }
        }
        let location: PostgresLocation
        do {
            location = try PostgresLocation(url: databasePath)
        } catch let error as PostgresStoreError {
            throw CLIFailure(.usage, "--database (or LIFECYCLE_DATABASE): \(error.message)")
        }
        let store = try await PostgresStore(location, logger: logger("lifecycle.postgres"), referenceSchema: servesReferenceApp)
        return try await command.run(services: try await services(store: store))
    }

    private func services<Store: LifecycleStore>(store: Store) async throws -> LifecycleServices<Store> {
        let logger = logger("lifecycle")
        let policies: PolicyBook
        do {
            policies = try PolicyBook(jobsDirectory: jobsDirectory)
        } catch let error as JobRunnerError {
            throw CLIFailure(.dataError, "policy files in \(jobsDirectory)/policies: \(error.message)")
        }
        let blobStore = try await openBlobStore(blobDirectory)
        return LifecycleServices(
            store: store, blobs: blobStore, policies: policies, jobsDirectory: jobsDirectory, clock: try clock(), logger: logger)
    }
}

/// A command whose body runs on either backend.
protocol StoreCommand {
    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus
}

/// swift-log allows one bootstrap per process.
enum LoggingBootstrap {
    nonisolated(unsafe) private static var done = false
    private static let lock = NSLock()

    static func once(format: LogFormat, level: Logger.Level) {
        lock.withLock {
            guard !done else { return }
            done = true
            LoggingSystem.bootstrap { label in
                switch format {
                case .text: TextLogHandler(label: label, logLevel: level)
                case .json: JSONLogHandler(label: label, logLevel: level)
                }
            }
        }
    }
}
