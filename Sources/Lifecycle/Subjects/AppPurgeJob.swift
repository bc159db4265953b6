import Foundation
import JobRunner

/// Removes everything of one account of an app's own database whose grace period is
/// over, as its data map says, then erases the user row. Three steps, each safe to run
/// again after a crash:
///
/// 1. `lock-and-mark` — re-checks lifecycle's record of the account under the write lock
///    and moves it to `purging`; from then on restore is refused.
/// 2. `delete-blobs` — every file the user's rows name (each `blobs:` column of the rows
///    the purge deletes, of other users' rows cascaded with them, and of the user row),
///    and lifecycle's own files of the account (export archives), deleted and then
///    checked gone one by one. The rows still name them, so a rerun finds them again.
/// 3. `erase-user` — table after table in the plan's order (children first), in bounded
///    batches, each its own transaction together with its counts: rows are deleted, or
///    masked where the map keeps them, a batch going on to the next table when one is
///    done. The transaction that finds nothing more to erase also erases the user row,
///    removes lifecycle's own records of the account, marks it purged and audits the
///    receipt: an account of at most one batch of rows (most of them) is erased in one
///    commit. A rerun carries on with what is left; after the last commit it finds the
///    account purged and stops.
///
/// Steps 2–3 read the app's tables through statements generated from the map, whose
/// check against the catalog needs a database round trip, so they are external steps
/// written to be repeated rather than database steps. (A job recorded by an earlier
/// version may hold an `erase-rows` step: erase-user carries on after it all the same.)
struct AppPurgeJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>
    let appData: AppDataCache

    var kind: JobKind<Store.Transaction> {
        JobKind(name: DeletionJobs.purgeKind, steps: [
            JobStep("lock-and-mark", database: lockAndMark),
            JobStep("delete-blobs", external: deleteBlobs),
            JobStep("erase-user", external: eraseUser),
        ])
    }

    typealias LockOutcome = PurgeJob<Store>.LockOutcome

    struct BlobsRemoved: Codable, Sendable {
        var blobs: Int
        var bytes: Int64
    }

    /// The audit receipt: what the purge removed, per table deleted and masked apart, with no personal data.
    struct Receipt: Codable, Sendable {
        var rows: [String: PurgeCounts]
        var rowsTotal: Int
        var blobs: Int
        var blobBytes: Int64
        var user: String
        var purgeJob: JobID
        /// Every hold the account had (all ended, or it would not be purged).
        var holds: [AccountHold]?

        enum CodingKeys: String, CodingKey {
            case rows, rowsTotal = "rows_total", blobs, blobBytes = "blob_bytes", user, purgeJob = "purge_job", holds
        }
    }

    // MARK: 1. lock-and-mark

    /// A database step: the state check and the move to `purging` commit together with
    /// the step's done-mark. Never purges an account that is active or still in its grace.
    private func lockAndMark(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let key = try context.payload(PurgePayload.self).account
        func finish(_ outcome: LockOutcome.Value) throws -> StepResult {
            context.logger.info("purge not needed", metadata: ["account": "\(key)", "outcome": "\(outcome.rawValue)"])
            return try .output(LockOutcome(outcome: outcome), finishesJob: true)
        }
        if try services.store.job(id: context.job.id, in: tx)?.cancelRequested == true { return try finish(.cancelled) }
        // Under the account's lock, which `accounts hold` takes too (PurgeJob.swift).
        if try tx.subject(key: key) != nil { _ = try tx.lockSubject(key: key, now: context.now) }
        if let hold = try HoldCheck.activeHold(key, now: context.now, in: tx) {
            context.logger.notice("purge withheld: the account is on hold", metadata: ["account": "\(key)", "hold": "\(HoldCheck.describe(hold))"])
            return try finish(.held)
        }
        if try !tx.beginSubjectPurge(key: key, now: context.now) {
            switch try tx.subject(key: key)?.state ?? .active {
            case .purged: return try finish(.alreadyPurged)
            case .active: return try finish(.restored)
            case .pendingDeletion: return try finish(.notDue)
            case .purging: break  // An earlier attempt got this far: carry on from here.
            }
        }
        try ExportJobs.withdraw(accountID: key, actor: "purge", purgeJob: context.job.id, store: services.store, now: context.now, in: tx)
        return StepResult(output: nil)
    }

    // MARK: 2. delete-blobs

    private func deleteBlobs(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let key = try context.payload(PurgePayload.self).account
        let data = try await appData.appData(services)
        let store = services.store

        // One read for the first page of every file column: for most accounts that page is all there is.
        let queries = data.blobQueries(key: key, batch: policy.purgeBlobBatch)
        let firstPages = try await store.read { tx in try queries.map { query in try tx.rows(query.page(nil)).compactMap { $0.first?.text } } }
        var deleted = 0
        var bytes: Int64 = 0
        var named: [String] = []
        for (query, first) in zip(queries, firstPages) {
            var page = first
            while let last = page.last {
                for blobKey in page {
                    guard let problem = services.blobs.keyProblem(blobKey) else { continue }
                    throw PermanentJobFailure("""
                        \(query.label) names the file \(BlobKey.quoted(blobKey)), which is not a key this blob store accepts \
                        (\(problem)); remove or fix that value, then retry the purge (`lifecycle jobs retry \(context.job.id)`)
                        """)
                }
                for blobKey in page {
                    if let info = try await services.blobs.info(key: blobKey) { bytes += info.size }
                }
                try await services.blobs.delete(keys: page)
                deleted += page.count
                named += page
                context.progress("\(deleted) file(s) deleted")
                guard page.count == policy.purgeBlobBatch else { break }
                if policy.batchPause > 0 { try await Task.sleep(nanoseconds: UInt64(policy.batchPause * 1_000_000_000)) }
                let statement = query.page(last)
                page = try await store.read { tx in try tx.rows(statement).compactMap { $0.first?.text } }
            }
        }

        // Lifecycle's own files of the account (export archives) live under its prefix.
        let prefix = BlobKey.accountPrefix(BlobKey.segment(forID: key))
        while true {
            let page = try await services.blobs.list(prefix: prefix, after: nil, limit: policy.purgeBlobBatch)
            if page.isEmpty { break }
            try await services.blobs.delete(keys: page.map(\.key))
            deleted += page.count
            bytes += page.reduce(0) { $0 + $1.size }
        }

        // Checked one by one: a store that acknowledged a delete it did not do must not end the purge.
        for blobKey in named where try await services.blobs.info(key: blobKey) != nil {
            throw PurgeIncomplete("file \(blobKey) is still there after it was deleted; the purge will retry")
        }
        if let survivor = try await services.blobs.list(prefix: prefix, after: nil, limit: 1).first {
            throw PurgeIncomplete("file \(survivor.key) is still there after deleting \(prefix); the purge will retry")
        }
        // The files for the receipt, kept apart from the job: a fresh job after this one died
        // finds none left to count, and the first record of a purge wins. Rows need no
        // inventory here: each batch counts what it erased (purge progress).
        let (total, size, now) = (deleted, bytes, context.now)
        try await store.write { tx in
            try tx.recordRowInventory(accountID: key, rows: [:], at: now)
            if total > 0 { try tx.recordBlobInventory(accountID: key, count: total, bytes: size) }
        }
        return try .output(BlobsRemoved(blobs: deleted, bytes: bytes))
    }

    // MARK: 3. erase-user


    /// The rows in batches; with the last, the user row deleted or masked, lifecycle's own
    /// records of the account removed, the account marked purged and the receipt audited.
    private func eraseUser(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let key = try context.payload(PurgePayload.self).account
        let data = try await appData.appData(services)
        let sql = data.sql
        let now = context.now
        let jobID = context.job.id
        let eraser = RowEraser(store: services.store, data: data, policy: policy) { key, tx in try tx.subject(key: key)?.state == .purging }
        let done = try await eraser.erase(key: key, context: context) { tx, counts -> (Receipt, String) in
            // `lifecycle audit <email>` finds the account by these once its values are gone.
            let lookupValues = try data.plan.subject.lookup.map { try tx.rows(sql.subjectValue(column: $0, key: key)).first?.first?.text }
            try LookupDigest.record(values: lookupValues, key: key, in: tx)
            let userRows = try tx.execute(sql.eraseSubject(key: key))
            var rows = try tx.takePurgeProgress(key: key)
            for (table, count) in counts {
                rows[table, default: PurgeCounts()].deleted += count.deleted
                rows[table, default: PurgeCounts()].masked += count.masked
            }
            rows = rows.filter { $0.value != PurgeCounts() }
            let userTable = data.displayName(data.plan.subject.table)
            rows[userTable, default: PurgeCounts()].deleted += data.plan.subject.erase == .delete ? userRows : 0
            rows[userTable, default: PurgeCounts()].masked += data.plan.subject.erase == .delete ? 0 : userRows
            let own = try tx.deleteLifecycleRows(accountID: key)
            for (table, count) in own where count > 0 { rows["lifecycle." + table, default: PurgeCounts()].deleted += count }
            let inventory = try tx.takePurgeInventory(accountID: key)
            guard try tx.markSubjectPurged(key: key, at: now) else {
                throw PermanentJobFailure("account \(key) is no longer purging: refusing to mark it purged")
            }
            let receipt = Receipt(
                rows: rows, rowsTotal: rows.values.reduce(0) { $0 + $1.deleted + $1.masked },
                blobs: inventory?.blobCount ?? 0, blobBytes: inventory?.blobBytes ?? 0,
                user: data.plan.subject.erase == .delete ? "deleted" : "masked", purgeJob: jobID, holds: try tx.holds(key: key))
            let detail = try JobJSON.encode(receipt)
            try tx.recordAudit(AuditEvent(at: now, actor: "purge", action: DeletionAudit.purge, accountID: key, outcome: "purged", detail: detail))
            return (receipt, detail)
        }
        guard let (receipt, detail) = done else { return StepResult(output: nil) }  // Committed by an earlier run.
        LifecycleMetrics.accountPurged(blobs: receipt.blobs, blobBytes: receipt.blobBytes, rows: receipt.rowsTotal)
        context.logger.notice("account purged", metadata: [
            "account": "\(key)", "rows": .stringConvertible(receipt.rowsTotal), "blobs": .stringConvertible(receipt.blobs), "blob_bytes": .stringConvertible(receipt.blobBytes),
        ])
        // Encoded once: the step's output is the audited receipt.
        return StepResult(output: detail)
    }
}
