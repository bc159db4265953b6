import Foundation
import JobRunner

/// Removes everything of one account whose grace period is over, then leaves a
/// tombstone. Four steps, each safe to run again after a crash:
///
/// 1. `lock-and-mark` — re-checks the state under the write lock and moves the
///    account to `purging`; from then on restore is refused.
/// 2. `delete-blobs` — photos, profile photo, export archives: everything under
///    `accounts/<id>/`, listed and deleted in batches, then listed again to prove it empty.
/// 3. `delete-rows` — every table of the account data map, in its order (children
///    first), in bounded batches that are each their own transaction, then
///    lifecycle's own rows about the account (exports, outbox), which the map does
///    not list. An account with at most one batch of rows (most of them) leaves
///    that batch to step 4.
/// 4. `tombstone` — deletes the last batch of rows and lifecycle's own rows about the
///    account; the account row keeps only id, state and purged_at; an audit receipt
///    records how many rows and blobs went.
struct PurgeJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>
    private let dataMap = DataMapCache()

    init(services: LifecycleServices<Store>, policy: Result<DeletionPolicy, any Error>) {
        self.services = services
        self.policy = policy
    }

    var kind: JobKind<Store.Transaction> {
        JobKind(name: DeletionJobs.purgeKind, steps: [
            JobStep("lock-and-mark", database: lockAndMark),
            JobStep("delete-blobs", external: deleteBlobs),
            JobStep("delete-rows", external: deleteRows),
            JobStep("tombstone", database: tombstone),
        ])
    }

    /// Why the first step ended the job without purging (it records no output when the purge goes ahead).
    struct LockOutcome: Codable, Sendable {
        enum Value: String, Codable, Sendable {
            /// A restore won: the account is active again.
            case restored
            /// Still inside its grace period (it was restored and requested again since this job was scheduled).
            case notDue
            /// Someone else's purge finished it.
            case alreadyPurged
            /// The job was cancelled (by a restore) after a worker had claimed it.
            case cancelled
        }
        var outcome: Value
    }

    /// Rows the account still had when this job's first step ran.
    struct PurgeStart: Codable, Sendable {
        var rows: Int
    }

    struct BlobsRemoved: Codable, Sendable {
        var blobs: Int
    }

    struct RowsRemoved: Codable, Sendable {
        var rows: [String: Int]
        /// Set when the account had at most one batch of rows: the tombstone deletes them
        /// in its own transaction, which saves a commit per account on a nightly run.
        var leftForTombstone: Bool?
    }

    /// The audit receipt: what the purge removed, with no personal data.
    struct Receipt: Codable, Sendable {
        var rows: [String: Int]
        var rowsTotal: Int
        var blobs: Int
        var blobBytes: Int64
        var purgeJob: JobID

        enum CodingKeys: String, CodingKey {
            case rows, rowsTotal = "rows_total", blobs, blobBytes = "blob_bytes", purgeJob = "purge_job"
        }
    }

    // MARK: 1. lock-and-mark

    /// A database step: the state check and the move to `purging` commit together
    /// with the step's done-mark, under the database's write lock, so a restore
    /// either lands before it (and this finds the account active) or after it (and
    /// is refused). Never purges an active account or one inside its grace period.
    private func lockAndMark(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let id = try context.payload(PurgePayload.self).account
        func finish(_ outcome: LockOutcome.Value) throws -> StepResult {
            context.logger.info("purge not needed", metadata: ["account": "\(id)", "outcome": "\(outcome.rawValue)"])
            return try .output(LockOutcome(outcome: outcome), finishesJob: true)
        }
        if try services.store.job(id: context.job.id, in: tx)?.cancelRequested == true { return try finish(.cancelled) }
        // The compare-and-set is the check: pendingDeletion and past purge_after, or no change.
        if try !tx.beginPurge(accountID: id, now: context.now) {
            guard let account = try tx.account(id: id) else {
                throw PermanentJobFailure("account \(id) does not exist, so there is nothing to purge; if files remain under \(BlobKey.accountPrefix(id)), remove them by hand")
            }
            switch account.state {
            case .purged: return try finish(.alreadyPurged)
            case .active: return try finish(.restored)
            case .pendingDeletion: return try finish(.notDue)
            case .purging: break  // An earlier attempt, or an earlier job, got this far: carry on from here.
            }
        }
        let map = try dataMap.map(services: services)
        var rows = try tx.countRows(in: map.tables.filter { $0.name != "accounts" }, accountID: id)
        // An app table of the same name as one of lifecycle's is counted under that name too.
        rows.merge(try tx.lifecycleRowCounts(accountID: id), uniquingKeysWith: +)
        try tx.recordRowInventory(accountID: id, rows: rows, at: context.now)
        return try .output(PurgeStart(rows: rows.values.reduce(0, +)))
    }

    // MARK: 2. delete-blobs

    /// Idempotent: deleting a missing key is not an error, and the step ends only
    /// when a fresh listing of the prefix comes back empty.
    private func deleteBlobs(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let id = try context.payload(PurgePayload.self).account
        let prefix = BlobKey.accountPrefix(id)
        let blobs = services.blobs
        let store = services.store

        // Count what is there before deleting anything. Only the first count of a purge is
        // kept, so the receipt reports the whole even when this step is cut short and rerun.
        var firstPage: [BlobInfo]?
        var count = 0
        var bytes: Int64 = 0
        var listedAfter: String?
        while true {
            let page = try await blobs.list(prefix: prefix, after: listedAfter, limit: policy.purgeBlobBatch)
            if firstPage == nil { firstPage = page }
            count += page.count
            bytes += page.reduce(0) { $0 + $1.size }
            guard page.count == policy.purgeBlobBatch, let last = page.last else { break }
            listedAfter = last.key
        }
        let (total, size) = (count, bytes)
        if total > 0 {
            try await store.write { tx in try tx.recordBlobInventory(accountID: id, count: total, bytes: size) }
        }
        // A single short page is the whole prefix: delete from it without listing again.
        if count >= policy.purgeBlobBatch { firstPage = nil }

        var deleted = 0
        var after: String?
        while true {
            let page: [BlobInfo]
            if let cached = firstPage {
                page = cached
                firstPage = nil
            } else {
                page = try await blobs.list(prefix: prefix, after: after, limit: policy.purgeBlobBatch)
            }
            guard let last = page.last else { break }
            try await blobs.delete(keys: page.map(\.key))
            deleted += page.count
            context.progress("\(deleted) blob(s) deleted")
            guard page.count == policy.purgeBlobBatch else { break }
            after = last.key
            try await pause(policy)
        }

        let left = try await blobs.list(prefix: prefix, after: nil, limit: 1)
        if let survivor = left.first {
            // Retried with backoff: a blob store that acknowledged a delete it did not do must not end the purge.
            throw PurgeIncomplete("blob \(survivor.key) is still there after deleting the prefix \(prefix); the purge will retry")
        }
        return try .output(BlobsRemoved(blobs: deleted))
    }

    // MARK: 3. delete-rows

    /// Deleting rows already deleted changes nothing, so a rerun simply continues.
    /// Each batch removes at most `purge_row_batch` rows, moving on to the next
    /// table of the map within the same batch when one runs out.
    private func deleteRows(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let id = try context.payload(PurgePayload.self).account
        let store = services.store
        let tables = try await dataMap.checkedMap(services: services).tables.filter { $0.name != "accounts" }
        let batch = policy.purgeRowBatch
        if let start = try context.output(of: "lock-and-mark", as: PurgeStart.self), start.rows <= batch {
            return try .unrecorded(RowsRemoved(rows: [:], leftForTombstone: true))
        }
        var removed: [String: Int] = [:]
        var index = 0
        while index < tables.count {
            let start = index
            let (next, counts) = try await store.write { tx in
                var (next, counts) = try Self.deleteBatch(of: id, from: tables, startingAt: start, limit: batch, in: tx)
                // With the last batch: a handful of rows per account (exports are rate-limited, one message each).
                if next == tables.count { counts.merge(try tx.deleteLifecycleRows(accountID: id), uniquingKeysWith: +) }
                return (next, counts)
            }
            removed.merge(counts, uniquingKeysWith: +)
            index = next
            context.progress("\(removed.values.reduce(0, +)) row(s) deleted")
            if index < tables.count { try await pause(policy) }
        }
        return try .output(RowsRemoved(rows: removed))
    }

    /// Deletes at most `limit` rows, table after table from `startingAt`; returns the
    /// first table that may still hold rows of the account (`tables.count` when none does).
    private static func deleteBatch(
        of id: String, from tables: [AccountDataMap.Table], startingAt start: Int, limit: Int, in tx: Store.Transaction
    ) throws -> (next: Int, counts: [String: Int]) {
        var budget = limit
        var table = start
        var counts: [String: Int] = [:]
        while table < tables.count && budget > 0 {
            let deleted = try tx.deleteRows(in: tables[table], accountID: id, limit: budget)
            counts[tables[table].name, default: 0] += deleted
            budget -= deleted
            if budget > 0 { table += 1 }  // Fewer than asked: that table holds none of the account's rows any more.
        }
        return (table, counts)
    }

    // MARK: 4. tombstone

    /// A database step: the last batch of rows, the tombstone, the receipt and the
    /// done-mark commit together.
    private func tombstone(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let id = try context.payload(PurgePayload.self).account
        let policy = try policy.get()
        let tables = try dataMap.map(services: services).tables.filter { $0.name != "accounts" }
        let inventory = try tx.takePurgeInventory(accountID: id)
        if try context.output(of: "delete-rows", as: RowsRemoved.self)?.leftForTombstone == true {
            // The account had at most one batch of rows when the purge started, so plain
            // deletes are as bounded as batched ones, and cheaper.
            for table in tables { _ = try tx.deleteRows(in: table, accountID: id, limit: nil) }
        } else {
            let (next, _) = try Self.deleteBatch(of: id, from: tables, startingAt: 0, limit: policy.purgeRowBatch, in: tx)
            if next < tables.count, let left = try tables[next...].first(where: { try tx.countRows(in: $0, accountID: id) > 0 }) {
                // Only if rows were added after the purge started; each retry removes another batch.
                throw PurgeIncomplete("account \(id) still has rows in \(left.name) after deleting a full batch; the purge will retry")
            }
        }
        // Lifecycle's own rows go here in any case, even when delete-rows already removed
        // them: nothing written about the account since then outlives the tombstone.
        let own = try tx.deleteLifecycleRows(accountID: id)
        var rows = try inventory?.rows ?? (context.output(of: "delete-rows", as: RowsRemoved.self)?.rows ?? [:])
        rows.merge(own) { counted, _ in counted }
        let receipt = Receipt(
            rows: rows, rowsTotal: rows.values.reduce(0, +),
            blobs: try inventory?.blobCount ?? (context.output(of: "delete-blobs", as: BlobsRemoved.self)?.blobs ?? 0),
            blobBytes: inventory?.blobBytes ?? 0, purgeJob: context.job.id)
        guard try tx.tombstone(accountID: id, purgedAt: context.now) else {
            let state = try tx.account(id: id)?.state.rawValue ?? "gone"
            throw PermanentJobFailure("account \(id) is \(state), not purging: refusing to tombstone it")
        }
        let detail = try JobJSON.encode(receipt)
        try tx.recordAudit(AuditEvent(
            at: context.now, actor: "purge", action: DeletionAudit.purge, accountID: id, outcome: "purged", detail: detail))
        context.logger.notice("account purged", metadata: [
            "account": "\(id)", "rows": "\(receipt.rowsTotal)", "blobs": "\(receipt.blobs)", "blob_bytes": "\(receipt.blobBytes)",
        ])
        return StepResult(output: detail)
    }

    private func pause(_ policy: DeletionPolicy) async throws {
        guard policy.batchPause > 0 else { return }
        try await Task.sleep(nanoseconds: UInt64(policy.batchPause * 1_000_000_000))
    }
}

struct PurgeIncomplete: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The data map, read once per worker instead of once per purged account. Checked
/// against the database before the first row is deleted: a table missing from the
/// map would be left behind.
final class DataMapCache: @unchecked Sendable {
    private let lock = NSLock()
    private var loaded: AccountDataMap?
    private var checked = false

    func map<Store: LifecycleStore>(services: LifecycleServices<Store>) throws -> AccountDataMap {
        try lock.withLock {
            if let loaded { return loaded }
            let map = try AccountDataMap(try services.dataMapDocument())
            loaded = map
            return map
        }
    }

    func checkedMap<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> AccountDataMap {
        let map = try map(services: services)
        if lock.withLock({ checked }) { return map }
        try map.requireCovers(accountTables: try await services.store.accountTables())
        lock.withLock { checked = true }
        return map
    }
}
