import ChildProcesses
import Foundation
import JobRunner
import Logging
import PostgresBackend
import PostgresNIO
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
            // The connect timeout of every other URL of the shared cluster: the default 5 s
            // once ran out while a full run's first minute kept both cores busy.
            _ = try await PostgresStore(url: "postgres://\(cluster.username):wrong@127.0.0.1:\(cluster.port)/postgres?sslmode=disable&connect_timeout=30")
            Issue.record("a wrong password was accepted")
        } catch let error as PostgresStoreError {
            #expect(error.isUnavailable)
            #expect(error.message.contains("password"))
        }
    }

    @Test(arguments: [
        "postgres://host/db", "postgres://user@/db", "postgres://user@host", "postgres://user@host/db?sslmode=sometimes",
        "postgres://user@host/db?pool=0", "postgres://user@host/db?colour=blue", "postgres://user@host/db?connect_timeout=0",
        "postgres://user@host/db?connect_timeout=soon", "postgres://user@host/db?prepared_statements=sometimes",
        // A socket address keeps 16 bits of a port: 99999 would reach 34463.
        "postgres://user@host:99999/db", "postgres://user@host:0/db", "postgres://user@host:/db",
    ])
    func badURLsAreRefusedWithWhatIsWrong(_ url: String) throws {
        #expect { try PostgresLocation(url: url) } throws: { error in
            (error as? PostgresStoreError)?.isBadLocation == true
        }
    }

    @Test func aURLWithEveryPartParses() throws {
        let location = try PostgresLocation(url: "postgresql://ops%40corp:p%2Fss@db.internal:6543/life?sslmode=require&pool=3&connect_timeout=20&prepared_statements=false")
        #expect(location == PostgresLocation(
            host: "db.internal", port: 6543, username: "ops@corp", password: "p/ss", database: "life", tls: .require, maxConnections: 3,
            connectTimeout: 20, preparedStatements: false))
        #expect(try PostgresLocation(url: "postgres://user@host/db").connectTimeout == 5)
        #expect(try PostgresLocation(url: "postgres://user@host/db").preparedStatements)
        #expect(!location.description.contains("p/ss"))
    }

    /// A single enqueue goes as a prepared statement. Behind a pooler in transaction mode
    /// the next run of it may reach a server connection where it was never prepared: that
    /// enqueue still succeeds, and the store sends plain statements from then on.
    @Test func aPreparedStatementTheServerNoLongerHasCostsNoEnqueue() async throws {
        let store = try await ThrowawayPostgres.makeStore(pool: 1)
        @Sendable func prepared() async throws -> [String] {
            // pool=1: the very connection the enqueues used.
            try await store.write { tx in try tx.query("SELECT name FROM pg_prepared_statements").map { try $0.decode(String.self) } }
        }
        func enqueue(_ n: Int) async throws -> EnqueueOutcome {
            try await store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"n":\#(n)}"#), policy: JobPolicy(), now: epoch)
        }
        let first = try await enqueue(1)
        #expect(try await prepared().contains { $0.hasPrefix("lifecycle_insert_job_") })
        // Gone from the server while the connection still counts it as prepared.
        _ = try await store.write { tx in try tx.execute("DEALLOCATE ALL") }
        let second = try await enqueue(2)
        let third = try await enqueue(3)
        #expect(try await prepared().isEmpty, "the store prepared the statement again after the server had refused it")
        for (outcome, n) in [(first, 1), (second, 2), (third, 3)] {
            #expect(outcome.created)
            #expect(try await store.job(id: outcome.job.id)?.payload == #"{"n":\#(n)}"#)
        }

        // Told so by its URL, a store never prepares one.
        let cluster = try await ThrowawayPostgres.shared()
        let plain = try await PostgresStore(url: cluster.url(database: try await cluster.createDatabase(), pool: 1) + "&prepared_statements=false")
        let job = try await plain.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch)
        #expect(job.created)
        #expect(try await plain.write { tx in try tx.query("SELECT count(*) FROM pg_prepared_statements").first?.decode(Int.self) } == 0)
    }

    /// A worker's claims and done-marks go as prepared statements too. Inside a transaction a
    /// refused one cannot be sent again plain: the transaction is rolled back and runs once
    /// more, with plain statements, as every later one does. The claim still takes its jobs
    /// (a worker whose claim failed would stop) and each job is claimed and finished once.
    @Test func aWorkerStatementTheServerNoLongerHasStillClaimsAndMarks() async throws {
        let store = try await ThrowawayPostgres.makeStore(pool: 1)
        @Sendable func prepared() async throws -> [String] {
            try await store.write { tx in try tx.query("SELECT name FROM pg_prepared_statements").map { try $0.decode(String.self) } }
        }
        func finish(_ claimed: [ClaimedJob]) async throws -> [Bool?] {
            let marks = claimed.map { StepMark(jobID: $0.record.id, step: "only", output: nil, finishesJob: true, owner: "A", now: epoch) }
            return try await store.write { tx in try store.markStepsDone(marks, in: tx) }
        }
        let requests = (0..<7).map { EnqueueRequest(kind: "test.a", payload: #"{"n":\#($0)}"#) }
        _ = try await store.write { tx in try store.enqueue(many: requests, policy: JobPolicy(), now: epoch, in: tx) }
        let first = try await store.claim(quota: ["test.a": 1], leases: ["test.a": 60], owner: "A", now: epoch)
        #expect(try await finish(first) == [false])
        let names = try await prepared()
        for prefix in ["lifecycle_claim_rescue_", "lifecycle_claim_ready_", "lifecycle_claim_lease_", "lifecycle_claim_steps_", "lifecycle_mark_steps_"] {
            #expect(names.contains { $0.hasPrefix(prefix) }, "\(prefix) missing from \(names)")
        }
        let second = try await store.claim(quota: ["test.a": 3], leases: ["test.a": 60], owner: "A", now: epoch)
        // Gone from the server while the connection still counts them as prepared: the marks
        // meet it first, then (in a store of its own) a claim.
        _ = try await store.write { tx in try tx.execute("DEALLOCATE ALL") }
        #expect(try await finish(second) == [false, false, false])
        #expect(!store.usesPreparedStatements)

        let cluster = try await ThrowawayPostgres.shared()
        let other = try await PostgresStore(url: cluster.url(database: store.server.database, pool: 1))
        _ = try await other.claim(quota: ["test.other": 1], leases: [:], owner: "B", now: epoch)
        _ = try await other.write { tx in try tx.execute("DEALLOCATE ALL") }
        let rest = try await other.claim(quota: ["test.a": 3], leases: ["test.a": 60], owner: "A", now: epoch)
        #expect(rest.count == 3)
        #expect(!other.usesPreparedStatements)
        #expect(try await finish(rest) == [false, false, false])
        #expect(try await store.countByState()[.succeeded] == 7)
        #expect(try await prepared().isEmpty, "the store prepared statements again after the server had refused one")
    }

    /// postgres-nio keeps a failed preparation as that statement's state on its connection.
    /// A preparation that failed for a passing reason (here the lock_timeout of an enqueue
    /// waiting behind a migration's lock on the jobs table) costs that enqueue alone: the
    /// next one prepares afresh rather than meet the same error for the life of the process.
    @Test func aPreparationThatFailedOnceFailsNoLaterEnqueue() async throws {
        let cluster = try await ThrowawayPostgres.shared()
        let database = try await cluster.createDatabase()
        try await PostgresStore(url: cluster.url(database: database, pool: 1)).close()
        // The database's name is made by the test cluster from a UUID.
        try await cluster.admin(PostgresQuery(unsafeSQL: "ALTER DATABASE \(database) SET lock_timeout = '300ms'"))
        let store = try await PostgresStore(url: cluster.url(database: database, pool: 1))

        // The locker's steps say which one failed, with postgres-nio's whole error (its
        // description alone hides the server's message).
        func step<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
            do { return try await body() } catch let error as PSQLError {
                throw LockerFailure(description: "the locker's \(what) failed: \(String(reflecting: error))")
            }
        }
        let logger = Logger(label: "lifecycle.tests.locker")
        var configuration = PostgresConnection.Configuration(
            host: "127.0.0.1", port: cluster.port, username: cluster.username, password: cluster.password, database: database, tls: .disable)
        configuration.options.connectTimeout = .seconds(30)
        let locker = try await step("connect") { try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger) }
        // The database's 300 ms is for the store's enqueue: the locker waits as long as it
        // must for whatever the store still holds (on a loaded machine, more than 300 ms).
        _ = try await step("SET lock_timeout") { try await locker.query("SET lock_timeout = 0", logger: logger) }
        _ = try await step("BEGIN") { try await locker.query("BEGIN", logger: logger) }
        _ = try await step("LOCK TABLE") { try await locker.query("LOCK TABLE lifecycle.jobs IN ACCESS EXCLUSIVE MODE", logger: logger) }
        await #expect(throws: PostgresStoreError.self) {
            try await store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch)
        }
        _ = try await step("ROLLBACK") { try await locker.query("ROLLBACK", logger: logger) }
        try await step("close") { try await locker.close() }

        let later = try await store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch)
        #expect(later.created)
        #expect(store.usesPreparedStatements, "a lock timeout is no refusal of prepared statements")
    }

    /// Behind PgBouncer in transaction mode (Debian's 1.18, which passes prepared statements
    /// through without tracking them), processes share the pooler's server connections: one
    /// process's prepared statement is found there by another's, which can then not prepare
    /// its own (42P05). That process's enqueue still lands, and it goes on with plain
    /// statements while the first keeps its prepared one; every enqueue lands once.
    @Test func enqueuesThroughAPoolerInTransactionModeAllLandOnce() async throws {
        let cluster = try await ThrowawayPostgres.shared()
        let database = try await cluster.createDatabase()
        let direct = try await PostgresStore(url: cluster.url(database: database, pool: 1))
        let bouncer = try await ThrowawayPgBouncer.start(before: cluster, serverConnections: 1)
        defer { bouncer.stop() }
        let first = try await PostgresStore(url: bouncer.url(database: database, pool: 1))
        let second = try await PostgresStore(url: bouncer.url(database: database, pool: 1))
        let one = try await first.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch)
        let two = try await second.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch)
        #expect(one.created && two.created && one.job.id != two.job.id)
        #expect(first.usesPreparedStatements)
        #expect(!second.usesPreparedStatements, "the second process prepared its own statement on the shared server connection")

        let ids = try await withThrowingTaskGroup(of: [JobID].self) { group in
            for client in 0..<8 {
                let store = client.isMultiple(of: 2) ? first : second
                group.addTask {
                    var ids: [JobID] = []
                    for n in 0..<40 {
                        let request = EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"client":\#(client),"n":\#(n)}"#)
                        ids.append(try await store.enqueue(request, policy: JobPolicy(), now: epoch).job.id)
                    }
                    return ids
                }
            }
            return try await group.reduce(into: [JobID]()) { $0 += $1 }
        }
        #expect(Set(ids + [one.job.id, two.job.id]).count == 322)
        let stored = try await direct.read { tx in try tx.query("SELECT count(DISTINCT payload) FROM lifecycle.jobs WHERE payload <> '{}'").first?.decode(Int.self) }
        #expect(stored == 320)
        #expect(first.usesPreparedStatements)
    }

    /// More callers than connections, each giving its connection back at once: a
    /// connection released while a caller is deciding to wait must still reach it.
    /// Lost, the caller waits forever, so the time limit is what fails the test. Alone it
    /// takes seconds; the limit is far above what the whole suite's load on two cores makes
    /// of it (over five minutes once, with the suites that load Supabase's schemas and
    /// migrate a Django site running alongside), since its 400 transactions wait their turn
    /// on the same threads and the same server as every other suite.
    @Test(.timeLimit(.minutes(12)))
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

    /// A server that goes away under an open store is reported within connect_timeout,
    /// naming it. A pool that waits for the server to come back (postgres-nio's
    /// `PostgresClient` does, for a minute before its circuit breaker) would hold a command
    /// for as long as the outage lasts. The time limit only catches a hang (a cluster's
    /// initdb on a loaded machine took three minutes); the report's own delay is checked below.
    @Test(.timeLimit(.minutes(10)))
    func aServerThatWentAwayIsReportedWithinTheConnectTimeout() async throws {
        let cluster = try await onThreadOfItsOwn { try ThrowawayPostgres(durable: false, maxConnections: 10) }
        let store: PostgresStore
        do {
            // The test clusters' 30 s connect timeout: the first connection, on a loaded machine,
            // may take seconds; a closed port afterwards refuses at once.
            store = try await PostgresStore(url: cluster.url(database: "postgres", pool: 2))
            _ = try await store.countByState()
        } catch {
            await onThreadOfItsOwn { cluster.stop() }
            throw error
        }
        await onThreadOfItsOwn { cluster.stop() }
        let started = ContinuousClock.now
        do {
            _ = try await store.countByState()
            Issue.record("a query on a stopped server succeeded")
        } catch let error as PostgresStoreError {
            #expect(error.isUnavailable)
            #expect(error.message.contains("127.0.0.1:\(cluster.port)"), "\(error.message)")
        }
        // A closed port refuses at once: well within the URL's connect_timeout of 30 s.
        #expect(ContinuousClock.now - started < .seconds(30))
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

/// A step of a test's own raw connection that failed, named, with the driver's whole error.
private struct LockerFailure: Error, CustomStringConvertible {
    let description: String
}
