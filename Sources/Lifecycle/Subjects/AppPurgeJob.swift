import Foundation
import JobRunner

/// Removes everything of one account of an app's own database whose grace period is
/// over, as its data map says, then erases the user row. Four steps, each safe to run
/// again after a crash:
///
/// 1. `lock-and-mark` — re-checks lifecycle's record of the account under the write lock
///    and moves it to `purging`; from then on restore is refused.
/// 2. `delete-blobs` — every file the user's rows name (each `blobs:` column of the rows
///    the purge deletes, of other users' rows cascaded with them, and of the user row),
///    and lifecycle's own files of the account (export archives), deleted and then
///    checked gone one by one. The rows still name them, so a rerun finds them again.
/// 3. `erase-rows` — table after table in the plan's order (children first), in bounded
///    batches, each its own transaction together with its count: rows are deleted, or
///    masked where the map keeps them. A rerun carries on with what is left.
/// 4. `erase-user` — the user row deleted or masked, lifecycle's own records of the
///    account removed, the account marked purged and the receipt audited, in one
///    transaction; run again after it committed, it finds the account purged and stops.
///
/// Steps 2–4 read the app's tables through statements generated from the map, whose
/// check against the catalog needs a database round trip, so they are external steps
/// written to be repeated rather than database steps.
struct AppPurgeJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>
    let appData: AppDataCache

    var kind: JobKind<Store.Transaction> {
        JobKind(name: DeletionJobs.purgeKind, steps: [
            JobStep("lock-and-mark", database: lockAndMark),
            JobStep("delete-blobs", external: deleteBlobs),
            JobStep("erase-rows", external: eraseRows),
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

        enum CodingKeys: String, CodingKey {
            case rows, rowsTotal = "rows_total", blobs, blobBytes = "blob_bytes", user, purgeJob = "purge_job"
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
        if try !tx.beginSubjectPurge(key: key, now: context.now) {
            switch try tx.subject(key: key)?.state ?? .active {
            case .purged: return try finish(.alreadyPurged)
            case .active: return try finish(.restored)
            case .pendingDeletion: return try finish(.notDue)
            case .purging: break  // An earlier attempt got this far: carry on from here.
            }
        }
        return StepResult(output: nil)
    }

    // MARK: 2. delete-blobs

    private func deleteBlobs(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let key = try context.payload(PurgePayload.self).account
        let data = try await appData.appData(services)
        let store = services.store

        // What the account had when the purge started; the first record of a purge wins.
        let counts = try await store.read { tx in try data.rowCounts(key: key, in: tx) }
        let now = context.now
        try await store.write { tx in try tx.recordRowInventory(accountID: key, rows: counts, at: now) }

        let queries = data.blobQueries(key: key, batch: policy.purgeBlobBatch)
        var deleted = 0
        var bytes: Int64 = 0
        var named: [String] = []
        for query in queries {
            var after: String?
            while true {
                let statement = query.page(after)
                let page = try await store.read { tx in try tx.rows(statement).compactMap { $0.first?.text } }
                guard let last = page.last else { break }
                for blobKey in page where !BlobKey.isValid(blobKey) {
                    throw PermanentJobFailure("""
                        \(query.label) names the file '\(blobKey)', which is not a key this blob store accepts; remove or \
                        fix that value, then retry the purge (`lifecycle jobs retry \(context.job.id)`)
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
                after = last
                if policy.batchPause > 0 { try await Task.sleep(nanoseconds: UInt64(policy.batchPause * 1_000_000_000)) }
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
        let (total, size) = (deleted, bytes)
        if total > 0 { try await store.write { tx in try tx.recordBlobInventory(accountID: key, count: total, bytes: size) } }
        return try .output(BlobsRemoved(blobs: deleted, bytes: bytes))
    }

    // MARK: 3. erase-rows

    private func eraseRows(_ context: StepContext) async throws -> StepResult {
        let policy = try policy.get()
        let key = try context.payload(PurgePayload.self).account
        let data = try await appData.appData(services)
        for table in data.plan.tables {
            try await erase(table, key: key, data: data, batch: policy.purgeRowBatch, context: context)
        }
        return StepResult(output: nil)
    }

    /// One table: other users' cascaded rows and the user's own, deleted (leaf rows first,
    /// so a reply goes before what it answers) until none can go; the rest masked where
    /// the map keeps them. Each batch commits with its count.
    private func erase(_ table: DataMapPlan.TablePlan, key: String, data: AppData, batch: Int, context: StepContext) async throws {
        let sql = data.sql
        let name = data.displayName(table.table.name)
        let store = services.store

        func run(_ statement: SQLStatement, deletes: Bool, cascades: Bool) async throws -> Int {
            try await store.write { tx in
                if cascades {
                    // Deepest first: a cascade may reference the one before it.
                    for index in table.cascades.indices.reversed() {
                        while true {
                            let count = try tx.execute(sql.deleteCascade(table, cascade: index, key: key, limit: batch))
                            try tx.addPurgeProgress(key: key, table: data.displayName(table.cascades[index].table), deleted: count, masked: 0)
                            if count < batch { break }
                        }
                    }
                }
                let count = try tx.execute(statement)
                try tx.addPurgeProgress(key: key, table: name, deleted: deletes ? count : 0, masked: deletes ? 0 : count)
                return count
            }
        }

        switch table.owner {
        case .sides(let sides):
            for side in sides {
                while true {
                    let statement = side.erase.mask.map { sql.maskOwned(table, mask: $0, key: key, limit: batch, side: side) }
                        ?? sql.deleteOwned(table, key: key, limit: batch, side: side)
                    if try await run(statement, deletes: side.erase.mask == nil, cascades: false) == 0 { break }
                }
            }
        default:
            if table.table.erase.deletesRows {
                while try await run(sql.deleteOwned(table, key: key, limit: batch), deletes: true, cascades: true) > 0 {
                    context.progress("\(name): deleting")
                }
            }
            if let mask = table.table.erase.mask {
                while try await run(sql.maskOwned(table, mask: mask, key: key, limit: batch), deletes: false, cascades: false) > 0 {
                    context.progress("\(name): masking")
                }
            }
            // Rows left that no erase could reach are held by a reference the map did not
            // declare (added to the schema since the check): retrying cannot help.
            let left = try await store.read { tx in try tx.rows(sql.countOwned(table, key: key)).first?.first }
            if table.table.erase == .delete, case .integer(let count) = left, count > 0 {
                throw PermanentJobFailure("""
                    \(count) row(s) of \(name) could not be deleted: another row still references them. Run \
                    `lifecycle map check` and add the reference to the map (cascade or delete_unless_referenced_by), then retry the purge
                    """)
            }
        }
    }

    // MARK: 4. erase-user

    private func eraseUser(_ context: StepContext) async throws -> StepResult {
        let key = try context.payload(PurgePayload.self).account
        let data = try await appData.appData(services)
        let sql = data.sql
        let now = context.now
        let jobID = context.job.id
        let receipt: Receipt? = try await services.store.write { tx -> Receipt? in
            guard try tx.subject(key: key)?.state == .purging else { return nil }  // Committed by an earlier run.
            let userRows = try tx.execute(sql.eraseSubject(key: key))
            var rows = try tx.takePurgeProgress(key: key)
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
                user: data.plan.subject.erase == .delete ? "deleted" : "masked", purgeJob: jobID)
            try tx.recordAudit(AuditEvent(
                at: now, actor: "purge", action: DeletionAudit.purge, accountID: key, outcome: "purged", detail: try JobJSON.encode(receipt)))
            return receipt
        }
        guard let receipt else { return StepResult(output: nil) }
        context.logger.notice("account purged", metadata: [
            "account": "\(key)", "rows": "\(receipt.rowsTotal)", "blobs": "\(receipt.blobs)", "blob_bytes": "\(receipt.blobBytes)",
        ])
        return try .output(receipt)
    }
}
