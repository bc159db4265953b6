import Foundation
import JobRunner
import Synchronization

/// Removes everything of one account whose grace period is over, verifies it, then leaves
/// a tombstone. Four steps, each safe to run again after a crash, and nothing irreversible
/// before the rows are gone:
///
/// 1. `lock-and-mark` — re-checks the state under the write lock and moves the
///    account to `purging`; from then on restore is refused.
/// 2. `erase-rows` — every table of the account data map in the plan's order (children
///    first), through the statements generated from the map, in bounded batches that are
///    each their own transaction with their counts (RowEraser.swift). A refusal by the
///    database rolls the batch back and names the table: every file is still in place.
/// 3. `delete-blobs` — photos, profile photo, export archives: everything under
///    `accounts/<id>/`, listed and deleted in batches, then listed again to prove it empty.
/// 4. `tombstone` — a database step: every mapped table read again for the account, and
///    only when none holds a row of it does the same transaction remove lifecycle's own rows
///    about the account (exports, outbox), leave the account row as a tombstone (id, state,
///    purged_at), check that row holds nothing but the mask, and audit a receipt of what
///    went with the verification's result. A row found fails the attempt naming the table.
///
/// Steps 2 and 3 run in every attempt and are not recorded as done: whatever ends an
/// attempt before the tombstone commits (a crash, a failed verification), the next one
/// erases and deletes again what is left (or was written since), which costs one empty
/// batch when nothing is, and two commits fewer per account than recording them would.
///
/// A job recorded by an earlier version may hold a `delete-rows` step, a row count from
/// its first step, or `delete-blobs` done: the steps carry on after it all the same, and
/// the receipt keeps that count.
struct PurgeJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>
    let appData: AppDataCache
    private let coverage = CoverageCheck()

    var kind: JobKind<Store.Transaction> {
        JobKind(name: DeletionJobs.purgeKind, steps: [
            JobStep("lock-and-mark", database: lockAndMark),
            JobStep("erase-rows", external: eraseRows, runsEveryAttempt: true),
            JobStep("delete-blobs", external: deleteBlobs, runsEveryAttempt: true),
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
            /// The account is on hold (`accounts hold`): the sweep starts a fresh purge once it ends.
            case held
        }
        var outcome: Value
    }

    /// The audit receipt: what the purge removed, with no personal data.
    struct Receipt: Codable, Sendable {
        var rows: [String: Int]
        var rowsTotal: Int
        var blobs: Int
        var blobBytes: Int64
        var purgeJob: JobID
        /// Every hold the account had (all ended, or it would not be purged).
        var holds: [AccountHold]?
        /// What the read of every mapped table after erasure found (absent from receipts
        /// of earlier versions, which did not verify).
        var verification: AppPurgeJob<Store>.Receipt.Verification?

        enum CodingKeys: String, CodingKey {
            case rows, rowsTotal = "rows_total", blobs, blobBytes = "blob_bytes", purgeJob = "purge_job", holds, verification
        }
    }

    // MARK: 1. lock-and-mark

    /// A database step: the state check and the move to `purging` commit together
    /// with the step's done-mark, under the database's write lock, so a restore
    /// either lands before it (and this finds the account active) or after it (and
    /// is refused). Never purges an active account or one inside its grace period.
    private func lockAndMark(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let id = try context.payload(PurgePayload.self).account
        func finish(_ outcome: LockOutcome.Value, stopped: String? = nil) throws -> StepResult {
            context.logger.info("purge not needed", metadata: ["account": "\(id)", "outcome": "\(outcome.rawValue)"])
            return try .output(LockOutcome(outcome: outcome), finishesJob: true, stopped: stopped)
        }
        if try services.store.job(id: context.job.id, in: tx)?.cancelRequested == true { return try finish(.cancelled) }
        // The account's row lock first (`accounts hold` takes it too): a hold either landed
        // before this and withdraws the purge, or finds the account purging and is refused.
        _ = try tx.accountState(id: id)
        if let hold = try HoldCheck.activeHold(id, now: context.now, in: tx) {
            context.logger.notice("purge withheld: the account is on hold", metadata: ["account": "\(id)", "hold": "\(HoldCheck.describe(hold))"])
            return try finish(.held, stopped: HoldCheck.purgeWithheld(id, hold))
        }
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
        try ExportJobs.withdraw(accountID: id, actor: "purge", purgeJob: context.job.id, store: services.store, now: context.now, in: tx)
        // The receipt's files are counted by delete-blobs into this record, its rows batch by
        // batch as they go (purge progress): nothing is counted up front.
        try tx.recordRowInventory(accountID: id, rows: [:], at: context.now)
        return StepResult(output: nil)
    }

    // MARK: 2. erase-rows

    private func eraseRows(_ context: StepContext) async throws -> StepResult {
        let id = try context.payload(PurgePayload.self).account
        try await erase(id: id, context: context)
        return StepResult(output: nil, recorded: false)
    }

    /// The account's rows in batches, each committed with its counts; run again, it erases
    /// only what is left (or what was written since). Nothing when the account is no
    /// longer purging.
    private func erase(id: String, context: StepContext) async throws {
        let policy = try policy.get()
        let data = try await appData.appData(services)
        try await coverage.check(services)
        let eraser = RowEraser(store: services.store, data: data, policy: policy) { id, tx in try tx.accountState(id: id) == .purging }
        _ = try await eraser.erase(key: id, context: context) { tx, counts in try RowEraser<Store>.record(counts, key: id, in: tx) }
    }

    // MARK: 3. delete-blobs

    /// Idempotent: deleting a missing key is not an error, and the step ends only
    /// when a fresh listing of the prefix comes back empty.
    private func deleteBlobs(_ context: StepContext) async throws -> StepResult {
        let id = try context.payload(PurgePayload.self).account
        _ = try await removeBlobs(id: id, context: context)
        return StepResult(output: nil, recorded: false)
    }

    private func removeBlobs(id: String, context: StepContext) async throws -> Int {
        let policy = try policy.get()
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
        func deletePass() async throws {
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
        }
        try await deletePass()
        deleted += try await services.deleteExportArchives(accountKey: id, batch: policy.purgeBlobBatch).count

        // A job that was writing under the prefix as the purge began (a photo normalisation
        // that looked at the account just before the first step marked it) can land its file
        // after the pass above; later ones see the mark and write nothing. Two more passes
        // before a survivor counts as the store's failure.
        var left = try await blobs.list(prefix: prefix, after: nil, limit: 1)
        for _ in 0..<2 where !left.isEmpty {
            try await deletePass()
            left = try await blobs.list(prefix: prefix, after: nil, limit: 1)
        }
        if let survivor = left.first {
            // Retried with backoff: a blob store that acknowledged a delete it did not do must not end the purge.
            throw PurgeIncomplete("blob \(survivor.key) is still there after deleting the prefix \(prefix); the purge will retry")
        }
        return deleted
    }

    // MARK: 4. tombstone

    /// The verification read, lifecycle's own rows, the tombstone and the receipt, with the
    /// step's done-mark, in one transaction. A rerun after that commit finds the account
    /// purged and changes nothing.
    private func tombstone(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let id = try context.payload(PurgePayload.self).account
        guard try tx.accountState(id: id) == .purging else { return StepResult(output: nil) }  // Committed by an earlier run.
        // Loaded by erase-rows or delete-blobs of this run: neither is ever recorded as done.
        guard let data = appData.loadedAppData else {
            throw PurgeIncomplete("the account data map is not loaded in this run; the purge will retry")
        }
        let tables = data.plan.tables.map { data.displayName($0.table.name) }
        let accounts = data.displayName(data.plan.subject.table)
        let (now, jobID) = (context.now, context.job.id)
        let started = ContinuousClock.now
        let left = try AppErasure.remainingRows(key: id, data: data, includingSubject: false, in: tx)
        let took = AppErasure.milliseconds(since: started)
        guard left.values.allSatisfy({ $0 == 0 }) else {
            let shown = left.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.value) row(s) of \($0.key)" }
            throw VerificationFailed(description: """
                verification found \(shown.joined(separator: ", ")) still the account's after erasure (written since?): the \
                account is not marked purged, and the next attempt erases and verifies again
                """)
        }
        let erased = try tx.takePurgeProgress(key: id)
        // Files a part deletion stopped by this purge had recorded: under the account's
        // prefix, which this purge emptied.
        _ = try tx.takePurgeFiles(key: id)
        let own = try tx.deleteLifecycleRows(accountID: id)
        let inventory = try tx.takePurgeInventory(accountID: id)
        var rows: [String: Int]
        if let counted = inventory?.rows, !counted.isEmpty {
            rows = counted  // Counted at the start by a job of an earlier version: the whole account.
        } else {
            rows = Dictionary(uniqueKeysWithValues: tables.map { ($0, 0) })
            for (table, count) in erased { rows[table, default: 0] += count.deleted + count.masked }
            rows.merge(own, uniquingKeysWith: +)
        }
        // `lifecycle audit <email>` finds the tombstone by this once the address is gone.
        try LookupDigest.record(values: [try tx.account(id: id)?.email], key: id, in: tx)
        guard try tx.tombstone(accountID: id, purgedAt: now) else {
            let state = try tx.accountState(id: id)?.rawValue ?? "gone"
            throw PermanentJobFailure("account \(id) is \(state), not purging: refusing to tombstone it")
        }
        guard case .integer(0) = try tx.rows(data.sql.subjectRemaining(key: id)).first?.first else {
            throw VerificationFailed(description: "the tombstone of account \(id) in \(accounts) still holds a value the data map masks; the account is not marked purged")
        }
        let receipt = Receipt(
            rows: rows, rowsTotal: rows.values.reduce(0, +), blobs: inventory?.blobCount ?? 0,
            blobBytes: inventory?.blobBytes ?? 0, purgeJob: jobID, holds: try tx.holds(key: id),
            verification: .init(result: "verified", tablesChecked: left.count + 1, rowsLeft: 0, milliseconds: took))
        let detail = try JobJSON.encode(receipt)
        try tx.recordAudit(AuditEvent(at: now, actor: "purge", action: DeletionAudit.purge, accountID: id, outcome: "purged", detail: detail))
        LifecycleMetrics.accountPurged(blobs: receipt.blobs, blobBytes: receipt.blobBytes, rows: receipt.rowsTotal)
        context.logger.notice("account purged", metadata: [
            "account": "\(id)", "rows": .stringConvertible(receipt.rowsTotal), "blobs": .stringConvertible(receipt.blobs),
            "blob_bytes": .stringConvertible(receipt.blobBytes), "verification": "verified",
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

/// The reference app's rule on top of the foreign keys: every table with an account_id
/// column holds account data, so one the map leaves out stops the purge before any row is
/// deleted rather than being left behind. Checked once per process: a schema change needs
/// a restart, as the map's own check does.
private final class CoverageCheck: Sendable {
    private let passed = Mutex(false)

    func check<Store: LifecycleStore>(_ services: LifecycleServices<Store>) async throws {
        if passed.withLock({ $0 }) { return }
        _ = try await services.dataMap()
        passed.withLock { $0 = true }
    }
}
