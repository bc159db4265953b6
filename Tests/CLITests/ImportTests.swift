import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// Writes a JSONL file plus the photos it names into a folder of its own.
struct ImportFixture {
    let directory: String
    var path: String { directory + "/accounts.jsonl" }

    init(lines: [String]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory + "/photos", withIntermediateDirectories: true)
        for name in ["run.jpg", "trail.jpg", "portrait.heic", "avatar-alpha.png"] {
            try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/demo/photos/" + name, toPath: directory + "/photos/" + name)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    static func account(
        id: String, email: String? = nil, firstName: String = "Ada", reminder: String = "07:30:00",
        timezone: String = "Europe/London", profilePhoto: String? = "photos/portrait.heic", entryPhoto: String? = "photos/run.jpg",
        childIDs: String? = nil
    ) -> String {
        let profile = profilePhoto.map { #","profile_photo":"\#($0)""# } ?? ""
        // Rows under the account take ids of their own; an id near the 128-character limit
        // leaves no room for a suffix.
        let child = childIDs ?? id
        let photos = entryPhoto.map { #"{"id":"\#(child)-p1","file":"\#($0)","taken_at":"2025-03-01T07:55:00Z"}"# } ?? ""
        return #"""
        {"id":"\#(id)","email":"\#(email ?? id + "@example.com")","password_hash":"$2b$04$abcdefghijklmnopqrstuu","first_name":"\#(firstName)","last_name":"Lovelace","display_name":"Ada","bio":"Runs at dawn","primary_sport":"running","morning_reminder_time":"\#(reminder)","timezone":"\#(timezone)","created_at":"2025-01-02T03:04:05Z","preferences":{"theme":"dark","font_size_offset":2,"notifications_enabled":true,"daily_reminder_time":"20:00:00"},"subscription":{"status":"premium"},"integrations":{"whoop":false,"strava":true,"apple_health":true,"fitness":false}\#(profile),"entries":[{"id":"\#(child)-e1","created_at":"2025-03-01T08:00:00Z","text":"Tempo run 🏃 café 東京","photos":[\#(photos)]}],"mesocycles":[{"id":"\#(child)-m1","status":"completed","started_at":"2025-01-01T00:00:00Z","completed_at":"2025-02-01T00:00:00Z"}],"meditation_sessions":[{"id":"\#(child)-s1","started_at":"2025-03-02T06:00:00Z","duration_seconds":600}],"sessions":[{"id":"\#(child)-t1","created_at":"2025-03-01T00:00:00Z"}]}
        """#
    }
}

@Suite(.serialized)
struct ImportTests {
    @Test(arguments: Backend.allCases)
    func aGoodFileImportsEveryRowAndPhoto(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "u-1"), ImportFixture.account(id: "u-2", profilePhoto: "photos/avatar-alpha.png")])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("imported 2 account(s)"))

        let summary = (try await workspace.account(id: "u-1"), try await workspace.rowCounts(of: "u-1"), try await workspace.photos(of: "u-1"))
        let account = try #require(summary.0)
        #expect(account.firstName == "Ada")
        #expect(account.integrations.strava)
        #expect(summary.1 == ["journal_entries": 1, "mesocycles": 1, "meditation_sessions": 1, "sessions": 1, "photos": 1, "preferences": 1])
        // Her profile photo is in her column, as an upload through the app API leaves it, its job queued.
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        #expect(account.profilePhotoKey == "accounts/u-1/upload-import.heic")
        let upload = try Data(contentsOf: URL(fileURLWithPath: try blobs.path(for: "accounts/u-1/upload-import.heic")))
        #expect(ContentSniffer.contentType(of: upload) == "image/heic")
        #expect(try await workspace.profilePhotos()["u-1"]?.state == "pending")
        // Journal photos are stored byte for byte, with the SHA-256 recorded.
        for photo in summary.2 {
            let stored = try blobs.path(for: photo.blobKey)
            #expect(try FileDigest.sha256(ofFile: stored).hex == photo.sha256)
        }
        let shown = try await workspace.run(["accounts", "show", "u-1@example.com"])
        #expect(shown.status == 0)
        #expect(shown.stdout.contains("state: active"))
        #expect(!shown.stdout.contains("$2b$"))
    }

    @Test(arguments: Backend.allCases)
    func importingTheSameFileAgainChangesNothing(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "u-1"), ImportFixture.account(id: "u-2")])
        #expect(try await workspace.run(["accounts", "import", fixture.path]).status == 0)
        func rows() async throws -> [Int] {
            var counts: [Int] = []
            for table in ["accounts", "journal_entries", "photos"] { counts.append(try await workspace.int("SELECT COUNT(*) FROM \(table)")) }
            return counts
        }
        let rowsBefore = try await rows()
        let updatedBefore = try await workspace.account(id: "u-1")?.updatedAt
        let again = try await workspace.run(["accounts", "import", fixture.path])
        #expect(again.status == 0)
        #expect(again.stdout.contains("imported 0 account(s), 2 already present"))
        #expect(try await rows() == rowsBefore)
        #expect(try await workspace.account(id: "u-1")?.updatedAt == updatedBefore)
        let blobFiles = FileManager.default.enumerator(atPath: workspace.blobs + "/accounts")?.allObjects.compactMap { $0 as? String }
            .filter { $0.contains("/photos/") || $0.contains("/upload-import.") } ?? []
        #expect(blobFiles.sorted() == ["u-1/photos/u-1-p1", "u-1/upload-import.heic", "u-2/photos/u-2-p1", "u-2/upload-import.heic"])
    }

    @Test(arguments: Backend.allCases)
    func badLinesAreReportedWithLineNumbersAndTheOthersImported(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "good-1"),
            ImportFixture.account(id: "bad-name", firstName: "R2-D2!"),
            ImportFixture.account(id: "bad-time", reminder: "7:30"),
            ImportFixture.account(id: "bad-zone", timezone: "Mars/Olympus_Mons"),
            ImportFixture.account(id: "bad-photo", entryPhoto: "photos/missing.jpg"),
            "{not json",
            ImportFixture.account(id: "good-2"),
        ])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        #expect(result.stdout.contains("imported 2 account(s)"))
        #expect(result.stderr.contains("line 2: first_name: may contain only letters, spaces and hyphens"))
        #expect(result.stderr.contains("line 3: morning_reminder_time: must be a time of day as HH:mm:ss"))
        #expect(result.stderr.contains("line 4: timezone: must be an IANA time zone name"))
        #expect(result.stderr.contains("line 5: entries[0].photos[0].file: photo file 'photos/missing.jpg' does not exist"))
        #expect(result.stderr.contains("line 6: line: is not valid JSON"))

        let ids = try await workspace.strings("SELECT id FROM accounts ORDER BY id")
        #expect(ids == ["good-1", "good-2"])
        // A refused line leaves nothing behind: no rows, no blobs.
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/accounts/bad-photo"))
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/accounts/bad-zone"))
    }

    @Test(arguments: Backend.allCases)
    func unicodeNamesAreAcceptedAndTrimmed(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "u-9", firstName: "  Zoë-Ångström ")])
        #expect(try await workspace.run(["accounts", "import", fixture.path]).status == 0)
        let account = try await workspace.account(id: "u-9")
        #expect(account?.firstName == "Zoë-Ångström")
    }

    @Test(arguments: Backend.allCases)
    func idsThatCouldEscapeAPathAreRefused(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "../etc")])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        #expect(result.stderr.contains("line 1: id: must be 1–128 characters"))
    }

    @Test(arguments: Backend.allCases)
    func anEmailAlreadyUsedByAnotherAccountRefusesTheLine(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "u-1", email: "same@example.com"),
            ImportFixture.account(id: "u-2", email: "SAME@example.com"),
        ])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        #expect(result.stderr.contains("line 2: email: SAME@example.com already belongs to account u-1"))
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/accounts/u-2"))
    }

    @Test(arguments: Backend.allCases)
    func missingFileAndUnknownAccountHaveTheirExitCodes(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let missing = try await workspace.run(["accounts", "import", workspace.root + "/nope.jsonl"])
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("no such file"))
        let unknown = try await workspace.run(["accounts", "show", "nobody"])
        #expect(unknown.status == 67)
        #expect(unknown.stderr.contains("no account with id or email 'nobody'"))
    }
}
