import Foundation
import JobRunner

/// Removes everything of one account whose grace period is over, as the data map says
/// (the reference app's map or an app's own), verifies it, and only then calls it purged. Four steps,
/// each safe to run again after a crash, and nothing irreversible before the rows are gone:
///
/// 1. `lock-and-mark` — re-checks lifecycle's record of the account under the write lock
///    and moves it to `purging`; from then on restore is refused.
/// 2. `erase-rows` — first checks that this role can erase what the map names (row level
///    security it does not bypass, or a missing privilege, stops here with the table
///    named). Then table after table in the plan's order (children first), in bounded
///    batches, each its own transaction together with its counts and the files the erased
///    rows named (recorded in lifecycle's own state, from the rows themselves: `RETURNING`
///    on a delete, read before a mask): rows are deleted, or masked where the map keeps
///    them; the transaction that finds nothing more to erase signs out sessions begun since.
///    Then the residue scan (`ResidueScan`), in a read transaction shared with the purges
///    running alongside (`ResidueScanBatcher`): every readable table searched for the
///    identifiers read from the user row (key, lookup values). A hit leaves the user row,
///    and with it the identifiers, for the next attempt (nothing of them is stored), audits
///    where it found them, and stops the job for good (dead, exit 77, each table, column
///    and row named) until the map maps or allows what holds them: running again would find
///    the same. Only then is the user row erased, in its own transaction. A refusal by the
///    database rolls the batch back and names the table; the job retries with every file
///    still in place.
/// 3. `delete-files` — each recorded file that no row the purge keeps still names (another
///    account's, or a row kept masked), and that is not one of lifecycle's own, is deleted
///    and checked gone; then lifecycle's own files of the account (export archives).
/// 4. `verify` — a database step: every mapped table read again for the account, as the
///    same role, through the same predicates: a deleted table must hold none of its rows, a
///    masked one only the mask, the user row must be gone or masked. Only that read, in the
///    transaction that marks the account purged and audits the receipt (with what the
///    residue scan read), moves it to `purged`; a row found fails the attempt naming the table.
///
/// Steps 2 and 3 run in every attempt and are not recorded as done: an attempt that ends
/// before `verify` commits (a crash, a row found) is followed by one that erases and deletes
/// again what is left or was written since (one empty batch when nothing is), and each
/// account costs three commits fewer than recording them would.
///
/// (A job recorded by an earlier version may hold `delete-blobs` or `erase-user` steps, or be
/// the reference app's own purge, moved to `purging` with its account: the steps above carry
/// on after them all the same.)
struct AppPurgeJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>
    let appData: AppDataCache
    /// The residue scans of the purges running at once in this process, one pass a batch.
    let scans: ResidueScanBatcher

    var kind: JobKind<Store.Transaction> {
        JobKind(name: DeletionJobs.purgeKind, steps: [
            JobStep("check-access", external: checkAccess, runsEveryAttempt: true),
            JobStep("lock-and-mark", database: lockAndMark),
            JobStep("erase-rows", external: eraseRows, runsEveryAttempt: true),
            JobStep("delete-files", external: deleteFiles, runsEveryAttempt: true),
            JobStep("verify", database: verify),
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

    /// The audit receipt: what the purge removed, per table, and what the verification read
    /// found; no personal data.
    struct Receipt: Codable, Sendable {
        struct Table: Codable, Sendable {
            var deleted: Int
            var masked: Int
            /// Rows of the table the purge found as the account's (deleted + masked).
            var before: Int
            /// What the verification read found left as it was: 0, or there is no receipt.
            var after: Int
        }

        struct Verification: Codable, Sendable {
            var result: String
            var tablesChecked: Int
            var rowsLeft: Int
            /// How long the read took (what verifying costs a purge: `make bench` sums it).
            var milliseconds: Double?

            enum CodingKeys: String, CodingKey {
                case result, tablesChecked = "tables_checked", rowsLeft = "rows_left", milliseconds
            }
        }

        struct KeptFiles: Codable {
            var table: String
            var columns: [String]
            var rowsKept: Int
            var reason: String

            enum CodingKeys: String, CodingKey { case table, columns, rowsKept = "rows_kept", reason }
        }

        var rows: [String: Table]
        var rowsTotal: Int
        var blobs: Int
        var blobBytes: Int64
        /// Files the erased rows named that stay, because a row the purge keeps still names them.
        var blobsKept: Int
        /// Files found under the user's folders (`blob_prefixes:`) that no erased row named:
        /// deleted with the others (in `blobs`), or kept where a kept row names them. Absent
        /// when the map declares no folder.
        var blobsUnnamed: Int?
        /// Files kept because their key crosses a symbolic link in the blob store (not in
        /// `blobs_kept`), and the links to replace. Absent when there were none.
        var blobsRefused: RecordedFiles<Store>.Refused?
        /// Rows kept (masked) whose file columns the mask leaves: their files stay with them.
        /// Absent when no kept row names a file.
        var filesKeptWithRows: [KeptFiles]?
        var user: String
        var verification: Verification
        /// What the residue scan read after erasure, and what the map allowed to stay.
        var residue: ResidueScan.Summary?
        var purgeJob: JobID
        /// Every hold the account had (all ended, or it would not be purged).
        var holds: [AccountHold]?

        enum CodingKeys: String, CodingKey {
            case rows, rowsTotal = "rows_total", blobs, blobBytes = "blob_bytes", blobsKept = "blobs_kept", blobsUnnamed = "blobs_unnamed", blobsRefused = "blobs_refused",
                 filesKeptWithRows = "files_kept_with_rows", user,
                 verification, residue,
                 purgeJob = "purge_job", holds
        }
    }

    // MARK: 0. check-access

    /// Before the account is marked purging: a role that row level security holds back, or
    /// that lacks a privilege the map needs, is how this installation is set up, not the
    /// job's fault, and no retry mends it. The job is handed back (`WorkerNotReady`: still
    /// due, its attempts untouched, the reason kept for `jobs check`), `purge` exits 77, and
    /// the account stays pending deletion, so signing in still restores it, until the grant
    /// or the policy changes. Never recorded: every attempt checks the role that runs it.
    private func checkAccess(_ context: StepContext) async throws -> StepResult {
        let key = try context.payload(PurgePayload.self).account
        let state = try await services.store.read { tx in try tx.subject(key: key)?.state }
        // Not due, restored or done: lock-and-mark says so and ends the job.
        guard state == .pendingDeletion || state == .purging else { return StepResult(output: nil, recorded: false) }
        let data = try await appData.appData(services)
        do {
            try await AppErasure.requireAccess(data, store: services.store)
        } catch let refused as AppErasure.AccessRefused {
            throw WorkerNotReady("""
                \(refused.description)
                Nothing was changed: the account stays \(state == .purging ? "purging" : "pending deletion (signing in still restores it)") \
                and its purge waits, its attempts unused, until the role can (`lifecycle map check` says what is missing)
                """)
        }
        return StepResult(output: nil, recorded: false)
    }

    // MARK: 1. lock-and-mark

    /// A database step: the state check and the move to `purging` commit together with
    /// the step's done-mark. Never purges an account that is active or still in its grace.
    private func lockAndMark(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let key = try context.payload(PurgePayload.self).account
        func finish(_ outcome: LockOutcome.Value, stopped: String? = nil) throws -> StepResult {
            context.logger.info("purge not needed", metadata: ["account": "\(key)", "outcome": "\(outcome.rawValue)"])
            return try .output(LockOutcome(outcome: outcome), finishesJob: true, stopped: stopped)
        }
        if try services.store.job(id: context.job.id, in: tx)?.cancelRequested == true { return try finish(.cancelled) }
        // Under the account's lock, which `accounts hold` takes too (PurgeJob.swift).
        if try tx.subject(key: key) != nil { _ = try tx.lockSubject(key: key, now: context.now) }
        if let hold = try HoldCheck.activeHold(key, now: context.now, in: tx) {
            context.logger.notice("purge withheld: the account is on hold", metadata: ["account": "\(key)", "hold": "\(HoldCheck.describe(hold))"])
            return try finish(.held, stopped: HoldCheck.purgeWithheld(key, hold))
        }
        if try !tx.beginSubjectPurge(key: key, now: context.now) {
            switch try tx.deletionState(key: key) {
            case .purged: return try finish(.alreadyPurged)
            case .active: return try finish(.restored)
            case .pendingDeletion: return try finish(.notDue)
            case .purging: break  // An earlier attempt got this far: carry on from here.
            }
        }
        try ExportJobs.withdraw(accountID: key, actor: "purge", purgeJob: context.job.id, store: services.store, now: context.now, in: tx)
        // What deletion set in the app's tables is no longer to be put back, and the values
        // kept for that are the user's: they go before anything else.
        _ = try tx.takeGraceValues(key: key)
        return StepResult(output: nil)
    }

    // MARK: 2. erase-rows

    private func eraseRows(_ context: StepContext) async throws -> StepResult {
        let key = try context.payload(PurgePayload.self).account
        let data = try await appData.appData(services)
        try await AppErasure.requireAccess(data, store: services.store)
        // A key that cannot be one folder of `blob_prefixes:` stops the purge before any row goes.
        do { _ = try data.plan.subject.blobPrefixes.map { try $0.resolved(key: key) } } catch { throw PermanentJobFailure("\(error)") }
        try await CatalogFiles(services: services).record(key: key, data: data, batch: try policy.get().purgeBlobBatch, context: context)
        try await erase(key: key, data: data, context: context)
        return StepResult(output: nil, recorded: false)
    }

    /// The account's rows, recorded files and all, then the residue scan, then the user
    /// row. Run again, it erases only what is left (or what the app wrote since).
    private func erase(key: String, data: AppData, context: StepContext) async throws {
        let policy = try policy.get()
        let sql = data.sql
        let eraser = RowEraser(store: services.store, data: data, policy: policy) { key, tx in try tx.subject(key: key)?.state == .purging }
        // The scan's next pass waits for this purge (or for as long as a pass takes).
        await scans.approach()
        let lookupValues: [String?]
        let scan = ResidueScan(plan: data.plan, dialect: sql.dialect)
        let lookup = data.plan.subject.lookup
        do {
            let userRowLeft = try await eraser.erase(key: key, context: context) { tx, counts in
                try RowEraser<Store>.record(counts, key: key, in: tx)
                // Not again once it is erased: a mask would count the row twice, and its lookup
                // values would be the masked ones.
                guard case .integer(let left) = try tx.rows(sql.subjectRemaining(key: key)).first?.first, left > 0 else { return false }
                // Sessions signed in since the request (an app that does not restore on sign-in)
                // end now, whatever the scan finds.
                _ = try data.signOut(key: key, in: tx)
                return true
            }
            guard userRowLeft == true else {
                await scans.withdraw()
                return
            }
            // The identifiers are read from the user row, which stays until the scan found
            // nothing: a stopped purge keeps them there for the next attempt, and nothing of
            // them is stored.
            lookupValues = try await services.store.read { tx in try lookup.map { try tx.rows(sql.subjectValue(column: $0, key: key)).first?.first?.text } }
        } catch {
            await scans.withdraw()
            throw error
        }
        let store = services.store
        // The scan reads (no write lock held), with the purges running alongside in one pass.
        let (summary, hits) = try await scans.scan(scan.identifiers(key: key, lookupValues: lookupValues)) { batch in
            try await store.read { tx in try scan.run(batch: batch, in: tx) }
        }
        guard hits.isEmpty else {
            let found = ResidueScan.Found(hits: hits)
            // Named in the audit (tables, columns and rows; never a value), for whoever
            // reads the account's history rather than the job's.
            let detail = try JobJSON.encode(ResidueStop(found: hits.map(\.description), purgeJob: context.job.id))
            try await store.write { tx in
                try tx.recordAudit(AuditEvent(at: context.now, actor: "purge", action: DeletionAudit.purge, accountID: key, outcome: "residue_found", detail: detail))
            }
            throw PermanentJobFailure(found.description)
        }
        try await store.write { tx in
            guard try tx.subject(key: key)?.state == .purging else { return }
            guard case .integer(let left) = try tx.rows(sql.subjectRemaining(key: key)).first?.first, left > 0 else { return }
            try tx.prepareErasure(settings: data.plan.eraseSettings)
            let now = try lookup.map { try tx.rows(sql.subjectValue(column: $0, key: key)).first?.first?.text }
            guard now == lookupValues else {
                throw PurgeIncomplete("the account's lookup values changed while the residue scan read; the purge will scan again")
            }
            // `lifecycle audit <email>` finds the account by these once its values are gone.
            try LookupDigest.record(values: lookupValues, key: key, in: tx)
            var counts: [String: PurgeCounts] = [:]
            var files: [String] = []
            try RowEraser<Store>.eraseUserRow(key: key, data: data, action: .erasingUser, counts: &counts, files: &files, in: tx)
            if !files.isEmpty { try tx.recordPurgeFiles(key: key, files: files) }
            try RowEraser<Store>.record(counts, key: key, in: tx)
            try tx.addPurgeProgress(key: key, table: ResidueScan.progressTables, deleted: summary.tablesScanned, masked: summary.columnsScanned)
            try tx.addPurgeProgress(key: key, table: ResidueScan.progressRows, deleted: summary.rowsScanned, masked: 0)
            try tx.addPurgeProgress(
                key: key, table: ResidueScan.progressTime, deleted: Int((summary.milliseconds ?? 0) * 1000), masked: summary.passAccounts ?? 1)
        }
    }

    // MARK: 3. delete-files

    private func deleteFiles(_ context: StepContext) async throws -> StepResult {
        let key = try context.payload(PurgePayload.self).account
        let data = try await appData.appData(services)
        try await removeFiles(key: key, data: data, context: context)
        return StepResult(output: nil, recorded: false)
    }

    /// Every recorded file, settled: deleted (and checked gone) unless a row the purge keeps
    /// still names it or it is one of lifecycle's own; then lifecycle's own files of the
    /// account (export archives). Files are compared as exact bytes: an NFC and an NFD
    /// spelling of one name are two files.
    private func removeFiles(key: String, data: AppData, context: StepContext) async throws {
        let policy = try policy.get()
        let (store, blobs) = (services.store, services.blobs)
        let prefixes = try data.plan.subject.blobPrefixes.map { try $0.resolved(key: key) }
        _ = try await recordFiles(under: prefixes, key: key, data: data, batch: policy.purgeBlobBatch)
        try await RecordedFiles(services: services, policy: policy).settle(key: key, sql: data.sql, context: context)
        // Listed again: an upload that landed while the others were deleted is the next attempt's.
        let arrived = try await recordFiles(under: prefixes, key: key, data: data, batch: policy.purgeBlobBatch)
        guard arrived == 0 else {
            throw PurgeIncomplete("\(arrived) file(s) appeared under \(prefixes.joined(separator: ", ")) while the purge deleted files there; the purge will retry")
        }

        // Lifecycle's own files of the account (export archives) live under its prefix.
        let prefix = BlobKey.accountPrefix(BlobKey.segment(forID: key))
        while true {
            let page = try await blobs.list(prefix: prefix, after: nil, limit: policy.purgeBlobBatch)
            if page.isEmpty { break }
            try await blobs.delete(keys: page.map(\.key))
            try await store.write { tx in
                try tx.recordPurgeFiles(key: key, files: page.map(\.key))
                try tx.settlePurgeFiles(key: key, files: page.map { PurgeFile(key: $0.key, state: .deleted, bytes: $0.size) })
            }
        }
        if let survivor = try await blobs.list(prefix: prefix, after: nil, limit: 1).first {
            throw PurgeIncomplete("file \(survivor.key) is still there after deleting \(prefix); the purge will retry")
        }
        let archives = try await services.deleteExportArchives(accountKey: key, batch: policy.purgeBlobBatch)
        if !archives.isEmpty {
            try await store.write { tx in
                try tx.recordPurgeFiles(key: key, files: archives.map(\.key))
                try tx.settlePurgeFiles(key: key, files: archives.map { PurgeFile(key: $0.key, state: .deleted, bytes: $0.size) })
            }
        }
    }

    /// Progress row counting the files `recordFiles(under:)` found that no erased row named.
    static var unnamedFilesProgress: String { "lifecycle blob prefixes: unnamed files" }

    /// Records every file under the user's folders, page by page, for `RecordedFiles` to
    /// delete unless a kept row names it; returns how many no erased row had named. Only
    /// once the user row is erased, which happens after the residue scan found nothing: a
    /// purge stopped before that deletes no file it found by listing.
    private func recordFiles(under prefixes: [String], key: String, data: AppData, batch: Int) async throws -> Int {
        guard !prefixes.isEmpty else { return 0 }
        let (store, blobs, sql) = (services.store, services.blobs, data.sql)
        let erased = try await store.read { tx in
            guard try tx.subject(key: key)?.state == .purging else { return false }
            guard case .integer(let left) = try tx.rows(sql.subjectRemaining(key: key)).first?.first else { return false }
            return left == 0
        }
        guard erased else {
            throw PurgeIncomplete("the user row is not erased yet: files under \(prefixes.joined(separator: ", ")) wait for it; the purge will retry")
        }
        var unnamed = 0
        for prefix in prefixes {
            var after: String?
            while true {
                let page: [BlobInfo]
                do {
                    page = try await blobs.list(prefix: prefix, after: after, limit: batch)
                } catch let error as BlobStoreError where error.isUnsafePath {
                    // Her folder is a link: what it leads to is not the store's to list or delete.
                    try await store.write { tx in try RecordedFiles<Store>.recordRefusal(key: key, link: error.link ?? prefix, files: 0, in: tx) }
                    break
                }
                guard let last = page.last else { break }
                unnamed += try await store.write { tx in
                    let added = try tx.recordListedPurgeFiles(key: key, files: page.map(\.key))
                    try tx.addPurgeProgress(key: key, table: Self.unnamedFilesProgress, deleted: added, masked: 0)
                    return added
                }
                guard page.count == batch else { break }
                after = last.key
            }
        }
        return unnamed
    }

    // MARK: 4. verify

    /// A database step: the read, the mark and the receipt commit with the step's done-mark.
    private func verify(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let key = try context.payload(PurgePayload.self).account
        guard try tx.subject(key: key)?.state == .purging else { return StepResult(output: nil) }  // Committed by an earlier run.
        // Loaded by erase-rows and delete-files, which run in every attempt before this.
        guard let data = appData.loadedAppData else {
            throw PurgeIncomplete("the account data map is not loaded in this run; the purge will retry")
        }
        let now = context.now
        let jobID = context.job.id
        if data.plan.catalog.hasAccessControl {
            let problems = data.plan.accessProblems(try tx.tableAccess(data.plan.touchedTables.map(\.table)))
            guard problems.isEmpty else { throw AppErasure.AccessRefused(problems: problems) }
        }
        // Sessions signed in since the user row went (a row kept masked can still sign in
        // where the app does not restore on sign-in): none outlives the purge.
        _ = try data.signOut(key: key, in: tx)
        let started = ContinuousClock.now
        let left = try AppErasure.remainingRows(key: key, data: data, in: tx)
        let took = AppErasure.milliseconds(since: started)
        guard left.values.allSatisfy({ $0 == 0 }) else {
            let shown = left.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.value) row(s) of \($0.key)" }
            throw VerificationFailed(description: """
                verification found \(shown.joined(separator: ", ")) still the account's after erasure (written since, by the \
                app or a trigger?): the account is not marked purged, and the next attempt erases and verifies again
                """)
        }
        let files = try tx.takePurgeFiles(key: key)
        guard files.pending == 0 else {
            throw PurgeIncomplete("\(files.pending) file(s) of the account are not settled yet; the purge will retry")
        }
        var tables: [String: Receipt.Table] = [:]
        var progress = try tx.takePurgeProgress(key: key)
        let unnamedFiles = progress.removeValue(forKey: Self.unnamedFilesProgress)?.deleted ?? 0
        let refused = RecordedFiles<Store>.takeRefused(from: &progress)
        // A purge whose user row was erased by an earlier version has no scan to report.
        var residue = progress[ResidueScan.progressTables].map { scanned in
            ResidueScan.Summary(
                tablesScanned: scanned.deleted, columnsScanned: scanned.masked, rowsScanned: progress[ResidueScan.progressRows]?.deleted ?? 0,
                found: 0, allowed: data.map.residue.allow.isEmpty ? nil : data.map.residue.allow.map(\.description), reason: data.map.residue.reason,
                notScanned: ResidueScan(plan: data.plan, dialect: data.sql.dialect).notScanned)
        }
        let scanTime = progress.removeValue(forKey: ResidueScan.progressTime)
        residue?.milliseconds = scanTime.map { Double($0.deleted) / 1000 }
        residue?.passAccounts = scanTime?.masked
        for (table, count) in progress where count != PurgeCounts() && table != ResidueScan.progressTables && table != ResidueScan.progressRows {
            tables[table] = Receipt.Table(deleted: count.deleted, masked: count.masked, before: count.deleted + count.masked, after: left[table] ?? 0)
        }
        for (table, count) in try tx.deleteLifecycleRows(accountID: key) where count > 0 {
            tables["lifecycle." + table] = Receipt.Table(deleted: count, masked: 0, before: count, after: 0)
        }
        // A purge begun by an earlier version counted the files it deleted here.
        let inventory = try tx.takePurgeInventory(accountID: key)
        guard try tx.markSubjectPurged(key: key, at: now) else {
            throw PermanentJobFailure("account \(key) is no longer purging: refusing to mark it purged")
        }
        var keptFiles: [Receipt.KeptFiles] = []
        for (table, columns) in data.plan.fileColumnsKeptWithMaskedRows {
            let name = data.displayName(table)
            guard let masked = tables[name]?.masked, masked > 0 else { continue }
            keptFiles.append(.init(
                table: name, columns: columns, rowsKept: masked,
                reason: "the rows are kept (masked) and the map does not mask these file columns, so the files stay with the rows"))
        }
        let receipt = Receipt(
            rows: tables, rowsTotal: tables.values.reduce(0) { $0 + $1.deleted + $1.masked },
            blobs: files.deleted + (inventory?.blobCount ?? 0), blobBytes: files.bytes + (inventory?.blobBytes ?? 0),
            blobsKept: files.kept - (refused?.files ?? 0), blobsUnnamed: data.plan.subject.blobPrefixes.isEmpty ? nil : unnamedFiles,
            blobsRefused: refused, filesKeptWithRows: keptFiles.isEmpty ? nil : keptFiles,
            user: data.plan.subject.erase == .delete ? "deleted" : "masked",
            verification: .init(result: "verified", tablesChecked: left.count, rowsLeft: 0, milliseconds: took),
            residue: residue, purgeJob: jobID, holds: try tx.holds(key: key))
        let detail = try JobJSON.encode(receipt)
        try tx.recordAudit(AuditEvent(at: now, actor: "purge", action: DeletionAudit.purge, accountID: key, outcome: "purged", detail: detail))
        LifecycleMetrics.accountPurged(blobs: receipt.blobs, blobBytes: receipt.blobBytes, rows: receipt.rowsTotal)
        context.logger.notice("account purged", metadata: [
            "account": "\(key)", "rows": .stringConvertible(receipt.rowsTotal), "blobs": .stringConvertible(receipt.blobs),
            "blob_bytes": .stringConvertible(receipt.blobBytes), "verification": "verified",
        ])
        // The step's output is the audited receipt.
        return StepResult(output: detail)
    }
}

/// The audit's record of a purge the residue scan stopped: where, never what.
struct ResidueStop: Encodable {
    var found: [String]
    var purgeJob: JobID

    enum CodingKeys: String, CodingKey {
        case found, purgeJob = "purge_job"
    }
}

/// The verification read found rows of the account after its erasure: retried, not purged.
struct VerificationFailed: Error, CustomStringConvertible {
    let description: String
}

/// What erasing and exporting an app's account need beyond the statements: the role's
/// access to every table, and the verification read.
public enum AppErasure {
    /// Starts the message of a purge a role cannot run (row level security, a privilege).
    public static let accessRefusedMarker = AccessRefused.marker

    /// Row level security this role does not bypass, or a missing privilege: a purge would
    /// erase nothing and report success, an export hand out part of an account.
    struct AccessRefused: Error, CustomStringConvertible {
        let problems: [String]
        var description: String {
            Self.marker + ":\n" + problems.map { "  - " + $0 }.joined(separator: "\n")
        }

        /// Starts every message of one: how a purge run tells this cause from a retry.
        static let marker = "this database role cannot see or change every row the data map names"
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return (Double(elapsed.components.seconds) * 1_000 + Double(elapsed.components.attoseconds) / 1e15 * 1_000).rounded() / 1_000
    }

    static func requireAccess<Store: LifecycleStore>(_ data: AppData, store: Store, exportOnly: Bool = false) async throws {
        guard data.plan.catalog.hasAccessControl else { return }
        let tables = data.plan.touchedTables.map(\.table)
        let access = try await store.read { tx in try tx.tableAccess(tables) }
        let problems = data.plan.accessProblems(access, exportOnly: exportOnly)
        guard problems.isEmpty else { throw AccessRefused(problems: problems) }
    }

    /// What a purge of the account would do, done for real inside a transaction that is
    /// then rolled back: rows deleted and masked per table (the user row and lifecycle's
    /// own records of the account included, as the receipt counts them), the files the
    /// erased rows name, and the first refusal by the database, naming the table.
    public struct Rehearsal: Sendable, Encodable {
        public var rows: [String: PurgeCounts]
        public var files: Int
        public var refused: String?
        /// Rows the verification read would still find (none, unless something is wrong).
        public var rowsLeft: Int
        /// What the residue scan read in the rehearsal (a hit is in `refused`).
        public var residue: ResidueScan.Summary?

        enum CodingKeys: String, CodingKey {
            case rows, files, refused, rowsLeft = "rows_left", residue
        }
    }

    private struct RolledBack: Error {
        let rehearsal: Rehearsal
    }

    public static func rehearse<Store: LifecycleStore>(key: String, data: AppData, store: Store) async throws -> Rehearsal {
        let tables = data.plan.touchedTables.map(\.table)
        return try await store.writeUnshared { tx in
            let problems = data.plan.accessProblems(try tx.tableAccess(tables))
            guard problems.isEmpty else {
                return Rehearsal(rows: [:], files: 0, refused: AccessRefused(problems: problems).description, rowsLeft: 0)
            }
            do {
                return try store.savepoint(in: tx) { () throws -> Rehearsal in
                    try tx.prepareErasure(settings: data.plan.eraseSettings)
                    var counts: [String: PurgeCounts] = [:]
                    var files: [String] = []
                    _ = try RowEraser<Store>.eraseBatch(key: key, data: data, budget: Int(Int32.max), counts: &counts, files: &files, in: tx)
                    let lookupValues = try data.plan.subject.lookup.map { try tx.rows(data.sql.subjectValue(column: $0, key: key)).first?.first?.text }
                    try RowEraser<Store>.eraseUserRow(key: key, data: data, action: .erasingUser, counts: &counts, files: &files, in: tx)
                    for (table, count) in try tx.lifecycleRowCounts(accountID: key) where count > 0 {
                        counts["lifecycle." + table] = PurgeCounts(deleted: count)
                    }
                    let left = try remainingRows(key: key, data: data, in: tx).filter { $0.value > 0 }
                    // Rows the erasure leaves as they were (a trigger that writes back what a mask
                    // empties): the verification would fail every attempt.
                    var refused = left.isEmpty ? nil : "the verification read would find " + left.sorted { $0.key < $1.key }
                        .map { "\($0.value) row(s) of \($0.key)" }.joined(separator: ", ") + " still the account's after erasure"
                    let scan = ResidueScan(plan: data.plan, dialect: data.sql.dialect)
                    let (residue, hits) = try scan.run(scan.identifiers(key: key, lookupValues: lookupValues), in: tx)
                    if !hits.isEmpty { refused = [refused, ResidueScan.Found(hits: hits).description].compactMap { $0 }.joined(separator: "; ") }
                    throw RolledBack(rehearsal: Rehearsal(
                        rows: counts.filter { $0.value != PurgeCounts() }, files: files.count, refused: refused, rowsLeft: left.values.reduce(0, +),
                        residue: residue))
                }
            } catch let done as RolledBack {
                return done.rehearsal
            } catch let refused as ErasureRefused {
                return Rehearsal(rows: [:], files: 0, refused: refused.description, rowsLeft: 0)
            } catch let failure as PermanentJobFailure {
                return Rehearsal(rows: [:], files: 0, refused: failure.description, rowsLeft: 0)
            }
        }
    }

    /// Per mapped table (and the user table), how many of the account's rows are still as
    /// they were: every row of a deleted table, every unmasked row of a masked one.
    static func remainingRows<T: GeneratedSQLTransaction>(
        key: String, data: AppData, includingSubject: Bool = true, in tx: T
    ) throws -> [String: Int] {
        let tables = data.plan.tables
        var left: [String: Int] = [:]
        for table in tables { left[data.displayName(table.table.name)] = 0 }
        let userTable = data.displayName(data.plan.subject.table)
        if includingSubject { left[userTable, default: 0] += 0 }
        for statement in data.sql.verificationReads(key: key, includingSubject: includingSubject) {
            for row in try tx.rows(statement) {
                // Fails closed: a count it cannot read is not a zero.
                guard row.count == 2, case .integer(let position) = row[0], case .integer(let count) = row[1] else {
                    throw VerificationFailed(description: "the verification read returned a row it cannot read (\(row)); the account is not marked purged")
                }
                let name = Int(position) < tables.count ? data.displayName(tables[Int(position)].table.name) : userTable
                left[name, default: 0] += Int(count)
            }
        }
        return left
    }
}

/// An attempt that stopped short of purging with nothing wrong: what is left is the next attempt's.
struct PurgeIncomplete: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
