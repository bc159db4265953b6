import Foundation
import JobRunner

/// Deletes part of an account's data (the data map's `parts:`, chosen by the user on the
/// web deletion page or through the API) while the account stays open: the same erasure,
/// file handling and verification as a purge, restricted to the part's tables, and within
/// them to the rows the request recorded (RecordedRows: the part as the user saw it; a row
/// added since stays, what hangs on a recorded row goes with it). Three steps, each safe to
/// run again after a crash, nothing irreversible before the rows are gone:
///
/// 1. `erase-rows` — checks this role can erase what the parts name, then erases their
///    rows in bounded batches (RowEraser.swift), each transaction recording its counts and
///    the files the erased rows named; the last batch also sets the parts' `user_columns`.
///    Each batch first checks, under the account's lock, that it is still there, active or
///    in its grace period, and not on hold: a purge that has begun, or a hold, ends the job
///    with nothing more done, and a `deletion.part` event with outcome `stopped` says so
///    (after a hold, with the rows erased so far; their files wait, recorded, for a later
///    part deletion; after a purge began, the purge erases the rest and counts it all).
/// 2. `delete-files` — each recorded file that no row still names (the user's other rows
///    included: the account stays) is deleted and checked gone (RecordedFiles.swift); not
///    while the account is on hold.
/// 3. `verify` — a database step: the parts' tables read again for the account through
///    the same predicates, so the recorded rows only (none of them left, masked ones only
///    the mask, the user row's cleared columns as set); only then is the receipt audited
///    and the recorded keys forgotten (as by a stop), in the same transaction
///    (`deletion.part`, `lifecycle audit` shows it). A row found fails the attempt naming
///    the table, and the next attempt erases and verifies again.
struct PartDeletionJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>
    let appData: AppDataCache

    var kind: JobKind<Store.Transaction> {
        JobKind(name: DeletionJobs.partKind, steps: [
            JobStep("erase-rows", external: eraseRows, runsEveryAttempt: true),
            JobStep("delete-files", external: deleteFiles, runsEveryAttempt: true),
            JobStep("verify", database: verify),
        ])
    }

    /// Why the job ended without deleting the parts.
    struct Stopped: Codable, Sendable {
        enum Reason: String, Codable, Sendable {
            /// The account's purge began (it erases everything), or it is gone.
            case purging
            /// The account is on hold (`accounts hold`): nothing of it may be deleted now.
            case held
        }
        var stopped: Reason
    }

    /// The audit receipt: what went, per table, and what the verification read found; no personal data.
    struct Receipt: Codable, Sendable {
        var parts: [String]
        var rows: [String: AppPurgeJob<Store>.Receipt.Table]
        var rowsTotal: Int
        var blobs: Int
        var blobBytes: Int64
        /// Files the erased rows named that stay, because another row still names them.
        var blobsKept: Int
        /// Files kept because their key crosses a symbolic link in the blob store (see the purge's receipt).
        var blobsRefused: RecordedFiles<Store>.Refused?
        var verification: AppPurgeJob<Store>.Receipt.Verification
        var job: JobID

        enum CodingKeys: String, CodingKey {
            case parts, rows, rowsTotal = "rows_total", blobs, blobBytes = "blob_bytes", blobsKept = "blobs_kept", blobsRefused = "blobs_refused",
                 verification, job
        }
    }

    /// The parts' plan: their tables and the user row's columns they set.
    private func partData(_ payload: PartDeletionPayload, job: JobID) async throws -> (whole: AppData, part: AppData) {
        let whole = try await appData.appData(services)
        return (whole, try Self.part(of: whole, payload, job: job, dialect: services.store.dialect))
    }

    /// Restricted to the rows the request recorded, when it recorded them.
    private static func part(of whole: AppData, _ payload: PartDeletionPayload, job: JobID, dialect: SQLDialect) throws -> AppData {
        let plan = try whole.plan.restricted(to: payload.parts)
        let recorded = payload.recordedRows == true ? RecordedRows(job: job, tables: RecordedRows.tables(of: plan)) : nil
        return AppData(plan: plan, dialect: dialect, recorded: recorded)
    }

    private func directory(_ whole: AppData) -> AccountDirectory<Store> {
        AccountDirectory(data: whole)
    }

    /// nil while the parts may still be deleted; else why not. `locking` in a write
    /// transaction: the account's lock, which `accounts hold` and a purge's first step take.
    private static func stopReason(
        key: String, directory: AccountDirectory<Store>, now: Date, locking: Bool = true, in tx: Store.Transaction
    ) throws -> Stopped.Reason? {
        guard let entry = try directory.entry(id: key, in: tx, locking: locking, now: now), entry.state == .active || entry.state == .pendingDeletion else {
            return .purging
        }
        return try HoldCheck.activeHold(key, now: now, in: tx) == nil ? nil : .held
    }

    // MARK: 1. erase-rows

    private func eraseRows(_ context: StepContext) async throws -> StepResult {
        let payload = try context.payload(PartDeletionPayload.self)
        let key = payload.account
        let (whole, part) = try await partData(payload, job: context.job.id)
        try await AppErasure.requireAccess(part, store: services.store)
        try await CatalogFiles(services: services).record(key: key, data: part, batch: try policy.get().purgeBlobBatch, context: context)
        let directory = directory(whole)
        let now = context.now
        let sql = part.sql
        let eraser = RowEraser(store: services.store, data: part, policy: try policy.get()) { key, tx in
            try Self.stopReason(key: key, directory: directory, now: now, in: tx) == nil
        }
        let erased: Void? = try await eraser.erase(key: key, context: context) { tx, counts in
            var counts = counts
            if part.plan.erasesUserRow, case .integer(let left) = try tx.rows(sql.subjectRemaining(key: key)).first?.first, left > 0 {
                var files: [String] = []
                try RowEraser<Store>.eraseUserRow(key: key, data: part, action: .masking, counts: &counts, files: &files, in: tx)
                if !files.isEmpty { try tx.recordPurgeFiles(key: key, files: files) }
            }
            try RowEraser<Store>.record(counts, key: key, in: tx)
        }
        guard erased != nil else { return try await stop(payload, directory: directory, context: context) }
        return StepResult(output: nil, recorded: false)
    }

    /// Ends the job without deleting more, with a `stopped` event in the audit: after a
    /// hold, the rows erased so far (taken from the ledger; their recorded files stay
    /// pending, kept while the hold lasts); after a purge began, nothing is taken (the
    /// purge erases the rest and its receipt counts it all).
    private func stop(_ payload: PartDeletionPayload, directory: AccountDirectory<Store>, context: StepContext) async throws -> StepResult {
        let (key, now, job, dialect) = (payload.account, context.now, context.job.id, services.store.dialect)
        let reason = try await services.store.write { tx -> Stopped.Reason in
            let reason = try Self.stopReason(key: key, directory: directory, now: now, in: tx) ?? .purging
            try Self.auditStop(payload, reason: reason, job: job, now: now, dialect: dialect, in: tx)
            return reason
        }
        context.logger.notice("part deletion stopped", metadata: ["account": "\(key)", "reason": "\(reason.rawValue)"])
        // After a purge began there is nothing to tell: the purge erases the part with the rest.
        // After a hold the user's request is refused, and only a person can tell them.
        let refused = reason == .held ? """
            account \(key) is on hold, so nothing more of its part(s) \(payload.parts.joined(separator: ", ")) was deleted; \
            the user asks again once the hold ends (Jobs/runbooks/deletion-and-purge.md, section 6)
            """ : nil
        return try .output(Stopped(stopped: reason), finishesJob: true, stopped: refused)
    }

    private static func auditStop(
        _ payload: PartDeletionPayload, reason: Stopped.Reason, job: JobID, now: Date, dialect: SQLDialect, in tx: Store.Transaction
    ) throws {
        // One request, one event: a crash after this commits and before the step's done-mark
        // runs the step again, and the ledger's counts it took are gone by then.
        let recorded = try tx.auditEvents(accountID: payload.account).contains { event in
            guard event.action == DeletionAudit.partDeletion, event.outcome == "stopped", case .object(let detail)? = event.detailValue else { return false }
            return detail["job"] == .int(job)
        }
        if recorded { return }
        try tx.execute(DataMapSQL.forgetRecordedRows(job: job, dialect: dialect))
        var detail: [String: JSONValue] = [
            "parts": .array(payload.parts.map(JSONValue.string)), "stopped": .string(reason.rawValue), "job": .int(job),
        ]
        if reason == .held {
            var rows: [String: JSONValue] = [:]
            for (table, count) in try tx.takePurgeProgress(key: payload.account) where count != PurgeCounts() {
                rows[table] = .object(["deleted": .int(count.deleted), "masked": .int(count.masked)])
            }
            detail["rows_erased_before"] = .object(rows)
        }
        try tx.recordAudit(AuditEvent(
            at: now, actor: payload.actor, action: DeletionAudit.partDeletion, accountID: payload.account, outcome: "stopped", detail: detail))
    }

    // MARK: 2. delete-files

    private func deleteFiles(_ context: StepContext) async throws -> StepResult {
        let payload = try context.payload(PartDeletionPayload.self)
        let (whole, _) = try await partData(payload, job: context.job.id)
        let directory = directory(whole)
        let now = context.now
        // A hold that came after the rows went keeps their files (and a purge deletes them itself).
        if try await services.store.read({ tx in try Self.stopReason(key: payload.account, directory: directory, now: now, locking: false, in: tx) }) != nil {
            return try await stop(payload, directory: directory, context: context)
        }
        // The whole map's file columns: a file the user's other rows still name stays.
        try await RecordedFiles(services: services, policy: try policy.get()).settle(key: payload.account, sql: whole.sql, context: context)
        return StepResult(output: nil, recorded: false)
    }

    // MARK: 3. verify

    /// A database step: the read, the receipt and its audit commit with the step's done-mark.
    private func verify(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let payload = try context.payload(PartDeletionPayload.self)
        let key = payload.account
        // Loaded by erase-rows and delete-files, which run in every attempt before this.
        guard let whole = appData.loadedAppData else {
            throw PurgeIncomplete("the account data map is not loaded in this run; the job will retry")
        }
        let part = try Self.part(of: whole, payload, job: context.job.id, dialect: services.store.dialect)
        // A hold that came once the rows and files were gone deletes nothing here: the
        // receipt of what was done is written all the same.
        if let reason = try Self.stopReason(key: key, directory: directory(whole), now: context.now, in: tx), reason == .purging {
            try Self.auditStop(payload, reason: reason, job: context.job.id, now: context.now, dialect: services.store.dialect, in: tx)
            return try .output(Stopped(stopped: reason), finishesJob: true)
        }
        let started = ContinuousClock.now
        let left = try AppErasure.remainingRows(key: key, data: part, includingSubject: part.plan.erasesUserRow, in: tx)
        let took = AppErasure.milliseconds(since: started)
        guard left.values.allSatisfy({ $0 == 0 }) else {
            let shown = left.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.value) row(s) of \($0.key)" }
            throw VerificationFailed(description: """
                verification found \(shown.joined(separator: ", ")) of the deleted part(s) still the account's (written since, \
                by the app?): the next attempt erases and verifies again
                """)
        }
        let files = try tx.takePurgeFiles(key: key)
        guard files.pending == 0 else {
            throw PurgeIncomplete("\(files.pending) file(s) of the part(s) are not settled yet; the job will retry")
        }
        var tables: [String: AppPurgeJob<Store>.Receipt.Table] = [:]
        var progress = try tx.takePurgeProgress(key: key)
        let refused = RecordedFiles<Store>.takeRefused(from: &progress)
        for (table, count) in progress where count != PurgeCounts() {
            tables[table] = .init(deleted: count.deleted, masked: count.masked, before: count.deleted + count.masked, after: left[table] ?? 0)
        }
        let receipt = Receipt(
            parts: payload.parts, rows: tables, rowsTotal: tables.values.reduce(0) { $0 + $1.deleted + $1.masked },
            blobs: files.deleted, blobBytes: files.bytes, blobsKept: files.kept - (refused?.files ?? 0), blobsRefused: refused,
            verification: .init(result: "verified", tablesChecked: left.count, rowsLeft: 0, milliseconds: took), job: context.job.id)
        let detail = try JobJSON.encode(receipt)
        try tx.recordAudit(AuditEvent(
            at: context.now, actor: payload.actor, action: DeletionAudit.partDeletion, accountID: key, outcome: "erased", detail: detail))
        try tx.execute(DataMapSQL.forgetRecordedRows(job: context.job.id, dialect: services.store.dialect))
        context.logger.notice("part of an account deleted", metadata: [
            "account": "\(key)", "parts": "\(payload.parts.joined(separator: ","))", "rows": .stringConvertible(receipt.rowsTotal),
            "blobs": .stringConvertible(receipt.blobs), "verification": "verified",
        ])
        return StepResult(output: detail)
    }
}

/// A part deletion's payload: the account, the parts and who asked (for the audit); no personal data.
public struct PartDeletionPayload: Codable, Sendable, Equatable {
    public var account: String
    public var parts: [String]
    /// `user`, `user:email-link`, `operator:NAME`: the receipt's actor.
    public var actor: String
    /// Whether the request recorded the part's rows (RecordedRows): then only those go.
    /// nil in a request queued by a version before the record, whose job erases the part
    /// as it stands when it runs, as that version promised.
    public var recordedRows: Bool?

    public init(account: String, parts: [String], actor: String, recordedRows: Bool? = nil) {
        self.account = account
        self.parts = parts
        self.actor = actor
        self.recordedRows = recordedRows
    }

    enum CodingKeys: String, CodingKey {
        case account, parts, actor, recordedRows = "recorded_rows"
    }
}
