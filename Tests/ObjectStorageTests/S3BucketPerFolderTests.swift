import Foundation
import Lifecycle
import ObjectStorage
import Testing

extension S3Tests {
    /// `s3://*?endpoint=…`: one bucket per first folder of a key, as Supabase Storage's S3
    /// protocol keeps one bucket per Storage bucket. An app with a file catalog shaped like
    /// `storage.objects` (`file_key: [bucket_id, name]`) and a folder of the user's
    /// (`blob_prefixes:`) on moto: her export reads her objects from their buckets; the
    /// purge deletes each from its own bucket, and the upload no row names from her folder;
    /// bob's objects, and every other bucket's keys, stay.
    @Suite struct S3BucketPerFolderTests {
        static let schema = """
            CREATE TABLE members (id INTEGER PRIMARY KEY, handle TEXT NOT NULL UNIQUE, email TEXT NOT NULL, pw TEXT, created_at TEXT NOT NULL);
            CREATE TABLE objects (
                id INTEGER PRIMARY KEY, bucket_id TEXT NOT NULL, name TEXT NOT NULL,
                owner_id INTEGER REFERENCES members(id), UNIQUE (bucket_id, name));
            """

        static func map(avatars: String) -> String {
            """
            version: 2

            subject:
              table: members
              key: id
              lookup: [handle, email]
              email: email
              export_file: member
              columns: [id, handle, email]
              erase: delete
              blob_prefixes: ["\(avatars)/{key}/"]

            tables:
              - table: objects
                owner: owner_id
                export_file: objects
                columns: [bucket_id, name]
                file_key: [bucket_id, name]
            """
        }

        @Test func eachObjectIsReadAndDeletedInItsOwnBucketAndHerFolderIsEmptied() async throws {
            let server = try MotoServer.require()
            let installation = try await S3Installation(server: server)
            let (avatars, documents) = (try await server.makeStore(prefix: ""), try await server.makeStore(prefix: ""))
            let (a, d) = (avatars.location.bucket, documents.location.bucket)
            let blobs = "s3://*?endpoint=\(server.endpoint.absoluteString)&region=us-east-1"

            let jobs = try Scratch.directory("s3-per-folder-jobs")
            try Self.map(avatars: a).write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
            let seed = Self.schema + """
                INSERT INTO members (id, handle, email, created_at) VALUES (1, 'ada', 'ada@example.com', '2025-01-01'), (2, 'bob', 'bob@example.com', '2025-01-02');
                INSERT INTO objects (id, bucket_id, name, owner_id) VALUES
                  (10, '\(a)', '1/Été à Paris.jpg', 1), (11, '\(d)', '1/notes.txt', 1), (12, '\(a)', '2/ride.jpg', 2);
                """
            try seed.write(toFile: jobs + "/app.sql", atomically: true, encoding: .utf8)
            let loaded = try await runTool("/usr/bin/sqlite3", [installation.root + "/lifecycle.sqlite", ".read \(jobs)/app.sql"])
            #expect(loaded.isEmpty, "\(loaded)")
            let hers = [(avatars, "1/Été à Paris.jpg"), (avatars, "1/an upload no row names.png"), (documents, "1/notes.txt")]
            let others = [(avatars, "2/ride.jpg"), (avatars, "10/not hers.jpg"), (documents, "2/notes.txt")]
            for (store, key) in hers + others { _ = try await store.put(key: key, data: Data("\(store.location.bucket)/\(key)".utf8)) }

            let exports = installation.root + "/exports"
            let exported = try await installation.run(
                ["export", "ada", "--wait", "--json", "--exports", exports], blobs: blobs, jobsDirectory: jobs,
                environment: ["LIFECYCLE_SIGNING_KEY": "1cb0aa78aa6af96c0678db2fcf849526db870afcd142927a206abb64d35649b4"])
            #expect(exported.status == 0, "\(exported.stdout) \(exported.stderr)")
            let ready = try S3EndToEndTests.decoder.decode(ReadyExport.self, from: Data(exported.stdout.utf8))
            let listing = try await runTool("/usr/bin/bsdtar", ["-tf", try #require(ready.archivePath)])
            #expect(listing.contains("files/objects/Été à Paris.jpg") && listing.contains("files/objects/notes.txt"), "\(listing)")
            #expect(!listing.contains("ride.jpg"), "\(listing)")

            let deleted = try await installation.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"], blobs: blobs, jobsDirectory: jobs)
            #expect(deleted.status == 0, "\(deleted.stdout) \(deleted.stderr)")
            let purged = try await installation.run(["purge"], blobs: blobs, jobsDirectory: jobs, environment: ["LIFECYCLE_EXPORTS": exports])
            #expect(purged.status == 0 && purged.stdout.contains("1 purged"), "\(purged.stdout) \(purged.stderr)")

            for (store, key) in hers { #expect(try await store.info(key: key) == nil, "\(store.location.bucket)/\(key) is left") }
            for (store, key) in others {
                #expect(try await store.readAll(key: key) == Data("\(store.location.bucket)/\(key)".utf8), "\(store.location.bucket)/\(key)")
            }
            let receipt = try await runTool("/usr/bin/sqlite3", [
                installation.root + "/lifecycle.sqlite",
                "SELECT detail FROM lifecycle_audit_events WHERE action = 'account.purge' AND outcome = 'purged' AND account_id = '1'",
            ])
            #expect(receipt.contains(#""blobs_unnamed":1"#) && receipt.contains(#""result":"verified""#), "\(receipt)")
        }

        @Test func aKeyWithoutABucketFolderOrAListingAcrossBucketsIsRefused() async throws {
            let server = try MotoServer.require()
            let store = S3BucketPerFolderStore(
                template: try S3Location(parsing: "s3://*?endpoint=\(server.endpoint.absoluteString)", environment: [:]),
                credentials: MotoServer.credentials)
            #expect(store.keyProblem("no-folder.jpg")?.contains("first folder names its bucket") == true)
            #expect(store.keyProblem("Not_A_Bucket/x.jpg")?.contains("not a valid bucket name") == true)
            await #expect(throws: BlobStoreError.self) { try await store.list(prefix: "", after: nil, limit: 10) }
            let bucket = try await server.makeStore(prefix: "")
            _ = try await store.put(key: "\(bucket.location.bucket)/a/b.txt", data: Data("x".utf8))
            #expect(try await bucket.readAll(key: "a/b.txt") == Data("x".utf8), "the first folder is the bucket, the rest the key")
            #expect(try await store.list(prefix: "\(bucket.location.bucket)/a/", after: nil, limit: 10).map(\.key) == ["\(bucket.location.bucket)/a/b.txt"])
        }
    }
}
