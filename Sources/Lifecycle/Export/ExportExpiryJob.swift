import Archiving
import Foundation
import JobRunner

/// Runs on the cron schedule in `Jobs/policies/export-expiry.yaml`: deletes the
/// archives of ready exports whose link has expired and marks them `expired`, then clears
/// what exports whose job ended unfinished left (a worker killed mid-build, then the job
/// cancelled by the account's deletion before it ran again).
struct ExportExpiryJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    static var batchSize: Int { 100 }

    var kind: JobKind<Store.Transaction> {
        JobKind(name: ExportJobs.expiryKind, steps: [
            JobStep("delete-expired-archives", external: { try await self.deleteExpiredArchives($0) }),
            JobStep("clear-abandoned-builds", external: { try await self.clearAbandonedBuilds($0) }),
        ])
    }

    struct Expired: Codable, Sendable {
        var expired: [String]
    }

    /// Blob first, row second: a crash in between leaves a `ready` row whose archive is
    /// gone, and the next run deletes again (deleting a missing key is not an error)
    /// and marks it. Running twice, or in two overlapping workers, changes nothing more.
    private func deleteExpiredArchives(_ context: StepContext) async throws -> StepResult {
        let now = context.now
        var expired: [String] = []
        while true {
            let due = try await services.store.read { tx in try tx.exportsToExpire(now: now, limit: Self.batchSize) }
            if due.isEmpty { break }
            for export in due {
                let format = ArchiveFormat(rawValue: export.format) ?? .zip
                let keys = [export.blobKey, ExportNames.temporaryKey(accountID: export.accountID, exportID: export.id, format: format)]
                try await services.deleteExportKeys(keys.compactMap { $0 })
                try await services.store.write { tx in
                    guard var current = try tx.export(id: export.id), current.state == .ready else { return }
                    current.state = .expired
                    current.expiredAt = now
                    try tx.updateExport(current)
                }
                expired.append(export.id)
                context.logger.info("export archive expired and deleted", metadata: ["export": "\(export.id)", "account": "\(export.accountID)"])
            }
        }
        return try .output(Expired(expired: expired))
    }

    struct Cleared: Codable, Sendable {
        var exports: [String]
        var scratchFolders: Int

        enum CodingKeys: String, CodingKey { case exports, scratchFolders = "scratch_folders" }
    }

    /// An export still `building` whose job was cancelled or died: its archive (temporary,
    /// or already published if the job stopped between publishing and marking it ready) and
    /// its scratch folder are deleted, and the row is marked `expired` (no link ever
    /// existed). Then scratch folders of exports no longer being built at all go: those
    /// a killed worker left behind. Files first, row last, so a crash in between repeats.
    private func clearAbandonedBuilds(_ context: StepContext) async throws -> StepResult {
        let now = context.now
        var cleared: [String] = []
        var after: String?
        while true {
            let from = after
            let batch = try await services.store.read { tx in try tx.abandonedBuilds(after: from, limit: Self.batchSize) }
            for export in batch {
                let format = ArchiveFormat(rawValue: export.format) ?? .zip
                try await services.deleteExportKeys([
                    ExportNames.temporaryKey(accountID: export.accountID, exportID: export.id, format: format),
                    ExportNames.archiveKey(accountID: export.accountID, exportID: export.id, format: format),
                ])
                try? FileManager.default.removeItem(atPath: ExportScratch.workDirectory(for: services.exports, exportID: export.id))
                try await services.store.write { tx in
                    guard var current = try tx.export(id: export.id), current.state == .building else { return }
                    current.state = .expired
                    current.expiredAt = now
                    try tx.updateExport(current)
                }
                cleared.append(export.id)
                context.logger.info("abandoned export build cleared", metadata: ["export": "\(export.id)", "account": "\(export.accountID)"])
            }
            guard batch.count == Self.batchSize, let last = batch.last else { break }
            after = last.id
        }
        var folders = 0
        // Only a file-system store's scratch folder is this installation's own: other stores
        // build in the machine's temporary directory, which other installations share.
        guard services.exports is FileSystemBlobStore else { return try .output(Cleared(exports: cleared, scratchFolders: 0)) }
        let scratch = ExportScratch.directory(for: services.exports)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: scratch)) ?? [] {
            let export = try await services.store.read { tx in try tx.export(id: name) }
            if let export, export.state == .building, let jobID = export.jobID,
               let job = try await services.store.job(id: jobID), !job.state.isFinal {
                continue  // Still being built, or to be built again after a crash.
            }
            try? FileManager.default.removeItem(atPath: (scratch as NSString).appendingPathComponent(name))
            folders += 1
        }
        return try .output(Cleared(exports: cleared, scratchFolders: folders))
    }
}
