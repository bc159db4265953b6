import Foundation

/// Where an export's archive is: the export store, or, for an archive made before the
/// installation had one of its own, the blob store it was written to then.
extension LifecycleServices {
    /// The store that holds `key`: the export store when it has it or when there is no
    /// other, else the blob store when an archive written there before is still there.
    func exportStore(holding key: String) async throws -> any BlobStore {
        guard exportsApart, try await exports.info(key: key) == nil, try await blobs.info(key: key) != nil else { return exports }
        return blobs
    }

    /// Deletes archive keys wherever an archive may be (deleting a missing key is not an error).
    func deleteExportKeys(_ keys: [String]) async throws {
        try await exports.delete(keys: keys)
        if exportsApart { try await blobs.delete(keys: keys) }
    }

    /// Every archive of the account in an export store apart from the blobs, deleted and
    /// listed again to prove them gone (the blob store's copy of the prefix is the purge's
    /// own listing). What was deleted, for the receipt.
    func deleteExportArchives(accountKey: String, batch: Int) async throws -> [BlobInfo] {
        guard exportsApart else { return [] }
        let prefix = BlobKey.accountPrefix(BlobKey.segment(forID: accountKey)) + "exports/"
        var deleted: [BlobInfo] = []
        for _ in 0..<3 {
            var after: String?
            while true {
                let page = try await exports.list(prefix: prefix, after: after, limit: batch)
                guard let last = page.last else { break }
                try await exports.delete(keys: page.map(\.key))
                deleted += page
                after = last.key
            }
            if try await exports.list(prefix: prefix, after: nil, limit: 1).isEmpty { return deleted }
        }
        throw PurgeIncomplete("export archives are still under \(prefix) in the export store after deleting them; the purge will retry")
    }
}
