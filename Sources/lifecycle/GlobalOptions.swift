import ArgumentParser
import Foundation
import LifecycleRuntime

enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    case text, json

    var logging: LifecycleLogging.Format {
        switch self {
        case .text: .text
        case .json: .json
        }
    }
}

/// Options every command takes, written after the command name.
struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "SQLite database file, or postgres://user:password@host:port/database for PostgreSQL (env LIFECYCLE_DATABASE).",
        valueName: "path-or-url"))
    var database: String?

    @Option(help: ArgumentHelp(
        "Where the files the rows name (photos, uploads) live: a directory, or s3://bucket/prefix?endpoint=URL&region=NAME with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set (env LIFECYCLE_BLOBS).",
        valueName: "dir|s3-url"))
    var blobs: String?

    @Option(help: ArgumentHelp(
        "Where export archives live, apart from --blobs (which an app may serve): a directory or an s3:// location (env LIFECYCLE_EXPORTS; default <database>.exports beside a SQLite file with a blob directory, <blobs>.exports beside it on PostgreSQL; with s3:// blobs none, and nothing is exported until it is set).",
        valueName: "dir|s3-url"))
    var exports: String?

    @Option(name: .customLong("jobs-dir"), help: ArgumentHelp("Directory with policies and the data map (env LIFECYCLE_JOBS_DIR).", valueName: "dir"))
    var jobsDir: String?

    @Flag(help: "Machine-readable JSON on stdout.")
    var json = false

    @Option(name: .customLong("log-format"), help: "Log lines on stderr as text or one JSON object per line.")
    var logFormat: LogFormat = .text

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = ProcessInfo.processInfo.environment["LIFECYCLE_LOG_LEVEL"] ?? "info"

    @Flag(help: "Print nothing when the command succeeds (for cron): what it would print is held back and shown only if it fails.")
    var quiet = false

    private var environment: [String: String] { ProcessInfo.processInfo.environment }

    var databasePath: String { LifecycleConfiguration.Setting.database.value(given: database, environment: environment) }
    var blobDirectory: String { LifecycleConfiguration.Setting.blobs.value(given: blobs, environment: environment) }
    var jobsDirectory: String { LifecycleConfiguration.Setting.jobsDirectory.value(given: jobsDir, environment: environment) }

    func validate() throws {
        guard LifecycleLogging.isLevel(logLevel) else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical (got '\(logLevel)')")
        }
    }

    func bootstrapLogging() {
        Terminal.jsonStderr = logFormat == .json
        if quiet { Terminal.beQuiet() }
        LifecycleLogging.bootstrapOnce(format: logFormat.logging, level: logLevel) { Terminal.logLine($0) }
    }

    /// The options over the environment, with logging set up first: the configuration's
    /// loggers and any error about it then come out in the chosen log format.
    func configuration() throws -> LifecycleConfiguration {
        bootstrapLogging()
        return try LifecycleConfiguration(environment: environment, database: database, blobs: blobs, jobsDirectory: jobsDir, exports: exports)
    }

    /// The embedded store (running migrations), the blob store and the policies: for
    /// `demo`, whose tour builds an installation of its own.
    func embeddedServices() async throws -> LifecycleServices<EmbeddedStore> {
        let configuration = try configuration()
        if configuration.usesPostgres {
            throw CLIFailure(.usage, """
                `demo` builds a fresh embedded installation (a SQLite file and a blob directory) and does not run on \
                PostgreSQL: pass --database PATH for a new SQLite file; every other command runs on PostgreSQL too
                """)
        }
        return try await configuration.embeddedServices()
    }

    /// Runs a command on whichever backend `--database` names; `signingKeyFile`, a command's
    /// `--signing-key-file`, for every link this process signs.
    func withServices(_ command: some StoreCommand, signingKeyFile: String? = nil) async throws -> ExitStatus {
        var configuration = try configuration()
        configuration.signingKeyFile = signingKeyFile
        return try await configuration.withInstallation(command)
    }
}

/// A command whose body runs on either backend.
protocol StoreCommand: InstallationBody where Output == ExitStatus {}

/// Who does an operator action, for the audit: `--operator NAME`, else
/// `LIFECYCLE_OPERATOR`, else the Unix account running the command (`sudo`'s caller
/// when run through sudo), so that no action is recorded as an anonymous "cli".
struct OperatorOption: ParsableArguments {
    @Option(name: .customLong("operator"), help: ArgumentHelp(
        "Who does this, for the audit (env LIFECYCLE_OPERATOR; default: the Unix user).", valueName: "name"))
    var name: String?

    func validate() throws {
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--operator needs a name") }
        if let name, name.count > 200 || name.contains(where: { $0.isNewline || $0.asciiValue.map { $0 < 0x20 } ?? false }) {
            throw ValidationError("--operator must be one line of at most 200 characters")
        }
    }

    /// The operator's name.
    var operatorName: String {
        let environment = ProcessInfo.processInfo.environment
        if let name { return name.trimmingCharacters(in: .whitespaces) }
        if let named = environment["LIFECYCLE_OPERATOR"], !named.trimmingCharacters(in: .whitespaces).isEmpty {
            return named.trimmingCharacters(in: .whitespaces)
        }
        if let caller = environment["SUDO_USER"], !caller.isEmpty { return caller }
        if let entry = getpwuid(geteuid()), let user = entry.pointee.pw_name { return String(cString: user) }
        return "uid \(geteuid())"
    }

    /// As the audit records it: `operator:NAME`, as every operator action does.
    var actor: String { "operator:" + operatorName }
}

/// `--metrics-file`: Prometheus figures of the run for node_exporter's textfile collector.
struct MetricsOption: ParsableArguments {
    @Option(name: .customLong("metrics-file"), help: ArgumentHelp(
        "Write Prometheus metrics here when the run ends (a daemon: every 15 s), for node_exporter's textfile collector (env LIFECYCLE_METRICS_FILE).",
        valueName: "path"))
    var path: String?

    var resolvedPath: String? {
        guard let path = path ?? ProcessInfo.processInfo.environment["LIFECYCLE_METRICS_FILE"], !path.isEmpty else { return nil }
        return path
    }

    /// The registry, made the process' swift-metrics backend, when a file is wanted.
    func start() -> LifecycleMetricsRegistry? {
        resolvedPath == nil ? nil : LifecycleMetricsRegistry.bootstrapped()
    }

    /// The queue as it stands and how the run ended, written to the file. A file that
    /// cannot be written turns a green run into exit 73: monitoring would otherwise go blind unnoticed.
    /// `final`: the process ends after this write (a cron run), so its counters are added
    /// to the file's; a daemon's periodic writes carry its own running totals.
    func finish<Store: LifecycleStore>(
        _ registry: LifecycleMetricsRegistry?, command: String, status: ExitStatus, final: Bool = true, services: LifecycleServices<Store>
    ) async -> ExitStatus {
        guard let registry, let path = resolvedPath else { return status }
        do {
            registry.recordRun(command: command, exitStatus: status.rawValue, at: services.clock.now())
            try await registry.recordQueue(store: services.store, kinds: services.registry.names)
            try registry.write(to: path, run: command, accumulating: final)
            return status
        } catch {
            Terminal.error(CLIFailure.from(error).message)
            return status == .ok ? .cannotCreate : status
        }
    }
}

extension GlobalOptions {
    /// The options above as a usage line shows them, for a command that writes its own usage:
    /// past 12 options ArgumentParser prints only `<options>` there.
    static let usage = "[--database <path-or-url>] [--blobs <dir|s3-url>] [--exports <dir|s3-url>] [--jobs-dir <dir>] [--json] [--log-format <log-format>] [--log-level <log-level>] [--quiet]"
}
