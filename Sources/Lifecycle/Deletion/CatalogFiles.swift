import Foundation
import JobRunner

/// The files of the user's rows of a file catalog (`file_key:`, Storage's objects), recorded
/// in lifecycle's state before any of those rows goes, for a purge and a part deletion alike:
/// a catalog row is the only record of its file. Recording deletes nothing; the files go
/// with the other recorded ones (`RecordedFiles`), after the rows. Run again, it finds only
/// the rows still there. A key with no file in this store (one laid out otherwise than the
/// catalog says) is not recorded, so a receipt never counts a file as deleted that was not
/// there; how many is logged.
struct CatalogFiles<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>

    func record(key: String, data: AppData, batch: Int, context: StepContext) async throws {
        let (store, blobs, sql) = (services.store, services.blobs, data.sql)
        for table in data.plan.tables where !table.table.fileKey.isEmpty {
            var after: String?
            var absent = 0
            while true {
                let cursor = after
                let page = try await store.read { tx in
                    try tx.rows(sql.catalogFileKeys(table, key: key, after: cursor, limit: batch)).compactMap { $0.first?.text }
                }
                var present: [String] = []
                for file in page {
                    do {
                        if blobs.keyProblem(file) == nil, try await blobs.info(key: file) != nil { present.append(file) } else { absent += 1 }
                    } catch let error as BlobStoreError where error.isUnsafePath {
                        present.append(file)  // Recorded, for RecordedFiles to refuse by name in the receipt.
                    }
                }
                let found = present
                if !found.isEmpty { try await store.write { tx in try tx.recordPurgeFiles(key: key, files: found) } }
                guard let last = page.last, page.count == batch else { break }
                after = last
            }
            if absent > 0 {
                context.logger.notice("file catalog rows whose file is not in the blob store; their rows go, nothing to delete", metadata: [
                    "account": "\(key)", "table": "\(data.displayName(table.table.name))", "rows": .stringConvertible(absent),
                ])
            }
        }
    }
}
