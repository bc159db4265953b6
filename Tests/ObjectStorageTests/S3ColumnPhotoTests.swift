import Foundation
import Lifecycle
import ObjectStorage
import Testing

extension S3Tests {
    /// An app's own avatar column (`profile_photo:`) with its files in S3 (moto): the photos
    /// the app stored itself are normalised by `photos normalize --all` (the column then
    /// names the product's JPEG, the original is deleted from the bucket), her export
    /// holds her rendered avatar and nobody else's, and her purge deletes it from the
    /// bucket while bob's stays.
    @Suite struct S3ColumnPhotoTests {
        static let schema = """
            CREATE TABLE members (id INTEGER PRIMARY KEY, handle TEXT NOT NULL UNIQUE, email TEXT NOT NULL, avatar TEXT, created_at TEXT NOT NULL);
            """

        static let map = """
            version: 2

            subject:
              table: members
              key: id
              lookup: [handle, email]
              email: email
              export_file: member
              columns: [id, handle, email, avatar]
              blobs: [avatar]
              erase: delete

            profile_photo: {column: avatar, prefix: avatars/}
            """

        @Test func avatarsTheAppKeptInABucketAreNormalisedExportedAndPurged() async throws {
            let server = try MotoServer.require()
            let installation = try await S3Installation(server: server)
            let store = installation.store
            let jobs = try Scratch.directory("s3-column-photo-jobs")
            try Self.map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
            let (hers, his) = ("avatars/1/from the app.heic", "avatars/2/from the app.jpg")
            let seed = Self.schema + """
                INSERT INTO members (id, handle, email, avatar, created_at) VALUES
                  (1, 'ada', 'ada@example.com', '\(hers)', '2025-01-01'), (2, 'bob', 'bob@example.com', '\(his)', '2025-01-02');
                """
            try seed.write(toFile: jobs + "/app.sql", atomically: true, encoding: .utf8)
            let database = installation.root + "/lifecycle.sqlite"
            #expect(try await runTool("/usr/bin/sqlite3", [database, ".read \(jobs)/app.sql"]).isEmpty)
            for (key, photo) in [(hers, "portrait.heic"), (his, "trail.jpg")] {
                _ = try await store.put(key: key, data: try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/Jobs/demo/photos/" + photo)))
            }
            let avatar = { (id: Int) in
                try await runTool("/usr/bin/sqlite3", [database, "SELECT avatar FROM members WHERE id = \(id)"]).trimmingCharacters(in: .newlines)
            }

            let normalized = try await installation.run(["photos", "normalize", "--all"], jobsDirectory: jobs)
            #expect(normalized.status == 0 && normalized.stdout.contains("normalised 2, rejected 0"), "\(normalized.stdout) \(normalized.stderr)")
            let (rendered, renderedHis) = (try await avatar(1), try await avatar(2))
            for (key, original) in [(rendered, hers), (renderedHis, his)] {
                #expect(key.hasPrefix("avatars/") && key.hasSuffix(".jpg") && key != original, "\(key)")
                #expect(try await store.info(key: original) == nil, "\(original) is left in the bucket")
                let bytes = try await store.readAll(key: key)
                #expect(bytes.starts(with: [0xFF, 0xD8, 0xFF]), "\(key) is not a JPEG")
                let file = installation.root + "/" + UUID().uuidString + ".jpg"
                try bytes.write(to: URL(fileURLWithPath: file))
                let width = Int(try await runTool("/usr/bin/vipsheader", ["-f", "width", file]).trimmingCharacters(in: .whitespacesAndNewlines))
                let height = Int(try await runTool("/usr/bin/vipsheader", ["-f", "height", file]).trimmingCharacters(in: .whitespacesAndNewlines))
                #expect(width != nil && width == height && width! <= 1024, "\(key): \(String(describing: width))×\(String(describing: height))")
            }
            let again = try await installation.run(["photos", "normalize", "--all"], jobsDirectory: jobs)
            #expect(again.status == 0 && again.stdout.contains("nothing to normalise"), "\(again.stdout) \(again.stderr)")

            let exports = installation.root + "/exports"
            let exported = try await installation.run(
                ["export", "ada", "--wait", "--json", "--exports", exports], jobsDirectory: jobs,
                environment: ["LIFECYCLE_SIGNING_KEY": "1cb0aa78aa6af96c0678db2fcf849526db870afcd142927a206abb64d35649b4"])
            #expect(exported.status == 0, "\(exported.stdout) \(exported.stderr)")
            let ready = try S3EndToEndTests.decoder.decode(ReadyExport.self, from: Data(exported.stdout.utf8))
            let listing = try await runTool("/usr/bin/bsdtar", ["-tf", try #require(ready.archivePath)])
            let name = { (key: String) in String(key.split(separator: "/").last ?? "") }
            #expect(listing.contains(name(rendered)) && !listing.contains(name(renderedHis)), "\(listing)")

            let deleted = try await installation.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"], jobsDirectory: jobs)
            #expect(deleted.status == 0, "\(deleted.stdout) \(deleted.stderr)")
            let purged = try await installation.run(["purge"], jobsDirectory: jobs, environment: ["LIFECYCLE_EXPORTS": exports])
            #expect(purged.status == 0 && purged.stdout.contains("1 purged"), "\(purged.stdout) \(purged.stderr)")
            #expect(try await store.info(key: rendered) == nil, "\(rendered) is left in the bucket")
            #expect(try await store.info(key: renderedHis) != nil, "bob's avatar went")
            #expect(try await avatar(2) == renderedHis)
            let receipt = try await runTool("/usr/bin/sqlite3", [
                database, "SELECT detail FROM lifecycle_audit_events WHERE action = 'account.purge' AND outcome = 'purged' AND account_id = '1'",
            ])
            #expect(receipt.contains(#""result":"verified""#), "\(receipt)")
        }
    }
}
