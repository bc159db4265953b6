import Foundation
import JobRunner
import Lifecycle
import Testing

/// Issue 54: an app's media folder with links in it. Ada's rows name a file through a
/// folder linked out of the store (`media/ada-out -> /elsewhere`) and bob's avatar through a
/// folder linked to his (`media/ada-dir -> ../avatars`); her own upload folder is itself a
/// link. Her export leaves those files out, naming them; her purge and her part deletion
/// delete neither, and their receipts name the links; the files outside and bob's avatar
/// are as they were.
@Suite(.serialized)
struct BlobStoreLinkErasureTests {
    let app = AppPurgeTests()

    struct Site {
        let workspace: Workspace
        let outside: String
    }

    func install(_ backend: Backend) async throws -> Site {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.map = schema.map.replacingOccurrences(of: "  blobs: [avatar_key]\n", with: "  blobs: [avatar_key]\n  blob_prefixes: [\"uploads/{key}/\"]\n")
            + "\nparts:\n  - name: posts\n    label: Posts\n    tables: [statuses, media, media_variants]\n"
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, AppPurgeTests.socialSeed + """

            UPDATE media SET file_key = 'media/ada-out/secret.jpg' WHERE id = 101;
            INSERT INTO media (id, status_id, file_key) VALUES (103, 11, 'media/ada-dir/2.jpg');
            """)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in AppPurgeTests.socialFiles { _ = try await blobs.put(key: key, data: Data("file \(key)".utf8)) }
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("outside-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("outside the store".utf8).write(to: URL(fileURLWithPath: outside + "/secret.jpg"))
        try FileManager.default.createDirectory(atPath: workspace.blobs + "/uploads", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: workspace.blobs + "/media/ada-out", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: workspace.blobs + "/media/ada-dir", withDestinationPath: "../avatars")
        try FileManager.default.createSymbolicLink(atPath: workspace.blobs + "/uploads/1", withDestinationPath: outside)
        return Site(workspace: workspace, outside: outside)
    }

    /// What must never change: the file outside the store, and bob's avatar.
    func expectUntouched(_ site: Site) throws {
        #expect(try FileManager.default.contentsOfDirectory(atPath: site.outside) == ["secret.jpg"])
        #expect(try String(contentsOfFile: site.outside + "/secret.jpg", encoding: .utf8) == "outside the store")
        #expect(try String(contentsOfFile: site.workspace.blobs + "/avatars/2.jpg", encoding: .utf8) == "file avatars/2.jpg")
    }

    func refused(_ detail: String?) throws -> [String: Any]? {
        let receipt = try #require(try JSONSerialization.jsonObject(with: Data((detail ?? "").utf8)) as? [String: Any])
        return receipt["blobs_refused"] as? [String: Any]
    }

    @Test(arguments: Backend.allCases)
    func herPurgeDeletesNoFileReachedThroughALinkAndItsReceiptNamesTheLinks(_ backend: Backend) async throws {
        let site = try await install(backend)
        let workspace = site.workspace
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        try expectUntouched(site)
        // Her files the store holds under their own names go as before.
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/avatars/1.jpg"))
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/media/100.jpg"))

        let detail = try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail
        let named = try #require(try refused(detail), "\(detail ?? "")")
        #expect(named["files"] as? Int == 2, "\(named)")
        #expect(named["links"] as? [String] == ["media/ada-dir", "media/ada-out", "uploads/1"], "\(named)")
        #expect(detail?.contains(#""verification":{"#) == true)
    }

    @Test func herExportLeavesOutWhatALinkReachesAndNamesIt() async throws {
        let site = try await install(.sqlite)
        let (ready, archive) = try await AppExportTests().export(site.workspace, "ada")
        #expect(ready.omittedPhotos == 2, "\(ready)")
        let omitted = try #require(archive.manifest["omitted_files"] as? [[String: Any]])
        #expect(Set(omitted.compactMap { $0["blob_key"] as? String }) == ["media/ada-out/secret.jpg", "media/ada-dir/2.jpg"], "\(omitted)")
        #expect(omitted.allSatisfy { ($0["reason"] as? String)?.contains("not a safe path") == true }, "\(omitted)")
        #expect(!archive.files.values.contains("outside the store") && !archive.files.values.contains("file avatars/2.jpg"), "\(archive.files)")
        #expect(archive.files.values.contains("file media/100.jpg"))
        try expectUntouched(site)
    }

    @Test(arguments: Backend.allCases)
    func herPartDeletionDeletesNoFileReachedThroughALink(_ backend: Backend) async throws {
        let site = try await install(backend)
        let workspace = site.workspace
        #expect(try await workspace.run(["delete", "ada", "--part", "posts", "--operator", "sam", "--reason", "test"]).status == 0)
        let worker = try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"])
        #expect(worker.status == 0 && (worker.stdout + worker.stderr).contains("1 succeeded"), "\(worker.stdout) \(worker.stderr)")
        try expectUntouched(site)
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM media WHERE id IN (101, 103)") == ["0"])
        let detail = try await workspace.auditRows(of: "1").first { $0.action == "deletion.part" && $0.outcome == "erased" }?.detail
        let named = try #require(try refused(detail), "\(detail ?? "")")
        #expect(named["files"] as? Int == 2 && named["links"] as? [String] == ["media/ada-dir", "media/ada-out"], "\(named)")
    }
}
