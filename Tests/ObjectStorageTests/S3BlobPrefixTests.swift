import Foundation
import Lifecycle
import ObjectStorage
import Testing

extension S3Tests {
    /// `blob_prefixes:` on S3: the purge lists the user's folder of the bucket (under the
    /// installation's prefix) and deletes what no kept row names, an upload no row named and
    /// a name with spaces and accents included; other folders, one beginning like hers
    /// included, and what lies outside the installation's prefix stay.
    @Suite struct S3BlobPrefixTests {
        static let seed = """
            INSERT INTO members (id, handle, email, pw, avatar_key, created_at) VALUES
              (1, 'ada', 'ada@example.com', NULL, 'uploads/1/avatar.jpg', '2025-01-01 00:00:00'),
              (2, 'bob', 'bob@example.com', NULL, 'uploads/1/shared.jpg', '2025-01-02 00:00:00');
            """

        /// The social app's map (with `blob_prefixes:`) and its tables, seeded, in the
        /// installation's SQLite file: an app whose blob store is its own bucket.
        static func socialApp(_ installation: S3Installation) async throws -> String {
            let jobs = try Scratch.directory("s3-prefix-jobs")
            let map = try String(contentsOfFile: repositoryRoot + "/Tests/CLITests/Schemas/social.yaml", encoding: .utf8)
                .replacingOccurrences(of: "  blobs: [avatar_key]\n", with: "  blobs: [avatar_key]\n  blob_prefixes: [\"uploads/{key}/\"]\n")
            #expect(map.contains("blob_prefixes"))
            try map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
            // Three pages of the purge's listing (the deletion policy's blob batch of 2).
            try FileManager.default.createDirectory(atPath: jobs + "/policies", withIntermediateDirectories: true)
            try "deletion:\n  purge_blob_batch: 2\n".write(toFile: jobs + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
            let ddl = try String(contentsOfFile: repositoryRoot + "/Tests/CLITests/Schemas/social.sql", encoding: .utf8)
            try (ddl + "\n" + Self.seed).write(toFile: jobs + "/app.sql", atomically: true, encoding: .utf8)
            let loaded = try await runTool("/usr/bin/sqlite3", [installation.root + "/lifecycle.sqlite", ".read \(jobs)/app.sql"])
            #expect(loaded.isEmpty, "\(loaded)")
            return jobs
        }

        @Test func theUsersFolderIsEmptiedPageByPageAndNoOtherKeyIsTouched() async throws {
            let server = try MotoServer.require()
            let installation = try await S3Installation(server: server)
            let store = installation.store
            let jobs = try await Self.socialApp(installation)

            let hers = ["uploads/1/avatar.jpg", "uploads/1/Été à Paris.jpg", "uploads/1/old avatar.png", "uploads/1/drafts/a b.txt"]
            let others = ["uploads/1/shared.jpg", "uploads/2/ride.jpg", "uploads/10/x.jpg", "uploads/1x/y.jpg"]
            for key in hers + others { _ = try await store.put(key: key, data: Data(key.utf8)) }
            // Beside the installation's prefix, in the same bucket: never listed.
            let outside = try S3BlobStore(
                location: S3Location(bucket: store.location.bucket, prefix: "elsewhere", region: "us-east-1", endpoint: server.endpoint),
                credentials: MotoServer.credentials, options: S3Tests.smallPartOptions)
            _ = try await outside.put(key: "uploads/1/z.jpg", data: Data("outside".utf8))

            let check = try await installation.run(["map", "check"], jobsDirectory: jobs)
            #expect(check.stdout.contains("the user's folders, emptied after erasure but for files a kept row names: uploads/{key}/"), "\(check.stdout) \(check.stderr)")
            let deleted = try await installation.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"], jobsDirectory: jobs)
            #expect(deleted.status == 0, "\(deleted.stdout) \(deleted.stderr)")
            // The rehearsal counts what lies in her folder, her avatar (which her row names
            // too) once, and the file bob's row names there, which the purge then keeps.
            let rehearsal = try await installation.run(["purge", "--dry-run", "--json"], jobsDirectory: jobs)
            #expect(rehearsal.status == 0 && rehearsal.stdout.contains(#""blobs":5"#), "\(rehearsal.stdout) \(rehearsal.stderr)")
            let purged = try await installation.run(["purge"], jobsDirectory: jobs)
            #expect(purged.status == 0 && purged.stdout.contains("1 purged"), "\(purged.stdout) \(purged.stderr)")

            let left = try await store.list(prefix: "uploads/", after: nil, limit: 100).map(\.key)
            #expect(left.sorted() == others.sorted(), "\(left)")
            for key in others { #expect(try await store.readAll(key: key) == Data(key.utf8), "\(key)") }
            #expect(try await outside.readAll(key: "uploads/1/z.jpg") == Data("outside".utf8))
            let receipt = try await runTool("/usr/bin/sqlite3", [
                installation.root + "/lifecycle.sqlite",
                "SELECT detail FROM lifecycle_audit_events WHERE action = 'account.purge' AND outcome = 'purged' AND account_id = '1'",
            ])
            // Her three uploads no row named, and the file bob's row names in her folder (kept).
            #expect(receipt.contains(#""blobs_unnamed":4"#) && receipt.contains(#""blobs_kept":1"#) && receipt.contains(#""blobs":4"#), "\(receipt)")
        }

        /// An app's bucket may be public: its accounts' archives never go there. Without a
        /// place of their own the export is refused, naming the setting, and nothing is
        /// queued; with a prefix of another bucket they go there, and the app's bucket holds
        /// no archive.
        @Test func anAppsExportOnS3WaitsForAPlaceOfItsOwnAndNeverLandsInTheAppsBucket() async throws {
            let server = try MotoServer.require()
            let installation = try await S3Installation(server: server)
            let jobs = try await Self.socialApp(installation)
            let refused = try await installation.run(["export", "ada", "--json"], jobsDirectory: jobs)
            #expect(refused.status == 64, "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains("LIFECYCLE_EXPORTS") && refused.stderr.contains("nothing was queued"), "\(refused.stderr)")
            let queued = try await runTool("/usr/bin/sqlite3", [installation.root + "/lifecycle.sqlite", "SELECT COUNT(*) FROM lifecycle_jobs WHERE kind = 'export'"])
            #expect(queued.trimmingCharacters(in: .whitespacesAndNewlines) == "0")

            _ = try await installation.store.put(key: "uploads/1/avatar.jpg", data: Data("her avatar".utf8))
            let privateStore = try await server.makeStore(prefix: "archives")
            let exports = "s3://\(privateStore.location.bucket)/archives?endpoint=\(server.endpoint.absoluteString)&region=us-east-1"
            #expect(privateStore.location.bucket != installation.store.location.bucket)
            let exported = try await installation.run(["export", "ada", "--wait", "--json"], jobsDirectory: jobs, environment: ["LIFECYCLE_EXPORTS": exports])
            #expect(exported.status == 0, "\(exported.stdout) \(exported.stderr)")
            let ready = try S3EndToEndTests.decoder.decode(ReadyExport.self, from: Data(exported.stdout.utf8))
            let archiveKey = try #require(ready.archiveKey)
            #expect(try await privateStore.readAll(key: archiveKey).prefix(2) == Data("PK".utf8))
            #expect(try await installation.store.info(key: archiveKey) == nil, "the app's bucket holds no archive")
        }
    }
}
