import Foundation
import GRDB
import JobRunner
import Lifecycle
import PostgresTesting
import SQLiteBackend
import Testing

/// The import path and `lifecycle photos normalize` end to end, on both backends: import
/// queues a job per profile photo, the jobs normalise or reject, a second run renders nothing.
@Suite(.serialized)
struct PhotoNormalizeCommandTests {
    /// Where the import stores each account's upload: named by what its bytes are (mallory's
    /// GIF named .jpg is a .gif).
    static let uploads = ["ada": "upload-import.heic", "grace": "upload-import.png", "linus": "upload-import.jpg", "mallory": "upload-import.gif"]

    /// ada HEIC, grace PNG with alpha, linus JPEG, mallory a GIF named .jpg.
    func importFourAccounts(_ workspace: Workspace) async throws -> ImportFixture {
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "ada", profilePhoto: "photos/portrait.heic"),
            ImportFixture.account(id: "grace", profilePhoto: "photos/avatar-alpha.png"),
            ImportFixture.account(id: "linus", profilePhoto: "photos/trail.jpg"),
            ImportFixture.account(id: "mallory", profilePhoto: "photos/not-a-photo.jpg"),
        ])
        try await photoTool("vips", "copy", repositoryRoot + "/Jobs/demo/photos/trail.jpg", fixture.directory + "/photos/not-a-photo.gif")
        try FileManager.default.moveItem(atPath: fixture.directory + "/photos/not-a-photo.gif", toPath: fixture.directory + "/photos/not-a-photo.jpg")
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        #expect(imported.status == 0, "\(imported.stderr)")
        return fixture
    }

    @Test(arguments: Backend.allCases)
    func importQueuesOneJobPerProfilePhotoAndAnyWorkerRunsThem(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        _ = try await importFourAccounts(workspace)
        let listed = try ListedJobs.from(try await workspace.run(["jobs", "list", "--json"]).stdout).jobs
        let photoJobs = listed.filter { $0.kind == PhotoJobs.normalizeColumnKind }
        #expect(photoJobs.count == 4 && photoJobs.allSatisfy { $0.state == .queued })
        #expect(Set(photoJobs.compactMap(\.uniqueKey)) == Set(Self.uploads.map { "photo:accounts/\($0.key)/\($0.value)" }))
        #expect(try await workspace.profilePhotos().mapValues(\.state) == ["ada": "pending", "grace": "pending", "linus": "pending", "mallory": "pending"])

        let worker = try await workspace.run(["worker", "--once"])
        #expect(worker.status == 0, "\(worker.stderr)")
        // The refused one leaves her with no photo, as she had none before it.
        #expect(try await workspace.profilePhotos().mapValues(\.state) == ["ada": "normalized", "grace": "normalized", "linus": "normalized"])
        let hers = try await workspace.run(["photos", "list", "--account", "mallory"])
        #expect(hers.stdout.hasPrefix("account mallory  rejected  (no photo)  "), "\(hers.stdout)")
        let again = try await workspace.run(["photos", "normalize", "--all"])
        #expect(again.status == 0)
        #expect(again.stdout.contains("nothing to normalise for all accounts"))
    }

    @Test(arguments: Backend.allCases)
    func normalizeAllSummarisesRejectionsAndASecondRunRendersNothing(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try await importFourAccounts(workspace)

        let first = try await workspace.run(["photos", "normalize", "--all"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("4 profile photo(s) of all accounts to normalise under recipe v2-s1024-q85 (4 already queued)"))
        #expect(first.stdout.contains("normalised 3, rejected 1"))
        #expect(first.stdout.contains(
            "rejected accounts/mallory/upload-import.gif (account mallory): This file type is not supported. Please use JPG, PNG, or HEIC. [unsupportedType: content is GIF]"))

        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        let sides = ["ada": 1024, "grace": 480, "linus": 768]
        let photos = try await workspace.profilePhotos()
        #expect(Set(photos.keys) == Set(sides.keys))
        for (account, photo) in photos {
            #expect(photo.state == "normalized" && photo.file.hasPrefix("accounts/\(account)/v2-s1024-q85-") && photo.file.hasSuffix(".jpg"))
            try await expectCleanSquareJPEG(atPath: try blobs.path(for: photo.file), side: try #require(sides[account]))
            #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/accounts/\(account)/" + (Self.uploads[account] ?? "?")))
        }
        // The refused upload is deleted (its uploader was told why and may send another); the
        // audit trail keeps the code and the message.
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/accounts/mallory/upload-import.gif"))
        let trail = try await workspace.query(
            "SELECT outcome, detail FROM \(workspace.ownTable("audit_events")) WHERE account_id = 'mallory' AND action = 'photo.normalize'")
        #expect(trail.count == 1 && trail.first?[0] == "rejected")
        #expect((trail.first?[1] ?? nil)?.contains("\"code\":\"unsupportedType\"") == true)
        // She has no photo, and the on-call engineer still finds her refusal and its message.
        let rejected = try await workspace.run(["photos", "list", "--state", "rejected", "--json"])
        #expect(rejected.status == 0, "\(rejected.stderr)")
        let rejectedRows = try JSONSerialization.jsonObject(with: Data(rejected.stdout.utf8)) as? [[String: String]]
        #expect(rejectedRows == [["account": "mallory", "state": "rejected", "message": "This file type is not supported. Please use JPG, PNG, or HEIC."]])
        let hers = try await workspace.run(["photos", "list", "--account", "mallory"])
        #expect(hers.stdout == "account mallory  rejected  (no photo)  \"This file type is not supported. Please use JPG, PNG, or HEIC.\"\n", "\(hers.stdout)")
        let everyone = try await workspace.run(["photos", "list", "--json"])
        let everyoneRows = try JSONSerialization.jsonObject(with: Data(everyone.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(everyoneRows.compactMap { $0["account"] as? String } == ["ada", "grace", "linus", "mallory"])
        #expect(try await workspace.run(["photos", "list", "--state", "normalized", "--account", "mallory"]).stdout == "no profile photos in state normalized\n")

        let tree = try workspace.blobTree()
        let jobs = try await workspace.photoJobCount()
        let second = try await workspace.run(["photos", "normalize", "--all"])
        #expect(second.status == 0)
        #expect(second.stdout.contains("nothing to normalise"))
        #expect(try await workspace.photoJobCount() == jobs)
        #expect(try workspace.blobTree() == tree)

        // Importing the same file again neither restores a deleted upload nor queues anything.
        let reimport = try await workspace.run(["accounts", "import", fixture.path])
        #expect(reimport.status == 0)
        #expect(try workspace.blobTree() == tree)
        #expect(try await workspace.photoJobCount() == jobs)
    }

    /// `photos list --state rejected` walks the audit trail's rejections a page at a time,
    /// in the byte order of the ids on both backends ("Zed" before "amy"), on a PostgreSQL
    /// database that sorts text as English does ("amy" first), past an account that is no
    /// longer listed (purged).
    @Test(arguments: Backend.allCases)
    func rejectedPhotosAreListedInByteOrderPageAfterPage(_ backend: Backend) async throws {
        var workspace = try Workspace()
        if backend == .postgres {
            let cluster = try await ThrowawayPostgres.shared()
            workspace.postgresURL = cluster.url(database: try await cluster.createDatabase(icuLocale: "en-US"), pool: 2)
            let sorted = try await workspace.query("SELECT name FROM (VALUES ('Zed'), ('amy')) AS t(name) ORDER BY name")
            try #require(sorted == [["amy"], ["Zed"]], "the database sorts as English does: \(sorted)")
        }
        let fixture = try ImportFixture(lines: ["amy", "Bob", "Zed"].map { ImportFixture.account(id: $0, profilePhoto: "photos/not-a-photo.jpg") })
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        try await photoTool("vips", "copy", repositoryRoot + "/Jobs/demo/photos/trail.jpg", fixture.directory + "/photos/not-a-photo.gif")
        try FileManager.default.moveItem(atPath: fixture.directory + "/photos/not-a-photo.gif", toPath: fixture.directory + "/photos/not-a-photo.jpg")
        try #require(try await workspace.run(["accounts", "import", fixture.path]).status == 0)
        try #require(try await workspace.run(["worker", "--once"]).status == 0)
        func rejected(_ extra: [String]) async throws -> [String] {
            let listed = try await workspace.run(["photos", "list", "--state", "rejected", "--json"] + extra)
            #expect(listed.status == 0, "\(listed.stderr)")
            let rows = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
            #expect(rows.allSatisfy { $0["file"] == nil && $0["state"] as? String == "rejected" }, "\(rows)")
            return rows.compactMap { $0["account"] as? String }
        }
        #expect(try await rejected([]) == ["Bob", "Zed", "amy"])

        let deleted = try await workspace.run(["delete", "Bob", "--operator", "sam", "--reason", "ticket 9", "--immediately"])
        try #require(deleted.status == 0, "\(deleted.stderr)")
        let purged = try await workspace.run(["purge"])
        try #require(purged.status == 0 && purged.stdout.contains("1 purged"), "\(purged.stdout)\(purged.stderr)")
        // Pages of two: Bob (purged, passed over) and Zed, then amy.
        #expect(try await rejected(["--limit", "2"]) == ["Zed", "amy"])
        #expect(try await rejected(["--limit", "1"]) == ["Zed"])
    }

    @Test(arguments: Backend.allCases)
    func oneAccountQueueOnlyAndTheUsageErrors(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        _ = try await importFourAccounts(workspace)
        let one = try await workspace.run(["photos", "normalize", "--account", "grace@example.com", "--queue-only"])
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stdout.contains("1 profile photo(s) of account grace@example.com to normalise under recipe v2-s1024-q85 (1 already queued)"))
        let all = try await workspace.run(["photos", "normalize", "--all", "--queue-only", "--json"])
        #expect(all.status == 0)
        #expect(all.stdout.contains("\"already_queued\":4"))
        #expect(try await workspace.profilePhotos().values.allSatisfy { $0.state == "pending" })

        let run = try await workspace.run(["photos", "normalize", "--account", "grace"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("normalised 1, rejected 0"))
        #expect(try await workspace.profilePhotos()["grace"]?.state == "normalized")

        let unknown = try await workspace.run(["photos", "normalize", "--account", "nobody"])
        #expect(unknown.status == 67)
        #expect(unknown.stderr.contains("nobody"))
        #expect(try await workspace.run(["photos", "normalize"]).status == 64)
        #expect(try await workspace.run(["photos", "normalize", "--all", "--account", "ada"]).status == 64)
    }

    @Test func theDemoShowsEachProfilePhotoBeforeAndAfter() async throws {
        let workspace = try Workspace()
        let demo = try await workspace.run(["demo"])
        #expect(demo.status == 0, "\(demo.stderr)")
        let chapter = demo.stdout.components(separatedBy: "── Profile photos")[1].components(separatedBy: "── ")[0]
        #expect(chapter.contains("before: HEIC 1200×1200, 73144 bytes, metadata: EXIF"))
        #expect(chapter.contains("before: PNG 640×480, 39790 bytes, metadata: text chunks"))
        #expect(chapter.contains("before: JPEG 1024×768, 82481 bytes"))
        for side in [1024, 480, 768] { #expect(chapter.contains("after:  JPEG \(side)×\(side), ")) }
        #expect(chapter.components(separatedBy: "metadata: none  → accounts/").count == 4)
        #expect(chapter.components(separatedBy: "upload deleted: yes").count == 4)
        #expect(chapter.contains("again: 0 to do"))
    }
}
