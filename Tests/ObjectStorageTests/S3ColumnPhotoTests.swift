import ChildProcesses
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

        /// An installation on a fresh bucket whose app database holds ada (1) and bob (2)
        /// with these avatar keys, its map in a jobs folder of its own.
        static func install(avatars: (hers: String, his: String)) async throws -> (installation: S3Installation, jobs: String, database: String) {
            let installation = try await S3Installation(server: try MotoServer.require())
            let jobs = try Scratch.directory("s3-column-photo-jobs")
            try map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
            let seed = schema + """
                INSERT INTO members (id, handle, email, avatar, created_at) VALUES
                  (1, 'ada', 'ada@example.com', '\(avatars.hers)', '2025-01-01'), (2, 'bob', 'bob@example.com', '\(avatars.his)', '2025-01-02');
                """
            try seed.write(toFile: jobs + "/app.sql", atomically: true, encoding: .utf8)
            let database = installation.root + "/lifecycle.sqlite"
            #expect(try await runTool("/usr/bin/sqlite3", [database, ".read \(jobs)/app.sql"]).isEmpty)
            return (installation, jobs, database)
        }

        /// The Settings screen's three choices through the app API with the files in a
        /// bucket: a new photo is stored and then replaced by the product's JPEG, the one it
        /// replaced deleted; "Remove Photo" empties the column and deletes the file; bob's
        /// avatar is never touched.
        @Test func anAvatarUploadedAndRemovedThroughTheAppAPILivesAndLeavesInTheBucket() async throws {
            let (previous, his) = ("avatars/1/old.jpg", "avatars/2/his.jpg")
            let (installation, jobs, database) = try await Self.install(avatars: (previous, his))
            let store = installation.store
            let trail = try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/Jobs/demo/photos/trail.jpg"))
            for key in [previous, his] { _ = try await store.put(key: key, data: trail) }
            let avatar = {
                try await runTool("/usr/bin/sqlite3", [database, "SELECT quote(avatar) FROM members WHERE id = 1"]).trimmingCharacters(in: .newlines)
            }

            let token = "7d1e0c9a4b3f28e6a5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2"
            let serve = try await APIServer(installation: installation, jobsDirectory: jobs, token: token)
            let upload = try await serve.request("PUT", "accounts/1/photo", file: repositoryRoot + "/Jobs/demo/photos/portrait.heic")
            #expect(upload.status == 202, "\(upload.text)")
            let uploaded = try await avatar()
            #expect(uploaded.hasPrefix("'avatars/") && uploaded.contains("/upload-"), "\(uploaded)")
            #expect(try await store.info(key: String(uploaded.dropFirst().dropLast())) != nil, "the upload is not in the bucket")
            let worker = try await installation.run(["worker", "--once"], jobsDirectory: jobs)
            #expect(worker.status == 0, "\(worker.stdout) \(worker.stderr)")
            let rendered = String(try await avatar().dropFirst().dropLast())
            #expect(rendered.hasPrefix("avatars/") && rendered.hasSuffix(".jpg") && "'\(rendered)'" != uploaded, "\(rendered)")
            #expect(try await store.readAll(key: rendered).starts(with: [0xFF, 0xD8, 0xFF]), "\(rendered) is not a JPEG")
            #expect(try await store.info(key: String(uploaded.dropFirst().dropLast())) == nil, "the upload is left in the bucket")
            #expect(try await store.info(key: previous) == nil, "the photo it replaced is left in the bucket")

            let removal = try await serve.request("DELETE", "accounts/1/photo")
            #expect(removal.status == 200 && removal.text.contains(#""removed":true"#), "\(removal.text)")
            #expect(try await avatar() == "NULL")
            #expect(try await installation.run(["worker", "--once"], jobsDirectory: jobs).status == 0)
            #expect(try await store.info(key: rendered) == nil, "the removed photo is left in the bucket")
            #expect(try await store.info(key: his) != nil, "bob's avatar went")
            #expect(await serve.stop() == 0)
        }

        @Test func avatarsTheAppKeptInABucketAreNormalisedExportedAndPurged() async throws {
            let (hers, his) = ("avatars/1/from the app.heic", "avatars/2/from the app.jpg")
            let (installation, jobs, database) = try await Self.install(avatars: (hers, his))
            let store = installation.store
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

/// `lifecycle serve` on an S3 installation, with the app API's token: started, ready once
/// it prints where it listens, stopped with SIGTERM.
final class APIServer: Sendable {
    private let process: Process
    private let base: String
    private let token: String

    init(installation: S3Installation, jobsDirectory: String, token: String) async throws {
        self.token = token
        process = Process()
        process.executableURL = URL(fileURLWithPath: lifecycleBinary)
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--database", installation.root + "/lifecycle.sqlite", "--blobs", installation.blobs, "--jobs-dir", jobsDirectory]
        process.environment = installation.environment.merging(["LIFECYCLE_API_TOKEN": token]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        let line = await firstLine(of: output)
        guard let range = line.range(of: "listening on http://") else {
            process.terminate()
            throw TestFailure("serve did not start (it printed '\(line)')")
        }
        base = String(line[range.upperBound...].prefix { !$0.isWhitespace })
        // Whatever else it prints must not fill a pipe nobody reads.
        output.fileHandleForReading.readabilityHandler = { handle in _ = handle.availableData }
    }

    func request(_ method: String, _ path: String, file: String? = nil) async throws -> (status: Int, text: String) {
        var arguments = ["-s", "--max-time", "60", "-w", "\n%{http_code}", "-X", method, "-H", "Authorization: Bearer \(token)"]
        if let file { arguments += ["-H", "Content-Type: image/heic", "--data-binary", "@" + file] }
        let output = try await runTool("/usr/bin/curl", arguments + ["http://\(base)/v1/\(path)"])
        return (Int(output.split(separator: "\n").last ?? "") ?? 0, output)
    }

    func stop() async -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        await process.exited()
        return process.terminationStatus
    }

    deinit { if process.isRunning { process.terminate() } }
}
