import Foundation
import JobRunner
import Lifecycle
import Testing

/// `blob_prefixes:`: folders of the blob store that are the user's alone. After her rows are
/// erased (and the residue scan found nothing), the purge lists them and deletes every file
/// no kept row names, so an upload no row of the app named does not outlive its record;
/// another account's folder, a file a kept row names, and everything before the scan passed
/// stay as they were.
@Suite(.serialized)
struct BlobPrefixTests {
    let app = AppPurgeTests()

    /// Ada is account 1; `uploads/10/` is another account's folder that begins like hers.
    static let uploads: [String: String] = [
        "uploads/1/Été à Paris.jpg": "ada's upload no row names",
        "uploads/1/old avatar.png": "ada's replaced avatar",
        "uploads/1/shared/brief.pdf": "a file bob's row names",
        "uploads/2/ride.jpg": "bob's",
        "uploads/10/x.jpg": "account 10's",
    ]

    func install(_ backend: Backend, extraDDL: String = "", extraRows: String = "") async throws -> Workspace {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.map = schema.map.replacingOccurrences(of: "  blobs: [avatar_key]\n", with: "  blobs: [avatar_key]\n  blob_prefixes: [\"uploads/{key}/\"]\n")
        #expect(schema.map.contains("blob_prefixes"))
        schema.ddl += "\n" + extraDDL + "\n"
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, AppPurgeTests.socialSeed + "\nUPDATE members SET avatar_key = 'uploads/1/shared/brief.pdf' WHERE id = 3;\n" + extraRows)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in AppPurgeTests.socialFiles { _ = try await blobs.put(key: key, data: Data("file \(key)".utf8)) }
        for (key, content) in Self.uploads { _ = try await blobs.put(key: key, data: Data(content.utf8)) }
        return workspace
    }

    func contents(_ workspace: Workspace) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for file in app.files(workspace) { result[file] = try Data(contentsOf: URL(fileURLWithPath: workspace.blobs + "/" + file)) }
        return result
    }

    func receipt(_ workspace: Workspace) async throws -> String? {
        try await workspace.auditRows(of: "1").first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail
    }

    @Test(arguments: Backend.allCases)
    func anUploadNoRowNamesUnderHerFolderGoesAndEveryOtherFolderStays(_ backend: Backend) async throws {
        let workspace = try await install(backend)
        let before = try contents(workspace)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")

        let after = try contents(workspace)
        let gone = Set(before.keys).subtracting(after.keys)
        // Her rows' files as before, and the two uploads only her folder held.
        #expect(gone == ["avatars/1.jpg", "media/100.jpg", "media/101.jpg", "media/100-s.jpg", "uploads/1/Été à Paris.jpg", "uploads/1/old avatar.png"], "\(gone.sorted())")
        // What stays is byte for byte: bob's and account 10's folders, and the file in hers a kept row names.
        for (key, data) in after { #expect(before[key] == data, "\(key)") }
        #expect(after["uploads/1/shared/brief.pdf"] != nil && after["uploads/10/x.jpg"] != nil && after["uploads/2/ride.jpg"] != nil)

        let detail = try #require(try await receipt(workspace))
        #expect(detail.contains(#""blobs":6"#) && detail.contains(#""blobs_unnamed":3"#) && detail.contains(#""blobs_kept":1"#), "\(detail)")
    }

    @Test(arguments: Backend.allCases)
    func filesUnderHerFolderStayWhileTheResidueScanStopsThePurge(_ backend: Backend) async throws {
        let workspace = try await install(
            backend, extraDDL: "CREATE TABLE mail_log (id integer PRIMARY KEY, recipient text);",
            extraRows: "INSERT INTO mail_log (id, recipient) VALUES (1, 'ada@example.com');")
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let before = try contents(workspace)
        let stopped = try await workspace.run(["purge"])
        #expect(stopped.status == 77, "\(stopped.stdout) \(stopped.stderr)")
        #expect(try contents(workspace) == before)

        // Allowed with a reason and retried: the purge ends, and her folder is emptied only now.
        let map = workspace.jobsDirectory + "/account-data.yaml"
        try (try String(contentsOfFile: map, encoding: .utf8) + "\nresidue:\n  allow: [mail_log.recipient]\n  reason: the mail provider's log\n")
            .write(toFile: map, atomically: true, encoding: .utf8)
        let said = stopped.stdout + stopped.stderr
        let job = try #require(said.firstMatch(of: /purge job #(\d+) is dead/)?.output.1).description
        #expect(try await workspace.run(["jobs", "retry", job]).status == 0)
        let purge = try await workspace.run(["purge"], environment: ErasureGuaranteeTests.later)
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        let after = try contents(workspace)
        #expect(after["uploads/1/Été à Paris.jpg"] == nil && after["uploads/1/old avatar.png"] == nil && after["uploads/10/x.jpg"] != nil)
    }

    @Test
    func aPrefixThatIsNotOneFolderOfTheUserIsRefusedSayingWhy() throws {
        let social = try DataMapCheckTests.AppSchema.social.map
        for (prefix, why) in [
            ("uploads/{key}", "must end with '/'"), ("uploads/", "{key} exactly once"), ("{key}/{key}/", "{key} exactly once"),
            ("../{key}/", "'..' segment"), ("/srv/{key}/", "starts with '/'"), ("uploads//{key}/", "empty segment"),
            ("accounts/{key}/", "lifecycle's own folder"), ("uploads/{id}-{key}/", "no placeholder but {key}"),
        ] {
            let map = social.replacingOccurrences(of: "  blobs: [avatar_key]\n", with: "  blobs: [avatar_key]\n  blob_prefixes: [\"\(prefix)\"]\n")
            #expect {
                try DataMap(yaml: map, source: "map.yaml")
            } throws: { error in
                "\(error)".contains(why) && "\(error)".contains(prefix) && "\(error)".contains("map.yaml:")
            }
        }
        let good = social.replacingOccurrences(of: "  blobs: [avatar_key]\n", with: "  blobs: [avatar_key]\n  blob_prefixes: [\"avatars/{key}/\", \"u-{key}/docs/\"]\n")
        let prefixes = try DataMap(yaml: good, source: "map.yaml").subject.blobPrefixes
        #expect(try prefixes.map { try $0.resolved(key: "0000000a-0000-4000-8000-000000000001") }
                == ["avatars/0000000a-0000-4000-8000-000000000001/", "u-0000000a-0000-4000-8000-000000000001/docs/"])
        // A key that is not one folder would reach into another account's, or out of the prefix.
        for key in ["a/b", "..", ""] { #expect(throws: LifecycleError.self) { try prefixes[0].resolved(key: key) } }
    }
}
