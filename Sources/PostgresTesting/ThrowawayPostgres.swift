import Foundation
import Logging
import NIOPosix
import PostgresBackend
import PostgresNIO
import Synchronization

/// A PostgreSQL 15 cluster of its own for one test process: initdb in a temporary
/// directory, loopback only, a free port, stopped when the process exits (also
/// when tests fail). The server refuses to run as root, so as root it runs as the
/// `postgres` user. Each test asks for a database of its own, so tests run in parallel.
/// Text sorts as English does (ICU `en-US`: "amy" before "Zed"), as in the databases apps
/// usually run on, not in the byte order of a `C` cluster, which would hide any paging or
/// comparison that assumes it.
public final class ThrowawayPostgres: Sendable {
    public static let binDirectory = ProcessInfo.processInfo.environment["LIFECYCLE_PG_BIN"] ?? "/usr/lib/postgresql/15/bin"
    /// Clusters are named so that a later run can find and stop one whose process died.
    static let prefix = "lifecycle-pg-"

    public let directory: String
    public let port: Int
    public let username = "lifecycle"
    public let password: String

    /// The cluster of this process, started on first use.
    public static func shared() async throws -> ThrowawayPostgres {
        try await starter.value
    }

    private static let starter = Task<ThrowawayPostgres, any Error> {
        try await withCheckedThrowingContinuation { continuation in
            // initdb and pg_ctl block for a second or two: not on the cooperative pool.
            Thread {
                continuation.resume(with: Result { try ThrowawayPostgres(durable: false) })
            }.start()
        }
    }

    /// `durable: false` turns fsync off: a test cluster dies with its process anyway.
    /// Benchmarks keep the server's defaults.
    public init(durable: Bool, maxConnections: Int = 400) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binDirectory + "/initdb") else {
            throw ClusterError(
                "PostgreSQL 15 server programs not found in \(Self.binDirectory): install the Debian package `postgresql` "
                    + "(make deps does), or point LIFECYCLE_PG_BIN at a PostgreSQL 15 bin directory")
        }
        Self.stopStaleClusters()
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(Self.prefix)\(getpid())-\(UUID().uuidString.prefix(8).lowercased())").path
        password = UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "\(getpid())\n".write(toFile: directory + "/owner.pid", atomically: true, encoding: .utf8)
        try password.write(toFile: directory + "/pwfile", atomically: true, encoding: .utf8)
        try Self.handToServerUser(directory, files: ["pwfile"])
        try Self.run("initdb", [
            "-D", directory + "/data", "-U", username, "--pwfile=\(directory)/pwfile", "-A", "scram-sha-256",
            "-E", "UTF8", "--locale=C.UTF-8", "--locale-provider=icu", "--icu-locale=en-US", "--no-sync",
        ], logTo: directory + "/initdb.log")

        var settings = [
            "-c listen_addresses=127.0.0.1", "-c unix_socket_directories=\(directory)", "-c max_connections=\(maxConnections)",
        ]
        if !durable {
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        }
        // A port free a moment ago may be taken by the time the server binds it: try a few.
        var started: Int?
        var lastError: (any Error)?
        for _ in 0..<5 where started == nil {
            let candidate = try Self.freePort()
            do {
                try Self.run("pg_ctl", [
                    "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60",
                    "-o", (["-p \(candidate)"] + settings).joined(separator: " "), "start",
                ], logTo: directory + "/pg_ctl.log")
                started = candidate
            } catch {
                lastError = error
            }
        }
        guard let started else {
            throw lastError ?? ClusterError("the PostgreSQL test server did not start; see \(directory)/server.log")
        }
        port = started
        Self.registerForExit(self)
    }

    /// `postgres://…` for a database of this cluster. A connection attempt may take 30 s, not
    /// the default 5: with the whole suite on two cores, the cluster's postmaster (one
    /// process accepting every connection) has been seen to take longer than 5 s to answer.
    public func url(database: String, pool: Int = 4) -> String {
        "postgres://\(username):\(password)@127.0.0.1:\(port)/\(database)?sslmode=disable&pool=\(pool)&connect_timeout=30"
    }

    /// A new empty database; returns its name.
    /// `icuLocale`: a database that sorts text as that language does (`"en-US"`: "amy"
    /// before "Zed"), as an adopter's usually does, instead of the cluster's byte order.
    public func createDatabase(icuLocale: String? = nil) async throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        // The name is made here from a UUID, never from outside input; identifiers cannot be bound.
        // From template0, not the default template1: autovacuum's workers connect to
        // template1 like any database, and CREATE DATABASE refuses a template someone is
        // connected to ("source database is being accessed by other users") once it has
        // waited 5 s for them to leave, which a loaded machine can take. Nothing connects
        // to template0 (it does not allow connections), and it holds what template1 holds here.
        var locale = ""
        if let icuLocale {
            // A test's own constant, never outside input; identifiers and options cannot be bound.
            precondition(icuLocale.allSatisfy { $0.isLetter || $0 == "-" }, "an ICU locale such as en-US")
            locale = " LOCALE_PROVIDER icu ICU_LOCALE '\(icuLocale)'"
        }
        try await admin(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE template0\(locale)"))
        return name
    }

    /// Cuts every connection to the database, as a server restart or failover would.
    public func terminateConnections(database: String) async throws {
        try await admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(database) AND pid <> pg_backend_pid()")
    }

    /// Runs one statement on the `postgres` database. A failure names the server's own
    /// message and SQLSTATE: PSQLError's description hides them, and a test that failed
    /// making its database would say only "PSQLError".
    public func admin(_ query: PostgresQuery) async throws {
        let logger = Logger(label: "lifecycle.tests.postgres")
        var configuration = PostgresConnection.Configuration(
            host: "127.0.0.1", port: port, username: username, password: password, database: "postgres", tls: .disable)
        // As in `url(database:)`: under the whole suite the postmaster has been slower to
        // answer than postgres-nio's default of 10 s.
        configuration.options.connectTimeout = .seconds(30)
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: 0, logger: logger)
        } catch {
            throw ClusterError("cannot connect to the test cluster on port \(port) (\(directory)/server.log): \(String(reflecting: error))")
        }
        do {
            let rows: PostgresRowSequence = try await connection.query(query, logger: logger)
            for try await _ in rows {}
        } catch {
            try? await connection.close().get()
            throw ClusterError("\(query.sql) failed on the test cluster (\(directory)/server.log): \(String(reflecting: error))")
        }
        try await connection.close().get()
    }

    /// A loopback port nothing listens on (a moment ago).
    public static func freePortForTests() throws -> Int { try freePort() }

    /// A store on a new database of the shared cluster.
    public static func makeStore(pool: Int = 4) async throws -> PostgresStore {
        let cluster = try await shared()
        return try await PostgresStore(url: cluster.url(database: try await cluster.createDatabase(), pool: pool))
    }

    public func stop() {
        ThrowawayPgBouncer.stopAll(in: directory)
        try? Self.run("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"], logTo: directory + "/pg_ctl.log")
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: - Process plumbing

    static let isRoot = getuid() == 0

    /// glibc's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does
    /// not declare (it is a _GNU_SOURCE extension).
    private static let closeFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// Runs a server program, as `postgres` when this process is root. posix_spawn and
    /// waitpid rather than Foundation's Process: `pg_ctl start` leaves a daemon behind
    /// holding descriptors it inherited, and Process then never notices pg_ctl's exit.
    static func run(_ program: String, _ arguments: [String], logTo log: String) throws {
        let path = program.hasPrefix("/") ? program : binDirectory + "/" + program
        let argv = isRoot ? ["/usr/sbin/runuser", "-u", "postgres", "--", path] + arguments : [path] + arguments
        let pid = try spawn(argv, logTo: log)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED && WEXITSTATUS == 0, spelled out: the macros are not imported.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw ClusterError("\(program) \(arguments.joined(separator: " ")) failed (wait status \(status)):\n\(text.suffix(2_000))")
        }
    }

    /// Starts `argv` with its output appended to `log`, and returns at once.
    static func spawn(_ argv: [String], logTo log: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else goes across. The server outlives this call, and a pipe another
        // thread has open at this moment (a test reading a tool's output to EOF) would
        // otherwise stay open in it, and that reader would wait for as long as the server runs.
        guard let closeFrom = Self.closeFrom, closeFrom(&actions, 3) == 0 else {
            throw ClusterError("cannot keep this process's descriptors from \(argv[0]): posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later) is missing or failed")
        }
        // The calling thread may be one of Swift concurrency's, which block most signals: a
        // server that kept that mask (PgBouncer does) would never see the SIGTERM that stops it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, &attributes, &cArguments, environ)
        guard spawned == 0 else {
            throw ClusterError("cannot start \(argv[0]): \(String(cString: strerror(spawned)))")
        }
        return pid
    }

    /// As root, the data directory must belong to the user the server runs as.
    static func handToServerUser(_ directory: String, files: [String]) throws {
        guard isRoot else { return }
        guard let entry = getpwnam("postgres") else {
            throw ClusterError("running as root, but there is no `postgres` user to run the server as (install the `postgresql` package)")
        }
        for path in [directory] + files.map({ directory + "/" + $0 }) {
            guard chown(path, entry.pointee.pw_uid, entry.pointee.pw_gid) == 0 else {
                throw ClusterError("cannot hand \(path) to the postgres user: \(String(cString: strerror(errno)))")
            }
        }
    }

    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw ClusterError("socket(): \(String(cString: strerror(errno)))") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(socket, generic, length) == 0 && getsockname(socket, generic, &length) == 0
            }
        }
        guard bound else { throw ClusterError("cannot find a free loopback port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Clusters left by test processes that were killed before their exit handler ran.
    static func stopStaleClusters() {
        let temporary = FileManager.default.temporaryDirectory.path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: temporary) else { return }
        for name in names where name.hasPrefix(prefix) {
            let directory = temporary + "/" + name
            guard let text = try? String(contentsOfFile: directory + "/owner.pid", encoding: .utf8),
                  let owner = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { continue }
            if kill(owner, 0) == 0 || errno != ESRCH { continue }
            ThrowawayPgBouncer.stopAll(in: directory)
            if FileManager.default.fileExists(atPath: directory + "/data/postmaster.pid") {
                try? run("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"], logTo: "/dev/null")
            }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    private static let running = Mutex<[ThrowawayPostgres]>([])

    private static func registerForExit(_ cluster: ThrowawayPostgres) {
        let first = running.withLock { running in
            running.append(cluster)
            return running.count == 1
        }
        if first {
            atexit {
                let clusters = ThrowawayPostgres.running.withLock { $0 }
                for cluster in clusters { cluster.stop() }
            }
        }
    }
}

public struct ClusterError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
