import Foundation
import JobRunner

/// The files an erasure recorded in lifecycle's state (from the rows it erased, in their
/// batches' transactions), settled once the rows are gone, for a purge and for the
/// deletion of part of an account alike: each file no row still names (another account's,
/// a row kept masked, the user's own rows a part leaves) and that is not one of
/// lifecycle's own is deleted and checked gone; the others are kept. Files are compared as
/// exact bytes: an NFC and an NFD spelling of one name are two files.
struct RecordedFiles<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: DeletionPolicy

    /// `sql` is the whole map's: every file column a kept row may still name a file in.
    func settle(key: String, sql: DataMapSQL, context: StepContext) async throws {
        let store = services.store
        let blobs = services.blobs
        var deleted = 0
        var after: String?
        while true {
            let cursor = after
            let page = try await store.read { tx in try tx.pendingPurgeFiles(key: key, after: cursor, limit: policy.purgeBlobBatch) }
            guard let last = page.last else { break }
            let candidates = page.filter { !BlobKey.isLifecycleOwn($0) && blobs.keyProblem($0) == nil }
            let named = candidates.isEmpty ? [] : try await store.read { tx in try sql.namedFiles(candidates, in: tx) }
            var settled: [PurgeFile] = []
            var doomed: [(key: String, bytes: Int64)] = []
            var refused: [String: Int] = [:]
            for file in page {
                let problem = blobs.keyProblem(file)
                if BlobKey.isLifecycleOwn(file) || problem != nil || named.contains(ExactText(file)) {
                    if let problem {
                        context.logger.notice("a row named a file this blob store cannot hold; nothing deleted", metadata: [
                            "blob_key": "\(BlobKey.quoted(file))", "problem": "\(problem)",
                        ])
                    }
                    settled.append(PurgeFile(key: file, state: .kept, bytes: 0))
                    continue
                }
                do {
                    doomed.append((file, try await blobs.info(key: file)?.size ?? 0))
                } catch let error as BlobStoreError where error.isUnsafePath {
                    context.logger.error("a file of the erased rows is reached through a symbolic link; it is neither deleted nor followed", metadata: [
                        "blob_key": "\(BlobKey.quoted(file))", "error": "\(error)",
                    ])
                    settled.append(PurgeFile(key: file, state: .kept, bytes: 0))
                    refused[error.link ?? file, default: 0] += 1
                }
            }
            try await blobs.delete(keys: doomed.map(\.key))
            // Checked one by one: a store that acknowledged a delete it did not do must not end the erasure.
            for file in doomed where try await blobs.info(key: file.key) != nil {
                throw PurgeIncomplete("file \(file.key) is still there after it was deleted; the job will retry")
            }
            settled += doomed.map { PurgeFile(key: $0.key, state: .deleted, bytes: $0.bytes) }
            let (done, links) = (settled, refused)
            try await store.write { tx in
                try tx.settlePurgeFiles(key: key, files: done)
                for (link, files) in links { try Self.recordRefusal(key: key, link: link, files: files, in: tx) }
            }
            deleted += doomed.count
            context.progress("\(deleted) file(s) deleted")
            guard page.count == policy.purgeBlobBatch else { break }
            after = last
            if policy.batchPause > 0 { try await Task.sleep(nanoseconds: UInt64(policy.batchPause * 1_000_000_000)) }
        }
    }

    /// Files a key reached only through a symbolic link (BlobStoreError.unsafePath), kept
    /// and named in the receipt by the link to fix. Counted in the erasure's progress rows,
    /// in the transaction that settles those files, so a rerun counts none twice.
    struct Refused: Codable, Sendable, Equatable {
        /// Files kept because their key crosses a link (also counted in `blobs_kept`).
        var files: Int
        /// The links, as parts of keys (`avatars/ada`): what the operator replaces.
        var links: [String]
    }

    private static var refusedProgressPrefix: String { "lifecycle blob store: link " }

    /// `files` is 0 for a folder of the user's (`blob_prefixes`) that is itself a link.
    static func recordRefusal(key: String, link: String, files: Int, in tx: Store.Transaction) throws {
        try tx.addPurgeProgress(key: key, table: refusedProgressPrefix + link, deleted: files, masked: 1)
    }

    /// Takes the refusals out of an erasure's progress rows (so they are not read as tables).
    static func takeRefused(from progress: inout [String: PurgeCounts]) -> Refused? {
        let entries = progress.keys.filter { $0.hasPrefix(refusedProgressPrefix) }.sorted()
        guard !entries.isEmpty else { return nil }
        var refused = Refused(files: 0, links: [])
        for entry in entries {
            refused.files += progress.removeValue(forKey: entry)?.deleted ?? 0
            refused.links.append(String(entry.dropFirst(refusedProgressPrefix.count)))
        }
        return refused
    }
}
