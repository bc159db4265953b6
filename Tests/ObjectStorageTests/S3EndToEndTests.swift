import ChildProcesses
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Lifecycle
import ObjectStorage
import Testing

/// The `lifecycle` executable SwiftPM built next to the test bundle.
let lifecycleBinary: String = {
    if let explicit = ProcessInfo.processInfo.environment["LIFECYCLE_BIN"] { return explicit }
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("lifecycle").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory.deleteLastPathComponent()
    }
    return repositoryRoot + "/.build/debug/lifecycle"
}()

/// One installation whose blobs are in S3: a SQLite file in a temp folder, `--blobs s3://…`.
struct S3Installation {
    let root: String
    let store: S3BlobStore
    let blobs: String
    var environment: [String: String]

    init(server: MotoServer) async throws {
        root = try Scratch.directory("s3-cli")
        store = try await server.makeStore(prefix: "installation")
        blobs = "s3://\(store.location.bucket)/installation?endpoint=\(server.endpoint.absoluteString)&region=us-east-1"
        var environment = ProcessInfo.processInfo.environment
        // The presigned link replaces the HMAC link: no signing key may be needed.
        for name in ["LIFECYCLE_SIGNING_KEY", "LIFECYCLE_SIGNING_KEY_FILE", "LIFECYCLE_NOW", "LIFECYCLE_BLOBS"] { environment.removeValue(forKey: name) }
        environment["AWS_ACCESS_KEY_ID"] = MotoServer.credentials.accessKeyID
        environment["AWS_SECRET_ACCESS_KEY"] = MotoServer.credentials.secretAccessKey
        self.environment = environment
        let created = try await run(["init"])
        guard created.status == 0 else { throw InstallationFailed(message: created.stderr) }
    }

    struct InstallationFailed: Error { let message: String }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    func run(
        _ command: [String], blobs: String? = nil, jobsDirectory: String = repositoryRoot + "/Jobs",
        environment extra: [String: String] = [:], removing: [String] = []
    ) async throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: lifecycleBinary)
        process.arguments = command + ["--database", root + "/lifecycle.sqlite", "--blobs", blobs ?? self.blobs, "--jobs-dir", jobsDirectory]
        var environment = self.environment.merging(extra) { $1 }
        for name in removing { environment.removeValue(forKey: name) }
        process.environment = environment
        let id = UUID().uuidString
        let out = root + "/stdout-\(id)", err = root + "/stderr-\(id)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        await process.exited()
        return Result(
            status: process.terminationStatus, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// One account with an entry photo (JPEG) and a profile photo (HEIC), as operators import them.
    func importAccount(_ id: String) async throws -> Result {
        let folder = try Scratch.directory("s3-import")
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in ["run.jpg", "trail.jpg", "portrait.heic"] {
            try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/demo/photos/" + name, toPath: folder + "/photos/" + name)
        }
        let line = #"""
            {"id":"\#(id)","email":"\#(id)@example.com","password_hash":"$2b$04$abcdefghijklmnopqrstuu","first_name":"Ada","last_name":"Lovelace","timezone":"Europe/London","created_at":"2025-01-02T03:04:05Z","preferences":{"theme":"dark"},"profile_photo":"photos/portrait.heic","entries":[{"id":"\#(id)-e1","created_at":"2025-03-01T08:00:00Z","text":"Tempo run","photos":[{"id":"\#(id)-p1","file":"photos/run.jpg","taken_at":"2025-03-01T07:55:00Z"},{"id":"\#(id)-p2","file":"photos/trail.jpg"}]}],"sessions":[{"id":"\#(id)-t1","created_at":"2025-03-01T00:00:00Z"}]}
            """#
        try (line + "\n").write(toFile: folder + "/accounts.jsonl", atomically: true, encoding: .utf8)
        return try await run(["accounts", "import", folder + "/accounts.jsonl"])
    }
}

struct ReadyExport: Decodable {
    var exportID: String
    var state: String
    var archiveKey: String?
    var archivePath: String?
    var link: String?
    var expiresAt: Date?

    enum CodingKeys: String, CodingKey {
        case exportID = "export_id", state, archiveKey = "archive_key", archivePath = "archive_path", link, expiresAt = "expires_at"
    }
}

extension S3Tests {
    @Suite struct S3EndToEndTests {
        static let decoder: JSONDecoder = {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return decoder
        }()

        @Test func importExportThroughAPresignedLinkThenPurgeLeavesTheAccountPrefixEmpty() async throws {
            let installation = try await S3Installation(server: try MotoServer.require())
            let store = installation.store

            let imported = try await installation.importAccount("ada")
            #expect(imported.status == 0, "\(imported.stderr)")
            let photos = try await store.list(prefix: "accounts/ada/photos/", after: nil, limit: 100).map(\.key)
            #expect(photos.count == 2, "\(photos)")
            #expect(try await store.info(key: "accounts/ada/upload-import.heic") != nil, "her profile photo, where the map keeps it")
            // The queued photo job reads the HEIC from S3 and writes the normalised JPEG back.
            let worker = try await installation.run(["worker", "--once"])
            #expect(worker.status == 0, "\(worker.stderr)")

            // Without a place of their own the archives would sit among the files the app serves.
            let refused = try await installation.run(["export", "ada", "--wait", "--json"])
            #expect(refused.status == 64 && refused.stderr.contains("LIFECYCLE_EXPORTS"), "\(refused.stderr)")
            // Another prefix of the same bucket, which the app does not serve.
            let server = try MotoServer.require()
            let exportStore = try await server.makeStore(bucket: store.location.bucket, prefix: "exports")
            let exportsApart = ["LIFECYCLE_EXPORTS": "s3://\(store.location.bucket)/exports?endpoint=\(server.endpoint.absoluteString)&region=us-east-1"]
            let started = Date()
            let exported = try await installation.run(["export", "ada", "--wait", "--json"], environment: exportsApart)
            #expect(exported.status == 0, "\(exported.stderr)")
            let ready = try Self.decoder.decode(ReadyExport.self, from: Data(exported.stdout.utf8))
            #expect(ready.state == "ready")
            let archiveKey = try #require(ready.archiveKey)
            #expect(archiveKey == "accounts/ada/exports/\(ready.exportID).zip")
            #expect(ready.archivePath == "s3://\(store.location.bucket)/exports/\(archiveKey)")
            let archive = try await exportStore.readAll(key: archiveKey)
            #expect(archive.prefix(4) == Data([0x50, 0x4B, 0x03, 0x04]))
            // Nothing half-written is left beside the published archive, and nothing among her files.
            #expect(try await exportStore.list(prefix: "accounts/ada/exports/", after: nil, limit: 10).map(\.key) == [archiveKey])
            #expect(try await store.list(prefix: "accounts/ada/exports/", after: nil, limit: 10).isEmpty)

            let link = try #require(ready.link)
            #expect(link.hasPrefix("\(server.endpoint.absoluteString)/\(store.location.bucket)/exports/\(archiveKey)?"))
            #expect(link.contains("X-Amz-Expires=604800") && link.contains("X-Amz-Signature="))
            let expiresAt = try #require(ready.expiresAt)
            #expect(abs(expiresAt.timeIntervalSince(started) - 7 * 86_400) < 120)
            let (downloaded, response) = try await URLSession.shared.data(from: try #require(URL(string: link)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(downloaded == archive)

            // The archive is a real one: an independent reader lists the photos in it.
            let local = installation.root + "/download.zip"
            try downloaded.write(to: URL(fileURLWithPath: local))
            let listing = try await runTool("/usr/bin/bsdtar", ["-tf", local])
            #expect(listing.contains("/manifest.json") && listing.contains("/files/photos/2025/03/01/ada-p1.jpg"), "\(listing)")

            let listed = try await installation.run(["exports", "list", "ada"], environment: exportsApart)
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(listed.stdout.contains("    link: \(link)"))
            let verified = try await installation.run(["exports", "verify-link", link], environment: exportsApart)
            #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
            let tampered = link.replacingOccurrences(of: "X-Amz-Expires=604800", with: "X-Amz-Expires=604799")
            #expect(try await installation.run(["exports", "verify-link", tampered], environment: exportsApart).status == 77)

            let deleted = try await installation.run(["delete", "ada", "--operator", "ops", "--reason", "ticket 1", "--immediately"])
            #expect(deleted.status == 0, "\(deleted.stderr)")
            let purged = try await installation.run(["purge"], environment: exportsApart)
            #expect(purged.status == 0, "\(purged.stdout)\(purged.stderr)")
            #expect(purged.stdout.contains("purge: 1 purged"), "\(purged.stdout)")
            #expect(try await store.list(prefix: "accounts/ada/", after: nil, limit: 10).isEmpty)
            #expect(try await exportStore.list(prefix: "accounts/ada/", after: nil, limit: 10).isEmpty)
            #expect(try await store.pendingMultipartUploads().isEmpty)
            // The link now leads nowhere: the archive went with the account.
            let (_, gone) = try await URLSession.shared.data(from: try #require(URL(string: link)))
            #expect((gone as? HTTPURLResponse)?.statusCode == 404)
        }

        /// The reference app's profile photo through the app API with its files in S3: a new
        /// photo replaces the imported one (whose file leaves the bucket once the new one is
        /// the product's JPEG), "Remove Photo" leaves her none and deletes the file, and her
        /// journal's photos stay.
        @Test func theReferenceAppsProfilePhotoIsReplacedAndRemovedThroughTheAppAPI() async throws {
            let installation = try await S3Installation(server: try MotoServer.require())
            let store = installation.store
            #expect(try await installation.importAccount("ada").status == 0)
            #expect(try await installation.run(["worker", "--once"]).status == 0)
            let database = installation.root + "/lifecycle.sqlite"
            let profilePhoto = {
                try await runTool("/usr/bin/sqlite3", [
                    database, "SELECT COALESCE(profile_photo_key, '') FROM accounts WHERE id = 'ada'",
                ]).trimmingCharacters(in: .newlines)
            }
            let photoFiles = { try await store.list(prefix: "accounts/ada/", after: nil, limit: 100).map(\.key) }
            let imported = try await profilePhoto()
            let journal = try await photoFiles().filter { $0 != imported }
            #expect(imported.hasPrefix("accounts/ada/v2-s1024-q85-") && journal.count == 2, "\(imported) \(journal)")

            let serve = try await APIServer(
                installation: installation, jobsDirectory: repositoryRoot + "/Jobs",
                token: "7d1e0c9a4b3f28e6a5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2")
            let upload = try await serve.request("PUT", "accounts/ada/photo", file: repositoryRoot + "/Jobs/demo/photos/trail.jpg")
            #expect(upload.status == 202, "\(upload.text)")
            #expect(try await installation.run(["worker", "--once"]).status == 0)
            let replacement = try await profilePhoto()
            #expect(replacement.hasPrefix("accounts/ada/v2-s1024-q85-") && replacement != imported, "\(replacement)")
            #expect(try await store.readAll(key: replacement).starts(with: [0xFF, 0xD8, 0xFF]), "\(replacement) is not a JPEG")
            #expect(try await photoFiles().sorted() == (journal + [replacement]).sorted(), "the replaced photo is left in the bucket")

            let removal = try await serve.request("DELETE", "accounts/ada/photo")
            #expect(removal.status == 200 && removal.text.contains(#""removed":true"#), "\(removal.text)")
            #expect(try await profilePhoto().isEmpty)
            #expect(try await installation.run(["worker", "--once"]).status == 0)
            #expect(try await photoFiles().sorted() == journal.sorted(), "the removed photo is left in the bucket, or the journal's went")
            #expect(await serve.stop() == 0)
        }

        @Test func configurationMistakesAreUsageErrorsAndAnUnreachableEndpointIsUnavailable() async throws {
            let installation = try await S3Installation(server: try MotoServer.require())
            let noCredentials = try await installation.run(["accounts", "show", "ada"], removing: ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
            #expect(noCredentials.status == 64)
            #expect(noCredentials.stderr.contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set"), "\(noCredentials.stderr)")

            let badLocation = try await installation.run(["accounts", "show", "ada"], blobs: "s3://Not_A_Bucket/x")
            #expect(badLocation.status == 64)
            #expect(badLocation.stderr.contains("not a valid S3 bucket name"), "\(badLocation.stderr)")

            let unknownScheme = try await installation.run(["accounts", "show", "ada"], blobs: "gs://bucket/x")
            #expect(unknownScheme.status == 64)

            let port = try MotoServer.freePort()
            let unreachable = try await installation.run(["worker", "--once"], blobs: "s3://bucket/x?endpoint=http://127.0.0.1:\(port)")
            #expect(unreachable.status == 69)
            #expect(unreachable.stderr.contains("127.0.0.1:\(port)") && unreachable.stderr.contains("connection refused"), "\(unreachable.stderr)")

            // Configured through the environment instead of --blobs works the same.
            let fromEnvironment = try await installation.run(["accounts", "show", "nobody"], environment: ["LIFECYCLE_BLOBS": installation.blobs])
            #expect(fromEnvironment.status == 67, "\(fromEnvironment.stderr)")
        }

        /// Seven days is S3's limit for a presigned URL: a longer policy is refused before any work.
        @Test func aLinkLifetimeS3CannotSignIsRefusedUpFront() async throws {
            let installation = try await S3Installation(server: try MotoServer.require())
            let jobs = try Scratch.directory("s3-jobs")
            try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/policies", toPath: jobs + "/policies")
            try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/account-data.yaml", toPath: jobs + "/account-data.yaml")
            let policy = try String(contentsOfFile: jobs + "/policies/export.yaml", encoding: .utf8)
            try policy.replacingOccurrences(of: "link_lifetime_days: 7", with: "link_lifetime_days: 30")
                .write(toFile: jobs + "/policies/export.yaml", atomically: true, encoding: .utf8)
            #expect(try await installation.importAccount("bob").status == 0)
            // The archives' own prefix: the store that signs their links.
            let exports = "s3://\(installation.store.location.bucket)/exports?endpoint=\(try MotoServer.require().endpoint.absoluteString)&region=us-east-1"
            let refused = try await installation.run(["export", "bob"], jobsDirectory: jobs, environment: ["LIFECYCLE_EXPORTS": exports])
            #expect(refused.status == 65, "\(refused.stderr)")
            #expect(refused.stderr.contains("link_lifetime_days is 30") && refused.stderr.contains("at most 7 days"), "\(refused.stderr)")
        }
    }
}

func runTool(_ executable: String, _ arguments: [String]) async throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString)").path
    _ = FileManager.default.createFile(atPath: output, contents: nil)
    process.standardOutput = FileHandle(forWritingAtPath: output)
    process.standardError = FileHandle(forWritingAtPath: output)
    try process.run()
    await process.exited()
    return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
}
