import ChildProcesses
import Foundation
import GRDB
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

@Suite(.serialized)
struct ExportCrashTests {
    /// A copy of the shipped Jobs directory whose export policy caps the archive write
    /// rate, so the archive is being written for seconds: long enough to kill the
    /// process in the middle of it without racing the clock.
    func throttledJobsDirectory() throws -> (directory: String, policy: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID().uuidString)").path
        // Resolved first: copying a symlinked Jobs folder would copy the link, and the
        // edit below would change the shipped policy.
        let shipped = URL(fileURLWithPath: repositoryRoot + "/Jobs").resolvingSymlinksInPath().path
        try FileManager.default.copyItem(atPath: shipped, toPath: directory)
        let linked = try? FileManager.default.destinationOfSymbolicLink(atPath: directory)
        #expect(linked == nil)
        let policy = directory + "/policies/export.yaml"
        let text = try String(contentsOfFile: policy, encoding: .utf8)
        #expect(text.contains("throttle_mb_per_second: 0"))
        try text.replacingOccurrences(of: "throttle_mb_per_second: 0", with: "throttle_mb_per_second: 1")
            .write(toFile: policy, atomically: true, encoding: .utf8)
        return (directory, policy)
    }

    static func scratchArchives(_ workspace: Workspace) -> [(path: String, size: Int64)] {
        let scratch = workspace.exportArchives + "/.incoming/exports"
        let files = FileManager.default.enumerator(atPath: scratch)?.allObjects.compactMap { $0 as? String } ?? []
        return files.filter { $0.hasSuffix("/archive.zip") }.map { relative in
            let path = scratch + "/" + relative
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            return (path, size)
        }
    }

    @Test(arguments: Backend.allCases)
    func killedWhileWritingTheArchiveThenRunAgainLeavesOneArchiveAndOneNotification(_ backend: Backend) async throws {
        let jobs = try throttledJobsDirectory()
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs.directory)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "u1", entryPhoto: "photos/big.jpg")])
        // An 8 MB "photo" (JPEG magic, then random bytes): at 1 MB/s, eight seconds of writing.
        var big = Data([0xFF, 0xD8, 0xFF, 0xE0])
        big.append(try #require(FileHandle(forReadingAtPath: "/dev/urandom")).readData(ofLength: 8 << 20))
        try big.write(to: URL(fileURLWithPath: fixture.directory + "/photos/big.jpg"))
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        #expect(imported.status == 0, "\(imported.stderr)")

        let (process, _, err) = try workspace.process(["export", "u1", "--wait"], environment: ExportCLI.key)
        // Watched from a thread of its own: with other suites running, the test's own
        // task may not be scheduled in time to see the archive half-written.
        let watcher = KillWhen(process.processIdentifier) { [workspace] in
            Self.scratchArchives(workspace).contains { $0.size > 1 << 20 }
        }
        await process.exited()
        #expect(watcher.fired, "the archive never reached 1 MB: \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
        #expect(process.terminationReason == .uncaughtSignal)

        // Killed inside write-archive: a half-written scratch file, nothing published, nobody told.
        let store = try await workspace.jobStore()
        let job = try #require(try await store.jobs(matching: JobFilter(kinds: [ExportJobs.exportKind])).first)
        #expect(job.state == .running)
        #expect(try await store.steps(of: job.id).map(\.step) == ["snapshot"])
        #expect(!Self.scratchArchives(workspace).isEmpty)
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("outbox"))") == 0)
        let exportsFolder = workspace.exportArchives + "/accounts/u1/exports"
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: exportsFolder)) ?? []).isEmpty)

        // Asked again once the dead worker's lease has run out: the same job resumes
        // (unthrottled: the crash already happened).
        let policy = try String(contentsOfFile: jobs.policy, encoding: .utf8)
        try policy.replacingOccurrences(of: "throttle_mb_per_second: 1", with: "throttle_mb_per_second: 0")
            .write(toFile: jobs.policy, atomically: true, encoding: .utf8)
        let leaseEnd = try #require(job.leaseExpiresAt)
        let rerun = try await workspace.run(
            ["export", "u1", "--wait", "--json"], environment: ExportCLI.key.merging(["LIFECYCLE_NOW": iso(leaseEnd.addingTimeInterval(5))]) { $1 })
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let ready = try JSONDecoder().decode(ExportCLI.Ready.self, from: Data(rerun.stdout.utf8))
        #expect(ready.jobID == job.id)
        #expect(try await store.job(id: job.id)?.attempt == 2)

        // One archive, no leftovers, one export row, one notification.
        #expect(try FileManager.default.contentsOfDirectory(atPath: exportsFolder) == ["\(ready.exportID).zip"])
        #expect(Self.scratchArchives(workspace).isEmpty)
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("exports"))") == 1)
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("outbox"))") == 1)
        let archive = try #require(ready.archivePath)
        let unzip = try await ExportCLI.tool("/usr/bin/unzip", ["-t", archive])
        #expect(unzip.status == 0, "\(unzip.output)")
        let report = try await ExportCLI.checkWithPython(archive, format: "zip")
        #expect(report.names.contains("\(report.root)/files/photos/2025/03/01/u1-p1.jpg"))
    }
}

/// Polls a condition on a thread of its own, every 20 ms for up to two minutes, and
/// SIGKILLs the process the moment it holds.
final class KillWhen: @unchecked Sendable {
    private let lock = NSLock()
    private var didFire = false
    var fired: Bool { lock.withLock { didFire } }

    init(_ pid: Int32, condition: @escaping @Sendable () -> Bool) {
        let thread = Thread { [self] in
            let deadline = Date().addingTimeInterval(120)
            while Date() < deadline {
                if condition() {
                    lock.withLock { didFire = true }
                    kill(pid, SIGKILL)
                    return
                }
                // Stop watching once the process is gone.
                if kill(pid, 0) != 0 { return }
                usleep(20_000)
            }
        }
        thread.start()
    }
}
