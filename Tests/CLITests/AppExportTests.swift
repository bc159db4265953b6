import Foundation
import JobRunner
import Lifecycle
import Testing

/// Export of an app's own database, built with the app's DDL, driven by its data map:
/// exactly the user's rows (through parents, both sides of two-user rows) and the files
/// they name, nobody else's, read back by Python's zipfile; the app's schema unchanged.
@Suite(.serialized)
struct AppExportTests {
    let purges = AppPurgeTests()

    /// The archive as Python reads it: each table file's rows and each stored file's content.
    struct Contents {
        var tables: [String: [[String: Any]]]
        var files: [String: String]
        var manifest: [String: Any]

        /// One table's rows, each as `key=value` pairs in the file's key order, for exact comparison.
        func rows(_ table: String) -> [String] {
            (tables[table] ?? []).map { row in
                row.keys.sorted().map { key in "\(key)=\(row[key].map { $0 is NSNull ? "null" : "\($0)" } ?? "?")" }.joined(separator: " ")
            }
        }

        /// manifest.json's entry for a stored file: where it came from.
        func blobKey(of path: String) -> String? {
            (manifest["files"] as? [[String: Any]])?.first { $0["path"] as? String == path }?["blob_key"] as? String
        }
    }

    func export(_ workspace: Workspace, _ account: String, _ extra: [String] = []) async throws -> (ExportCLI.Ready, Contents) {
        let ready = try await ExportCLI.exportNow(workspace, account, extra)
        let path = try #require(ready.archivePath)
        let output = try await ExportCLI.pythonOutput(workspace.blobs.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path, format: "zip")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        return (ready, Contents(
            tables: json["tables"] as? [String: [[String: Any]]] ?? [:], files: json["files"] as? [String: String] ?? [:],
            manifest: json["manifest"] as? [String: Any] ?? [:]))
    }

    @Test(arguments: Backend.allCases)
    func aSocialMembersExportHoldsHerRowsAtEveryDepthAndHerFilesAndNobodyElses(_ backend: Backend) async throws {
        let workspace = try await purges.installSocial(backend)
        let catalog = try await purges.appCatalog(workspace)
        let (ready, archive) = try await export(workspace, "ada@example.com")
        #expect(ready.accountID == "1")

        #expect(archive.rows("member") == ["created_at=2025-01-01T00:00:00Z email=ada@example.com handle=ada id=1"])
        // Ordered by created_at, as the map says; bob's answer to her (12) is his, not hers.
        #expect(archive.rows("statuses") == [
            "body=ada first created_at=2025-02-01T00:00:00Z id=10 in_reply_to_id=null",
            "body=ada answers herself created_at=2025-02-02T00:00:00Z id=11 in_reply_to_id=10",
            "body=ada answers bob created_at=2025-02-04T00:00:00Z id=13 in_reply_to_id=12",
        ])
        // Reached through her statuses; bob's media (102) is not.
        #expect(archive.rows("media") == ["id=100 status_id=10", "id=101 status_id=13"])
        #expect(archive.rows("favourites") == ["created_at=2025-03-03T00:00:00Z status_id=14"])
        // Both sides of rows naming two users; the other user appears as a key only.
        #expect(archive.rows("follows") == ["followee_id=2 follower_id=1", "followee_id=1 follower_id=2"])
        #expect(archive.rows("messages") == [
            "body=hi bob id=1000 recipient_id=2 sender_id=1 sent_at=2025-04-01T00:00:00Z",
            "body=hi ada id=1001 recipient_id=1 sender_id=2 sent_at=2025-04-02T00:00:00Z",
        ])
        #expect(Set(archive.tables.keys) == ["member", "statuses", "media", "favourites", "follows", "messages"])

        // Her avatar, her media and their variant (two levels down, a table with no export file): nobody else's.
        #expect(archive.files == [
            "files/members/2025/01/01/1.jpg": "file avatars/1.jpg",
            "files/media/100.jpg": "file media/100.jpg",
            "files/media/101.jpg": "file media/101.jpg",
            "files/media_variants/100-s.jpg": "file media/100-s.jpg",
        ])
        #expect(archive.blobKey(of: "files/media_variants/100-s.jpg") == "media/100-s.jpg")
        #expect(try await purges.appCatalog(workspace) == catalog)

        // The notification goes to the address the map's `email:` column holds.
        let recipients = try await workspace.query("SELECT recipient FROM \(workspace.ownTable("outbox"))")
        #expect(recipients == [["ada@example.com"]])
    }

    @Test
    func theProductsSupabaseUserGetsHerProfileJournalAndPhotosDatedByTheirRows() async throws {
        let workspace = try await purges.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try await purges.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users"))
        try await AppPurgeTests.storeSupabaseFiles(workspace)
        let catalog = try await purges.appCatalog(workspace)
        let (ready, archive) = try await export(workspace, "ada@example.com")
        #expect(ready.accountID == AppPurgeTests.ada)

        let profile = try #require(archive.tables["profile"]?.first)
        #expect(profile["id"] as? String == AppPurgeTests.ada)
        #expect(profile["subscription_status"] as? String == "premium")
        #expect(profile["created_at"] as? String == "2025-01-01T00:00:00Z")
        #expect(archive.rows("integrations") == ["connected_at=2025-01-05T00:00:00Z provider=strava", "connected_at=2025-01-06T00:00:00Z provider=whoop"])
        #expect(archive.rows("journal_entries") == ["body=tempo run created_at=2025-03-01T08:00:00Z id=e0000000-0000-4000-8000-000000000001"])
        #expect(archive.rows("journal_photos") == [
            "entry_id=e0000000-0000-4000-8000-000000000001 id=f0000000-0000-4000-8000-000000000001 taken_at=2025-03-01T07:55:00Z",
        ])
        #expect(archive.rows("meditation_sessions").count == 1 && archive.rows("mesocycles").count == 1)
        #expect(archive.files == [
            "files/users/2025/01/01/ada.jpg": "avatars/ada.jpg",
            "files/journal_photos/2025/03/01/run.jpg": "journal/ada/run.jpg",
        ])
        #expect(try await purges.appCatalog(workspace) == catalog)
    }

    @Test(arguments: Backend.allCases)
    func aDjangoUsersExportHasHerPostsCommentsAndAttachmentsNotTheCommentsOthersLeftHer(_ backend: Backend) async throws {
        let workspace = try await purges.schemas.install(try DataMapCheckTests.AppSchema.django, backend)
        try await purges.seed(workspace, AppPurgeTests.djangoSeed)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in ["covers/10.png", "covers/11.png", "att/1000.pdf", "att/1001.pdf", "att/1002.pdf"] {
            _ = try await blobs.put(key: key, data: Data(key.utf8))
        }
        let (_, archive) = try await export(workspace, "ada")
        #expect(archive.rows("user") == [
            "date_joined=2025-01-01T00:00:00Z email=ada@example.com first_name=Ada id=1 last_login=null last_name=Lovelace username=ada",
        ])
        #expect(archive.rows("posts") == ["body=analytical created_at=2025-02-01T00:00:00Z id=10 title=Engines"])
        // Her comment on bob's post is hers; bob's comment on her post is his.
        #expect(archive.rows("comments") == ["body=ada on bob's post created_at=2025-02-04T00:00:00Z id=101 post_id=11"])
        #expect(archive.rows("attachments") == ["comment_id=101 file=att/1001.pdf id=1001"])
        #expect(archive.files == [
            "files/blog_post/2025/02/01/10.png": "covers/10.png",
            "files/blog_attachment/1001.pdf": "att/1001.pdf",
        ])
    }

    @Test func aMissingFileStopsTheExportNamingItUnlessTheOperatorLeavesItOut() async throws {
        let workspace = try await purges.installSocial(.sqlite)
        try FileManager.default.removeItem(atPath: workspace.blobs + "/media/101.jpg")
        let refused = try await workspace.run(["export", "ada", "--wait"], environment: ExportCLI.key)
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("media.file_key names media/101.jpg, which is not in the blob store"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--skip-missing-photos"))

        let retried = try await workspace.run(["jobs", "cancel", "1"])
        #expect(retried.status == 0, "\(retried.stderr)")
        let (ready, archive) = try await export(workspace, "ada", ["--skip-missing-photos"])
        #expect(ready.omittedPhotos == 1)
        #expect(archive.files["files/media/101.jpg"] == nil && archive.files["files/media/100.jpg"] != nil)
        let omitted = try #require(archive.manifest["omitted_files"] as? [[String: Any]])
        #expect(omitted.count == 1 && omitted.first?["blob_key"] as? String == "media/101.jpg")
    }

    @Test(arguments: Backend.allCases)
    func anAccountScheduledForDeletionNeedsAnOperatorAndItsPurgeTakesTheArchive(_ backend: Backend) async throws {
        let workspace = try await purges.installSocial(backend)
        let (ready, _) = try await export(workspace, "ada")
        let archiveKey = try #require(ready.archiveKey)
        #expect(FileManager.default.fileExists(atPath: workspace.exportArchives + "/" + archiveKey))
        // Listed by a lookup column as by the key.
        let listed = try await workspace.run(["exports", "list", "ada@example.com", "--json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains(ready.exportID) && listed.stdout.contains(#""state":"ready""#), "\(listed.stdout)")

        let deletion = try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "ticket 7", "--immediately"])
        #expect(deletion.status == 0, "\(deletion.stderr)")
        let refused = try await workspace.run(["export", "ada"], environment: ExportCLI.key)
        #expect(refused.status == 77, "\(refused.stderr)")
        #expect(refused.stderr.contains("scheduled for deletion"), "\(refused.stderr)")

        #expect(try await workspace.run(["purge"]).stdout.contains("1 purged"))
        #expect(!FileManager.default.fileExists(atPath: workspace.exportArchives + "/" + archiveKey))
        #expect(try await workspace.query("SELECT COUNT(*) FROM \(workspace.ownTable("exports"))") == [["0"]])
        let gone = try await workspace.run(["export", "1"], environment: ExportCLI.key)
        #expect(gone.status == 67, "\(gone.stderr)")
    }

    /// Pages of two rows over an order with ties and nulls, a text key and a composite
    /// key: every row comes exactly once, in the map's order, whatever the page size.
    @Test(arguments: Backend.allCases)
    func pagesOfTwoRowsGiveEveryRowOnceInOrderThroughTiesAndNulls(_ backend: Backend) async throws {
        let schema = DataMapCheckTests.AppSchema(ddl: """
            CREATE TABLE people (code varchar(20) PRIMARY KEY, name text NOT NULL);
            CREATE TABLE tasks (id integer PRIMARY KEY, owner text NOT NULL REFERENCES people(code), done_at timestamp, title text);
            CREATE TABLE tags (owner text NOT NULL REFERENCES people(code), label text NOT NULL, weight real, pinned boolean NOT NULL,
                               PRIMARY KEY (owner, label));
            """, map: """
            version: 2
            subject: {table: people, key: code, columns: [code, name], export_file: me}
            tables:
              - {table: tasks, owner: owner, export_file: tasks, columns: [id, done_at, title], timestamps: [done_at], order_by: done_at}
              - {table: tags, owner: owner, export_file: tags, columns: [label, weight, pinned], order_by: [weight, label]}
            """)
        let workspace = try await purges.schemas.install(schema, backend)
        try FileManager.default.createDirectory(atPath: workspace.jobsDirectory + "/policies", withIntermediateDirectories: true)
        try "export:\n  batch_rows: 2\n".write(toFile: workspace.jobsDirectory + "/policies/export.yaml", atomically: true, encoding: .utf8)
        let yes = backend == .sqlite ? "1" : "TRUE"
        let no = backend == .sqlite ? "0" : "FALSE"
        try await purges.seed(workspace, """
            INSERT INTO people VALUES ('ada', 'Ada'), ('bob', 'Bob');
            INSERT INTO tasks VALUES (1, 'ada', NULL, 'a'), (2, 'ada', '2025-01-02 00:00:00', 'b'), (3, 'bob', NULL, 'bob''s'),
              (4, 'ada', '2025-01-01 00:00:00', 'c'), (5, 'ada', NULL, 'd'), (6, 'ada', '2025-01-01 00:00:00', 'e'),
              (7, 'ada', '2025-01-02 00:00:00', 'f'), (8, 'ada', NULL, 'g');
            INSERT INTO tags VALUES ('ada', 'z', NULL, \(yes)), ('ada', 'y', 2.5, \(no)), ('ada', 'x', NULL, \(no)), ('ada', 'w', 2.5, \(yes)),
              ('bob', 'v', 1, \(yes)), ('ada', 'u', 0.5, \(no));
            """)
        let (_, archive) = try await export(workspace, "ada")
        #expect(archive.rows("me") == ["code=ada name=Ada"])
        // Nulls first, then by time, ties by id.
        #expect(archive.rows("tasks").map { $0.split(separator: " ").first { $0.hasPrefix("id=") } ?? "" }
                == ["id=1", "id=5", "id=8", "id=4", "id=6", "id=2", "id=7"])
        #expect(archive.rows("tags") == [
            "label=x pinned=0 weight=null", "label=z pinned=1 weight=null", "label=u pinned=0 weight=0.5",
            "label=w pinned=1 weight=2.5", "label=y pinned=0 weight=2.5",
        ])
    }
}
