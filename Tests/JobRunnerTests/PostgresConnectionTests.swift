import ChildProcesses
import Foundation
import JobRunner
import PostgresBackend
import PostgresTesting
import Testing

/// What an operator sees when the PostgreSQL URL or server is wrong.
struct PostgresConnectionTests {
    @Test func anUnreachableServerIsReportedAsUnavailableNamingIt() async throws {
        let port = try ThrowawayPostgres.freePortForTests()
        do {
            _ = try await PostgresStore(url: "postgres://someone:secret@127.0.0.1:\(port)/lifecycle?sslmode=disable")
            Issue.record("connecting to a closed port succeeded")
        } catch let error as PostgresStoreError {
            #expect(error.isUnavailable)
            #expect(error.message.contains("127.0.0.1:\(port)"))
            #expect(!error.message.contains("secret"))
        }
    }

    @Test func aWrongPasswordIsReportedAsUnavailableWithAHint() async throws {
        let cluster = try await ThrowawayPostgres.shared()
        do {
            _ = try await PostgresStore(url: "postgres://\(cluster.username):wrong@127.0.0.1:\(cluster.port)/postgres?sslmode=disable")
            Issue.record("a wrong password was accepted")
        } catch let error as PostgresStoreError {
            #expect(error.isUnavailable)
            #expect(error.message.contains("password"))
        }
    }

    @Test(arguments: [
        "postgres://host/db", "postgres://user@/db", "postgres://user@host", "postgres://user@host/db?sslmode=sometimes",
        "postgres://user@host/db?pool=0", "postgres://user@host/db?colour=blue", "postgres://user@host/db?connect_timeout=0",
        "postgres://user@host/db?connect_timeout=soon",
    ])
    func badURLsAreRefusedWithWhatIsWrong(_ url: String) throws {
        #expect { try PostgresLocation(url: url) } throws: { error in
            (error as? PostgresStoreError)?.isBadLocation == true
        }
    }

    @Test func aURLWithEveryPartParses() throws {
        let location = try PostgresLocation(url: "postgresql://ops%40corp:p%2Fss@db.internal:6543/life?sslmode=require&pool=3&connect_timeout=20")
        #expect(location == PostgresLocation(
            host: "db.internal", port: 6543, username: "ops@corp", password: "p/ss", database: "life", tls: .require, maxConnections: 3,
            connectTimeout: 20))
        #expect(try PostgresLocation(url: "postgres://user@host/db").connectTimeout == 5)
        #expect(!location.description.contains("p/ss"))
    }

    /// More callers than connections, each giving its connection back at once: a
    /// connection released while a caller is deciding to wait must still reach it.
    /// Lost, the caller waits forever, so the time limit is what fails the test. Alone it
    /// takes seconds; the limit is far above what the whole suite's load on two cores makes
    /// of it (a minute and a half), since the callers wait their turn on the same few
    /// cooperative threads as every other suite.
    @Test(.timeLimit(.minutes(5)))
    func callersWaitingForABusyPoolAreAllServed() async throws {
        let store = try await ThrowawayPostgres.makeStore(pool: 1)
        let served = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<50 { _ = try await store.read { tx in try tx.query("SELECT 1") } }
                    return 50
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(served == 8 * 50)
    }

    @Test func aServerRestartCostsOnlyTheTransactionsInFlight() async throws {
        let store = try await ThrowawayPostgres.makeStore(pool: 2)
        _ = try await store.write { tx in try store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch, in: tx) }
        // Every pooled connection is cut by the server, as a restart or failover would.
        let cluster = try await ThrowawayPostgres.shared()
        try await cluster.terminateConnections(database: store.server.database)
        var recovered = false
        for _ in 0..<3 where !recovered {
            recovered = (try? await store.countByState()[.queued]) == 1
        }
        #expect(recovered)
    }
}

/// The test cluster's server outlives the call that starts it, so it must take none of the
/// test process's descriptors along: a pipe another test is reading to EOF at that moment
/// would stay open in the server, and that reader would wait for as long as the server runs.
struct ThrowawayClusterDescriptorTests {
    @Test func theServerHoldsNoDescriptorOfTheProcessThatStartedIt() async throws {
        let pipe = Pipe()
        let writeEnd = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(pipe.fileHandleForWriting.fileDescriptor)")
        #expect(writeEnd.hasPrefix("pipe:["))
        // initdb, pg_ctl start and pg_ctl stop block until they exit: on a thread of their own.
        let cluster = try await onThreadOfItsOwn { try ThrowawayPostgres(durable: false, maxConnections: 10) }
        let held: [String]
        do {
            held = try Self.descriptors(heldBy: cluster)
        } catch {
            await onThreadOfItsOwn { cluster.stop() }
            throw error
        }
        await onThreadOfItsOwn { cluster.stop() }

        #expect(held.contains { $0.hasPrefix("/") || $0.hasPrefix("socket:") }, "the listing of the server's descriptors came back empty: \(held)")
        #expect(!held.contains(writeEnd), "the server holds this process's pipe \(writeEnd): \(held)")
        try pipe.fileHandleForWriting.close()
    }

    /// What the cluster's server process has open, as /proc lists it.
    private static func descriptors(heldBy cluster: ThrowawayPostgres) throws -> [String] {
        let pidFile = try String(contentsOfFile: cluster.directory + "/data/postmaster.pid", encoding: .utf8)
        let postmaster = try #require(pidFile.split(separator: "\n").first.flatMap { Int($0) })
        return try FileManager.default.contentsOfDirectory(atPath: "/proc/\(postmaster)/fd").compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(postmaster)/fd/\($0)")
        }
    }
}
