import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import PostgresTesting
import Testing

/// Deletion and purge of an app's own database, built with the app's DDL, driven by its
/// data map alone: the user's rows go (or are masked where the map keeps them), other
/// users' rows stay byte for byte, every file the user's rows named is gone, the app's
/// schema is unchanged, and a purge killed half-way finishes on the next run.
@Suite(.serialized)
struct AppPurgeTests {
    let schemas = DataMapCheckTests()

    /// The social schema with three members: ada (the one deleted), bob and cy, whose rows
    /// reference ada's in every way the map handles.
    static let socialSeed = """
        INSERT INTO members (id, handle, email, pw, avatar_key, created_at) VALUES
          (1, 'ada', 'ada@example.com', '$2b$04$HHocyac4LWUar5jGjh4pzOF5vihAMJ8IF5/sJaHaNgDitpdnxyL/G', 'avatars/1.jpg', '2025-01-01 00:00:00'),
          (2, 'bob', 'bob@example.com', NULL, 'avatars/2.jpg', '2025-01-02 00:00:00'),
          (3, 'cy', 'cy@example.com', NULL, NULL, '2025-01-03 00:00:00');
        INSERT INTO statuses (id, member_id, in_reply_to_id, body, created_at) VALUES
          (10, 1, NULL, 'ada first', '2025-02-01 00:00:00'),
          (11, 1, 10, 'ada answers herself', '2025-02-02 00:00:00'),
          (12, 2, 10, 'bob answers ada', '2025-02-03 00:00:00'),
          (13, 1, 12, 'ada answers bob', '2025-02-04 00:00:00'),
          (14, 2, NULL, 'bob alone', '2025-02-05 00:00:00');
        INSERT INTO media (id, status_id, file_key) VALUES (100, 10, 'media/100.jpg'), (101, 13, 'media/101.jpg'), (102, 14, 'media/102.jpg');
        INSERT INTO media_variants (media_id, size, file_key) VALUES (100, 'small', 'media/100-s.jpg'), (102, 'small', 'media/102-s.jpg');
        INSERT INTO favourites (member_id, status_id, created_at) VALUES
          (2, 10, '2025-03-01 00:00:00'), (2, 11, '2025-03-02 00:00:00'), (1, 14, '2025-03-03 00:00:00');
        INSERT INTO follows (follower_id, followee_id) VALUES (1, 2), (2, 1), (2, 3);
        INSERT INTO messages (id, sender_id, recipient_id, body, sent_at) VALUES
          (1000, 1, 2, 'hi bob', '2025-04-01 00:00:00'), (1001, 2, 1, 'hi ada', '2025-04-02 00:00:00'),
          (1002, 2, 3, 'hi cy', '2025-04-03 00:00:00');
        """

    static let socialFiles = ["avatars/1.jpg", "avatars/2.jpg", "media/100.jpg", "media/101.jpg", "media/102.jpg", "media/100-s.jpg", "media/102-s.jpg"]

    func installSocial(_ backend: Backend, policy: String? = nil) async throws -> Workspace {
        let workspace = try await schemas.install(try DataMapCheckTests.AppSchema.social, backend)
        try await seed(workspace, Self.socialSeed)
        if let policy {
            try FileManager.default.createDirectory(atPath: workspace.jobsDirectory + "/policies", withIntermediateDirectories: true)
            try policy.write(toFile: workspace.jobsDirectory + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
        }
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in Self.socialFiles { _ = try await blobs.put(key: key, data: Data("file \(key)".utf8)) }
        return workspace
    }

    func seed(_ workspace: Workspace, _ sql: String) async throws {
        switch workspace.backend {
        // A purge that just ended may still be closing the file: wait for it, as lifecycle does.
        case .sqlite: try await runTool("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", workspace.database], input: sql)
        case .postgres:
            // Through stdin: a seed of thousands of rows is longer than a command line may be.
            let connection = String(workspace.database[..<(workspace.database.range(of: "&pool=")?.lowerBound ?? workspace.database.endIndex)])
            try await runTool(ThrowawayPostgres.binDirectory + "/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", connection, "-f", "-"], input: sql)
        }
    }

    func appCatalog(_ workspace: Workspace) async throws -> String { try await schemas.tables(workspace) }

    func rows(_ workspace: Workspace, _ sql: String) async throws -> [String] {
        try await workspace.query(sql).map { $0.map { $0 ?? "∅" }.joined(separator: "|") }
    }

    func files(_ workspace: Workspace) -> Set<String> {
        let all = FileManager.default.enumerator(atPath: workspace.blobs)?.allObjects.compactMap { $0 as? String } ?? []
        return Set(all.filter { !$0.hasPrefix(".incoming") && ((try? FileManager.default.attributesOfItem(atPath: workspace.blobs + "/" + $0)[.type] as? FileAttributeType) == .typeRegular) })
    }

    @Test(arguments: Backend.allCases)
    func purgingAMemberOfTheSocialAppTakesHerRowsAndFilesAndNobodyElses(_ backend: Backend) async throws {
        let workspace = try await installSocial(backend)
        let catalog = try await appCatalog(workspace)

        let request = try await workspace.run(["delete", "ada@example.com", "--operator", "sam", "--reason", "GDPR request #12", "--immediately"])
        #expect(request.status == 0, "\(request.stderr)")
        let shown = try await workspace.run(["accounts", "show", "ada", "--json"])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains(#""state":"pendingDeletion""#), "\(shown.stdout)")
        #expect(shown.stdout.contains(#""statuses":3"#))

        let dryRun = try await workspace.run(["purge", "--dry-run"])
        #expect(dryRun.status == 0, "\(dryRun.stderr)")
        #expect(dryRun.stdout.contains("1 account(s) would be purged"), "\(dryRun.stdout)")
        #expect(try await rows(workspace, "SELECT id FROM members ORDER BY id") == ["1", "2", "3"])

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stderr)")
        #expect(purge.stdout.contains("purge: 1 purged, 0 skipped, 0 failed"), "\(purge.stdout)")
        try await expectAdaPurged(workspace, catalog: catalog)
        // Nothing is left to purge, and a second run changes nothing.
        #expect(try await workspace.run(["purge"]).stdout.contains("purge: 0 purged, 0 skipped, 0 failed"))
    }

    /// One row per transaction: every batch ends inside a table (a cascade, a leaf round,
    /// a mask, one side of a two-user row) and the next carries on there; the end state
    /// and the receipt are those of a purge in one transaction.
    @Test(arguments: Backend.allCases)
    func aPurgeOneRowPerTransactionEndsAsOneInASingleTransaction(_ backend: Backend) async throws {
        let workspace = try await installSocial(backend, policy: "deletion:\n  purge_row_batch: 1\n")
        let catalog = try await appCatalog(workspace)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.stdout.contains("purge: 1 purged, 0 skipped, 0 failed"), "\(purge.stdout) \(purge.stderr)")
        try await expectAdaPurged(workspace, catalog: catalog)
    }

    /// ada's rows and files gone or masked as the social map says, and nobody else's.
    func expectAdaPurged(_ workspace: Workspace, catalog: String) async throws {
        #expect(try await rows(workspace, "SELECT id, handle FROM members ORDER BY id") == ["2|bob", "3|cy"])
        // 10 stays, emptied, because bob answered it; ada's own answers and her answer to bob go.
        #expect(try await rows(workspace, "SELECT id, member_id, in_reply_to_id, body FROM statuses ORDER BY id")
                == ["10|∅|∅|∅", "12|2|10|bob answers ada", "14|2|∅|bob alone"])
        #expect(try await rows(workspace, "SELECT id, status_id FROM media ORDER BY id") == ["102|14"])
        #expect(try await rows(workspace, "SELECT media_id, size FROM media_variants ORDER BY media_id") == ["102|small"])
        // Bob's favourite of ada's deleted answer went with it; his favourite of the kept post stays.
        #expect(try await rows(workspace, "SELECT member_id, status_id FROM favourites ORDER BY member_id, status_id") == ["2|10"])
        #expect(try await rows(workspace, "SELECT follower_id, followee_id FROM follows ORDER BY follower_id") == ["2|3"])
        // Messages stay for the other person, with ada's side emptied.
        #expect(try await rows(workspace, "SELECT id, sender_id, recipient_id, body FROM messages ORDER BY id")
                == ["1000|∅|2|hi bob", "1001|2|∅|hi ada", "1002|2|3|hi cy"])
        #expect(files(workspace) == ["avatars/2.jpg", "media/102.jpg", "media/102-s.jpg"])
        if workspace.backend == .sqlite {
            #expect(try await runTool("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", workspace.database, "PRAGMA foreign_key_check"]).isEmpty)
        }
        let catalogAfter = try await appCatalog(workspace)
        #expect(catalogAfter == catalog, "\(Set(catalogAfter.split(separator: ",")).symmetricDifference(catalog.split(separator: ",")))")

        let receipt = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        for expected in [#""statuses":{"after":0,"before":3,"deleted":2,"masked":1}"#, #""favourites":{"after":0,"before":2,"deleted":2,"masked":0}"#, #""messages":{"after":0,"before":2,"deleted":0,"masked":2}"#,
                         #""members":{"after":0,"before":1,"deleted":1,"masked":0}"#, #""media_variants":{"after":0,"before":1,"deleted":1,"masked":0}"#, #""media":{"after":0,"before":2,"deleted":2,"masked":0}"#,
                         #""follows":{"after":0,"before":2,"deleted":2,"masked":0}"#, #""blobs":4"#] {
            #expect(receipt.contains(expected), "\(receipt)")
        }
        let after = try await workspace.run(["accounts", "show", "1", "--json"])
        #expect(after.stdout.contains(#""state":"purged""#), "\(after.stdout) \(after.stderr)")
    }

    @Test(arguments: Backend.allCases)
    func theUsersPasswordIsCheckedWhereTheMapSaysAndRestoreUndoesTheRequest(_ backend: Backend) async throws {
        let workspace = try await installSocial(backend)
        // ada's bcrypt hash is of "correct horse" (written by libxcrypt, as PHP or Python's bcrypt would).
        let wrong = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "not it\n")
        #expect(wrong.status == 77, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("Incorrect password"))
        // pw is NULL for bob: nothing can verify it, and nothing changes.
        let unverifiable = try await workspace.run(["delete", "bob", "--password-stdin"], stdin: "x\n")
        #expect(unverifiable.status == 65, "\(unverifiable.stderr)")
        #expect(try await workspace.run(["restore", "ada"]).status == 65)  // not pending

        let later = ["LIFECYCLE_NOW": "2026-01-01T00:00:00Z"]
        let requested = try await workspace.run(["delete", "ada", "--password-stdin"], environment: later, stdin: "correct horse\n")
        #expect(requested.status == 0, "\(requested.stderr)")
        #expect(requested.stdout.contains("30 days"), "\(requested.stdout)")
        let restored = try await workspace.run(["restore", "ada"], environment: later)
        #expect(restored.status == 0, "\(restored.stderr)")
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": "2026-03-01T00:00:00Z"])
        #expect(purge.stdout.contains("purge: 0 purged"), "\(purge.stdout)")
        #expect(try await rows(workspace, "SELECT COUNT(*) FROM statuses WHERE member_id = 1") == ["3"])
    }

    @Test(arguments: Backend.allCases)
    func aPurgeKilledHalfWayFinishesOnTheNextRunAndCountsEveryRowOnce(_ backend: Backend) async throws {
        // Small batches with a pause between them, so the kill lands in the middle of ada's rows.
        // The window between 1,400 and 100 rows left is some twenty seconds, and the poller
        // waits for it as long as the purge runs: with the whole suite on two cores, a purge
        // took over a minute to reach ada's posts, and 100 ms pauses (five seconds) were
        // missed too. A kill that lands ends the purge early, and the rerun goes without pauses.
        let workspace = try await installSocial(backend, policy: "deletion:\n  purge_row_batch: 25\n  batch_pause_milliseconds: 400\n")
        let many = (0..<1_500).map { "(\(20_000 + $0), 1, NULL, 'post \($0)', '2025-05-01 00:00:00')" }.joined(separator: ",\n")
        let favourites = (0..<1_500).map { "(2, \(20_000 + $0), '2025-05-02 00:00:00')" }.joined(separator: ",\n")
        try await seed(workspace, "INSERT INTO statuses (id, member_id, in_reply_to_id, body, created_at) VALUES \(many);\nINSERT INTO favourites (member_id, status_id, created_at) VALUES \(favourites);")
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)

        let (process, _, _) = try workspace.process(["purge"])
        let landed = await killProcess(process, when: {
            let left = try workspace.integerNow("SELECT COUNT(*) FROM statuses WHERE member_id = 1")
            return left > 100 && left < 1_400
        }, timeout: 900)
        await process.exited()
        #expect(landed, "the kill never found the purge half-way")
        #expect(process.terminationReason == .uncaughtSignal)
        let half = try await rows(workspace, "SELECT COUNT(*) FROM statuses WHERE member_id = 1")
        #expect(half != ["0"] && half != ["1503"])

        try "deletion:\n  purge_row_batch: 25\n".write(toFile: workspace.jobsDirectory + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
        // The killed worker's lease has to run out before another run takes the job over.
        let rerun = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(3_600))])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.stdout.contains("1 purged"), "\(rerun.stdout)")
        #expect(try await rows(workspace, "SELECT COUNT(*) FROM statuses WHERE member_id = 1") == ["0"])
        #expect(try await rows(workspace, "SELECT id FROM statuses WHERE member_id IS NULL") == ["10"])
        #expect(try await rows(workspace, "SELECT member_id, status_id FROM favourites ORDER BY status_id") == ["2|10"])
        let receipt = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        // 1,500 posts plus ada's two answers deleted, each counted once across both runs; bob's 1,500 favourites and one more cascaded.
        #expect(receipt.contains(#""statuses":{"after":0,"before":1503,"deleted":1502,"masked":1}"#), "\(receipt)")
        #expect(receipt.contains(#""favourites":{"after":0,"before":1502,"deleted":1502,"masked":0}"#), "\(receipt)")
    }

    // MARK: - The shipped examples

    static let ada = "0000000a-0000-4000-8000-000000000001"
    static let bob = "0000000b-0000-4000-8000-000000000002"

    /// The product's app on Supabase: ada's password is "hunter2", in auth.users.
    static func supabaseSeed(auth: String) -> String {
        """
        INSERT INTO \(auth) (id, email, encrypted_password, phone, created_at) VALUES
          ('\(ada)', 'ada@example.com', '$2b$04$417W2BL6IWBp8fK6A5dPMulhiZioaZV8jhd04SHJXwMkb9Wr46yUy', '+44 1', '2025-01-01 00:00:00'),
          ('\(bob)', 'bob@example.com', NULL, NULL, '2025-01-02 00:00:00');
        INSERT INTO users (id, email, first_name, display_name, avatar_path, subscription_status, created_at) VALUES
          ('\(ada)', 'ada@example.com', 'Ada', 'Ada', 'avatars/ada.jpg', 'premium', '2025-01-01 00:00:00'),
          ('\(bob)', 'bob@example.com', 'Bob', 'Bob', 'avatars/bob.jpg', 'free', '2025-01-02 00:00:00');
        INSERT INTO user_preferences (user_id, theme) VALUES ('\(ada)', 'dark'), ('\(bob)', 'light');
        INSERT INTO user_integrations (user_id, provider, connected_at) VALUES
          ('\(ada)', 'strava', '2025-01-05 00:00:00'), ('\(ada)', 'whoop', '2025-01-06 00:00:00'), ('\(bob)', 'strava', '2025-01-07 00:00:00');
        INSERT INTO journal_entries (id, user_id, created_at, body) VALUES
          ('e0000000-0000-4000-8000-000000000001', '\(ada)', '2025-03-01 08:00:00', 'tempo run'),
          ('e0000000-0000-4000-8000-000000000002', '\(bob)', '2025-03-02 08:00:00', 'long ride');
        INSERT INTO journal_photos (id, entry_id, storage_path, taken_at) VALUES
          ('f0000000-0000-4000-8000-000000000001', 'e0000000-0000-4000-8000-000000000001', 'journal/ada/run.jpg', '2025-03-01 07:55:00'),
          ('f0000000-0000-4000-8000-000000000002', 'e0000000-0000-4000-8000-000000000002', 'journal/bob/ride.jpg', NULL);
        INSERT INTO mesocycles (id, user_id, status) VALUES ('c0000000-0000-4000-8000-000000000001', '\(ada)', 'completed');
        INSERT INTO meditation_sessions (id, user_id, started_at, duration_seconds) VALUES
          ('d0000000-0000-4000-8000-000000000001', '\(ada)', '2025-03-02 06:00:00', 600);
        """
    }

    /// The files `supabaseSeed`'s rows name (avatars and journal photos of ada and bob), each holding its own key.
    static func storeSupabaseFiles(_ workspace: Workspace) async throws {
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in ["avatars/ada.jpg", "avatars/bob.jpg", "journal/ada/run.jpg", "journal/bob/ride.jpg"] {
            _ = try await blobs.put(key: key, data: Data(key.utf8))
        }
    }

    @Test
    func theProductsSupabaseAppIsPurgedByItsMapWithItsBcryptHashInAuthUsers() async throws {
        let workspace = try await schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        let auth = "auth.users"
        try await seed(workspace, Self.supabaseSeed(auth: auth))
        try await AppPurgeTests.storeSupabaseFiles(workspace)
        let catalog = try await appCatalog(workspace)
        let wrong = try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: "hunter3")
        #expect(wrong.status == 77, "\(wrong.stderr)")
        let right = try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: "hunter2")
        #expect(right.status == 0, "\(right.stderr)")
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")

        // The profile row and Supabase's own stay as tombstones; everything else of ada goes.
        #expect(try await rows(workspace, "SELECT email, first_name, display_name, avatar_path, subscription_status FROM users ORDER BY email")
                == ["bob@example.com|Bob|Bob|avatars/bob.jpg|free", "deleted-\(Self.ada)@users.invalid|∅|∅|∅|premium"])
        #expect(try await rows(workspace, "SELECT email, encrypted_password, phone FROM \(auth) ORDER BY email")
                == ["bob@example.com|∅|∅", "deleted-\(Self.ada)@users.invalid||∅"])
        for table in ["user_preferences", "user_integrations", "journal_entries", "mesocycles", "meditation_sessions"] {
            #expect(try await rows(workspace, "SELECT COUNT(*) FROM \(table) WHERE user_id = '\(Self.ada)'") == ["0"], "\(table)")
        }
        #expect(try await rows(workspace, "SELECT COUNT(*) FROM user_integrations") == ["1"])
        #expect(try await rows(workspace, "SELECT storage_path FROM journal_photos") == ["journal/bob/ride.jpg"])
        #expect(files(workspace) == ["avatars/bob.jpg", "journal/bob/ride.jpg"])
        #expect(try await appCatalog(workspace) == catalog)
        let receipt = try #require(try await workspace.auditRows(of: Self.ada).first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        #expect(receipt.contains(#""journal_photos":{"after":0,"before":1,"deleted":1,"masked":0}"#) && receipt.contains(#""user":"masked""#), "\(receipt)")
    }

    /// A Django site: ada (id 1, password "letmein" as Django's PBKDF2 hasher writes it)
    /// wrote a post bob commented on with a file, and commented on bob's post with a file.
    static let djangoSeed = """
        INSERT INTO auth_user (id, password, is_superuser, username, first_name, last_name, email, is_staff, is_active, date_joined) VALUES
          (1, 'pbkdf2_sha256$1000$seasalt$R1/GfWtwog1T8Ev9VndgDjzkiRzbFr8JpmJtL9cMmQU=', FALSE, 'ada', 'Ada', 'Lovelace', 'ada@example.com', TRUE, TRUE, '2025-01-01 00:00:00'),
          (2, '!', FALSE, 'bob', 'Bob', 'B', 'bob@example.com', FALSE, TRUE, '2025-01-02 00:00:00');
        INSERT INTO blog_post (id, author_id, title, body, cover, created_at) VALUES
          (10, 1, 'Engines', 'analytical', 'covers/10.png', '2025-02-01 00:00:00'),
          (11, 2, 'Bikes', 'pedals', 'covers/11.png', '2025-02-02 00:00:00');
        INSERT INTO blog_comment (id, post_id, author_id, body, created_at) VALUES
          (100, 10, 2, 'bob on ada''s post', '2025-02-03 00:00:00'),
          (101, 11, 1, 'ada on bob''s post', '2025-02-04 00:00:00'),
          (102, 11, 2, 'bob on his own post', '2025-02-05 00:00:00');
        INSERT INTO blog_attachment (id, comment_id, file) VALUES (1000, 100, 'att/1000.pdf'), (1001, 101, 'att/1001.pdf'), (1002, 102, 'att/1002.pdf');
        INSERT INTO auth_group (id, name) VALUES (1, 'editors');
        INSERT INTO auth_user_groups (id, user_id, group_id) VALUES (1, 1, 1), (2, 2, 1);
        INSERT INTO django_admin_log (id, action_time, object_id, object_repr, change_message, user_id) VALUES
          (1, '2025-02-06 00:00:00', '11', 'Bikes', '[]', 1);
        """

    @Test(arguments: Backend.allCases)
    func aDjangoUserIsPurgedWithOtherPeoplesCommentsUnderHerPostsAndTheirFiles(_ backend: Backend) async throws {
        let workspace = try await schemas.install(try DataMapCheckTests.AppSchema.django, backend)
        try await seed(workspace, Self.djangoSeed)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in ["covers/10.png", "covers/11.png", "att/1000.pdf", "att/1001.pdf", "att/1002.pdf"] {
            _ = try await blobs.put(key: key, data: Data(key.utf8))
        }
        let catalog = try await appCatalog(workspace)
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "wrong").status == 77)
        let right = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "letmein")
        #expect(right.status == 0, "\(right.stderr)")
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")

        #expect(try await rows(workspace, "SELECT id, username, password, email, first_name FROM auth_user ORDER BY id")
                == ["1|deleted-1|!deleted||", "2|bob|!|bob@example.com|Bob"])
        #expect(try await rows(workspace, "SELECT id FROM blog_post") == ["11"])
        #expect(try await rows(workspace, "SELECT id FROM blog_comment ORDER BY id") == ["102"])
        #expect(try await rows(workspace, "SELECT id FROM blog_attachment") == ["1002"])
        #expect(try await rows(workspace, "SELECT user_id FROM auth_user_groups") == ["2"])
        #expect(try await rows(workspace, "SELECT user_id FROM django_admin_log") == ["1"])
        #expect(files(workspace) == ["covers/11.png", "att/1002.pdf"])
        #expect(try await appCatalog(workspace) == catalog)
        let receipt = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        #expect(receipt.contains(#""blog_comment":{"after":0,"before":2,"deleted":2,"masked":0}"#), "\(receipt)")
        #expect(receipt.contains(#""blog_attachment":{"after":0,"before":2,"deleted":2,"masked":0}"#), "\(receipt)")
    }
}
