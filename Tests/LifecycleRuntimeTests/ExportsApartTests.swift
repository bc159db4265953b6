import Foundation
import Lifecycle
import LifecycleRuntime
import Testing

/// Export archives must live apart from the blob store (an app may serve it to anyone): the
/// check follows what the file system says, not how the paths are spelled.
struct ExportsApartTests {
    /// A blob store, a symlink to it, and a folder beside it, in a fresh temporary folder.
    func layout() throws -> (root: String, blobs: String, link: String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("apart-\(UUID().uuidString)").path
        let blobs = root + "/media"
        try FileManager.default.createDirectory(atPath: blobs, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/public", withDestinationPath: blobs)
        return (root, blobs, root + "/public")
    }

    @Test func aFolderReachedThroughASymlinkToTheBlobStoreIsInsideIt() throws {
        let (root, blobs, link) = try layout()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // Neither exists yet: only the symlink on the way says where they would be.
        for exports in [link + "/exports", link + "/a/b/exports", link] {
            #expect(throws: LifecycleError.self, "\(exports)") { try BlobLocation.requireApart(exports: exports, blobs: blobs) }
        }
        // The same through the store's other name, the other way round.
        #expect(throws: LifecycleError.self) { try BlobLocation.requireApart(exports: blobs + "/exports", blobs: link) }
    }

    @Test func aFolderBesideTheBlobStoreIsApart() throws {
        let (root, blobs, link) = try layout()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try BlobLocation.requireApart(exports: root + "/exports", blobs: blobs)
        try BlobLocation.requireApart(exports: root + "/media-exports", blobs: link)
        try BlobLocation.requireApart(exports: root + "/media.exports/deeper", blobs: blobs)
    }
}
