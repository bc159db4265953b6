import Foundation

/// PgBouncer in transaction mode in front of a test cluster: the kind of pooler an app's
/// PostgreSQL often sits behind (Supabase's on port 6543 works the same way), which hands
/// each transaction, and each statement outside one, to whichever server connection is
/// free. Debian 12's PgBouncer (1.18) predates its support for prepared statements, as
/// such poolers often do. It lives in a directory inside the cluster's and stops with it.
public final class ThrowawayPgBouncer: Sendable {
    public static let program = "/usr/sbin/pgbouncer"

    public let directory: String
    public let port: Int
    private let cluster: ThrowawayPostgres

    /// `serverConnections`: how many server connections it shares among all its clients.
    public init(before cluster: ThrowawayPostgres, serverConnections: Int) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.program) else {
            throw ClusterError("PgBouncer not found at \(Self.program): install the Debian package `pgbouncer` (make deps does)")
        }
        self.cluster = cluster
        directory = cluster.directory + "/pgbouncer-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // PgBouncer logs in with this password to the server (SCRAM) and checks clients' against it.
        try "\"\(cluster.username)\" \"\(cluster.password)\"\n".write(toFile: directory + "/userlist.txt", atomically: true, encoding: .utf8)
        var started: Int?
        var lastError: (any Error)?
        // A port free a moment ago may be taken by the time PgBouncer binds it: try a few.
        for _ in 0..<5 where started == nil {
            let candidate = try ThrowawayPostgres.freePort()
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
                logfile = \(directory)/pgbouncer.log
                pidfile = \(directory)/pgbouncer.pid
                """
            try settings.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
            try ThrowawayPostgres.handToServerUser(directory, files: ["userlist.txt", "pgbouncer.ini"])
            do {
                // -d: it goes into the background once it listens, or exits non-zero.
                try ThrowawayPostgres.run(Self.program, ["-d", directory + "/pgbouncer.ini"], logTo: directory + "/start.log")
                started = candidate
            } catch {
                lastError = error
            }
        }
        guard let started else {
            throw lastError ?? ClusterError("PgBouncer did not start; see \(directory)/pgbouncer.log")
        }
        port = started
        try waitUntilListening()
    }

    /// PgBouncer may go into the background before its socket listens: connections are
    /// refused until it does.
    private func waitUntilListening() throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
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
            if connected { return }
            usleep(10_000)
        }
        throw ClusterError("PgBouncer did not listen on port \(port) within 30 s; see \(directory)/pgbouncer.log")
    }

    /// `postgres://…` for a database of the cluster, through PgBouncer.
    public func url(database: String, pool: Int) -> String {
        "postgres://\(cluster.username):\(cluster.password)@127.0.0.1:\(port)/\(database)?sslmode=disable&pool=\(pool)&connect_timeout=30"
    }

    public func stop() { Self.stop(directory) }

    /// Every PgBouncer started in the cluster directory `directory`.
    static func stopAll(in directory: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix("pgbouncer-") { stop(directory + "/" + name) }
    }

    private static func stop(_ directory: String) {
        guard let text = try? String(contentsOfFile: directory + "/pgbouncer.pid", encoding: .utf8),
              let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return }
        kill(pid, SIGTERM)
        try? FileManager.default.removeItem(atPath: directory + "/pgbouncer.pid")
    }
}
