import ChildProcesses
import Foundation
import Lifecycle
import Testing

/// The walk-throughs of docs/walkthroughs.md (your own database: Django, Supabase), each
/// block run by bash exactly as written there, from the repository's root, then the end
/// state looked at in the database and the blob store: a newcomer who types them gets a
/// verified purge.
@Suite(.serialized)
struct DocsWalkthroughTests {
    let app = AppPurgeTests()

    /// The page that holds the walk-throughs.
    static let page = "docs/walkthroughs.md"

    /// The `sh` block after `<!-- walkthrough: NAME -->` in ``page``.
    static func block(_ name: String) throws -> String {
        try RunbookWalkthroughTests.block(page, name)
    }

    struct Run {
        var status: Int32
        var output: String
        /// The run's own temporary folder (its TMPDIR), where `mktemp -d` made its work.
        var temporary: String
    }

    /// bash -euo pipefail, each command echoed (-x) so a failure names its line; no
    /// LIFECYCLE_* setting of the test's own environment leaks in.
    func run(_ script: String, environment: [String: String] = [:]) async throws -> Run {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("walkthrough-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-euxo", "pipefail", "-c", script]
        process.currentDirectoryURL = URL(fileURLWithPath: repositoryRoot)
        var inherited = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LIFECYCLE_") }
        inherited["B"] = lifecycleBinary
        inherited["TMPDIR"] = temporary
        process.environment = inherited.merging(environment) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = await onThreadOfItsOwn { output.fileHandleForReading.readDataToEndOfFile() }
        await process.exited()
        return Run(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self), temporary: temporary)
    }

    @Test
    func theDjangoWalkthroughEndsInAVerifiedPurge() async throws {
        let walk = try await run(try Self.block("django"))
        defer { try? FileManager.default.removeItem(atPath: walk.temporary) }
        #expect(walk.status == 0, "\(walk.output)")
        #expect(walk.output.contains("1 session(s) signed out"), "\(walk.output)")
        #expect(walk.output.contains("purge: 1 purged, 0 skipped, 0 failed"), "\(walk.output)")
        #expect(walk.output.contains(#""result":"verified","rows_left":0"#), "\(walk.output)")

        // What the walk-through made, looked at directly: ada is gone, rows and files.
        let work = try #require(try FileManager.default.contentsOfDirectory(atPath: walk.temporary).first { $0.hasPrefix("tmp.") })
        let site = walk.temporary + "/" + work
        let seeded = try JSONDecoder().decode(DjangoSiteErasureTests.Seeded.self, from: Data(contentsOf: URL(fileURLWithPath: site + "/seeded.json")))
        let users = try await runTool("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", site + "/site.sqlite", "SELECT group_concat(username) FROM (SELECT username FROM auth_user ORDER BY id)"])
        #expect(users == "bob,cy")
        let messages = try await runTool("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", site + "/site.sqlite", "SELECT COUNT(*) FROM blog_message"])
        #expect(messages == "1")
        let present = { (name: String) in FileManager.default.fileExists(atPath: site + "/media/" + name) }
        let adas = seeded.files.filter { $0.owner == "ada" }
        #expect(!adas.isEmpty && !adas.contains { present($0.name) }, "\(adas)")
        #expect(seeded.files.filter { $0.owner == "cy" }.allSatisfy { present($0.name) })
    }

    @Test
    func theSupabaseWalkthroughEndsInAVerifiedPurge() async throws {
        let workspace = try await app.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + SupabaseAuthErasureTests.authSeed
            + "\n" + SupabaseAuthErasureTests.storageSeed)
        try await AppPurgeTests.storeSupabaseFiles(workspace)
        let walk = try await run(try Self.block("supabase"), environment: ["DATABASE_URL": workspace.database, "BLOBS": workspace.blobs])
        defer { try? FileManager.default.removeItem(atPath: walk.temporary) }
        #expect(walk.status == 0, "\(walk.output)")
        #expect(walk.output.contains("purge: 1 purged, 0 skipped, 0 failed"), "\(walk.output)")
        #expect(walk.output.contains(#""result":"verified","rows_left":0"#), "\(walk.output)")

        let ada = SupabaseAuthErasureTests.ada
        for query in SupabaseAuthErasureTests.adasAuthRows {
            #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM \(query)") == ["0"], "\(query)")
        }
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM journal_entries WHERE user_id = '\(ada)'") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM storage.objects") == ["1"])
        #expect(app.files(workspace) == ["avatars/bob.jpg", "journal/bob/ride.jpg"])
    }
}
