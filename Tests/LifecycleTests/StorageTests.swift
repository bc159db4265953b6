import ChildProcesses
import Foundation
import Lifecycle
import Testing

struct FileSystemBlobStoreTests {
    func makeStore() throws -> (FileSystemBlobStore, String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID().uuidString)").path
        return (try FileSystemBlobStore(root: root), root)
    }

    /// A write killed half-way leaves its temporary file: the next process to open the store
    /// removes it, and leaves alone the writes of processes still running.
    @Test func openingTheStoreRemovesTheTemporaryFilesOfProcessesThatNoLongerRun() async throws {
        let (_, root) = try makeStore()
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        await ended.exited()
        let abandoned = root + "/.incoming/\(ended.processIdentifier)-\(UUID().uuidString)"
        let inFlight = root + "/.incoming/\(getpid())-\(UUID().uuidString)"
        let scratch = root + "/.incoming/exports/some-export"
        for path in [abandoned, inFlight] { #expect(FileManager.default.createFile(atPath: path, contents: Data("half a photo".utf8))) }
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)

        _ = try FileSystemBlobStore(root: root)
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(FileManager.default.fileExists(atPath: inFlight))
        #expect(FileManager.default.fileExists(atPath: scratch))
    }

    @Test func putReadListAndDeleteByPrefix() async throws {
        let (store, root) = try makeStore()
        for index in 0..<5 {
            _ = try await store.put(key: "accounts/u-1/photos/p-\(index)", data: Data("photo \(index)".utf8))
        }
        _ = try await store.put(key: "accounts/u-10/photos/p-0", data: Data("other account".utf8))
        #expect(try await store.readAll(key: "accounts/u-1/photos/p-3") == Data("photo 3".utf8))

        // Paginated listing stays inside the prefix: u-10 is not u-1.
        let firstPage = try await store.list(prefix: "accounts/u-1/", after: nil, limit: 2)
        #expect(firstPage.map(\.key) == ["accounts/u-1/photos/p-0", "accounts/u-1/photos/p-1"])
        let rest = try await store.list(prefix: "accounts/u-1/", after: firstPage.last?.key, limit: 10)
        #expect(rest.map(\.key) == ["accounts/u-1/photos/p-2", "accounts/u-1/photos/p-3", "accounts/u-1/photos/p-4"])
        #expect(rest.first?.size == 7)

        try await store.delete(keys: (firstPage + rest).map(\.key))
        #expect(try await store.list(prefix: "accounts/u-1/", after: nil, limit: 10).isEmpty)
        // No empty directories named after the account are left behind.
        #expect(!FileManager.default.fileExists(atPath: root + "/accounts/u-1"))
        // Deleting again is not an error: a purge may run twice.
        try await store.delete(keys: ["accounts/u-1/photos/p-0"])
        #expect(try await store.info(key: "accounts/u-10/photos/p-0")?.size == 13)
    }

    @Test func aPutIsAtomicAndNothingIsLeftInTheIncomingFolder() async throws {
        let (store, root) = try makeStore()
        let source = root + "/../source-\(UUID().uuidString)"
        try Data(repeating: 7, count: 3 << 20).write(to: URL(fileURLWithPath: source))
        let info = try await store.put(key: "accounts/u-1/exports/e-1.zip", fromFile: source, moving: false)
        #expect(info.size == 3 << 20)
        #expect(FileManager.default.fileExists(atPath: source))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/.incoming").isEmpty)
        try await store.move(from: "accounts/u-1/exports/e-1.zip", to: "accounts/u-1/exports/final.zip")
        // Moving again after a crash between the move and its record is a no-op.
        try await store.move(from: "accounts/u-1/exports/e-1.zip", to: "accounts/u-1/exports/final.zip")
        #expect(try await store.info(key: "accounts/u-1/exports/final.zip")?.size == 3 << 20)
    }

    @Test(arguments: ["../etc/passwd", "/abs", "accounts//x", "accounts/./x", "accounts/u-1/..", "control\u{1}character", ""])
    func keysThatCouldEscapeTheRootAreRefused(_ key: String) async throws {
        let (store, _) = try makeStore()
        await #expect(throws: BlobStoreError.self) { _ = try await store.put(key: key, data: Data()) }
    }
}

struct ProfileRulesTests {
    @Test func namesAllowLettersOfAnyScriptSpacesAndHyphens() throws {
        #expect(try ProfileRules.name("  Jean-Luc ", field: "first_name") == "Jean-Luc")
        #expect(try ProfileRules.name("渡辺", field: "last_name") == "渡辺")
        #expect(try ProfileRules.name("Zoë Ångström", field: "first_name") == "Zoë Ångström")
        #expect(throws: ValidationFailure.self) { try ProfileRules.name("R2D2", field: "first_name") }
        #expect(throws: ValidationFailure.self) { try ProfileRules.name("   ", field: "first_name") }
        #expect(throws: ValidationFailure.self) { try ProfileRules.name(String(repeating: "a", count: 51), field: "first_name") }
    }

    @Test func timesZonesAndLengths() throws {
        #expect(try ProfileRules.timeOfDay("23:59:59", field: "t") == "23:59:59")
        for bad in ["24:00:00", "7:30:00", "07:30", "07:60:00", "ab:cd:ef", "07:30:00 "] {
            #expect(throws: ValidationFailure.self) { try ProfileRules.timeOfDay(bad, field: "t") }
        }
        #expect(try ProfileRules.timezone("America/New_York") == "America/New_York")
        #expect(throws: ValidationFailure.self) { try ProfileRules.timezone("Mars/Base") }
        #expect(try ProfileRules.bio(String(repeating: "é", count: 150)).count == 150)
        #expect(throws: ValidationFailure.self) { try ProfileRules.bio(String(repeating: "é", count: 151)) }
        #expect(throws: ValidationFailure.self) { try ProfileRules.displayName("") }
    }
}

struct PathTextTests {
    @Test func theParentOfAPathIsWhatFoundationWouldSayWithoutItsTrapOnOneCharacter() {
        #expect(PathText.parent("b") == "")
        #expect(PathText.parent("x/y") == "x")
        #expect(PathText.parent("/a") == "/")
        #expect(PathText.parent("/") == "/")
        #expect(PathText.parent("a/b/c.txt") == "a/b")
        #expect(PathText.parent("a//b/") == "a")
        #expect(PathText.parent("/srv/blobs/accounts/") == "/srv/blobs")
    }
}

struct BlobKeyTests {
    /// An app's key that cannot be a folder name is hashed; an id that is literally that
    /// hash must not land in the same folder (where the other account's archives live).
    @Test func noTwoIdsShareAFolder() {
        let email = "ada@example.com"
        let hashed = BlobKey.segment(forID: email)
        #expect(hashed.hasPrefix("sha256-") && hashed.utf8.count == 47)
        #expect(BlobKey.isSafeSegment(hashed))
        #expect(BlobKey.segment(forID: hashed) != hashed)
        #expect(BlobKey.segment(forID: BlobKey.segment(forID: hashed)) != BlobKey.segment(forID: hashed))
        let ids = [email, hashed, "ada", "sha256-", "sha256-abc", "SHA256-abc", "u-1.profile", "a b", "caf\u{E9}", "cafe\u{301}"]
        #expect(Set(ids.map { ExactText(BlobKey.segment(forID: $0)) }).count == ids.count)
        // Existing folders keep their meaning: a safe id not starting with "sha256-" is its own segment.
        for id in ["ada", "u-1.profile", "SHA256-abc", "sha256", "018f2c1e-7b7a-7c3e-9f00-1a2b3c4d5e6f"] {
            #expect(BlobKey.segment(forID: id) == id)
        }
        // Stable across runs.
        #expect(BlobKey.segment(forID: email) == hashed)
    }

    @Test func keysAreComparedAsBytes() {
        let nfc = "caf\u{E9}", nfd = "cafe\u{301}"
        #expect(nfc == nfd)
        #expect(!nfc.isExactly(nfd))
        #expect(Set([ExactText(nfc), ExactText(nfd)]).count == 2)
        #expect(ExactText(nfd) < ExactText(nfc))
        #expect("a/\u{301}b".hasExactPrefix("a/") && !"a/\u{301}b".hasPrefix("a/"))
        #expect(PathText.parent("a/\u{301}b") == "a")
    }
}
