import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

@Suite(.serialized)
struct DeletionCommandTests {
    @Test(arguments: Backend.allCases)
    func deleteWithThePasswordThenRestoreSpeakTheProductsWords(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)

        let wrong = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse battery\n")
        #expect(wrong.status == 77)
        #expect(wrong.stderr.contains("Incorrect password"))
        #expect(try await workspace.state(of: "ada") == "active")

        let right = try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: DeletionLines.password + "\n")
        #expect(right.status == 0, "\(right.stderr)")
        #expect(right.stdout.contains("Your account has been deleted. You have 30 days to recover it by signing in again.\n"))
        let record = try await workspace.deletionRecord(of: "ada")
        #expect(record.state == "pendingDeletion")
        let purgeAfter = try #require(record.purgeAfter)
        #expect(right.stdout.contains("removed on or after \(iso(purgeAfter))"))
        #expect(right.stdout.contains("1 session(s) signed out"))
        #expect(try await workspace.state(of: "ada") == "pendingDeletion")
        // Signed out as the map's `on_deletion:` says: her sessions are gone.
        #expect(try await workspace.int("SELECT COUNT(*) FROM sessions WHERE account_id = 'ada'") == 0)

        let again = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: DeletionLines.password)
        #expect(again.status == 0)
        #expect(again.stdout.contains("already scheduled for deletion; it will be purged on or after \(iso(purgeAfter))"))

        let restore = try await workspace.run(["restore", "ada"])
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(restore.stdout.contains("restored"))
        #expect(try await workspace.state(of: "ada") == "active")
        let cancelled = try await workspace.run(["jobs", "list", "--kind", DeletionJobs.purgeKind])
        #expect(cancelled.stdout.contains("cancelled"))

        let refused = try await workspace.run(["restore", "ada"])
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("not scheduled for deletion"))
        #expect(try await workspace.run(["restore", "nobody"]).status == 67)
    }

    @Test(arguments: Backend.allCases)
    func fiveWrongPasswordsLockDeletionUntilThePrintedTime(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        // A whole minute, so "until" can be compared to the minute whatever the seconds the attempts took.
        let start = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.down) * 60 + 3_600)
        let secret = "Tr0ub4dor&3-guess"
        for _ in 0..<5 {
            let attempt = try await workspace.run(["delete", "ada", "--password-stdin"], environment: ["LIFECYCLE_NOW": iso(start)], stdin: secret)
            #expect(attempt.status == 77)
        }
        let locked = try await workspace.run(["delete", "ada", "--password-stdin"], environment: ["LIFECYCLE_NOW": iso(start)], stdin: DeletionLines.password)
        #expect(locked.status == 75)
        #expect(locked.stderr.contains("Too many incorrect passwords"))
        #expect(locked.stderr.contains("try again after \(iso(start.addingTimeInterval(15 * 60)).prefix(16))"))
        #expect(try await workspace.state(of: "ada") == "active")

        let later = try await workspace.run(
            ["delete", "ada", "--password-stdin"], environment: ["LIFECYCLE_NOW": iso(start.addingTimeInterval(16 * 60))], stdin: secret)
        #expect(later.status == 77)

        // Every attempt is audited, and no audit row holds the password or the hash.
        let rows = try await workspace.auditRows(of: "ada").filter { $0.action == DeletionAudit.request }
        #expect(rows.map(\.outcome) == Array(repeating: "incorrect-password", count: 5) + ["locked-out", "incorrect-password"])
        let everything = try await workspace.strings("SELECT actor || action || outcome || COALESCE(detail, '') FROM \(workspace.ownTable("audit_events"))")
        for row in everything {
            #expect(!row.contains(secret) && !row.contains(DeletionLines.password) && !row.contains("$2b$"), "\(row)")
        }
    }

    @Test(arguments: Backend.allCases)
    func theOperatorPathIsAuditedAndImmediatelyMeansTheNextPurge(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada"), DeletionLines.account(id: "bob")], into: workspace)
        let noReason = try await workspace.run(["delete", "ada", "--operator", "Grace Hopper"])
        #expect(noReason.status == 64)
        #expect(noReason.stderr.contains("--reason"))
        #expect(try await workspace.run(["delete", "ada", "--password-stdin", "--operator", "x", "--reason", "y"]).status == 64)

        let deleted = try await workspace.run(["delete", "ada", "--operator", "Grace Hopper", "--reason", "legal request L-42", "--immediately"])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stdout.contains("next purge run"))
        let event = try #require(try await workspace.auditRows(of: "ada").last)
        #expect(event.actor == "operator:Grace Hopper")
        #expect(event.detail?.contains("legal request L-42") == true)

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stderr)")
        #expect(purgeCounts(purge.stdout)?.purged == 1)
        let shown = try await workspace.run(["accounts", "show", "ada", "--json"])
        #expect(shown.stdout.contains("\"state\":\"purged\""))
        #expect(!shown.stdout.contains("ada@example.com"))
        #expect(try await workspace.rowCount(of: "ada") == 0)
        #expect(workspace.blobFiles(of: "ada").isEmpty)
        #expect(try await workspace.state(of: "bob") == "active")
        #expect(workspace.blobFiles(of: "bob").count == 2)
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "x").status == 67)
    }

    @Test(arguments: Backend.allCases)
    func passwordsComeOnlyFromStandardInputAndNewOnesAreArgon2id(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        #expect(try await workspace.run(["delete", "ada"]).status == 64)
        #expect(try await workspace.run(["delete", "ada", "--password", "secret"]).status == 64)
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "").status == 64)
        #expect(try await workspace.run(["accounts", "set-password", "ada"]).status == 64)

        let set = try await workspace.run(["accounts", "set-password", "ada", "--password-stdin"], stdin: "n3w pässword\n")
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.contains("argon2id"))
        let hash = try await workspace.string("SELECT password_hash FROM accounts WHERE id = 'ada'")
        #expect(hash?.hasPrefix("$argon2id$") == true)
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: DeletionLines.password).status == 77)
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "n3w pässword").status == 0)
    }

    @Test(arguments: Backend.allCases)
    func dryRunListsDueAccountsAndChangesNothingThenPurgeAndLimit(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([
            DeletionLines.account(id: "due-1", entries: 2, pendingSince: DeletionLines.past),
            DeletionLines.account(id: "due-2", pendingSince: DeletionLines.past),
            DeletionLines.account(id: "due-3", pendingSince: DeletionLines.past),
            DeletionLines.account(id: "later", pendingSince: "2999-01-01T00:00:00Z"),
            DeletionLines.account(id: "active"),
        ], into: workspace)

        let dry = try await workspace.run(["purge", "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        let listed = dry.stdout.split(separator: "\n").filter { $0.hasPrefix("due-") }
        #expect(listed.count == 3)
        // Every row the purge would erase, the user row it masks counted too.
        let dueRows = try await workspace.rowCount(of: "due-1") + 1
        #expect(dry.stdout.contains("due-1  pendingDeletion  purge_after 2020-01-01T00:00:00Z  rows \(dueRows)"), "\(dry.stdout)")
        #expect(dry.stdout.contains("blobs 3 (24 bytes)"))
        #expect(dry.stdout.contains("dry run: 3 account(s) would be purged"))
        #expect(!dry.stdout.contains("later") && !dry.stdout.contains("active"))
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = ?", [.text(DeletionJobs.purgeKind)]) == 0)
        #expect(try await workspace.state(of: "due-1") == "pendingDeletion")

        let limited = try await workspace.run(["purge", "--limit", "2"])
        #expect(limited.status == 0, "\(limited.stderr)")
        #expect(purgeCounts(limited.stdout)?.purged == 2)
        #expect(limited.stdout.contains("3 due account(s) had no purge job and got one"))
        // The third is handed back at once, not left leased to a process that has exited.
        let leased = try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE state = 'running' AND kind = ?", [.text(DeletionJobs.purgeKind)])
        #expect(leased == 0)

        let rest = try await workspace.run(["purge"])
        #expect(rest.status == 0)
        #expect(purgeCounts(rest.stdout)?.purged == 1)
        for id in ["due-1", "due-2", "due-3"] {
            #expect(try await workspace.state(of: id) == "purged")
            #expect(workspace.blobFiles(of: id).isEmpty)
        }
        #expect(try await workspace.state(of: "later") == "pendingDeletion")
        #expect(workspace.blobFiles(of: "later").count == 2)
        #expect(purgeCounts(try await workspace.run(["purge"]).stdout)?.purged == 0)
    }

    @Test(arguments: Backend.allCases)
    func aWorkerDaemonOrCronWorkerRunsTheNightlySweepOnItsSchedule(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([
            DeletionLines.account(id: "due", pendingSince: DeletionLines.past), DeletionLines.account(id: "active"),
        ], into: workspace)
        // `worker --once` enqueues the sweep for the latest 03:00 slot, and the purges it enqueues run in the same drain.
        let worker = try await workspace.run(["worker", "--once", "--kind", DeletionJobs.sweepKind, "--kind", DeletionJobs.purgeKind])
        #expect(worker.status == 0, "\(worker.stderr)")
        #expect(try await workspace.state(of: "due") == "purged")
        #expect(try await workspace.state(of: "active") == "active")
        let sweeps = try await workspace.run(["jobs", "list", "--kind", DeletionJobs.sweepKind])
        #expect(sweeps.stdout.contains("succeeded"))
    }
}
