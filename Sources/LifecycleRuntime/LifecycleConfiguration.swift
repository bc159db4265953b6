import Foundation
import JobRunner
import Lifecycle
import Logging
import ObjectStorage
import PostgresBackend

/// Where an installation lives and how it tells time: what the `lifecycle` CLI reads from
/// its options and environment, for an app backend that runs the same jobs in its own
/// process against the same database, blob store and `Jobs` folder.
///
/// ```swift
/// let configuration = try LifecycleConfiguration(environment: ProcessInfo.processInfo.environment)
/// ```
/// reads the variables the CLI reads; the memberwise initialiser takes the values directly.
public struct LifecycleConfiguration: Sendable {
    /// A SQLite file (created, with its folder, when missing), or a
    /// `postgres://user:password@host:port/database` URL.
    public var database: String
    /// A directory, or `s3://bucket/prefix?endpoint=URL&region=NAME`.
    public var blobs: String
    /// Where export archives live, apart from `blobs` (which an app may serve to anyone):
    /// a directory or an `s3://` location. Nil: beside a SQLite database whose blobs are a
    /// directory (`<database>.exports`); otherwise in `blobs`, as before it existed.
    public var exports: String?
    /// The folder holding `policies/` and the data map `account-data.yaml`.
    public var jobsDirectory: String
    public var clock: any TimeSource
    /// Where an `s3://` blob store finds its credentials and region (`AWS_ACCESS_KEY_ID`, …).
    public var environment: [String: String]
    /// A link-signing key file named on the command line, over LIFECYCLE_SIGNING_KEY_FILE.
    public var signingKeyFile: String?
    /// Given to the services, and through them to every job.
    public var logger: Logger
    /// Given to a PostgreSQL store for its connections.
    public var databaseLogger: Logger

    public init(
        database: String, blobs: String, jobsDirectory: String, clock: any TimeSource = SystemTimeSource(),
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger = Logger(label: "lifecycle"), databaseLogger: Logger = Logger(label: "lifecycle.postgres"),
        exports: String? = nil
    ) {
        self.database = database
        self.blobs = blobs
        self.exports = exports
        self.jobsDirectory = jobsDirectory
        self.clock = clock
        self.environment = environment
        self.logger = logger
        self.databaseLogger = databaseLogger
    }

    /// The configuration the CLI runs with: each of `database`, `blobs` and `jobsDirectory`
    /// as given, else from its variable (`LIFECYCLE_DATABASE`, `LIFECYCLE_BLOBS`,
    /// `LIFECYCLE_JOBS_DIR`), else its default (`./lifecycle.sqlite`, `./blobs`, `./Jobs`);
    /// the clock from `LIFECYCLE_NOW` (see `clock(environment:)`).
    ///
    /// - Throws: `LifecycleError` `.badConfiguration` when `LIFECYCLE_NOW` is not a timestamp.
    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        database: String? = nil, blobs: String? = nil, jobsDirectory: String? = nil,
        logger: Logger = Logger(label: "lifecycle"), databaseLogger: Logger = Logger(label: "lifecycle.postgres"),
        exports: String? = nil
    ) throws {
        self.init(
            database: Setting.database.value(given: database, environment: environment),
            blobs: Setting.blobs.value(given: blobs, environment: environment),
            jobsDirectory: Setting.jobsDirectory.value(given: jobsDirectory, environment: environment),
            clock: try Self.clock(environment: environment), environment: environment, logger: logger, databaseLogger: databaseLogger,
            exports: exports ?? environment[Self.exportsVariable].flatMap { $0.isEmpty ? nil : $0 })
    }

    public static let exportsVariable = "LIFECYCLE_EXPORTS"

    /// Where export archives go: `exports` as configured, else a private folder of their
    /// own: beside a SQLite database (`<database>.exports`, private like the file), or on
    /// PostgreSQL beside the blob directory (`<blobs>.exports`: never inside an app's
    /// `MEDIA_ROOT`, which an app serves to anyone). Nil on S3: an installation there may
    /// have no local disk, and a prefix beside the blobs would be as public as their bucket,
    /// so it is the operator's choice (an S3 prefix of a private bucket). Until it is made,
    /// no account is exported (`ExportJobs.requestExport`, and the export job waits for a
    /// worker that has one).
    public var exportLocation: String? {
        if let exports { return exports }
        if S3Location.looksLikeLocation(blobs) { return nil }
        guard usesPostgres else { return database + ".exports" }
        var folder = blobs
        while folder.count > 1 && folder.hasSuffix("/") { folder.removeLast() }
        return folder + ".exports"
    }

    /// The settings read from the environment, with the CLI's defaults.
    public enum Setting: String, Sendable, CaseIterable {
        case database = "LIFECYCLE_DATABASE"
        case blobs = "LIFECYCLE_BLOBS"
        case jobsDirectory = "LIFECYCLE_JOBS_DIR"

        public var variable: String { rawValue }

        public var defaultValue: String {
            switch self {
            case .database: "./lifecycle.sqlite"
            case .blobs: "./blobs"
            case .jobsDirectory: "./Jobs"
            }
        }

        /// `given` (a command-line option) wins over the environment, which wins over the default.
        public func value(given: String? = nil, environment: [String: String]) -> String {
            given ?? environment[variable] ?? defaultValue
        }
    }

    public static let clockVariable = "LIFECYCLE_NOW"

    /// The system clock, or with `LIFECYCLE_NOW` a clock that starts at that instant and
    /// keeps ticking from there, for tests and what-if runs.
    public static func clock(environment: [String: String]) throws -> any TimeSource {
        guard let text = environment[clockVariable], !text.isEmpty else { return SystemTimeSource() }
        guard let start = ISO8601.parse(text) else {
            throw LifecycleError(.badConfiguration, "LIFECYCLE_NOW must be an ISO-8601 timestamp like 2026-01-31T03:00:00Z (got '\(text)')")
        }
        return ShiftedTimeSource(startingAt: start)
    }

    public var usesPostgres: Bool { PostgresLocation.isURL(database) }

    /// `database` as a PostgreSQL location; a malformed URL is `.badConfiguration`.
    func postgresLocation() throws -> PostgresLocation {
        do {
            return try PostgresLocation(url: database)
        } catch let error as PostgresStoreError {
            throw LifecycleError(.badConfiguration, "--database (or LIFECYCLE_DATABASE): \(error.message)")
        }
    }
}
