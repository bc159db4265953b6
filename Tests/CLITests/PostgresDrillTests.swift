import ChildProcesses
import Foundation
import JobRunner
import PostgresBackend
import PostgresTesting
import Testing

/// Many machines, one PostgreSQL: worker processes share the queue through the
/// server alone, and a machine that dies mid-job loses nothing.
@Suite(.serialized)
struct PostgresDrillTests {
    /// A copy of the shipped Jobs/ folder whose probe kind has a short lease, so that
    /// the dead worker's jobs come due again within seconds.
    static func jobsDirectory(lease: Int) throws -> String {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/policies", toPath: copy + "/policies")
        try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/account-data.yaml", toPath: copy + "/account-data.yaml")
        try """
            job:
              kind: runner.probe
              max_attempts: 5
              lease_seconds: \(lease)
              concurrency: 8
            """.write(toFile: copy + "/policies/runner.yaml", atomically: true, encoding: .utf8)
        return copy
    }

    @Test func fourWorkersDrainFiveThousandJobsWhileOneIsKilledHalfway() async throws {
        let cluster = try await ThrowawayPostgres.shared()
        let url = cluster.url(database: try await cluster.createDatabase(), pool: 8)
        var workspace = try Workspace(jobsDirectory: try Self.jobsDirectory(lease: 4))
        workspace.postgresURL = url
        let probes = 2_500
        let noops = 2_500
        // Probes hold their job for 0.2 s: a victim seen holding one still holds it when the
        // kill lands a few milliseconds later, even on a loaded machine (noops finish within
        // that gap, so the victim holding only noops does not count).
        #expect(try await workspace.run(["jobs", "probe", "--count", "\(probes)", "--hold", "0.2"]).status == 0)
        #expect(try await workspace.run(["jobs", "probe", "--noop", "--count", "\(noops)"]).status == 0)
        let store = try await PostgresStore(url: url)

        let workers = try (0..<4).map { _ in try workspace.process(["worker", "--concurrency", "8"]) }
        let victim = workers[0].0
        // Polled from a thread of its own: at half-way, and while the victim holds
        // leases (jobs running or claimed), it is killed at once. The poll goes through
        // psql, not this process's PostgreSQL client: that client runs on the few
        // cooperative threads, which the other tests running alongside can hold for
        // longer than the second half of the jobs takes, and the moment passes unseen.
        let ownerPattern = "%:\(victim.processIdentifier):%"
        let killed = await killProcess(victim, when: {
            let counts = try psqlQuery(url, """
                SELECT (SELECT COUNT(*) FROM \(Backend.postgres.ownTable("jobs")) WHERE state = 'succeeded' AND kind LIKE 'runner.%'),
                       (SELECT COUNT(*) FROM \(Backend.postgres.ownTable("jobs"))
                        WHERE state = 'running' AND kind = '\(ProbeJobs.probeKind)' AND lease_owner LIKE '\(ownerPattern)')
                """).split(separator: "|").compactMap { Int($0) }
            guard counts.count == 2 else { return false }
            return counts[0] >= (probes + noops) / 2 && counts[1] > 0
        }, timeout: 300)
        guard killed else {
            // Without the kill there is nothing to rescue; stop every worker rather than wait for one.
            for (process, _, _) in workers { kill(process.processIdentifier, SIGKILL) }
            for (process, _, _) in workers { await process.exited() }
            Issue.record("the victim held no job after half the jobs were done: \(try await store.countByState())")
            return
        }
        await victim.exited()
        #expect(victim.terminationReason == .uncaughtSignal)
        // What the dead worker still held: nobody else can hold a lease in its name.
        let orphans = try await store.read { tx in
            try tx.query("SELECT id FROM \(unescaped: Backend.postgres.ownTable("jobs")) WHERE state = 'running' AND lease_owner LIKE \(ownerPattern)").map { try $0.decode(Int64.self) }
        }
        #expect(!orphans.isEmpty)

        let drained = try await eventually(timeout: 300) {
            try await store.jobs(matching: JobFilter(states: [.succeeded], kinds: [ProbeJobs.probeKind, ProbeJobs.noopKind], limit: 10_000))
                .count == probes + noops
        }
        for (process, _, _) in workers.dropFirst() { kill(process.processIdentifier, SIGTERM) }
        for (process, _, _) in workers.dropFirst() { await process.exited() }
        let counts = try await store.countByState()
        #expect(drained, "not every job succeeded: \(counts)")
        #expect(workers.dropFirst().allSatisfy { $0.0.terminationStatus == 0 })

        // Every probe's two database steps took effect exactly once, although some jobs ran twice.
        let effects = try await store.read { tx in
            try tx.query("SELECT job_id, step, COUNT(*) FROM \(unescaped: Backend.postgres.ownTable("runner_probe_effects")) GROUP BY job_id, step").map {
                try $0.decode((Int64, String, Int64).self)
            }
        }
        #expect(effects.count == probes * 2)
        #expect(effects.allSatisfy { $0.2 == 1 })
        // The dead worker's jobs were rescued by the others once its leases expired.
        let rescued = try await store.read { tx in
            try tx.query("SELECT id, state, attempt, lease_owner FROM \(unescaped: Backend.postgres.ownTable("jobs")) WHERE id = ANY(\(orphans))").map {
                try $0.decode((Int64, String, Int32, String?).self)
            }
        }
        #expect(rescued.count == orphans.count)
        #expect(rescued.allSatisfy { $0.1 == "succeeded" && $0.2 == 2 })
        let maxAttempt = try await store.read { tx in try tx.query("SELECT MAX(attempt) FROM \(unescaped: Backend.postgres.ownTable("jobs")) WHERE kind LIKE 'runner.%'").first?.decode(Int32.self) }
        #expect(maxAttempt == 2)
    }

    @Test func anUnreachableServerExitsSixtyNineNamingIt() async throws {
        var workspace = try Workspace()
        // Nothing answers there, so there is no installation to make first: the command meets the dead port itself.
        workspace.initialisesOnFirstCommand = false
        let port = try ThrowawayPostgres.freePortForTests()
        workspace.postgresURL = "postgres://lifecycle:secret@127.0.0.1:\(port)/lifecycle?sslmode=disable"
        let result = try await workspace.run(["worker", "--once"])
        #expect(result.status == 69)
        #expect(result.stderr.contains("127.0.0.1:\(port)"))
        #expect(!result.stderr.contains("secret"))
    }

    @Test func accountCommandsRunOnPostgresAndOnlyTheDemoRefusesIt() async throws {
        let cluster = try await ThrowawayPostgres.shared()
        var workspace = try Workspace()
        workspace.postgresURL = cluster.url(database: try await cluster.createDatabase())
        let unknown = try await workspace.run(["accounts", "show", "ada@example.com"])
        #expect(unknown.status == 67)
        let demo = try await workspace.run(["demo"])
        #expect(demo.status == 64)
        #expect(demo.stderr.contains("PostgreSQL"))
        #expect(try await workspace.run(["jobs", "probe", "--count", "3"]).status == 0)
        #expect(try await workspace.run(["worker", "--once"]).status == 0)
        let listed = try await workspace.run(["jobs", "list", "--state", "succeeded", "--kind", "runner.probe"])
        #expect(listed.stdout.split(separator: "\n").count == 3)
    }

    @Test func anUnreachableServerIsExit69ForAccountCommandsToo() async throws {
        var workspace = try Workspace()
        // Nothing answers there, so there is no installation to make first: the command meets the dead port itself.
        workspace.initialisesOnFirstCommand = false
        let port = try ThrowawayPostgres.freePortForTests()
        workspace.postgresURL = "postgres://lifecycle:secret@127.0.0.1:\(port)/lifecycle?sslmode=disable"
        for command in [["accounts", "show", "ada"], ["purge", "--dry-run"], ["export", "ada"]] {
            let result = try await workspace.run(command)
            #expect(result.status == 69, "\(command)")
            #expect(result.stderr.contains("127.0.0.1:\(port)"))
            #expect(!result.stderr.contains("secret"))
        }
    }
}
