import Foundation

/// PgBouncer in transaction mode in front of a test cluster: the kind of pooler an app's
/// PostgreSQL often sits behind (Supabase's on port 6543 works the same way), which hands
/// each transaction, and each statement outside one, to whichever server connection is
/// free. Debian 12's PgBouncer (1.18) predates its support for prepared statements, as
/// such poolers often do. It lives in a directory inside the cluster's and is stopped with
/// the cluster, or by `stop()`.
public final class ThrowawayPgBouncer: Sendable {
    public static let program = "/usr/sbin/pgbouncer"

    public let directory: String
    public let port: Int
    private let pid: pid_t
    private let cluster: ThrowawayPostgres

    /// Starts one (it takes a moment: not on the cooperative pool). `serverConnections`:
    /// how many server connections it shares among all its clients.
    public static func start(before cluster: ThrowawayPostgres, serverConnections: Int) async throws -> ThrowawayPgBouncer {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try ThrowawayPgBouncer(before: cluster, serverConnections: serverConnections) })
            }.start()
        }
    }

    private init(before cluster: ThrowawayPostgres, serverConnections: Int) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.program) else {
            throw ClusterError("PgBouncer not found at \(Self.program): install the Debian package `pgbouncer` (make deps does)")
        }
        self.cluster = cluster
        directory = cluster.directory + "/pgbouncer-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // PgBouncer logs in with this password to the server (SCRAM) and checks clients' against it.
        try "\"\(cluster.username)\" \"\(cluster.password)\"\n".write(toFile: directory + "/userlist.txt", atomically: true, encoding: .utf8)
        try ThrowawayPostgres.handToServerUser(directory, files: ["userlist.txt"])
        // A port free a moment ago may be taken by the time PgBouncer binds it: try a few.
        var lastLog = ""
        for _ in 0..<5 {
            let candidate = try ThrowawayPostgres.freePort()
            // Run as root, it refuses to go on unless told which user to become.
            let settings = """
                [databases]
                * = host=127.0.0.1 port=\(cluster.port)
                [pgbouncer]
                listen_addr = 127.0.0.1
                listen_port = \(candidate)
                unix_socket_dir =
                auth_type = scram-sha-256
                auth_file = \(directory)/userlist.txt
                pool_mode = transaction
                default_pool_size = \(serverConnections)
                \(ThrowawayPostgres.isRoot ? "user = postgres" : "")
                """
            try settings.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
            let log = directory + "/pgbouncer.log"
            // In the foreground: its exit (a port taken after all) is seen here, and its pid is this one.
            let started = try ThrowawayPostgres.spawn([Self.program, directory + "/pgbouncer.ini"], logTo: log)
            try "\(started)\n".write(toFile: directory + "/bouncer.pid", atomically: true, encoding: .utf8)
            if try Self.listens(pid: started, port: candidate) {
                pid = started
                port = candidate
                return
            }
            lastLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        }
        throw ClusterError("PgBouncer did not start:\n\(lastLog.suffix(2_000))")
    }

    /// Waits until PgBouncer accepts connections on `port` (true), or has exited (false).
    private static func listens(pid: pid_t, port: Int) throws -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { return false }
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { throw ClusterError("socket(): \(String(cString: strerror(errno)))") }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(socket)
            if connected { return true }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        throw ClusterError("PgBouncer did not listen on port \(port) within 30 s")
    }

    /// `postgres://…` for a database of the cluster, through PgBouncer.
    public func url(database: String, pool: Int) -> String {
        "postgres://\(cluster.username):\(cluster.password)@127.0.0.1:\(port)/\(database)?sslmode=disable&pool=\(pool)&connect_timeout=30"
    }

    public func stop() { Self.stop(directory) }

    /// Every PgBouncer started in the cluster directory `directory`, also by a test process
    /// that has died since.
    static func stopAll(in directory: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix("pgbouncer-") { stop(directory + "/" + name) }
    }

    private static func stop(_ directory: String) {
        let pidFile = directory + "/bouncer.pid"
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
              let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return }
        try? FileManager.default.removeItem(atPath: pidFile)
        // A pid from a test process that died may have been reused since: only PgBouncer is stopped.
        guard let command = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8), command.hasPrefix(program) else { return }
        kill(pid, SIGKILL)
        // Reaped by this process when it started it; otherwise waitpid fails and init reaps it.
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
}
