import Archiving
import Foundation
import JobRunner

/// Runs on the cron schedule in `Jobs/policies/export-expiry.yaml`: deletes the
/// archives of ready exports whose link has expired and marks them `expired`.
struct ExportExpiryJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    static var batchSize: Int { 100 }

    var kind: JobKind<Store.Transaction> {
        JobKind(name: ExportJobs.expiryKind, steps: [
            JobStep("delete-expired-archives", external: { try await self.deleteExpiredArchives($0) }),
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
                try await services.blobs.delete(keys: keys.compactMap { $0 })
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
}
