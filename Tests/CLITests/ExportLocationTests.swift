import Foundation
import JobRunner
import Lifecycle
import Testing

/// Export archives live apart from the blob store, which an app may serve to anyone
/// (Django's `MEDIA_ROOT` under `MEDIA_URL`): beside a SQLite file by default, wherever
/// `--exports` / `LIFECYCLE_EXPORTS` says otherwise; private; and the link, the expiry and
/// the purge find them there, as they still find archives an earlier release left in the blobs.
@Suite(.serialized)
struct ExportLocationTests {
    /// SQLite by its default folder, PostgreSQL through the variable.
    static func location(_ workspace: Workspace) -> (folder: String, environment: [String: String]) {
        guard workspace.postgresURL != nil else { return (workspace.database + ".exports", [:]) }
        return (workspace.root + "/private-exports", ["LIFECYCLE_EXPORTS": workspace.root + "/private-exports"])
    }

    /// Every regular file under the blob directory.
    static func blobFiles(_ workspace: Workspace) -> [String] {
        let all = FileManager.default.enumerator(atPath: workspace.blobs)?.allObjects.compactMap { $0 as? String } ?? []
        return all.filter { path in
            (try? FileManager.default.attributesOfItem(atPath: workspace.blobs + "/" + path)[.type] as? FileAttributeType) == .typeRegular
        }
    }

    static func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test(arguments: Backend.allCases)
    func anArchiveLivesApartFromTheBlobsPrivatelyAndItsLinkExpiryAndPurgeFindItThere(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let (folder, environment) = Self.location(workspace)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", entries: 2)], into: workspace)
        let ready = try await ExportCLI.exportNow(workspace, "ada", environment: environment)
        let path = try #require(ready.archivePath)
        #expect(path.hasPrefix(folder + "/"), "\(path)")
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(Self.blobFiles(workspace).filter { $0.hasSuffix(".zip") || $0.contains("exports") }.isEmpty, "\(Self.blobFiles(workspace))")
        // Private: the file and every folder from the export location down to it.
        #expect(try Self.mode(path) & 0o777 == 0o600)
        var directory = (path as NSString).deletingLastPathComponent
        while directory.count >= folder.count {
            #expect(try Self.mode(directory) & 0o777 == 0o700, "\(directory)")
            directory = (directory as NSString).deletingLastPathComponent
        }

        // The link verifies and downloads the archive from there.
        let link = try #require(ready.link)
        let verified = try await workspace.run(["exports", "verify-link", link], environment: ExportCLI.key.merging(environment) { $1 })
        #expect(verified.status == 0, "\(verified.stderr)")
        let server = try await ServeTests.Server.start(workspace, environment: ExportCLI.key.merging(environment) { $1 })
        let answer = try await ServeTests.request(try ServeTests.local(link, on: server))
        #expect(await server.stop() == 0)
        #expect(answer.status == 200, "\(server.diagnosis)")
        #expect(answer.body == FileManager.default.contents(atPath: path))

        // The expiry job deletes it there.
        let expires = try #require(ISO8601.parse(ready.expiresAt ?? ""))
        let later = environment.merging(ExportCLI.key) { $1 }.merging(["LIFECYCLE_NOW": iso(expires.addingTimeInterval(3_600))]) { $1 }
        let expiry = try await workspace.run(["worker", "--once", "--kind", "export-expiry"], environment: later)
        #expect(expiry.status == 0, "\(expiry.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path))

        // The account's purge deletes its archives there (a week on, past the rate limit).
        let second = try await ExportCLI.exportNow(workspace, "ada", environment: later)
        let secondPath = try #require(second.archivePath)
        #expect(FileManager.default.fileExists(atPath: secondPath))
        let deletion = try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "ticket 7", "--immediately"], environment: later)
        #expect(deletion.status == 0, "\(deletion.stderr)")
        // Each process's clock starts again at LIFECYCLE_NOW: the purge runs a minute on.
        let purgeTime = later.merging(["LIFECYCLE_NOW": iso(expires.addingTimeInterval(3_660))]) { $1 }
        let purge = try await workspace.run(["purge"], environment: purgeTime)
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout)\(purge.stderr)")
        #expect(!FileManager.default.fileExists(atPath: secondPath))
    }

    /// An archive an earlier release wrote into the blob store keeps working: its link
    /// downloads it from there, and the expiry job deletes it there.
    @Test(arguments: Backend.allCases)
    func anArchiveLeftInTheBlobsByAnEarlierReleaseStillDownloadsAndExpires(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let (_, environment) = Self.location(workspace)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", entries: 2)], into: workspace)
        let ready = try await ExportCLI.exportNow(workspace, "ada", environment: environment)
        let key = try #require(ready.archiveKey)
        let legacy = workspace.blobs + "/" + key
        try FileManager.default.createDirectory(atPath: (legacy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: try #require(ready.archivePath), toPath: legacy)

        let link = try #require(ready.link)
        let server = try await ServeTests.Server.start(workspace, environment: ExportCLI.key.merging(environment) { $1 })
        let answer = try await ServeTests.request(try ServeTests.local(link, on: server))
        #expect(await server.stop() == 0)
        #expect(answer.status == 200, "\(server.diagnosis)")
        #expect(answer.body == FileManager.default.contents(atPath: legacy))

        let expires = try #require(ISO8601.parse(ready.expiresAt ?? ""))
        let later = environment.merging(ExportCLI.key) { $1 }.merging(["LIFECYCLE_NOW": iso(expires.addingTimeInterval(3_600))]) { $1 }
        let expiry = try await workspace.run(["worker", "--once", "--kind", "export-expiry"], environment: later)
        #expect(expiry.status == 0, "\(expiry.stderr)")
        #expect(!FileManager.default.fileExists(atPath: legacy))
    }

    /// The Django walk-through's setting, `LIFECYCLE_BLOBS` at `MEDIA_ROOT`: the export leaves
    /// the media folder as it was, so nothing of it is reachable under `MEDIA_URL`.
    @Test(arguments: Backend.allCases)
    func anExportOnTheDjangoWalkthroughIsNotReachableUnderMediaURL(_ backend: Backend) async throws {
        let (workspace, _) = try await DjangoSiteErasureTests().site(backend, map: try DjangoSiteErasureTests.map)
        let (folder, environment) = Self.location(workspace)
        let media = Set(Self.blobFiles(workspace))
        #expect(!media.isEmpty)
        let ready = try await ExportCLI.exportNow(workspace, "ada", environment: environment)
        let key = try #require(ready.archiveKey)
        #expect(try #require(ready.archivePath).hasPrefix(folder + "/"))
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/" + key))
        #expect(Set(Self.blobFiles(workspace)) == media, "\(Set(Self.blobFiles(workspace)).subtracting(media))")
    }

    /// The option names the location too; one equal to the blob directory or inside it is a
    /// usage error before anything is opened or created.
    @Test(arguments: Backend.allCases)
    func anExportLocationInsideTheBlobsIsRefusedAndTheOptionIsHonoured(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", entries: 1)], into: workspace)
        for inside in [workspace.blobs, workspace.blobs + "/private", workspace.blobs + "/../blobs/exports"] {
            for (arguments, environment) in [(["--exports", inside], [:]), ([], ["LIFECYCLE_EXPORTS": inside])] {
                let refused = try await workspace.run(["export", "ada", "--wait"] + arguments, environment: ExportCLI.key.merging(environment) { $1 })
                #expect(refused.status == 64, "\(inside): \(refused.stderr)")
                #expect(refused.stderr.contains("inside the blob store"), "\(refused.stderr)")
            }
        }
        #expect(Self.blobFiles(workspace).filter { $0.hasSuffix(".zip") }.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/private"))

        let chosen = workspace.root + "/chosen-exports"
        let ready = try await ExportCLI.exportNow(workspace, "ada", ["--exports", chosen])
        #expect(try #require(ready.archivePath).hasPrefix(chosen + "/"))
    }
}
