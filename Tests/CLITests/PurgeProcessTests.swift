import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// Purges in real `lifecycle` processes: SIGKILL half-way, then a rerun; and
/// overlapping cron runs.
@Suite(.serialized)
struct PurgeProcessTests {
    /// Small batches with a pause between them keep each purge step running long
    /// enough to be killed in the middle of it.
    static func slowPurgeWorkspace(_ backend: Backend) async throws -> Workspace {
        try await Workspace.make(backend, jobsDirectory: try DeletionLines.jobsDirectory(deletion: [
            "purge_blob_batch: 1", "purge_row_batch: 4", "batch_pause_milliseconds: 100",
        ]))
    }

    /// Columns an app adds to `accounts` later are emptied by the same rule on both
    /// backends (the map's `erase: keep:`): required numbers of any kind zero, required
    /// dates the Unix epoch, nullable columns NULL.
    @Test(arguments: Backend.allCases)
    func columnsAddedToAccountsLaterAreEmptiedAlikeOnBothBackends(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", entries: 1, pendingSince: DeletionLines.past)], into: workspace)
        let timestamp = backend == .sqlite ? "DATETIME" : "timestamptz"
        try await workspace.execute("ALTER TABLE accounts ADD COLUMN lifetime_score REAL NOT NULL DEFAULT 4.5")
        try await workspace.execute("ALTER TABLE accounts ADD COLUMN referral_code TEXT DEFAULT 'ADA-7'")
        try await workspace.execute("ALTER TABLE accounts ADD COLUMN verified_at \(timestamp) NOT NULL DEFAULT '2025-01-01 00:00:00'")
        let purge = try await workspace.run(["purge"])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        let row = try await workspace.query("SELECT state, CAST(lifetime_score AS TEXT), referral_code, CAST(verified_at AS TEXT) FROM accounts WHERE id = 'ada'")
        #expect(row.count == 1)
        #expect(row.first?[0] == "purged")
        #expect(row.first?[1].flatMap(Double.init) == 0)
        #expect(row.first?[2] == nil)
        #expect(row.first?[3]?.hasPrefix("1970-01-01") == true, "\(row)")
    }

    @Test(arguments: Backend.allCases)
    func killedDuringBlobDeletionThenRerunLeavesOnlyTheTombstone(_ backend: Backend) async throws {
        let workspace = try await Self.slowPurgeWorkspace(backend)
        try await DeletionLines.importAccounts([
            DeletionLines.account(id: "big", entries: 30, pendingSince: DeletionLines.past),
            DeletionLines.account(id: "bystander", entries: 3),
        ], into: workspace)
        let blobs = workspace.blobFiles(of: "big").count
        #expect(blobs == 31)
        // One readdir per poll: a recursive walk racing the deletes can come back empty. Her
        // journal's 30 photos are in photos/, her profile photo beside it.
        let photos = workspace.blobs + "/accounts/big/photos"
        try await killMidPurge(workspace) {
            (1..<blobs - 1).contains((try? FileManager.default.contentsOfDirectory(atPath: photos).count) ?? 0)
        }
        try await rerunAndCheck(workspace, blobs: blobs)
    }

    @Test(arguments: Backend.allCases)
    func killedDuringRowDeletionThenRerunLeavesOnlyTheTombstone(_ backend: Backend) async throws {
        let workspace = try await Self.slowPurgeWorkspace(backend)
        try await DeletionLines.importAccounts([
            DeletionLines.account(id: "big", entries: 30, pendingSince: DeletionLines.past),
            DeletionLines.account(id: "bystander", entries: 3),
        ], into: workspace)
        let rows = try await workspace.rowCount(of: "big")
        #expect(try await onThreadOfItsOwn { try workspace.rowCountNow(of: "big") } == rows)
        // Rows go before files: killed half-way through the rows, every file is still there.
        try await killMidPurge(workspace) {
            (1..<rows).contains(try workspace.rowCountNow(of: "big")) && workspace.blobFiles(of: "big").count == 31
        }
        #expect(workspace.blobFiles(of: "big").count == 31)
        try await rerunAndCheck(workspace, blobs: 31)
    }

    private func killMidPurge(_ workspace: Workspace, when condition: @escaping @Sendable () throws -> Bool) async throws {
        let bystanderRows = try await workspace.rowCount(of: "bystander")
        let bystanderBlobs = workspace.blobFiles(of: "bystander")
        let (process, _, _) = try workspace.process(["purge"])
        let reached = await killProcess(process, when: condition)
        if !reached { process.terminate() }
        await process.exited()
        #expect(reached)
        #expect(process.terminationReason == .uncaughtSignal)

        // Half-deleted, and it shows: purging, restore refused, nothing of it looks active.
        #expect(try await workspace.deletionRecord(of: "big").state == "purging")
        // The app shows it pending until the user row is masked, which comes before the files go.
        #expect(["pendingDeletion", "purged"].contains(try await workspace.state(of: "big")))
        let restore = try await workspace.run(["restore", "big"])
        #expect(restore.status == 65)
        #expect(restore.stderr.contains("purge already started"))
        #expect(try await workspace.rowCount(of: "bystander") == bystanderRows)
        #expect(workspace.blobFiles(of: "bystander") == bystanderBlobs)
    }

    private func rerunAndCheck(_ workspace: Workspace, blobs: Int) async throws {
        let bystanderRows = try await workspace.rowCount(of: "bystander")
        let bystanderBlobs = workspace.blobFiles(of: "bystander")
        let store = try await workspace.jobStore()
        let orphan = try #require(try await store.jobs(matching: JobFilter(kinds: [DeletionJobs.purgeKind])).first)
        #expect(orphan.state == .running)
        let leaseEnd = try #require(orphan.leaseExpiresAt)

        // While the killed process' lease runs, a run cannot take the purge over, and says
        // so: exit 75 naming the account, never "0 purged" and green.
        let early = try await workspace.run(["purge"])
        #expect(early.status == 75, "\(early.stdout)\(early.stderr)")
        #expect(early.stderr.contains("deletion.purge job #\(orphan.id) (account big) is held by \(orphan.leaseOwner ?? "?")"), "\(early.stderr)")
        #expect(try await workspace.deletionRecord(of: "big").state == "purging")

        let rerun = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": iso(leaseEnd.addingTimeInterval(5))])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(purgeCounts(rerun.stdout)?.purged == 1)
        #expect(purgeCounts(rerun.stdout)?.failed == 0)

        let tombstone = try #require(try await workspace.account(id: "big"))
        #expect(tombstone.state == .purged)
        #expect(tombstone.email == nil && tombstone.passwordHash == nil && tombstone.firstName == nil && tombstone.bio == nil)
        #expect(try await workspace.rowCount(of: "big") == 0)
        #expect(workspace.blobFiles(of: "big").isEmpty)
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/accounts/big"))
        #expect(try await workspace.rowCount(of: "bystander") == bystanderRows)
        #expect(workspace.blobFiles(of: "bystander") == bystanderBlobs)
        #expect(try await workspace.state(of: "bystander") == "active")
        // One job, resumed: two attempts, each step recorded once, and a receipt for the whole account.
        let job = try #require(try await store.job(id: orphan.id))
        #expect(job.state == .succeeded)
        #expect(job.attempt == 2)
        #expect(try await store.steps(of: orphan.id).map(\.step).sorted() == ["lock-and-mark", "verify"])
        let receipts = try await workspace.auditRows(of: "big").filter { $0.action == DeletionAudit.purge && $0.outcome == "purged" }
        #expect(receipts.count == 1)
        #expect(receipts.first?.detail?.contains("\"blobs\":\(blobs),") == true)
        #expect(receipts.first?.detail?.contains("\"rows_total\":\(30 + 30 + 30 + 1 + 1)") == true, "\(receipts.first?.detail ?? "")")
    }

    @Test(arguments: Backend.allCases)
    func fourOverlappingPurgeRunsPurgeTwoHundredAccountsEachOnce(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let ids = (0..<200).map { String(format: "due-%03d", $0) }
        try await DeletionLines.importAccounts(ids.map { DeletionLines.account(id: $0, pendingSince: DeletionLines.past) }
                                         + [DeletionLines.account(id: "keeper")], into: workspace)

        let barrier = try OverlapBarrier(in: workspace)
        // 16 at once each: at the default (256) the first run would claim all 200 accounts.
        let runs = try (0..<4).map { _ in try workspace.process(["purge", "--concurrency", "16"], environment: barrier.environment) }
        // Every run holds claimed purges at the barrier until all four do: they overlap for
        // certain, rather than one doing the work while the others find nothing.
        let together = try await barrier.releaseOnceAllArrive(runs.map(\.0))
        for (process, _, _) in runs { await process.exited() }
        #expect(together == 4, "only \(together) of 4 purge runs held purges at once: the runs did not overlap")
        var purged = 0
        for (process, out, err) in runs {
            let stdout = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            // A run that ends while another still holds purges says so (75), naming them.
            #expect(process.terminationStatus == 0 || (process.terminationStatus == 75 && stderr.contains(" is held by ")), "\(stderr)")
            let counts = try #require(purgeCounts(stdout), "\(stdout)")
            #expect(counts.failed == 0, "\(stderr)")
            #expect(!stderr.contains("error"), "\(stderr)")
            purged += counts.purged
        }
        #expect(purged == 200)
        // With every run over, nothing is left undone: the next run is green.
        let after = try await workspace.run(["purge"])
        #expect(after.status == 0, "\(after.stderr)")
        #expect(purgeCounts(after.stdout)?.purged == 0)

        let receipts = try await workspace.strings(
            "SELECT COUNT(*) FROM \(workspace.ownTable("audit_events")) WHERE action = 'account.purge' AND outcome = 'purged' GROUP BY account_id")
        let jobs = try await workspace.strings("SELECT state || '=' || COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = ? GROUP BY state", [.text(DeletionJobs.purgeKind)])
        let states = try await workspace.strings("SELECT state || '=' || COUNT(*) FROM accounts GROUP BY state")
        #expect(receipts.count == 200)
        #expect(receipts.allSatisfy { $0 == "1" })
        #expect(jobs == ["succeeded=200"])
        #expect(Set(states) == ["purged=200", "active=1"])
        #expect(workspace.blobFiles(of: "keeper").count == 2)
        #expect(FileManager.default.enumerator(atPath: workspace.blobs + "/accounts")?.allObjects.compactMap { $0 as? String }
            .filter { $0.hasPrefix("due-") }.isEmpty == true)
    }
}
