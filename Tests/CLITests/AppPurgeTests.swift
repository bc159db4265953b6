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
        case .sqlite: try runTool("/usr/bin/sqlite3", [workspace.database], input: sql)
        case .postgres:
            // Through stdin: a seed of thousands of rows is longer than a command line may be.
            let connection = String(workspace.database[..<(workspace.database.range(of: "&pool=")?.lowerBound ?? workspace.database.endIndex)])
            try runTool(ThrowawayPostgres.binDirectory + "/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", connection, "-f", "-"], input: sql)
        }
    }

    /// The app's tables with their columns (lifecycle's own namespace left out).
    func appCatalog(_ workspace: Workspace) throws -> String {
        switch workspace.backend {
        case .sqlite:
            return try runTool("/usr/bin/sqlite3", [workspace.database, "SELECT name || ':' || sql FROM sqlite_master WHERE tbl_name NOT LIKE 'lifecycle\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"])
        case .postgres:
            return try psqlQuery(workspace.database, """
                SELECT string_agg(table_schema || '.' || table_name || '.' || column_name || ':' || data_type, ',' ORDER BY table_schema, table_name, column_name)
                FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema', 'lifecycle')
                """)
        }
    }

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
        let catalog = try appCatalog(workspace)

        let request = try workspace.run(["delete", "ada@example.com", "--operator", "sam", "--reason", "GDPR request #12", "--immediately"])
        #expect(request.status == 0, "\(request.stderr)")
        let shown = try workspace.run(["accounts", "show", "ada", "--json"])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains(#""state":"pendingDeletion""#), "\(shown.stdout)")
        #expect(shown.stdout.contains(#""statuses":3"#))

        let dryRun = try workspace.run(["purge", "--dry-run"])
        #expect(dryRun.status == 0, "\(dryRun.stderr)")
        #expect(dryRun.stdout.contains("1 account(s) would be purged"), "\(dryRun.stdout)")
        #expect(try await rows(workspace, "SELECT id FROM members ORDER BY id") == ["1", "2", "3"])

        let purge = try workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stderr)")
        #expect(purge.stdout.contains("purge: 1 purged, 0 skipped, 0 failed"), "\(purge.stdout)")

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
        if backend == .sqlite {
            #expect(try runTool("/usr/bin/sqlite3", [workspace.database, "PRAGMA foreign_key_check"]).isEmpty)
        }
        let catalogAfter = try appCatalog(workspace)
        #expect(catalogAfter == catalog, "\(Set(catalogAfter.split(separator: ",")).symmetricDifference(catalog.split(separator: ",")))")

        let receipt = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" }?.detail)
        for expected in [#""statuses":{"deleted":2,"masked":1}"#, #""favourites":{"deleted":2,"masked":0}"#, #""messages":{"deleted":0,"masked":2}"#,
                         #""members":{"deleted":1,"masked":0}"#, #""media_variants":{"deleted":1,"masked":0}"#, #""blobs":4"#] {
            #expect(receipt.contains(expected), "\(receipt)")
        }
        let after = try workspace.run(["accounts", "show", "1", "--json"])
        #expect(after.stdout.contains(#""state":"purged""#), "\(after.stdout) \(after.stderr)")
        // Nothing is left to purge, and a second run changes nothing.
        #expect(try workspace.run(["purge"]).stdout.contains("purge: 0 purged, 0 skipped, 0 failed"))
    }

    @Test(arguments: Backend.allCases)
    func theUsersPasswordIsCheckedWhereTheMapSaysAndRestoreUndoesTheRequest(_ backend: Backend) async throws {
        let workspace = try await installSocial(backend)
        // ada's bcrypt hash is of "correct horse" (written by libxcrypt, as PHP or Python's bcrypt would).
        let wrong = try workspace.run(["delete", "ada", "--password-stdin"], stdin: "not it\n")
        #expect(wrong.status == 77, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("Incorrect password"))
        // pw is NULL for bob: nothing can verify it, and nothing changes.
        let unverifiable = try workspace.run(["delete", "bob", "--password-stdin"], stdin: "x\n")
        #expect(unverifiable.status == 65, "\(unverifiable.stderr)")
        #expect(try workspace.run(["restore", "ada"]).status == 65)  // not pending

        let later = ["LIFECYCLE_NOW": "2026-01-01T00:00:00Z"]
        let requested = try workspace.run(["delete", "ada", "--password-stdin"], environment: later, stdin: "correct horse\n")
        #expect(requested.status == 0, "\(requested.stderr)")
        #expect(requested.stdout.contains("30 days"), "\(requested.stdout)")
        let restored = try workspace.run(["restore", "ada"], environment: later)
        #expect(restored.status == 0, "\(restored.stderr)")
        let purge = try workspace.run(["purge"], environment: ["LIFECYCLE_NOW": "2026-03-01T00:00:00Z"])
        #expect(purge.stdout.contains("purge: 0 purged"), "\(purge.stdout)")
        #expect(try await rows(workspace, "SELECT COUNT(*) FROM statuses WHERE member_id = 1") == ["3"])
    }

    @Test(arguments: Backend.allCases)
    func aPurgeKilledHalfWayFinishesOnTheNextRunAndCountsEveryRowOnce(_ backend: Backend) async throws {
        // Small batches with a pause between them, so the kill lands in the middle of ada's rows.
        let workspace = try await installSocial(backend, policy: "deletion:\n  purge_row_batch: 25\n  batch_pause_milliseconds: 20\n")
        let many = (0..<1_500).map { "(\(20_000 + $0), 1, NULL, 'post \($0)', '2025-05-01 00:00:00')" }.joined(separator: ",\n")
        let favourites = (0..<1_500).map { "(2, \(20_000 + $0), '2025-05-02 00:00:00')" }.joined(separator: ",\n")
        try await seed(workspace, "INSERT INTO statuses (id, member_id, in_reply_to_id, body, created_at) VALUES \(many);\nINSERT INTO favourites (member_id, status_id, created_at) VALUES \(favourites);")
        #expect(try workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)

        let (process, _, _) = try workspace.process(["purge"])
        let landed = await killProcess(process.processIdentifier, when: {
            let left = try workspace.integerNow("SELECT COUNT(*) FROM statuses WHERE member_id = 1")
            return left > 100 && left < 1_400
        })
        process.waitUntilExit()
        #expect(landed, "the kill never found the purge half-way")
        #expect(process.terminationReason == .uncaughtSignal)
        let half = try await rows(workspace, "SELECT COUNT(*) FROM statuses WHERE member_id = 1")
        #expect(half != ["0"] && half != ["1503"])

        // The killed worker's lease has to run out before another run takes the job over.
        let rerun = try workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(3_600))])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.stdout.contains("1 purged"), "\(rerun.stdout)")
        #expect(try await rows(workspace, "SELECT COUNT(*) FROM statuses WHERE member_id = 1") == ["0"])
        #expect(try await rows(workspace, "SELECT id FROM statuses WHERE member_id IS NULL") == ["10"])
        #expect(try await rows(workspace, "SELECT member_id, status_id FROM favourites ORDER BY status_id") == ["2|10"])
        let receipt = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" }?.detail)
        // 1,500 posts plus ada's two answers deleted, each counted once across both runs; bob's 1,500 favourites and one more cascaded.
        #expect(receipt.contains(#""statuses":{"deleted":1502,"masked":1}"#), "\(receipt)")
        #expect(receipt.contains(#""favourites":{"deleted":1502,"masked":0}"#), "\(receipt)")
    }
}
