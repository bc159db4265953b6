import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// `lifecycle export` and `lifecycle exports …` as an operator or a script uses them.
@Suite(.serialized)
struct ExportCommandTests {
    @Test(arguments: Backend.allCases)
    func askingAgainReturnsTheSameJobAndAfterItCompletesTheRateLimitSaysWhen(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let first = try await workspace.run(["export", "u1", "--json"], environment: ExportCLI.key)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try await workspace.run(["export", "u1@example.com", "--json"], environment: ExportCLI.key)
        #expect(second.status == 0, "\(second.stderr)")
        struct Queued: Decodable { var job_id: Int64; var created: Bool }
        let one = try JSONDecoder().decode(Queued.self, from: Data(first.stdout.utf8))
        let two = try JSONDecoder().decode(Queued.self, from: Data(second.stdout.utf8))
        #expect(one.created && !two.created)
        #expect(one.job_id == two.job_id)
        #expect(second.stderr.contains("already queued: job #\(one.job_id)"))
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = 'export'") == 1)

        // --wait picks up the queued job rather than starting another.
        let ready = try await ExportCLI.exportNow(workspace, "u1")
        #expect(ready.jobID == one.job_id)
        #expect(ready.state == "ready")

        let limited = try await workspace.run(["export", "u1"], environment: ExportCLI.key)
        #expect(limited.status == 75)
        #expect(limited.stderr.contains("the next export is allowed at "))
        let allowedAt = try #require(limited.stderr.components(separatedBy: "allowed at ").last?.prefix(20))
        let next = try #require(ISO8601.parse(String(allowedAt)))
        let expires = try #require(ISO8601.parse(ready.expiresAt ?? ""))
        // One day after completion, which is seven days before the link expires.
        #expect(abs(next.timeIntervalSince(expires) + 6 * 86_400) < 5)
        let later = try await workspace.run(["export", "u1", "--json"], environment: ExportCLI.key.merging(["LIFECYCLE_NOW": iso(next.addingTimeInterval(1))]) { $1 })
        #expect(later.status == 0, "\(later.stderr)")
    }

    @Test(arguments: Backend.allCases)
    func pendingPurgedAndUnknownAccountsGetTheirExitCodes(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let pending = ImportFixture.account(id: "p1").replacingOccurrences(
            of: #""created_at":"2025-01-02T03:04:05Z""#,
            with: #""created_at":"2025-01-02T03:04:05Z","state":"pendingDeletion","purge_after":"2030-01-01T00:00:00Z""#)
        try await ExportCLI.importAccounts(workspace, [pending, ImportFixture.account(id: "gone")])

        let refused = try await workspace.run(["export", "p1", "--wait"], environment: ExportCLI.key)
        #expect(refused.status == 77)
        #expect(refused.stderr.contains("scheduled for deletion"))
        #expect(refused.stderr.contains("--allow-pending --operator NAME"))
        let noOperator = try await workspace.run(["export", "p1", "--allow-pending"], environment: ExportCLI.key)
        #expect(noOperator.status == 64)
        #expect(noOperator.stderr.contains("--allow-pending needs --operator NAME"))
        let operatorRun = try await ExportCLI.exportNow(workspace, "p1", ["--allow-pending", "--operator", "sam"])
        #expect(operatorRun.state == "ready")
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("audit_events")) WHERE account_id = 'p1' AND action = 'export.request' AND actor = 'operator:sam'") == 1)

        try await ExportCLI.setState(workspace, "gone", "purged")
        let purged = try await workspace.run(["export", "gone"], environment: ExportCLI.key)
        #expect(purged.status == 67)
        #expect(purged.stderr.contains("account gone is deleted (purged)"))
        let unknown = try await workspace.run(["export", "nobody"], environment: ExportCLI.key)
        #expect(unknown.status == 67)
        #expect(unknown.stderr.contains("no account with id or email 'nobody'"))
        #expect(try await workspace.run(["exports", "list", "nobody"]).status == 67)
    }

    @Test(arguments: Backend.allCases)
    func linksVerifyUntilTamperedExpiredOrRevoked(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let ready = try await ExportCLI.exportNow(workspace, "u1")
        let link = try #require(ready.link)
        #expect(link.hasPrefix("https://example.invalid/exports/\(ready.exportID)?expires="))

        let valid = try await workspace.run(["exports", "verify-link", link], environment: ExportCLI.key)
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(valid.stdout.hasPrefix("valid: export \(ready.exportID) of account u1"))

        let expiresText = try #require(link.components(separatedBy: "expires=").last?.components(separatedBy: "&").first)
        let longer = link.replacingOccurrences(of: "expires=\(expiresText)", with: "expires=\(Int64(expiresText)! + 86_400)")
        let tamperedExpiry = try await workspace.run(["exports", "verify-link", longer], environment: ExportCLI.key)
        #expect(tamperedExpiry.status == 77)
        #expect(tamperedExpiry.stdout.contains("invalid"))
        let last = link.last!
        let tamperedSignature = String(link.dropLast()) + (last == "a" ? "b" : "a")
        #expect(try await workspace.run(["exports", "verify-link", tamperedSignature], environment: ExportCLI.key).status == 77)
        let otherExport = link.replacingOccurrences(of: ready.exportID, with: "00000000-0000-0000-0000-000000000000")
        #expect(try await workspace.run(["exports", "verify-link", otherExport], environment: ExportCLI.key).status == 77)
        let otherKey = try await workspace.run(["exports", "verify-link", link], environment: ["LIFECYCLE_SIGNING_KEY": "7d35efce2c73911519251d804c99aa624498e120a24998eddd7ff68f792c436a"])
        #expect(otherKey.status == 77)
        #expect(try await workspace.run(["exports", "verify-link", "definitely not a link"], environment: ExportCLI.key).status == 77)

        let afterExpiry = iso(Date(timeIntervalSince1970: TimeInterval(Int64(expiresText)! + 1)))
        let expired = try await workspace.run(["exports", "verify-link", link], environment: ExportCLI.key.merging(["LIFECYCLE_NOW": afterExpiry]) { $1 })
        #expect(expired.status == 65)
        #expect(expired.stdout.hasPrefix("expired"))

        let revoke = try await workspace.run(["exports", "revoke", ready.exportID, "--operator", "sam", "--reason", "ticket 42"])
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let revoked = try await workspace.run(["exports", "verify-link", link], environment: ExportCLI.key)
        #expect(revoked.status == 77)
        #expect(revoked.stdout.contains("was revoked"))
        #expect(!FileManager.default.fileExists(atPath: ready.archivePath ?? "/"))
        let list = try await workspace.run(["exports", "list", "u1"])
        #expect(list.status == 0)
        #expect(list.stdout.contains("\(ready.exportID)  revoked  zip"))
    }

    /// docs/operations.md: an operator action names its operator by `--operator`, else `LIFECYCLE_OPERATOR`.
    @Test(arguments: Backend.allCases)
    func revokeRecordsTheOperatorFromTheEnvironment(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let ready = try await ExportCLI.exportNow(workspace, "u1")
        let revoke = try await workspace.run(["exports", "revoke", ready.exportID, "--reason", "ticket 7"], environment: ["LIFECYCLE_OPERATOR": "lee"])
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let audits = workspace.ownTable("audit_events")
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(audits) WHERE action = 'export.revoke' AND actor = 'operator:lee'") == 1)
    }

    @Test(arguments: Backend.allCases)
    func withoutASigningKeyTheExportIsRefusedAndTheListShowsExpiry(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let refused = try await workspace.run(["export", "u1", "--wait"])
        #expect(refused.status == 69)
        #expect(refused.stderr.contains("no signing key for download links"))
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = 'export'") == 0)

        let keyFile = workspace.root + "/signing.key"
        _ = FileManager.default.createFile(atPath: keyFile, contents: Data("9f2c71e04ab35d86c1e7f0a24b9d38e6\n".utf8), attributes: [.posixPermissions: 0o644])
        let loose = try await workspace.run(["export", "u1", "--signing-key-file", keyFile])
        #expect(loose.status == 69)
        #expect(loose.stderr.contains("chmod 600"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)
        let done = try await workspace.run(["export", "u1", "--wait", "--signing-key-file", keyFile])
        #expect(done.status == 0, "\(done.stderr)")
        #expect(done.stdout.contains("  link:    https://example.invalid/exports/"))
        #expect(done.stdout.contains("  notification: outbox #1 pending for u1@example.com"))

        let list = try await workspace.run(["exports", "list", "u1@example.com"])
        #expect(list.status == 0)
        #expect(list.stdout.contains("  ready  zip  "))
        #expect(list.stdout.contains("  expires "))
        #expect(list.stdout.contains("notification: outbox #1 pending"))
    }

    /// The key passes the command's own check, then becomes unusable (readable by others)
    /// while its worker holds the job at the test barrier: the job is handed back not ready,
    /// and `--wait` stops with 69 and the reason instead of claiming it again for ever.
    @Test(arguments: Backend.allCases)
    func aWaitWhoseWorkerCannotRunTheJobStopsInsteadOfClaimingItForEver(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let keyFile = workspace.root + "/signing.key"
        _ = FileManager.default.createFile(atPath: keyFile, contents: Data("9f2c71e04ab35d86c1e7f0a24b9d38e6\n".utf8), attributes: [.posixPermissions: 0o600])
        let barrier = try OverlapBarrier(in: workspace)
        let (process, _, stderr) = try workspace.process(["export", "u1", "--wait", "--signing-key-file", keyFile], environment: barrier.environment)
        let claimed = try await eventually(timeout: 60) { !barrier.arrived.isEmpty || !process.isRunning }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile)
        _ = FileManager.default.createFile(atPath: barrier.directory + "/release", contents: nil)
        #expect(claimed && !barrier.arrived.isEmpty, "the export's worker never held the job")
        let ended = try await eventually(timeout: 30) { !process.isRunning }
        if !ended { process.terminate() }
        await process.exited()
        #expect(ended, "export --wait was still claiming a job it cannot run after 30 s")
        let message = (try? String(contentsOfFile: stderr, encoding: .utf8)) ?? ""
        #expect(ended && process.terminationStatus == 69, "\(message)")
        #expect(message.contains("not run, handed back") && message.contains("chmod 600"), "\(message)")
        let jobs = workspace.ownTable("jobs")
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(jobs) WHERE kind = 'export' AND state = 'queued' AND attempt = 0") == 1)
    }

    @Test(arguments: Backend.allCases)
    func aMissingPhotoFailsTheExportNamingItUnlessSkipped(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        try FileManager.default.removeItem(atPath: workspace.blobs + "/accounts/u1/photos/u1-p1")
        let failed = try await workspace.run(["export", "u1", "--wait"], environment: ExportCLI.key)
        #expect(failed.status == 65)
        #expect(failed.stderr.contains("photos.blob_key names accounts/u1/photos/u1-p1, which is not in the blob store"), "\(failed.stderr)")
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("outbox"))") == 0)

        let skipped = try await ExportCLI.exportNow(workspace, "u1", ["--skip-missing-photos"])
        #expect(skipped.omittedPhotos == 1)
        let report = try await ExportCLI.checkWithPython(try #require(skipped.archivePath), format: "zip")
        #expect(!report.names.contains { $0.contains("u1-p1") })
    }

    @Test(arguments: Backend.allCases)
    func theExpiryScheduleDeletesOldArchivesWhenAWorkerRuns(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let ready = try await ExportCLI.exportNow(workspace, "u1")
        let expires = try #require(ISO8601.parse(ready.expiresAt ?? ""))
        let path = try #require(ready.archivePath)
        // A worker an hour past the expiry finds the hourly slot due and runs the expiry job.
        let environment = ExportCLI.key.merging(["LIFECYCLE_NOW": iso(expires.addingTimeInterval(3_600))]) { $1 }
        let worker = try await workspace.run(["worker", "--once", "--kind", "export-expiry"], environment: environment)
        #expect(worker.status == 0, "\(worker.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try await ExportCLI.count(workspace, "SELECT COUNT(*) FROM \(workspace.ownTable("exports")) WHERE state = 'expired'") == 1)
        let again = try await workspace.run(["worker", "--once", "--kind", "export-expiry"], environment: environment)
        #expect(again.status == 0)
        let list = try await workspace.run(["exports", "list", "u1"])
        #expect(list.stdout.contains("  expired  zip"))
    }
}
