import Foundation
import JobRunner
import Lifecycle
import Testing

/// What the on-call engineer meets at 3 a.m.: a command never reports green when nothing
/// happened, an operator can pause a kind and hold an account, and the audit answers
/// "was this account purged, when, and what went?" on both backends.
@Suite(.serialized)
struct OperationsTests {
    // MARK: An installation that was never made

    @Test func aMistypedDatabaseIsRefusedAndNothingIsCreatedThere() async throws {
        var workspace = try Workspace()
        workspace.initialisesOnFirstCommand = false
        for command in [["purge"], ["worker", "--once"], ["jobs", "list"], ["accounts", "show", "ada"]] {
            let result = try await workspace.run(command)
            #expect(result.status == 66, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("no lifecycle installation: SQLite file \(workspace.database) does not exist"), "\(result.stderr)")
            #expect(result.stderr.contains("lifecycle init"))
            #expect(!FileManager.default.fileExists(atPath: workspace.database), "\(command) created the database")
        }

        let created = try await workspace.run(["init"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.contains("created a lifecycle installation in SQLite file \(workspace.database) with the reference app's tables"))
        let again = try await workspace.run(["init", "--json"])
        #expect(again.status == 0)
        #expect(again.stdout.contains(#""created":false"#))
        #expect(try await workspace.run(["purge"]).status == 0)
    }

    @Test func aPostgresDatabaseWithoutLifecycleIsRefusedAndLeftUntouched() async throws {
        var workspace = try await Workspace.make(.postgres)
        workspace.initialisesOnFirstCommand = false
        let refused = try await workspace.run(["purge"])
        #expect(refused.status == 66, "\(refused.stderr)")
        #expect(refused.stderr.contains("has no lifecycle tables"))
        let url = try #require(workspace.postgresURL)
        #expect(try psqlQuery(url, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'lifecycle'") == "0")
        #expect(try psqlQuery(url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'") == "0")

        #expect(try await workspace.run(["init"]).status == 0)
        #expect(try await workspace.run(["purge"]).status == 0)
    }

    // MARK: Never green while work is left undone

    @Test(arguments: Backend.allCases)
    func aPurgeHeldByAKilledProcessOrBackingOffOrDeadIsNamedEveryRun(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts(
            [DeletionLines.account(id: "half", pendingSince: DeletionLines.past), DeletionLines.account(id: "later", pendingSince: DeletionLines.past)],
            into: workspace)
        // The sweep gives each a job; then one is as a SIGKILLed purge leaves it (leased, lease still running).
        let sweep = try await workspace.run(["purge", "--limit", "1"])
        #expect(sweep.status == 0, "\(sweep.stderr)")
        let job = try await workspace.int("SELECT id FROM \(workspace.ownTable("jobs")) WHERE unique_key = 'purge:later'")
        try await workspace.execute(
            "UPDATE \(workspace.ownTable("jobs")) SET state = 'running', lease_owner = 'db1:4242:dead', lease_expires_at = ? WHERE id = ?",
            [.date(Date().addingTimeInterval(3600)), .integer(job)])

        let leased = try await workspace.run(["purge"])
        #expect(leased.status == 75, "\(leased.stderr)")
        #expect(leased.stderr.contains("deletion.purge job #\(job) (account later) is held by db1:4242:dead"), "\(leased.stderr)")

        // Backing off after a failed attempt.
        try await workspace.execute(
            "UPDATE \(workspace.ownTable("jobs")) SET state = 'retrying', lease_owner = NULL, lease_expires_at = NULL, attempt = 1, run_at = ?, last_error = 'blob store unavailable' WHERE id = ?",
            [.date(Date().addingTimeInterval(3600)), .integer(job)])
        let backingOff = try await workspace.run(["purge"])
        #expect(backingOff.status == 75)
        #expect(backingOff.stderr.contains("(account later) failed attempt 1/"), "\(backingOff.stderr)")
        #expect(backingOff.stderr.contains("blob store unavailable"))

        // Dead: every later run says so too, not only the one that buried it.
        try await workspace.execute("UPDATE \(workspace.ownTable("jobs")) SET state = 'dead', finished_at = ? WHERE id = ?", [.date(Date()), .integer(job)])
        for _ in 0..<2 {
            let dead = try await workspace.run(["purge", "--json"])
            #expect(dead.status == 75)
            let report = try JSONSerialization.jsonObject(with: Data(dead.stdout.utf8)) as? [String: Any]
            let attention = report?["attention"] as? [[String: Any]]
            #expect(attention?.first?["reason"] as? String == "dead")
            #expect(attention?.first?["account"] as? String == "later")
            #expect(attention?.first?["job"] as? Int == job)
            #expect(try await workspace.run(["worker", "--once"]).status == 75)
        }
        let check = try await workspace.run(["jobs", "check", "--json"])
        #expect(check.status == 75)
        #expect(check.stdout.contains(#""ok":false"#))

        #expect(try await workspace.run(["jobs", "retry", "\(job)", "--operator", "oncall"]).status == 0)
        let drained = try await workspace.run(["purge"])
        #expect(drained.status == 0, "\(drained.stderr)")
        #expect(try await workspace.state(of: "later") == "purged")
        #expect(try await workspace.run(["audit", "later"]).stdout.contains("job.retry  queued  by operator:oncall"))
        #expect(try await workspace.run(["jobs", "check"]).status == 0)
    }

    @Test(arguments: Backend.allCases)
    func jobsCheckIsGreenOnlyWithNothingDeadOrOverdue(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        #expect(try await workspace.run(["jobs", "probe", "--count", "2"]).status == 0)
        let fresh = try await workspace.run(["jobs", "check"])
        #expect(fresh.status == 0, "\(fresh.stderr)")
        #expect(fresh.stdout.contains("ok ("))

        // An hour later nobody has run them: overdue.
        let later = iso(Date().addingTimeInterval(3600))
        let overdue = try await workspace.run(["jobs", "check", "--json"], environment: ["LIFECYCLE_NOW": later])
        #expect(overdue.status == 75)
        let health = try #require(try JSONSerialization.jsonObject(with: Data(overdue.stdout.utf8)) as? [String: Any])
        #expect((health["overdue"] as? [[String: Any]])?.count == 2)
        #expect(health["overdue_after_seconds"] as? Int == 900)
        #expect((health["counts"] as? [String: Int])?["queued"] == 2)

        // Paused on purpose: listed as paused, not overdue.
        #expect(try await workspace.run(["jobs", "pause", ProbeJobs.probeKind, "--reason", "maintenance", "--operator", "alice"]).status == 0)
        let paused = try await workspace.run(["jobs", "check"], environment: ["LIFECYCLE_NOW": later])
        #expect(paused.status == 0, "\(paused.stdout)\(paused.stderr)")
        #expect(paused.stdout.contains("paused: runner.probe since"))
        #expect(paused.stdout.contains("by alice (maintenance)"))
    }

    // MARK: Pause and resume

    @Test(arguments: Backend.allCases)
    func aPausedKindIsClaimedByNoWorkerUntilResumed(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        #expect(try await workspace.run(["jobs", "probe", "--count", "3"]).status == 0)
        let pause = try await workspace.run(["jobs", "pause", ProbeJobs.probeKind, "--operator", "alice", "--reason", "incident 12"])
        #expect(pause.status == 0, "\(pause.stderr)")
        let twice = try await workspace.run(["jobs", "pause", ProbeJobs.probeKind])
        #expect(twice.status == 0 && twice.stdout.contains("was paused already"))

        let listed = try await workspace.run(["jobs", "list", "--json"])
        let paused = try ListedJobs.from(listed.stdout).pausedKinds
        #expect(paused.map(\.kind) == [ProbeJobs.probeKind])
        #expect(paused.first?.pausedBy == "alice" && paused.first?.reason == "incident 12")

        // Workers leave them alone, and the run is not green: the work is still there.
        let run = try await workspace.run(["worker", "--once"])
        #expect(run.status == 75, "\(run.stderr)")
        #expect(run.stderr.contains("3 due runner.probe job(s) wait: the kind is paused"), "\(run.stderr)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE state = 'queued'") == 3)

        let unknown = try await workspace.run(["jobs", "pause", "no.such.kind"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("unknown job kind 'no.such.kind'"))

        #expect(try await workspace.run(["jobs", "resume", ProbeJobs.probeKind]).status == 0)
        let resumed = try await workspace.run(["worker", "--once"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = 'runner.probe' AND state = 'succeeded'") == 3)
    }

    @Test func aPausedPurgePurgesNothingAndSaysSo() async throws {
        let workspace = try await Workspace.make(.sqlite)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "due", pendingSince: DeletionLines.past)], into: workspace)
        #expect(try await workspace.run(["jobs", "pause", DeletionJobs.purgeKind]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 75)
        #expect(purge.stderr.contains("1 due deletion.purge job(s) wait: the kind is paused"), "\(purge.stderr)")
        #expect(try await workspace.state(of: "due") == "pendingDeletion")
        #expect(try await workspace.run(["jobs", "resume", DeletionJobs.purgeKind]).status == 0)
        #expect(try await workspace.run(["purge"]).status == 0)
        #expect(try await workspace.state(of: "due") == "purged")
    }

    // MARK: Holds

    @Test(arguments: Backend.allCases)
    func aHeldAccountIsNeverPurgedAndTheHoldIsInTheAuditAndTheReceipt(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([
            DeletionLines.account(id: "held", pendingSince: DeletionLines.past), DeletionLines.account(id: "other", pendingSince: DeletionLines.past),
        ], into: workspace)
        let hold = try await workspace.run(["accounts", "hold", "held@example.com", "--reason", "legal case 7", "--operator", "legal-team"])
        #expect(hold.status == 0, "\(hold.stderr)")
        #expect(hold.stdout.contains("account held (pendingDeletion) is on hold"))
        let twice = try await workspace.run(["accounts", "hold", "held", "--reason", "another"])
        #expect(twice.status == 65)
        #expect(twice.stderr.contains("is on hold already"))

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stderr)")
        #expect(purgeCounts(purge.stdout)?.purged == 1)
        #expect(purge.stdout.contains("1 due account(s) on hold, not purged: held"))
        #expect(try await workspace.state(of: "held") == "pendingDeletion")
        #expect(try await workspace.state(of: "other") == "purged")
        let dryRun = try await workspace.run(["purge", "--dry-run", "--json"])
        #expect(dryRun.stdout.contains(#""reason":"legal case 7""#))

        // A purge job that reaches a held account (queued before the hold, say) stands down.
        try await workspace.execute(
            "INSERT INTO \(workspace.ownTable("jobs")) (kind, payload, unique_key, state, attempt, max_attempts, run_at, cancel_requested, created_at, updated_at) VALUES ('deletion.purge', '{\"account\":\"held\"}', 'purge:held', 'queued', 0, 8, ?, false, ?, ?)",
            [.date(Date()), .date(Date()), .date(Date())])
        // It did not purge, so the run is not green: it says stopped, and why, and exits 75.
        let worker = try await workspace.run(["worker", "--once", "--kind", DeletionJobs.purgeKind])
        #expect(worker.status == 75 && worker.stdout.contains("0 succeeded") && worker.stdout.contains("1 stopped"), "\(worker.stdout)")
        #expect(worker.stderr.contains("stopped: account held is on hold since"), "\(worker.stderr)")
        #expect(worker.stderr.contains("legal case 7, so it was not purged; the purge sweep schedules a fresh purge once the hold ends"), "\(worker.stderr)")
        #expect(try await workspace.run(["worker", "--once", "--kind", DeletionJobs.purgeKind]).status == 0, "the next run has nothing left to report")
        #expect(try await workspace.state(of: "held") == "pendingDeletion")
        let standDown = try await workspace.string("""
            SELECT s.output FROM \(workspace.ownTable("job_steps")) s JOIN \(workspace.ownTable("jobs")) j ON j.id = s.job_id
            WHERE j.unique_key = 'purge:held' AND j.state = 'succeeded' AND s.step = 'lock-and-mark'
            """)
        #expect(standDown?.contains(#""outcome":"held""#) == true, "\(standDown ?? "no finished purge job")")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE unique_key = 'purge:held' AND state IN ('queued', 'running', 'retrying')") == 0)

        let unhold = try await workspace.run(["accounts", "unhold", "held", "--operator", "legal-team", "--json"])
        #expect(unhold.status == 0, "\(unhold.stderr)")
        #expect(unhold.stdout.contains(#""changed":true"#) && unhold.stdout.contains(#""purge_job":"#))
        let after = try await workspace.run(["purge"])
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await workspace.state(of: "held") == "purged")
        #expect(try await workspace.run(["accounts", "unhold", "held"]).stdout.contains("was not on hold"))

        let audit = try await workspace.run(["audit", "held", "--json"])
        #expect(audit.status == 0, "\(audit.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(audit.stdout.utf8)) as? [String: Any])
        let events = try #require(report["events"] as? [[String: Any]])
        #expect(events.contains { $0["action"] as? String == "account.hold" && $0["actor"] as? String == "operator:legal-team" })
        #expect(events.contains { $0["action"] as? String == "account.unhold" })
        let receipt = try #require(events.first { $0["action"] as? String == DeletionAudit.purge }?["detail"] as? [String: Any])
        let holds = try #require(receipt["holds"] as? [[String: Any]])
        #expect(holds.count == 1 && holds.first?["reason"] as? String == "legal case 7" && holds.first?["released_by"] as? String == "operator:legal-team")
        #expect(receipt["rows_total"] as? Int ?? 0 > 0)

        // Once the purge has begun, nothing can hold it any more.
        let late = try await workspace.run(["accounts", "hold", "held", "--reason", "too late"])
        #expect(late.status == 65)
        #expect(late.stderr.contains("its purge has begun and cannot be held"))
    }

    @Test func aHoldWithAnEndLiftsItselfAndAPastEndIsRefused() async throws {
        let workspace = try await Workspace.make(.sqlite)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "brief", pendingSince: DeletionLines.past)], into: workspace)
        let past = try await workspace.run(["accounts", "hold", "brief", "--reason", "x", "--until", "2020-01-01"])
        #expect(past.status == 65)
        #expect(past.stderr.contains("is not in the future"))
        let until = Date().addingTimeInterval(86_400)
        #expect(try await workspace.run(["accounts", "hold", "brief", "--reason", "review", "--until", iso(until)]).status == 0)
        #expect(try await workspace.run(["purge"]).stdout.contains("on hold, not purged: brief"))
        let afterwards = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": iso(until.addingTimeInterval(60))])
        #expect(afterwards.status == 0, "\(afterwards.stderr)")
        #expect(purgeCounts(afterwards.stdout)?.purged == 1)
        #expect(try await workspace.state(of: "brief") == "purged")
    }

    // MARK: Audit

    @Test(arguments: Backend.allCases)
    func theAuditFindsAPurgedAccountByTheEmailItHadAndNamesEveryOperator(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: DeletionLines.password).status == 0)
        let restore = try await workspace.run(["restore", "ada", "--operator", "bob"])
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try await workspace.run(["accounts", "set-password", "ada", "--password-stdin", "--operator", "carol"], stdin: "new secret 123").status == 0)
        #expect(try await workspace.run(["delete", "ada", "--operator", "dave", "--reason", "GDPR request", "--immediately"]).status == 0)
        #expect(try await workspace.run(["purge"]).status == 0)
        #expect(try await workspace.state(of: "ada") == "purged")

        for reference in ["ada", "ADA@example.com "] {
            let audit = try await workspace.run(["audit", reference])
            #expect(audit.status == 0, "\(audit.stderr)")
            #expect(audit.stdout.contains("account ada  state: purged  purged at"))
            #expect(audit.stdout.contains("deletion.restore  restored  by operator:bob"))
            #expect(audit.stdout.contains("account.set-password  set  by operator:carol"))
            #expect(audit.stdout.contains("deletion.operator-request  requested  by operator:dave"))
            #expect(audit.stdout.contains("account.purge  purged  by purge"))
        }
        #expect(try await workspace.run(["audit", "ada@example.com"]).stdout.contains("(found by a former lookup value)"))
        // The address itself is nowhere in lifecycle's tables any more.
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("lookup_digests")) WHERE digest LIKE '%@%'") == 0)
        #expect(try await workspace.int("SELECT COUNT(*) FROM accounts WHERE email = 'ada@example.com'") == 0)

        let unknown = try await workspace.run(["audit", "nobody@example.com"])
        #expect(unknown.status == 67)
    }

    // MARK: Rows edited by hand

    /// A row edited by hand into values lifecycle never writes (a date that is none, a count
    /// that is text) is refused with the table, the row and the column named and exit 65 where
    /// the reference app's typed model reads it, where GRDB's typed reads stopped the process;
    /// mended, it reads again. `accounts show` reads through the map, as text, and shows it.
    @Test func anAccountRowEditedByHandIsNamedNotACrash() async throws {
        let workspace = try await Workspace.make(.sqlite)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada"), DeletionLines.account(id: "bob")], into: workspace)
        try await workspace.execute("UPDATE accounts SET created_at = 'last tuesday' WHERE id = 'ada'")
        try await workspace.execute("UPDATE accounts SET updated_at = 'soon' WHERE id = 'bob'")
        for (account, named) in [("ada", #"the accounts row with id "ada" has created_at "last tuesday""#),
                                 ("bob", #"the accounts row with id "bob" has updated_at "soon""#)] {
            let shown = try await workspace.run(["accounts", "show", account])
            #expect(shown.status == 0 && shown.stdout.contains("account \(account) (accounts)  state: active"), "\(shown.stdout) \(shown.stderr)")
            // The import reads the reference app's row whole, to tell a present account from a new one.
            let again = try ImportFixture(lines: [DeletionLines.account(id: account)])
            let result = try await workspace.run(["accounts", "import", again.path])
            #expect(result.status == 65, "\(result.stderr)")
            #expect(result.stderr.contains(named), "\(result.stderr)")
            #expect(result.stderr.contains("correct that column or delete the row"), "\(result.stderr)")
            // The photo list reads only the map's photo column.
            #expect(try await workspace.run(["photos", "list", "--account", account]).status == 0)
        }
        try await workspace.execute("UPDATE accounts SET created_at = updated_at WHERE id = 'ada'")
        try await workspace.execute("UPDATE accounts SET updated_at = created_at WHERE id = 'bob'")
        for account in ["ada", "bob"] {
            let result = try await workspace.run(["photos", "list", "--account", account])
            #expect(result.status == 0, "\(result.stderr)")
        }
    }

    // MARK: Policy files

    @Test func oneBrokenPolicyFileFailsOnlyWhatNeedsIt() async throws {
        let jobs = try DeletionLines.jobsDirectory(deletion: ["grace_days: 30"])
        try "job:\n  kind: runner.noop\n  concurency: 64\n".write(toFile: jobs + "/policies/noop.yaml", atomically: true, encoding: .utf8)
        let workspace = try await Workspace.make(.sqlite, jobsDirectory: jobs)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", pendingSince: DeletionLines.past)], into: workspace)
        #expect(try await workspace.run(["jobs", "list"]).status == 0)
        #expect(try await workspace.run(["accounts", "show", "ada"]).status == 0)
        #expect(try await workspace.run(["purge"]).status == 0)
        #expect(try await workspace.state(of: "ada") == "purged")

        let noop = try await workspace.run(["jobs", "probe", "--noop"])
        #expect(noop.status == 65)
        #expect(noop.stderr.contains("noop.yaml") && noop.stderr.contains("concurency"), "\(noop.stderr)")
        // A worker runs every other kind and says which it could not run.
        #expect(try await workspace.run(["jobs", "probe"]).status == 0)
        let worker = try await workspace.run(["worker", "--once"])
        #expect(worker.status == 75)
        #expect(worker.stderr.contains("kind runner.noop was not run"), "\(worker.stderr)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM lifecycle_jobs WHERE kind = 'runner.probe' AND state = 'succeeded'") == 1)

        // Monitoring hears of it even while nothing else is wrong.
        let check = try await workspace.run(["jobs", "check"])
        #expect(check.status == 75)
        #expect(check.stdout.contains("policy file not usable") && check.stdout.contains("noop.yaml"), "\(check.stdout)")

        try "deletion: [not, a, section".write(toFile: jobs + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
        #expect(try await workspace.run(["jobs", "list"]).status == 0)
        let delete = try await workspace.run(["delete", "ada", "--operator", "x", "--reason", "y"])
        #expect(delete.status == 65)
        #expect(delete.stderr.contains("deletion.yaml: not valid YAML"), "\(delete.stderr)")
    }

    /// The crontab's promise: `jobs check` is silent only when every policy file can be
    /// used, so a settings typo that `purge` refuses (65) is reported before the night's run.
    @Test func jobsCheckReportsEverySettingsSectionACommandWouldRefuse() async throws {
        let jobs = try DeletionLines.jobsDirectory(deletion: ["grace_dayz: 30"])
        func edit(_ file: String, _ from: String, _ to: String) throws {
            let path = jobs + "/policies/" + file
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.contains(from), "\(file) no longer holds \(from)")
            try text.replacingOccurrences(of: from, with: to).write(toFile: path, atomically: true, encoding: .utf8)
        }
        try edit("export.yaml", "rate_limit_count:", "rate_limit_cuont:")
        try edit("photos.yaml", "jpeg_quality: 85", "jpeg_quality: 101")
        let workspace = try await Workspace.make(.sqlite, jobsDirectory: jobs)

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 65, "\(purge.stderr)")
        #expect(purge.stderr.contains("grace_dayz"), "\(purge.stderr)")

        let check = try await workspace.run(["jobs", "check"])
        #expect(check.status == 75, "\(check.stdout)\(check.stderr)")
        let lines = check.stdout.split(separator: "\n").filter { $0.hasPrefix("policy file not usable") }
        #expect(lines.count == 3, "\(check.stdout)")
        for (file, wrong) in [("deletion.yaml", "grace_dayz"), ("export.yaml", "rate_limit_cuont"), ("photos.yaml", "jpeg_quality = 101")] {
            #expect(lines.contains { $0.contains(file) && $0.contains(wrong) }, "\(file): \(check.stdout)")
        }
        #expect(check.stdout.contains("NOT OK: 0 dead, 0 overdue, 3 broken policy file(s)"), "\(check.stdout)")
        let json = try await workspace.run(["jobs", "check", "--json"])
        #expect(json.status == 75)
        #expect(json.stdout.contains(#""broken_policy_files""#) && json.stdout.contains("grace_dayz"), "\(json.stdout)")

        try edit("deletion.yaml", "grace_dayz", "grace_days")
        try edit("export.yaml", "rate_limit_cuont:", "rate_limit_count:")
        try edit("photos.yaml", "jpeg_quality: 101", "jpeg_quality: 85")
        let fixed = try await workspace.run(["jobs", "check"])
        #expect(fixed.status == 0, "\(fixed.stdout)")
        #expect(fixed.stdout.hasPrefix("ok ("), "\(fixed.stdout)")
    }

    // MARK: Cron's view

    @Test func quietIsSilentOnSuccessAndSpeaksOnFailure() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let quiet = try await workspace.run(["purge", "--quiet"])
        #expect(quiet.status == 0)
        #expect(quiet.stdout.isEmpty && quiet.stderr.isEmpty, "\(quiet.stdout)\(quiet.stderr)")
        #expect(try await workspace.run(["jobs", "probe", "--fail-attempts", "5"]).status == 0)
        let failing = try await workspace.run(["worker", "--once", "--quiet"])
        #expect(failing.status == 75)
        #expect(failing.stdout.contains(" succeeded, 1 retrying"), "\(failing.stdout)")
        #expect(failing.stderr.contains("failed attempt 1/"))

        let version = try await workspace.run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout == LifecycleVersion.current + "\n")
    }

    @Test func theCanaryRunsProbesAndTouchesNothingElse() async throws {
        let workspace = try await Workspace.make(.sqlite)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", pendingSince: DeletionLines.past)], into: workspace)
        // The import queued the profile photo's normalisation; the account's purge is due.
        let queuedBefore = try await workspace.strings("SELECT kind FROM lifecycle_jobs WHERE state = 'queued' ORDER BY kind")
        #expect(!queuedBefore.isEmpty)
        #expect(try await workspace.run(["jobs", "probe", "--count", "3"]).status == 0)
        let canary = try await workspace.run(["worker", "--once", "--kind", ProbeJobs.probeKind])
        #expect(canary.status == 0, "\(canary.stderr)")
        #expect(canary.stdout.contains("worker: 3 succeeded"))
        #expect(try await workspace.strings("SELECT kind FROM lifecycle_jobs WHERE state = 'queued' ORDER BY kind") == queuedBefore)
        #expect(try await workspace.state(of: "ada") == "pendingDeletion")
    }

    @Test func workerAndPurgeWriteAPrometheusTextfile() async throws {
        let workspace = try await Workspace.make(.sqlite)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "gone", pendingSince: DeletionLines.past)], into: workspace)
        #expect(try await workspace.run(["jobs", "probe", "--count", "2"]).status == 0)
        let workerFile = workspace.root + "/worker.prom"
        let worker = try await workspace.run(["worker", "--once", "--kind", ProbeJobs.probeKind, "--metrics-file", workerFile])
        #expect(worker.status == 0, "\(worker.stderr)")
        let text = try String(contentsOfFile: workerFile, encoding: .utf8)
        #expect(text.contains(#"lifecycle_job_attempts_total{run="worker",kind="runner.probe",outcome="succeeded"} 2"#), "\(text)")
        #expect(text.contains(#"lifecycle_jobs{run="worker",kind="runner.probe",state="succeeded"} 2"#))
        #expect(text.contains(#"lifecycle_jobs{run="worker",kind="deletion.purge",state="queued"} 0"#))
        #expect(text.contains(#"lifecycle_last_run_exit_status{run="worker",command="worker"} 0"#))
        #expect(text.contains("# TYPE lifecycle_job_duration_seconds histogram"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: workspace.root).filter { $0.contains(".prom.tmp") }.isEmpty)

        // A cron run's counters add to the last run's, so they grow as counters must.
        #expect(try await workspace.run(["jobs", "probe"]).status == 0)
        #expect(try await workspace.run(["worker", "--once", "--kind", ProbeJobs.probeKind, "--metrics-file", workerFile]).status == 0)
        let again = try String(contentsOfFile: workerFile, encoding: .utf8)
        #expect(again.contains(#"lifecycle_job_attempts_total{run="worker",kind="runner.probe",outcome="succeeded"} 3"#), "\(again)")
        #expect(again.contains(#"lifecycle_job_duration_seconds_count{run="worker",kind="runner.probe"} 3"#), "\(again)")

        let purgeFile = workspace.root + "/purge.prom"
        #expect(try await workspace.run(["purge", "--metrics-file", purgeFile]).status == 0)
        let purged = try String(contentsOfFile: purgeFile, encoding: .utf8)
        #expect(purged.contains(#"lifecycle_accounts_purged_total{run="purge"} 1"#), "\(purged)")
        #expect(purged.contains(#"lifecycle_jobs{run="purge",kind="deletion.purge",state="succeeded"} 1"#))

        let unwritable = try await workspace.run(["purge", "--metrics-file", workspace.root + "/no/such/folder/x.prom"])
        #expect(unwritable.status == 73)
        #expect(unwritable.stderr.contains("cannot write the metrics file"))
    }

    /// node_exporter runs as its own user (install.md): the metrics file must be readable by
    /// others, while everything else the process writes stays its owner's.
    @Test func theMetricsFileIsReadableByNodeExporterAndNothingElseIs() async throws {
        let workspace = try await Workspace.make(.sqlite)
        #expect(try await workspace.run(["jobs", "probe"]).status == 0)
        let workerFile = workspace.root + "/worker.prom"
        let worker = try await workspace.run(["worker", "--once", "--kind", ProbeJobs.probeKind, "--metrics-file", workerFile])
        #expect(worker.status == 0, "\(worker.stderr)")
        // Written again over an existing file (the cron case): the mode holds.
        #expect(try await workspace.run(["worker", "--once", "--metrics-file", workerFile]).status == 0)
        let purgeFile = workspace.root + "/purge.prom"
        #expect(try await workspace.run(["purge", "--metrics-file", purgeFile]).status == 0)
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1) & 0o777
        }
        #expect(try mode(workerFile) == 0o644)
        #expect(try mode(purgeFile) == 0o644)
        #expect(try mode(workspace.database) == 0o600)
    }
}
