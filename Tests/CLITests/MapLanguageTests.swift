import Foundation
import Lifecycle
import Testing

/// What a CMS's schema needs the map to say (Django-style foreign keys, NO ACTION in the
/// database): a page kept when its owner and its locker both go (SET_NULL on both columns),
/// an image another user's page uses kept with its file, a comment deleted with its author
/// but kept, unlinked, by the user who resolved it, and other users' reactions on her
/// comments. Each case that `map check` once refused, or passed and the purge then broke,
/// on both backends.
@Suite(.serialized)
struct MapLanguageTests {
    let app = AppPurgeTests()

    static let schema = """
        CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, password TEXT NOT NULL);
        CREATE TABLE sites (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE pages (id INTEGER PRIMARY KEY, site_id INTEGER NOT NULL REFERENCES sites (id), owner_id INTEGER REFERENCES users (id),
            locked_by_id INTEGER REFERENCES users (id), title TEXT NOT NULL);
        CREATE TABLE page_revisions (id INTEGER PRIMARY KEY, page_id INTEGER NOT NULL REFERENCES pages (id), body TEXT NOT NULL);
        CREATE TABLE images (id INTEGER PRIMARY KEY, uploaded_by_id INTEGER REFERENCES users (id), file TEXT NOT NULL);
        CREATE TABLE page_images (id INTEGER PRIMARY KEY, page_id INTEGER NOT NULL REFERENCES pages (id),
            image_id INTEGER NOT NULL REFERENCES images (id));
        CREATE TABLE comments (id INTEGER PRIMARY KEY, page_id INTEGER NOT NULL REFERENCES pages (id),
            user_id INTEGER NOT NULL REFERENCES users (id), resolved_by_id INTEGER REFERENCES users (id), body TEXT NOT NULL);
        CREATE TABLE reactions (id INTEGER PRIMARY KEY, comment_id INTEGER NOT NULL REFERENCES comments (id), emoji TEXT NOT NULL);
        """

    /// ada (1) owns page 1 and locked bob's page 2; uploaded image 1, which bob's page
    /// shows; wrote comment 1 (bob reacted) and resolved bob's comment 2 (cy reacted).
    static let seed = """
        INSERT INTO users VALUES (1, 'ada@example.com', 'x'), (2, 'bob@example.com', 'x'), (3, 'cy@example.com', 'x');
        INSERT INTO sites VALUES (1, 'main');
        INSERT INTO pages VALUES (1, 1, 1, NULL, 'ada''s page'), (2, 1, 2, 1, 'bob''s page');
        INSERT INTO page_revisions VALUES (1, 1, 'first draft'), (2, 2, 'bob''s draft');
        INSERT INTO images VALUES (1, 1, 'images/engine.png'), (2, 2, 'images/bob.png');
        INSERT INTO page_images VALUES (1, 2, 1), (2, 2, 2);
        INSERT INTO comments VALUES (1, 2, 1, NULL, 'ada: typo here'), (2, 1, 2, 1, 'bob: fixed?'), (3, 2, 3, NULL, 'cy: nice');
        INSERT INTO reactions VALUES (1, 1, '+1'), (2, 2, 'eyes'), (3, 3, 'heart');
        """

    static let map = """
        version: 2
        subject: {table: users, key: id, lookup: [email], password: {column: password}, erase: delete}
        tables:
          # SET_NULL on both: the page stays, no longer hers.
          - table: pages
            owners:
              - {column: owner_id, erase: {mask: {owner_id: null}}}
              - {column: locked_by_id, erase: {mask: {locked_by_id: null}}}
          # Kept, unlinked, with its file: bob's page shows it.
          - table: images
            owner: uploaded_by_id
            erase: {mask: {uploaded_by_id: null}}
            blobs: [file]
          # Her comments go with the reactions on them; those she resolved stay.
          - table: comments
            owners:
              - user_id
              - {column: resolved_by_id, erase: {mask: {resolved_by_id: null}}}
            cascade: [reactions.comment_id]
        """

    func install(_ backend: Backend, map: String = Self.map) async throws -> Workspace {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("cms-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        try map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        try await app.seed(workspace, Self.schema + Self.seed)
        if backend == .sqlite { _ = try await runTool("/bin/chmod", ["o-rwx", workspace.database]) }
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in ["images/engine.png", "images/bob.png"] { _ = try await blobs.put(key: key, data: Data("image \(key)".utf8)) }
        return workspace
    }

    @Test(arguments: Backend.allCases)
    func pagesKeptByEveryUserColumnImagesKeptWithTheirFilesAndACommentsTwoSidesArePurgedAsTheyShouldBe(_ backend: Backend) async throws {
        let workspace = try await install(backend)
        // Refused before: references into pages and images (kept rows that no longer name
        // her), and a table with a deleting and a masking side.
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stderr)")
        let request = try await workspace.run(["delete", "1", "--operator", "sam", "--reason", "ticket", "--immediately"])
        #expect(request.status == 0, "\(request.stderr)")
        // `cascade:` under `owners:` once printed by map check and skipped by the purge: exit 75.
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")

        #expect(try await app.rows(workspace, "SELECT id, owner_id, locked_by_id FROM pages ORDER BY id") == ["1|∅|∅", "2|2|∅"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM page_revisions") == ["2"])
        #expect(try await app.rows(workspace, "SELECT id, uploaded_by_id, file FROM images ORDER BY id") == ["1|∅|images/engine.png", "2|2|images/bob.png"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM page_images") == ["2"])
        // Her comment and bob's reaction on it gone; bob's comment she resolved kept, unlinked, with cy's reaction.
        #expect(try await app.rows(workspace, "SELECT id, user_id, resolved_by_id FROM comments ORDER BY id") == ["2|2|∅", "3|3|∅"])
        #expect(try await app.rows(workspace, "SELECT id FROM reactions ORDER BY id") == ["2", "3"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM users") == ["2"])
        #expect(app.files(workspace) == ["images/engine.png", "images/bob.png"])

        let receipt = try #require(try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")
        #expect(receipt.contains(#""files_kept_with_rows":[{"columns":["file"],"reason":"#) && receipt.contains(#""rows_kept":1,"table":"images"}"#), "\(receipt)")
        #expect(receipt.contains(#""reactions":{"after":0,"before":1,"deleted":1,"masked":0}"#), "\(receipt)")
    }

    /// What `map check` offers for each reference the map forgot, applied as written: the
    /// parser takes it, the map then holds, and the purge deletes no row of anyone else's.
    @Test(arguments: Backend.allCases)
    func everySuggestionMapCheckPrintsIsAcceptedAndDeletesNobodyElsesRow(_ backend: Backend) async throws {
        // The resolver side and the reactions forgotten: two references, named in one run.
        let forgetful = Self.map
            .replacingOccurrences(of: "      - {column: resolved_by_id, erase: {mask: {resolved_by_id: null}}}\n", with: "")
            .replacingOccurrences(of: "  - table: comments\n    owners:\n      - user_id\n    cascade: [reactions.comment_id]", with: "  - table: comments\n    owner: user_id")
        #expect(forgetful.contains("  - table: comments\n    owner: user_id") && !forgetful.contains("resolved_by_id"))
        let workspace = try await install(backend, map: forgetful)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 65, "\(check.stdout) \(check.stderr)")
        #expect(check.stderr.contains("2 references"), "\(check.stderr)")
        let resolver = "write its owner as `owners: [user_id, {column: resolved_by_id, erase: {mask: {resolved_by_id: null}}}]`"
        #expect(check.stderr.contains(resolver), "\(check.stderr)")
        #expect(check.stderr.contains("reactions.comment_id references comments") && check.stderr.contains("comment_id is NOT NULL, so those rows cannot stay: a choice only you can make"), "\(check.stderr)")
        // Applied: the first suggestion for the resolver (keeps bob's comment), and for the
        // reactions the one for other users' rows (their reactions go with her comment).
        let applied = forgetful.replacingOccurrences(
            of: "  - table: comments\n    owner: user_id",
            with: "  - table: comments\n    owners: [user_id, {column: resolved_by_id, erase: {mask: {resolved_by_id: null}}}]\n    cascade: [reactions.comment_id]")
        try applied.write(toFile: workspace.jobsDirectory + "/account-data.yaml", atomically: true, encoding: .utf8)
        let again = try await workspace.run(["map", "check"])
        #expect(again.status == 0, "\(again.stderr)")
        _ = try await workspace.run(["delete", "1", "--operator", "sam", "--reason", "ticket", "--immediately"])
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stdout) \(purge.stderr)")
        #expect(try await app.rows(workspace, "SELECT id FROM comments ORDER BY id") == ["2", "3"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM pages") == ["2"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM sites") == ["1"])
    }

    /// A table naming two users whose rows answer each other (NO ACTION) and carry other
    /// users' rows (reads): bob's note answering her message stays, unlinked (`set: null` on
    /// the table's own reference, which no longer holds her rows back), the reads of hers go.
    /// A delete cascade of the table onto itself is refused: it would take one level only.
    @Test(arguments: Backend.allCases)
    func aTwoSidedTablesRepliesAreUnlinkedAndTheirReadsGo(_ backend: Backend) async throws {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("threads-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        try """
            version: 2
            subject: {table: users, key: id, lookup: [email], erase: delete}
            tables:
              - table: messages
                owners: [sender_id, recipient_id]
                cascade: [{column: messages.reply_to_id, set: null}, message_reads.message_id]
            """.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        try await app.seed(workspace, """
            CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL);
            CREATE TABLE messages (id INTEGER PRIMARY KEY, sender_id INTEGER NOT NULL REFERENCES users (id),
                recipient_id INTEGER NOT NULL REFERENCES users (id), reply_to_id INTEGER REFERENCES messages (id), body TEXT NOT NULL);
            CREATE TABLE message_reads (id INTEGER PRIMARY KEY, message_id INTEGER NOT NULL REFERENCES messages (id), reader INTEGER NOT NULL);
            INSERT INTO users VALUES (1, 'ada@example.com'), (2, 'bob@example.com');
            INSERT INTO messages VALUES (1, 1, 2, NULL, 'hello'), (2, 1, 2, 1, 'hello again'), (3, 1, 2, 2, 'and again'), (4, 2, 2, 1, 'note to self');
            INSERT INTO message_reads VALUES (1, 1, 2), (2, 2, 2), (3, 3, 2), (4, 4, 2);
            """)
        if backend == .sqlite { _ = try await runTool("/bin/chmod", ["o-rwx", workspace.database]) }
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stderr)")
        _ = try await workspace.run(["delete", "1", "--operator", "sam", "--reason", "ticket", "--immediately"])
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(try await app.rows(workspace, "SELECT id, reply_to_id FROM messages") == ["4|∅"])
        #expect(try await app.rows(workspace, "SELECT id FROM message_reads") == ["4"])

        let map = try String(contentsOfFile: jobs + "/account-data.yaml", encoding: .utf8)
        try map.replacingOccurrences(of: "{column: messages.reply_to_id, set: null}", with: "messages.reply_to_id")
            .write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
        let refused = try await workspace.run(["map", "check"])
        #expect(refused.status == 65 && refused.stderr.contains("is the table's reference to itself"), "\(refused.stderr)")
    }
}
