import Foundation
import LifecycleRuntime

extension DemoTour {
    /// The password behind the demo accounts' bcrypt hash (DemoCommand.swift).
    private static let demoPassword = "correct horse battery staple"

    func deletionChapter() async throws {
        heading("Deletion: password check, 30-day grace, restore, purge")
        let deletion = try DeletionService(services: services, directory: try await services.directory())
        let states = try await services.store.read { tx in
            (try tx.account(id: "grace")?.state, try tx.account(id: "linus")?.state)
        }
        guard states.0 == .active, states.1 == .active else {
            say("grace is \(states.0?.rawValue ?? "missing"), linus is \(states.1?.rawValue ?? "missing") from an earlier run; start from a fresh database to see this chapter")
            return
        }

        do {
            _ = try await deletion.requestDeletion(account: "linus", password: "correct horse battery stapler")
        } catch let error as LifecycleError where error.category == .permissionDenied {
            say("delete linus, wrong password   → \"\(error.message)\" (exit 77; audited, and \(deletion.policy.lockoutFailures) in \(Int(deletion.policy.lockoutWindow / 60)) min lock deletion)")
        }

        let request = try await deletion.requestDeletion(account: "grace", password: Self.demoPassword)
        say("delete grace, right password   → \"\(request.message)\"")
        say("    state \(request.state.rawValue), purge on or after \(request.purgeAfter.map { ISO8601.format($0) } ?? "-"), \(request.sessionsRevoked) session(s) signed out, purge job #\(request.purgeJobID ?? 0) waits until then")
        let restored = try await deletion.restore(account: "grace", actor: "sign-in")
        say("grace signs in again           → restored; purge job #\(restored.cancelledJobID ?? 0) cancelled in the same transaction; sessions stay signed out")

        let linus = try await deletion.requestDeletion(account: "linus", password: Self.demoPassword)
        guard let purgeAfter = linus.purgeAfter else { return }
        let blobsBefore = try await services.blobs.list(prefix: BlobKey.accountPrefix("linus"), after: nil, limit: 10_000).count
        say("delete linus, right password   → pending; \(blobsBefore) blob(s) under \(BlobKey.accountPrefix("linus")) until \(ISO8601.format(purgeAfter))")

        // The nightly run, a minute past the grace period, as `LIFECYCLE_NOW=… lifecycle purge` would see it.
        var later = services
        later.clock = ShiftedTimeSource(startingAt: purgeAfter.addingTimeInterval(60))
        let preview = try await PurgeSweep(services: later, directory: try await later.directory()).preview(limit: nil)
        for item in preview {
            say("purge --dry-run at \(ISO8601.format(purgeAfter.addingTimeInterval(60))): \(item.accountID) would lose \(item.rowsTotal) rows and \(item.blobs) blobs (\(item.blobBytes) bytes)")
        }
        _ = try await PurgeSweep(services: later, directory: try await later.directory()).enqueueDuePurges()
        let run = try await runWorker(services: later, once: true, concurrency: 2, kinds: [DeletionJobs.purgeKind])
        say("purge                          → \(run.succeeded) purge job(s) ran: check-access → lock-and-mark → erase-rows → delete-files → verify")

        let rows = try await services.rowCounts(accountID: "linus")
        let (tombstone, record, receipt) = try await services.store.read { tx in
            (try tx.account(id: "linus"), try tx.subject(key: "linus"),
             try tx.auditEvents(accountID: "linus").last { $0.action == DeletionAudit.purge && $0.outcome == "purged" })
        }
        let blobsAfter = try await services.blobs.list(prefix: BlobKey.accountPrefix("linus"), after: nil, limit: 1).count
        if let tombstone {
            say("tombstone: id \(tombstone.id), state \(tombstone.state.rawValue), purged_at \(record?.purgedAt.map { ISO8601.format($0) } ?? "-"); email \(tombstone.email ?? "none"), name \(tombstone.firstName ?? "none"), password hash \(tombstone.passwordHash == nil ? "none" : "KEPT")")
        }
        say("left behind: \(rows.values.reduce(0, +)) rows, \(blobsAfter) blobs; audit receipt: \(receipt?.detail ?? "missing")")
        do {
            _ = try await deletion.restore(account: "linus", actor: "sign-in")
        } catch let error as LifecycleError {
            say("linus signs in again           → refused (exit 65): \(error.message)")
        }
    }
}
