import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// A `photos normalize --all` process SIGKILLed in the middle of a batch, then run
/// again: every photo ends normalised exactly once and no upload outlives its photo.
@Suite(.serialized)
struct PhotoCrashTests {
    @Test(arguments: Backend.allCases)
    func sigkillMidBatchThenRerunNormalisesEveryPhotoOnceAndLeavesNoUpload(_ backend: Backend) async throws {
        let count = 40
        let workspace = try await Workspace.make(backend)
        // 4000×3000 JPEGs carrying GPS tags: about 0.1 s of work each, so the batch
        // takes long enough to be interrupted in the middle.
        var lines: [String] = []
        for index in 0..<count { lines.append(ImportFixture.account(id: "u\(index)", profilePhoto: "photos/big.jpg")) }
        let fixture = try ImportFixture(lines: lines)
        try await photoTool("vips", "resize", repositoryRoot + "/Jobs/demo/photos/run.jpg", fixture.directory + "/photos/big.jpg", "2.5")
        #expect(try await workspace.run(["accounts", "import", fixture.path]).status == 0)
        @Sendable func normalizedCount() throws -> Int {
            try workspace.integerNow("SELECT COUNT(*) FROM accounts WHERE profile_photo_key LIKE 'accounts/%/v2-s1024-q85-%.jpg'")
        }

        @Sendable func claimedCount() throws -> Int {
            try workspace.integerNow("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = '\(PhotoJobs.normalizeColumnKind)' AND state = 'running'")
        }

        let (process, _, _) = try workspace.process(["photos", "normalize", "--all"])
        // Killed while it holds jobs: a kill between a batch's last commit and the next claim
        // would catch none in flight (each holds ~0.1 s of work, a claim a few milliseconds).
        #expect(try pollHoldingThisThread(timeout: 120) { try normalizedCount() >= 3 && claimedCount() > 0 })
        kill(process.processIdentifier, SIGKILL)
        await process.exited()
        #expect(process.terminationReason == .uncaughtSignal)
        let atKill = try await onThreadOfItsOwn { try normalizedCount() }
        #expect(atKill < count, "the batch finished before the kill; nothing was interrupted")

        // A finished photo never keeps its upload, even when the process died right after.
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        let succeeded = try await workspace.query(
            "SELECT unique_key FROM \(workspace.ownTable("jobs")) WHERE kind = ? AND state = 'succeeded'", [.text(PhotoJobs.normalizeColumnKind)]
        ).compactMap { $0.first ?? nil }
        #expect(!succeeded.isEmpty)
        for key in succeeded {
            #expect(try await blobs.info(key: String(key.dropFirst("photo:".count))) == nil, "\(key)")
        }

        // Rerun once the dead process's leases have run out.
        let later = iso(Date().addingTimeInterval(600))
        let rerun = try await workspace.run(["photos", "normalize", "--all"], environment: ["LIFECYCLE_NOW": later])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(rerun.stdout.contains("normalised \(count - atKill), rejected 0"), "\(rerun.stdout)")

        let photos = try await workspace.profilePhotos()
        #expect(photos.count == count)
        for (account, photo) in photos {
            #expect(photo.state == "normalized")
            // Exactly one file left in her folder, the rendering her column names; the upload is gone.
            let files = try await blobs.list(prefix: "accounts/\(account)/", after: nil, limit: 10).map(\.key).filter { !$0.contains("/photos/") }
            #expect(files == [photo.file])
        }
        // One job per photo, each switched exactly once; the interrupted ones were resumed, not redone.
        let perJob = try await workspace.query("""
            SELECT j.unique_key, j.state, j.attempt,
                   (SELECT COUNT(*) FROM \(workspace.ownTable("job_steps")) s WHERE s.job_id = j.id AND s.step = 'switch')
            FROM \(workspace.ownTable("jobs")) j WHERE j.kind = ?
            """, [.text(PhotoJobs.normalizeColumnKind)])
        #expect(perJob.count == count)
        #expect(Set(perJob.map { $0[0] }).count == count)
        #expect(perJob.allSatisfy { $0[1] == "succeeded" && $0[3] == "1" })
        #expect(perJob.contains { $0[2] == "2" }, "no job was caught in flight by the kill")

        try await expectCleanSquareJPEG(atPath: try blobs.path(for: try #require(photos["u0"]).file), side: 1024)
        let again = try await workspace.run(["photos", "normalize", "--all"], environment: ["LIFECYCLE_NOW": later])
        #expect(again.stdout.contains("nothing to normalise"))
    }
}

/// Like `eventually`, but checks from this thread instead of resuming after a
/// `Task.sleep`: when other suites keep the cooperative pool's few threads busy,
/// a resumed task can be late by seconds and miss the window the kill must land in.
private func pollHoldingThisThread(timeout: TimeInterval, _ condition: () throws -> Bool) throws -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    return false
}
