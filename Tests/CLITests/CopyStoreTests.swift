import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import PostgresTesting
import Testing

/// `lifecycle copy-store`: an embedded installation moved up to PostgreSQL and another
/// blob store, in real processes, and the commands carrying on there.
@Suite(.serialized)
struct CopyStoreTests {
    struct Report: Decodable {
        struct Table: Decodable { var table: String; var rows: Int; var checksum: String }
        struct Blobs: Decodable { var blobs: Int; var bytes: Int64; var copied: Int; var already_there: Int }
        var tables: [Table]
        var blobs: Blobs?
        var exports_kept_in: String?
    }

    /// A PostgreSQL database of its own and an empty blob directory to copy into.
    func emptyDestination() async throws -> Workspace {
        var destination = try Workspace()
        let cluster = try await ThrowawayPostgres.shared()
        destination.postgresURL = cluster.url(database: try await cluster.createDatabase(), pool: 2)
        return destination
    }

    func copy(_ source: Workspace, to destination: Workspace, environment: [String: String] = [:]) async throws -> CommandResult {
        try await source.run(["copy-store", "--json", "--to-database", destination.database, "--to-blobs", destination.blobs], environment: environment)
    }

    func sha256(_ path: String) throws -> String { try FileDigest.sha256(ofFile: path).hex }

    /// Every file under the blob store's `accounts/`, relative path → SHA-256.
    func blobHashes(_ workspace: Workspace) throws -> [String: String] {
        let root = workspace.blobs + "/accounts"
        var hashes: [String: String] = [:]
        for case let relative as String in FileManager.default.enumerator(atPath: root)?.allObjects ?? [] {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            hashes[relative] = try sha256(root + "/" + relative)
        }
        return hashes
    }

    @Test func anEmbeddedInstallationMovesUpAndEveryCommandCarriesOnThere() async throws {
        let source = try Workspace()
        try await DeletionLines.importAccounts([
            DeletionLines.account(id: "leaving", entries: 3), DeletionLines.account(id: "staying", entries: 2),
        ], into: source)
        let deleted = try await source.run(["delete", "leaving", "--password-stdin"], stdin: DeletionLines.password + "\n")
        #expect(deleted.status == 0, "\(deleted.stderr)")
        let export = try await ExportCLI.exportNow(source, "staying")
        let link = try #require(export.link)
        #expect(try await source.run(["jobs", "probe", "--count", "2"]).status == 0)
        #expect(try await source.run(["worker", "--once"]).status == 0)
        let sourceJobs = try await source.query("SELECT id, kind, state, unique_key, run_at, attempt FROM \(source.ownTable("jobs")) ORDER BY id")
        let sourceSteps = try await source.int("SELECT COUNT(*) FROM \(source.ownTable("job_steps"))")
        let sourceBlobs = try blobHashes(source)
        // Each account's journal photos; their profile photos (eight bytes, no picture) were
        // refused by the photo jobs the worker ran, and deleted. The export archive is apart.
        let expectedBlobs = 3 + 2
        #expect(sourceBlobs.count == expectedBlobs)
        let archive = try #require(FileManager.default.subpaths(atPath: source.exportArchives)?.first { $0.hasSuffix(".zip") })

        let destination = try await emptyDestination()
        let result = try await copy(source, to: destination)
        #expect(result.status == 0, "\(result.stderr)")
        let report = try JSONDecoder().decode(Report.self, from: Data(result.stdout.utf8))
        #expect(report.tables.first { $0.table == "accounts" }?.rows == 2)
        #expect(report.tables.first { $0.table == "jobs" }?.rows == sourceJobs.count)
        #expect(report.blobs?.blobs == sourceBlobs.count)
        #expect(report.blobs?.copied == sourceBlobs.count)
        // The archive stays beside the SQLite file, and the report says where.
        #expect(report.exports_kept_in == source.exportArchives)
        #expect(FileManager.default.fileExists(atPath: source.exportArchives + "/" + archive))

        // Jobs keep their ids, states, keys and schedule; the blobs are the same bytes.
        #expect(try await destination.query("SELECT id, kind, state, unique_key, run_at, attempt FROM \(destination.ownTable("jobs")) ORDER BY id") == sourceJobs)
        #expect(try await destination.int("SELECT COUNT(*) FROM \(destination.ownTable("job_steps"))") == sourceSteps)
        #expect(try blobHashes(destination) == sourceBlobs)
        #expect(try await destination.state(of: "leaving") == "pendingDeletion")

        // The commands carry on against the new stores: the link still verifies, new jobs get
        // new ids, and the purge the user was promised happens there, blobs and all.
        let shown = try await destination.run(["accounts", "show", "staying"])
        #expect(shown.status == 0, "\(shown.stderr)")
        let keptExports = ExportCLI.key.merging(["LIFECYCLE_EXPORTS": source.exportArchives]) { $1 }
        #expect(try await destination.run(["exports", "verify-link", link], environment: keptExports).status == 0)
        #expect(try await destination.run(["jobs", "probe", "--count", "2"]).status == 0)
        let later = ["LIFECYCLE_NOW": iso(Date().addingTimeInterval(31 * 86_400))]
        let purge = try await destination.run(["purge"], environment: later)
        #expect(purge.status == 0, "\(purge.stderr)")
        #expect(purgeCounts(purge.stdout)?.purged == 1)
        #expect(try await destination.state(of: "leaving") == "purged")
        #expect(destination.blobFiles(of: "leaving").isEmpty)
        #expect(!destination.blobFiles(of: "staying").isEmpty)
        // New jobs were given ids after the copied ones: a worker there runs them beside the old.
        let worker = try await destination.run(["worker", "--once"], environment: later)
        #expect(worker.status == 0, "\(worker.stderr)")
        #expect(try await destination.int("SELECT COUNT(*) FROM \(destination.ownTable("jobs")) WHERE kind = 'runner.probe' AND state = 'succeeded'") == 4)
        let sourceIDs = sourceJobs.compactMap { $0.first ?? nil }.compactMap { Int($0) }
        let newProbes = try await destination.strings("SELECT id FROM \(destination.ownTable("jobs")) WHERE kind = 'runner.probe' ORDER BY id").compactMap { Int($0) }
        #expect(newProbes.count == 4)
        #expect(newProbes.suffix(2).allSatisfy { $0 > (sourceIDs.max() ?? 0) }, "\(newProbes) after \(sourceIDs)")
        #expect(Set(try await destination.strings("SELECT id FROM \(destination.ownTable("jobs"))").compactMap { Int($0) }).isSuperset(of: sourceIDs))
        // The source is left as it was.
        #expect(try await source.state(of: "leaving") == "pendingDeletion")
        #expect(try blobHashes(source) == sourceBlobs)
    }

    @Test func killedWhileCopyingBlobsThenRunAgainFinishesWithEveryBlobVerified() async throws {
        let source = try Workspace()
        let perAccount = 400
        try await DeletionLines.importAccounts(["a", "b", "c"].map { DeletionLines.account(id: $0, entries: perAccount - 1) }, into: source)
        let sourceBlobs = try blobHashes(source)
        #expect(sourceBlobs.count == 3 * perAccount)
        let destination = try await emptyDestination()

        let (process, _, _) = try source.process(["copy-store", "--to-database", destination.database, "--to-blobs", destination.blobs])
        let first = destination.blobs + "/accounts/a/photos", last = destination.blobs + "/accounts/c/photos"
        let reached = await killProcess(process) {
            let started = ((try? FileManager.default.contentsOfDirectory(atPath: first).count) ?? 0) > 0
            let unfinished = ((try? FileManager.default.contentsOfDirectory(atPath: last).count) ?? 0) < perAccount
            return started && unfinished
        }
        if !reached { process.terminate() }
        await process.exited()
        #expect(reached)
        #expect(process.terminationReason == .uncaughtSignal)
        let copiedBeforeKill = try blobHashes(destination).count
        #expect((1..<sourceBlobs.count).contains(copiedBeforeKill))
        // The rows were committed, whole, before the first blob was copied.
        #expect(try await destination.int("SELECT COUNT(*) FROM accounts") == 3)

        let rerun = try await copy(source, to: destination)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let report = try JSONDecoder().decode(Report.self, from: Data(rerun.stdout.utf8))
        #expect(report.blobs?.blobs == sourceBlobs.count)
        #expect((report.blobs?.already_there ?? 0) >= copiedBeforeKill - 1)
        #expect((report.blobs?.copied ?? 0) >= 1)
        #expect(try blobHashes(destination) == sourceBlobs)
        #expect(try await destination.int("SELECT COUNT(*) FROM journal_entries") == 3 * (perAccount - 1))

        // A third run finds everything in place and copies nothing.
        let again = try JSONDecoder().decode(Report.self, from: Data(try await copy(source, to: destination).stdout.utf8))
        #expect(again.blobs?.copied == 0)
        #expect(again.blobs?.already_there == sourceBlobs.count)
    }

    @Test func aDestinationHoldingOtherDataIsRefusedAndLeftAsItWas() async throws {
        let source = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ours", entries: 2)], into: source)
        let destination = try await emptyDestination()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "theirs", entries: 1)], into: destination)
        let jobsBefore = try await destination.query("SELECT id, kind, state FROM \(destination.ownTable("jobs")) ORDER BY id")

        let result = try await copy(source, to: destination)
        #expect(result.status == 65)
        #expect(result.stderr.contains("copy into an empty database"))
        // One transaction: what was inserted before the mismatch was found is gone too.
        #expect(try await destination.query("SELECT id, kind, state FROM \(destination.ownTable("jobs")) ORDER BY id") == jobsBefore)
        #expect(try await destination.strings("SELECT id FROM accounts") == ["theirs"])
        #expect(try blobHashes(destination).keys.allSatisfy { $0.hasPrefix("theirs/") })
    }

    @Test func jobsLeasedToALiveWorkerAreRefusedUntilTheyFinish() async throws {
        let source = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "busy")], into: source)
        let job = try await source.int("SELECT MIN(id) FROM \(source.ownTable("jobs"))")
        try await source.execute(
            "UPDATE \(source.ownTable("jobs")) SET state = 'running', lease_owner = 'elsewhere', lease_expires_at = ? WHERE id = ?",
            [.date(Date().addingTimeInterval(600)), .integer(job)])
        let destination = try await emptyDestination()

        let refused = try await copy(source, to: destination)
        #expect(refused.status == 75)
        #expect(refused.stderr.contains("still leased to a running worker"))
        #expect(try await destination.int("SELECT COUNT(*) FROM accounts") == 0)
        #expect(try blobHashes(destination).isEmpty)

        // Once the lease has run out the job is copied as it stands, for any worker there to rescue.
        let later = try await copy(source, to: destination, environment: ["LIFECYCLE_NOW": iso(Date().addingTimeInterval(900))])
        #expect(later.status == 0, "\(later.stderr)")
        #expect(try await destination.string("SELECT state FROM \(destination.ownTable("jobs")) WHERE id = ?", [.integer(job)]) == "running")
    }

    @Test func badSourcesAndDestinationsHaveTheirExitCodes() async throws {
        let source = try Workspace()
        let destination = try await emptyDestination()
        let missing = try await copy(source, to: destination)
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("no lifecycle installation to copy from"))
        #expect(!FileManager.default.fileExists(atPath: source.database))

        try await DeletionLines.importAccounts([DeletionLines.account(id: "x")], into: source)
        let notAURL = try await source.run(["copy-store", "--to-database", source.root + "/other.sqlite"])
        #expect(notAURL.status == 64)
        #expect(notAURL.stderr.contains("--to-database must be a postgres://"))
        let sameBlobs = try await source.run(["copy-store", "--to-database", destination.database, "--to-blobs", source.blobs])
        #expect(sameBlobs.status == 64)
        var fromPostgres = destination
        fromPostgres.postgresURL = destination.database
        let wrongWay = try await fromPostgres.run(["copy-store", "--to-database", destination.database])
        #expect(wrongWay.status == 64)
        let port = try ThrowawayPostgres.freePortForTests()
        let unreachable = try await source.run(["copy-store", "--to-database", "postgres://lifecycle:secret@127.0.0.1:\(port)/x?sslmode=disable"])
        #expect(unreachable.status == 69)
        #expect(!unreachable.stderr.contains("secret"))
        #expect(try await destination.int("SELECT COUNT(*) FROM accounts") == 0)
    }
}
