import ChildProcesses
import Foundation
import JobRunner
import Testing

/// Deleting part of an account's data (the data map's `parts:`) and keeping the account:
/// the part's rows and files go, verified, with a receipt in the audit; nothing else of the
/// account or of anyone else changes.
@Suite(.serialized)
struct PartDeletionTests {
    struct Receipt: Decodable {
        struct Table: Decodable { var deleted: Int; var masked: Int; var after: Int }
        struct Verification: Decodable { var result: String; var rows_left: Int }
        var parts: [String]
        var rows: [String: Table]
        var rows_total: Int
        var blobs: Int
        var verification: Verification
    }

    static func receipts(_ workspace: Workspace, of key: String) async throws -> [Receipt] {
        try await workspace.auditRows(of: key).filter { $0.action == "deletion.part" }.map {
            try JSONDecoder().decode(Receipt.self, from: Data(($0.detail ?? "").utf8))
        }
    }

    static func files(_ workspace: Workspace, of key: String) -> Set<String> {
        let root = workspace.blobs + "/accounts/" + key
        let found = FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String } ?? []
        return Set(found.filter { !$0.hasPrefix("exports") && (try? FileManager.default.attributesOfItem(atPath: root + "/" + $0)[.type] as? FileAttributeType) == .typeRegular })
    }

    /// The reference app, both backends: the user's photos go (her profile photo's file with
    /// them), after a wrong password is refused; her journal, her other rows and bob's
    /// account are as they were.
    @Test(arguments: Backend.allCases)
    func photosGoAndTheAccountStaysWithAVerifiedReceipt(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", entries: 2), DeletionLines.account(id: "bob", entries: 2)], into: workspace)
        let bobsFiles = Self.files(workspace, of: "bob")
        #expect(bobsFiles.count == 3 && Self.files(workspace, of: "ada").count == 3, "\(bobsFiles)")
        let bobBefore = try await workspace.query("SELECT id, blob_key FROM photos WHERE account_id = 'bob' ORDER BY id")

        let wrong = try await workspace.run(["delete", "ada", "--part", "photos", "--password-stdin"], stdin: "battery staple")
        #expect(wrong.status == 77 && wrong.stderr.contains("Incorrect password"), "\(wrong.stderr)")
        let asked = try await workspace.run(["delete", "ada", "--part", "photos", "--password-stdin", "--json"], stdin: DeletionLines.password)
        #expect(asked.status == 0, "\(asked.stderr)")
        #expect(asked.stdout.contains(#""parts":["photos"]"#) && asked.stdout.contains("Your account stays open."), "\(asked.stdout)")
        let twice = try await workspace.run(["delete", "ada", "--part", "journal", "--operator", "sam", "--reason", "ticket 7"])
        #expect(twice.status == 65 && twice.stderr.contains("is already under way"), "\(twice.stderr)")
        // Nothing is deleted until the job runs, and then all of it.
        #expect(try await workspace.int("SELECT COUNT(*) FROM photos WHERE account_id = 'ada'") == 2)
        #expect(try await workspace.query("SELECT profile_photo_key FROM accounts WHERE id = 'ada'") == [["accounts/ada/upload-import.jpg"]])
        let worker = try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"])
        #expect(worker.status == 0 && (worker.stdout + worker.stderr).contains("1 succeeded"), "\(worker.stdout) \(worker.stderr)")

        #expect(try await workspace.int("SELECT COUNT(*) FROM photos WHERE account_id = 'ada'") == 0)
        #expect(try await workspace.query("SELECT profile_photo_key, state, email FROM accounts WHERE id = 'ada'") == [[nil, "active", "ada@example.com"]])
        #expect(try await workspace.int("SELECT COUNT(*) FROM journal_entries WHERE account_id = 'ada'") == 2)
        #expect(try await workspace.int("SELECT COUNT(*) FROM sessions WHERE account_id = 'ada'") == 1)
        #expect(Self.files(workspace, of: "ada").isEmpty, "\(Self.files(workspace, of: "ada"))")
        #expect(Self.files(workspace, of: "bob") == bobsFiles)
        #expect(try await workspace.query("SELECT id, blob_key FROM photos WHERE account_id = 'bob' ORDER BY id") == bobBefore)

        let receipt = try #require(try await Self.receipts(workspace, of: "ada").first)
        #expect(receipt.parts == ["photos"] && receipt.rows["photos"]?.deleted == 2 && receipt.rows["accounts"]?.masked == 1, "\(receipt)")
        #expect(receipt.blobs == 3 && receipt.rows_total == 3 && receipt.verification.result == "verified" && receipt.verification.rows_left == 0)
        let audit = try await workspace.run(["audit", "ada"])
        #expect(audit.stdout.contains("deletion.part") && audit.stdout.contains("verified"), "\(audit.stdout)")

        // Once it is done, the next part can be asked for; the account is still theirs to delete.
        let journal = try await workspace.run(["delete", "ada", "--part", "journal", "--operator", "sam", "--reason", "ticket 7"])
        #expect(journal.status == 0, "\(journal.stderr)")
        #expect(try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"]).status == 0)
        #expect(try await workspace.int("SELECT COUNT(*) FROM journal_entries WHERE account_id = 'ada'") == 0)
        #expect(try await Self.receipts(workspace, of: "ada").count == 2)
        #expect(try await workspace.int("SELECT COUNT(*) FROM journal_entries WHERE account_id = 'bob'") == 2)
    }

    /// Only an active account's parts, not on hold; a wrong password counts towards the same
    /// lockout as the whole account's deletion.
    @Test func aPartIsRefusedForAnAccountPendingDeletionOrOnHoldAndWrongPasswordsLockBoth() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts(["ada", "bob", "cy"].map { DeletionLines.account(id: $0) }, into: workspace)
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: DeletionLines.password).status == 0)
        let pending = try await workspace.run(["delete", "ada", "--part", "photos", "--password-stdin"], stdin: DeletionLines.password)
        #expect(pending.status == 65 && pending.stderr.contains("is scheduled for deletion") && pending.stderr.contains("Restore it first"), "\(pending.stderr)")

        #expect(try await workspace.run(["accounts", "hold", "bob", "--reason", "litigation 12", "--operator", "sam"]).status == 0)
        let held = try await workspace.run(["delete", "bob", "--part", "photos", "--operator", "sam", "--reason", "t"])
        #expect(held.status == 65 && held.stderr.contains("on hold"), "\(held.stderr)")
        let unknown = try await workspace.run(["delete", "cy", "--part", "videos", "--operator", "sam", "--reason", "t"])
        #expect(unknown.status == 65 && unknown.stderr.contains("there is no part 'videos' (the data map declares: photos, journal)"), "\(unknown.stderr)")

        // A hold that comes after the request stops the job before it deletes anything, and says so.
        #expect(try await workspace.run(["delete", "cy", "--part", "journal", "--operator", "sam", "--reason", "t"]).status == 0)
        #expect(try await workspace.run(["accounts", "hold", "cy", "--reason", "litigation 13", "--operator", "sam"]).status == 0)
        // Refused work is not a green run: the worker names it and exits 75 for cron to look.
        let worker = try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"])
        #expect(worker.status == 75 && worker.stdout.contains("1 stopped"), "\(worker.stdout)")
        #expect(worker.stderr.contains("stopped: account cy is on hold, so nothing more of its part(s) journal was deleted; the user asks again once the hold ends"), "\(worker.stderr)")
        #expect(try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"]).status == 0, "the next run has nothing left to report")
        // As a crash between the stop's audit event and the step's done-mark leaves it: the
        // step runs again and stops again, and the one request keeps one event.
        let jobs = workspace.ownTable("jobs"), steps = workspace.ownTable("job_steps")
        try await workspace.execute("DELETE FROM \(steps) WHERE job_id IN (SELECT id FROM \(jobs) WHERE kind = 'deletion.erase-parts')")
        try await workspace.execute("""
            UPDATE \(jobs) SET state = 'retrying', finished_at = NULL, lease_owner = NULL, lease_expires_at = NULL \
            WHERE kind = 'deletion.erase-parts'
            """)
        #expect(try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"]).status == 75)
        #expect(try await workspace.auditRows(of: "cy").filter { $0.action == "deletion.part" }.count == 1)
        #expect(try await workspace.int("SELECT COUNT(*) FROM journal_entries WHERE account_id = 'cy'") == 1)
        let stopped = try await workspace.auditRows(of: "cy").first { $0.action == "deletion.part" }
        #expect(stopped?.outcome == "stopped" && stopped?.detail?.contains(#""stopped":"held""#) == true, "\(String(describing: stopped))")
        // The app's listing says so too, in a field of its own: a stopped one is never read as done.
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let listed = try await ServeTests.api(server, "GET", "accounts/cy/part-deletions")
        #expect(await server.stop() == 0)
        let deletions = try #require(listed.json["deletions"] as? [[String: Any]], "\(listed.json)")
        #expect(deletions.count == 1 && deletions.first?["outcome"] as? String == "stopped", "\(listed.json)")
        #expect((deletions.first?["receipt"] as? [String: Any])?["stopped"] as? String == "held", "\(listed.json)")
        #expect(try await workspace.run(["accounts", "unhold", "cy", "--operator", "sam"]).status == 0)

        for _ in 0..<3 { #expect(try await workspace.run(["delete", "cy", "--password-stdin"], stdin: "nope").status == 77) }
        for _ in 0..<2 { #expect(try await workspace.run(["delete", "cy", "--part", "photos", "--password-stdin"], stdin: "nope").status == 77) }
        let locked = try await workspace.run(["delete", "cy", "--part", "photos", "--password-stdin"], stdin: DeletionLines.password)
        #expect(locked.status == 75 && locked.stderr.contains("Too many incorrect passwords"), "\(locked.stderr)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM photos") == 3)
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = 'deletion.erase-parts'") == 1)
    }

    /// A run killed after a stopped job's done-mark, before its exit status could say so: the
    /// stop was recorded with the mark, so the next run of that kind reports it (exit 75,
    /// naming it and when it happened) and the one after that has nothing left to report.
    @Test(arguments: Backend.allCases)
    func aStopIsReportedByTheNextRunWhenTheRunThatMadeItWasKilledBeforeReporting(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "cy")], into: workspace)
        #expect(try await workspace.run(["delete", "cy", "--part", "journal", "--operator", "sam", "--reason", "t"]).status == 0)
        #expect(try await workspace.run(["accounts", "hold", "cy", "--reason", "litigation 13", "--operator", "sam"]).status == 0)

        let barrier = workspace.root + "/after-job-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: barrier, withIntermediateDirectories: true)
        let (worker, _, _) = try workspace.process(
            ["worker", "--once", "--kind", "deletion.erase-parts"], environment: ["LIFECYCLE_TEST_BARRIER_AFTER_JOB": barrier])
        let killed = await killProcess(worker) {
            try FileManager.default.contentsOfDirectory(atPath: barrier).contains { $0.hasPrefix("arrived-") }
        }
        await worker.exited()
        #expect(killed && worker.terminationReason == .uncaughtSignal, "the run ended before its job did: \(worker.terminationStatus)")
        // The kill landed between the job's end and the run's report.
        let jobs = workspace.ownTable("jobs"), stops = workspace.ownTable("unreported_stops")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(jobs) WHERE kind = 'deletion.erase-parts' AND state = 'succeeded'") == 1)
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(stops)") == 1)

        // A run of other kinds leaves it to a run of its own kind.
        #expect(try await workspace.run(["worker", "--once", "--kind", "runner.probe"]).status == 0)
        let next = try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"])
        #expect(next.status == 75 && next.stdout.contains("0 succeeded") && next.stdout.contains("1 stopped"), "\(next.stdout)")
        #expect(next.stderr.contains("account cy is on hold") && next.stderr.contains("by a run that had not reported it"), "\(next.stderr)")
        #expect(try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"]).status == 0, "reported once")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(stops)") == 0)
        #expect(try await workspace.int("SELECT COUNT(*) FROM journal_entries WHERE account_id = 'cy'") == 1, "the hold kept the part")
    }

    /// A real Django site through the API, both backends: ada deletes her posts. They go
    /// with the comments others left under them and those comments' files; every other row
    /// of the site is as it was, byte for byte, and she is still signed in.
    @Test(arguments: Backend.allCases)
    func aDjangoUserDeletesHerPostsThroughTheAPIAndEverythingElseStays(_ backend: Backend) async throws {
        let django = DjangoSiteErasureTests()
        let (workspace, seeded) = try await django.site(backend, map: try DjangoSiteErasureTests.map)
        let ada = try #require(seeded.users["ada"])
        let session = try #require(seeded.sessions["ada"])
        #expect(try await workspace.run(["init"]).status == 0)
        let before = try await django.everyRow(workspace)
        let posts = try await django.app.rows(workspace, "SELECT cover FROM blog_post WHERE author_id = \(ada) AND cover <> ''")
        #expect(!posts.isEmpty)
        let filesBefore = django.app.files(workspace)

        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let listed = try await ServeTests.api(server, "GET", "parts")
        #expect(listed.status == 200 && (listed.json["parts"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["messages", "posts"], "\(listed.json)")
        let wrong = try await ServeTests.api(server, "POST", "accounts/\(ada)/part-deletions", body: #"{"password": "battery staple", "parts": ["posts"]}"#)
        #expect(wrong.status == 401 && ServeTests.errorCode(wrong.json) == "incorrect_password", "\(wrong.json)")
        let unknown = try await ServeTests.api(server, "POST", "accounts/\(ada)/part-deletions", body: #"{"password": "correct horse", "parts": ["likes"]}"#)
        #expect(unknown.status == 400 && ServeTests.errorMessage(unknown.json)?.contains("there is no part 'likes'") == true, "\(unknown.json)")
        let asked = try await ServeTests.api(server, "POST", "accounts/\(ada)/part-deletions", body: #"{"password": "correct horse", "parts": ["posts"]}"#)
        #expect(asked.status == 202 && asked.json["parts"] as? [String] == ["posts"], "\(asked.json)")
        #expect(try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"]).status == 0)
        let done = try await ServeTests.api(server, "GET", "accounts/\(ada)/part-deletions")
        #expect(await server.stop() == 0)
        let deletions = try #require(done.json["deletions"] as? [[String: Any]], "\(done.json)")
        let receipt = try #require(deletions.first?["receipt"] as? [String: Any])
        #expect(deletions.count == 1 && (receipt["verification"] as? [String: Any])?["result"] as? String == "verified", "\(done.json)")
        #expect(deletions.first?["outcome"] as? String == "erased", "\(done.json)")

        #expect(try await django.app.rows(workspace, "SELECT COUNT(*) FROM blog_post WHERE author_id = \(ada)") == ["0"])
        #expect(try await django.app.rows(workspace, "SELECT COUNT(*) FROM blog_comment WHERE post_id NOT IN (SELECT id FROM blog_post)") == ["0"])
        let after = try await django.everyRow(workspace)
        // Nothing changed in place: every row left was there as it is; the rows gone are the receipt's.
        #expect(after.subtracting(before).isEmpty, "\(after.subtracting(before))")
        let gone = before.subtracting(after)
        #expect(gone.count == receipt["rows_total"] as? Int, "\(gone) \(receipt)")
        #expect(gone.allSatisfy { $0.hasPrefix("blog_post ") || $0.hasPrefix("blog_comment ") || $0.hasPrefix("blog_attachment ") }, "\(gone)")
        #expect(gone.contains { $0.hasPrefix("blog_attachment ") }, "a comment's attachment under her post goes with it")
        let filesGone = filesBefore.subtracting(django.app.files(workspace))
        #expect(filesGone.count == receipt["blobs"] as? Int && Set(posts).isSubset(of: filesGone), "\(filesGone)")
        #expect(try await django.manage(workspace, ["whoami", session]) != "anonymous")
        #expect(try await workspace.run(["accounts", "show", "ada", "--json"]).stdout.contains(#""state":"active""#))
    }

    /// Issue 53, both backends: a part deletion erases the part as it was when the user asked.
    /// A photo uploaded while the job waited is new content and stays, file and all; a photo
    /// attached since to a journal entry the request recorded goes with the entry (children go
    /// with a recorded row, as the map's `cascade:` says), while an entry written since stays.
    /// Asked through the CLI (photos) and the app API (journal). A request an older version
    /// queued, which recorded nothing, still erases the part as it stands when it runs.
    @Test(arguments: Backend.allCases)
    func aRowOfThePartAddedAfterTheRequestStays(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", entries: 2)], into: workspace)
        let template = try #require(try await workspace.query("SELECT blob_key FROM photos WHERE id = 'ada-p0'").first?.first ?? nil)
        let directory = (template as NSString).deletingLastPathComponent
        /// A photo the app adds as the user uploads it: its row (a copy of one of hers) and its file.
        func upload(_ id: String, entry: String?) async throws -> String {
            let key = directory + "/" + id + ".jpg"
            try Data([0xFF, 0xD8, 0xFF, 0xD9]).write(to: URL(fileURLWithPath: workspace.blobs + "/" + key))
            try await workspace.execute("""
                INSERT INTO photos (id, account_id, entry_id, role, blob_key, content_type, byte_size, sha256, taken_at, created_at)
                SELECT ?, account_id, NULLIF(?, ''), 'entry', ?, content_type, byte_size, sha256, taken_at, created_at \
                FROM photos WHERE id = (SELECT MIN(id) FROM photos WHERE account_id = 'ada')
                """, [.text(id), .text(entry ?? ""), .text(key)])
            return String(key.dropFirst("accounts/ada/".count))
        }
        func photos() async throws -> [String?] {
            try await workspace.query("SELECT id FROM photos WHERE account_id = 'ada' ORDER BY id").map { $0[0] }
        }
        func work() async throws {
            let worker = try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"])
            #expect(worker.status == 0 && (worker.stdout + worker.stderr).contains("1 succeeded"), "\(worker.stdout) \(worker.stderr)")
        }

        // The CLI: her photos as they are now; one uploaded before the job runs stays.
        let asked = try await workspace.run(["delete", "ada", "--part", "photos", "--password-stdin"], stdin: DeletionLines.password)
        #expect(asked.status == 0, "\(asked.stderr)")
        let uploaded = try await upload("ada-new", entry: nil)
        try await work()
        #expect(try await photos() == ["ada-new"])
        #expect(Self.files(workspace, of: "ada") == [uploaded], "\(Self.files(workspace, of: "ada"))")
        let photosReceipt = try #require(try await Self.receipts(workspace, of: "ada").last)
        #expect(photosReceipt.rows["photos"]?.deleted == 2 && photosReceipt.verification.result == "verified", "\(photosReceipt)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("part_deletion_rows"))") == 0, "the keys go with the job")

        // The app API: her journal as it is now. A photo attached since to one of its entries
        // goes with the entry; an entry written since stays, with its photo.
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let api = try await ServeTests.api(server, "POST", "accounts/ada/part-deletions", body: #"{"password": "\#(DeletionLines.password)", "parts": ["journal"]}"#)
        #expect(await server.stop() == 0)
        #expect(api.status == 202, "\(api.json)")
        let attached = try await upload("ada-e0-later", entry: "ada-e0")
        try await workspace.execute("""
            INSERT INTO journal_entries (id, account_id, created_at, text) SELECT 'ada-e9', account_id, created_at, 'written since' \
            FROM journal_entries WHERE id = 'ada-e0'
            """)
        let kept = try await upload("ada-e9-photo", entry: "ada-e9")
        try await work()
        #expect(try await workspace.query("SELECT id FROM journal_entries WHERE account_id = 'ada'") == [["ada-e9"]])
        let afterJournal = try await workspace.query("SELECT id, entry_id FROM photos WHERE account_id = 'ada' ORDER BY id")
        #expect(afterJournal == [["ada-e9-photo", "ada-e9"], ["ada-new", nil]], "\(afterJournal)")
        #expect(Self.files(workspace, of: "ada") == [uploaded, kept] && !Self.files(workspace, of: "ada").contains(attached))
        let journalReceipt = try #require(try await Self.receipts(workspace, of: "ada").last)
        #expect(journalReceipt.parts == ["journal"] && journalReceipt.rows["journal_entries"]?.deleted == 2, "\(journalReceipt)")
        #expect(journalReceipt.rows["photos"]?.deleted == 1 && journalReceipt.verification.result == "verified", "\(journalReceipt)")

        // A request queued by a version that recorded nothing: its payload has no
        // recorded_rows. Its job erases the part as it stands, as that version promised.
        let old = try await workspace.run(["delete", "ada", "--part", "photos", "--operator", "sam", "--reason", "ticket 9"])
        #expect(old.status == 0, "\(old.stderr)")
        try await workspace.execute("DELETE FROM \(workspace.ownTable("part_deletion_rows"))")
        try await workspace.execute("""
            UPDATE \(workspace.ownTable("jobs")) SET payload = '{"account":"ada","parts":["photos"],"actor":"operator:sam"}' \
            WHERE kind = 'deletion.erase-parts' AND state = 'queued'
            """)
        _ = try await upload("ada-later", entry: nil)
        try await work()
        #expect(try await photos() == [])
        #expect(Self.files(workspace, of: "ada").isEmpty, "\(Self.files(workspace, of: "ada"))")

        // A part deletion cancelled before it ran keeps its recorded keys while `jobs retry`
        // may still bring it back; her purge takes them with the rest of her.
        let recorded = "SELECT COUNT(*) FROM \(workspace.ownTable("part_deletion_rows"))"
        #expect(try await workspace.run(["delete", "ada", "--part", "journal", "--operator", "sam", "--reason", "ticket 10"]).status == 0)
        let queued = try await workspace.int("SELECT MAX(id) FROM \(workspace.ownTable("jobs")) WHERE kind = 'deletion.erase-parts'")
        #expect(try await workspace.run(["jobs", "cancel", "\(queued)"]).status == 0)
        #expect(try await workspace.int(recorded) == 1, "ada-e9, her one entry")
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "ticket 11"]).status == 0)
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(try await workspace.int(recorded) == 0)
        let purged = try #require(try await workspace.auditRows(of: "ada").first { $0.action == "account.purge" && $0.outcome == "purged" })
        #expect(purged.detail?.contains(#""lifecycle.part_deletion_rows":{"after":0,"before":1,"deleted":1"#) == true, "\(purged.detail ?? "")")
    }
}
