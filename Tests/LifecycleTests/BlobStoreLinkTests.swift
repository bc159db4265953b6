import Foundation
@testable import Lifecycle
import Testing

/// Issue 54: the file-system blob store never leaves its root. A media folder may hold
/// links someone made (`alice/out -> /elsewhere`, `alice/dir -> ../bob`); no read, stat,
/// listing, write, move or delete goes through one, with the kernel's `openat2` and with
/// the component walk used where the kernel lacks it.
struct BlobStoreLinkTests {
    struct Layout {
        let root: String
        let outside: String
        let store: FileSystemBlobStore
    }

    /// `alice/out -> <outside>` (a link leading out), `alice/dir -> ../bob` (a link aliasing
    /// another user's folder), `alice/own.jpg -> ../bob/b.jpg` (a final link), and a real file of hers.
    func layout(_ resolution: BeneathDirectory.Resolution) async throws -> Layout {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("links-\(UUID().uuidString)").path
        let (root, outside) = (base + "/blobs", base + "/outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("outside the store".utf8).write(to: URL(fileURLWithPath: outside + "/secret.jpg"))
        let store = try FileSystemBlobStore(root: root, resolution: resolution)
        _ = try await store.put(key: "bob/b.jpg", data: Data("bob's photo".utf8))
        _ = try await store.put(key: "alice/a.jpg", data: Data("alice's photo".utf8))
        try FileManager.default.createSymbolicLink(atPath: root + "/alice/out", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: root + "/alice/dir", withDestinationPath: "../bob")
        try FileManager.default.createSymbolicLink(atPath: root + "/alice/own.jpg", withDestinationPath: "../bob/b.jpg")
        return Layout(root: root, outside: outside, store: store)
    }

    func expectUnsafe(_ key: String, link: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("\(key) was reached through \(link)")
        } catch let error as BlobStoreError {
            #expect(error.isUnsafePath && error.link == link, "\(error)")
            #expect(error.description.contains("not a safe path") && error.description.contains(link), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test(arguments: [BeneathDirectory.Resolution.kernel, .componentWalk])
    func noOperationGoesThroughALinkAnywhereInTheKey(_ resolution: BeneathDirectory.Resolution) async throws {
        let files = try await layout(resolution)
        let store = files.store
        for (key, link) in [("alice/out/secret.jpg", "alice/out"), ("alice/dir/b.jpg", "alice/dir"), ("alice/own.jpg", "alice/own.jpg")] {
            await expectUnsafe(key, link: link) { _ = try await store.info(key: key) }
            await expectUnsafe(key, link: link) { _ = try await store.readAll(key: key) }
            await expectUnsafe(key, link: link) { _ = try store.path(for: key) }
        }
        // A listing walks past links: what they lead to is not the store's. A prefix that is one is refused.
        #expect(try await store.list(prefix: "alice/", after: nil, limit: 100).map(\.key) == ["alice/a.jpg"])
        #expect(try await store.list(prefix: "", after: nil, limit: 100).map(\.key) == ["alice/a.jpg", "bob/b.jpg"])
        await expectUnsafe("alice/out/", link: "alice/out") { _ = try await store.list(prefix: "alice/out/", after: nil, limit: 100) }
        // Writes and moves through a link are refused; nothing lands outside or in bob's folder.
        await expectUnsafe("alice/out/new.jpg", link: "alice/out") { _ = try await store.put(key: "alice/out/new.jpg", data: Data("x".utf8)) }
        await expectUnsafe("alice/dir/b.jpg", link: "alice/dir") { try await store.move(from: "alice/a.jpg", to: "alice/dir/b.jpg") }
        await expectUnsafe("alice/dir/b.jpg", link: "alice/dir") { try await store.move(from: "alice/dir/b.jpg", to: "alice/moved.jpg") }
        // A delete through a link deletes nothing.
        await expectUnsafe("alice/out/secret.jpg", link: "alice/out") { try await store.delete(keys: ["alice/out/secret.jpg"]) }
        await expectUnsafe("alice/dir/b.jpg", link: "alice/dir") { try await store.delete(keys: ["alice/dir/b.jpg"]) }

        #expect(try String(contentsOfFile: files.outside + "/secret.jpg", encoding: .utf8) == "outside the store")
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.outside) == ["secret.jpg"])
        #expect(try String(decoding: await store.readAll(key: "bob/b.jpg"), as: UTF8.self) == "bob's photo")
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.root + "/bob") == ["b.jpg"])
        #expect(try String(decoding: await store.readAll(key: "alice/a.jpg"), as: UTF8.self) == "alice's photo")

        // Her own file is the store's as before; deleting it removes her folder's file only.
        try await store.delete(keys: ["alice/a.jpg"])
        #expect(try await store.info(key: "alice/a.jpg") == nil)
        #expect(try await store.info(key: "bob/b.jpg")?.size == 11)
    }

    /// A folder swapped for a link between two operations: the open descriptor of the root
    /// decides, not the path's text.
    @Test(arguments: [BeneathDirectory.Resolution.kernel, .componentWalk])
    func aFolderReplacedByALinkIsNotFollowed(_ resolution: BeneathDirectory.Resolution) async throws {
        let files = try await layout(resolution)
        _ = try await files.store.put(key: "carol/c.jpg", data: Data("carol's".utf8))
        try FileManager.default.removeItem(atPath: files.root + "/carol")
        try FileManager.default.createSymbolicLink(atPath: files.root + "/carol", withDestinationPath: files.outside)
        try Data("planted".utf8).write(to: URL(fileURLWithPath: files.outside + "/c.jpg"))
        await expectUnsafe("carol/c.jpg", link: "carol") { _ = try await files.store.readAll(key: "carol/c.jpg") }
        await expectUnsafe("carol/c.jpg", link: "carol") { try await files.store.delete(keys: ["carol/c.jpg"]) }
        #expect(FileManager.default.fileExists(atPath: files.outside + "/c.jpg"))
    }
}
