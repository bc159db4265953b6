import Archiving
import Foundation
import JobRunner

/// What `lifecycle export` (or an app calling `requestExport`) enqueues.
struct ExportPayload: Codable, Sendable {
    var accountID: String
    var format: String
    var skipMissingPhotos: Bool
    var allowPending: Bool
    /// `user`, or `operator:<name>`.
    var requestedBy: String
}

/// The data export: one archive with every exported table as JSON and CSV,
/// account.json and the photos, published under the account's blob prefix, then a
/// signed 7-day link and a notification.
///
/// Killed at any point and run again, it leaves one archive and one notification:
/// the database steps take effect exactly once; the outside steps use names fixed by
/// the export id (scratch folder, temporary key, final key), so a rerun overwrites or
/// finds what the killed run left; the notification is an outbox row under a unique key.
///
/// The archive is written from the data map and the account's state is lifecycle's record
/// of it; the notification's recipient is read from the app's user row, so that step reads
/// through the map outside the step's transaction and relies on the outbox's unique key for
/// its one message.
struct ExportJob<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    /// The data map checked against the catalog, read once per worker: every table is
    /// read through SQL generated from it.
    let appData: AppDataCache

    var kind: JobKind<Store.Transaction> {
        JobKind(name: ExportJobs.exportKind, steps: [
            JobStep("check-signing-key", external: { try await self.checkSigningKey($0) }),
            JobStep("snapshot", database: { try self.snapshot($0, $1) }),
            JobStep("write-archive", external: { try await self.writeArchive($0) }),
            JobStep("verify-archive", external: { try await self.verifyArchive($0) }),
            JobStep("publish", external: { try await self.publish($0) }),
            JobStep("mark-ready", database: { try self.markReady($0, $1) }),
            JobStep("sign-link", external: { try await self.signLink($0) }),
            JobStep("notify", external: { try await self.notify($0) }),
            JobStep("deliver", external: { try await self.deliver($0) }),
        ])
    }

    struct Snapshot: Codable, Sendable {
        var exportID: String
        var cutoffAt: Date
    }

    struct Written: Codable, Sendable {
        var temporaryKey: String
        var bytes: Int64
        var entries: Int
        var expiresAt: Date
        var rowCounts: [String: Int]
        var photos: Int
        var omittedPhotos: Int
        var tablesSeconds: Double
        var archiveSeconds: Double
        /// Optional: outputs recorded before these were measured lack them.
        var archiveCPUSeconds: Double?
        var finalSyncSeconds: Double?
        /// The archive file as it was when every byte of it had been read back and compared
        /// while it was written; nil when it was not (another store, a tar.gz, no direct I/O).
        var readBackFile: StoredFileIdentity?
    }

    struct Verified: Codable, Sendable {
        var entries: Int
        var bytes: Int64
        var omittedPhotos: Int
    }

    struct Published: Codable, Sendable {
        var archiveKey: String
    }

    struct Signed: Codable, Sendable {
        var link: String
    }

    struct Notified: Codable, Sendable {
        var outboxID: Int64
    }

    struct Delivered: Codable, Sendable {
        var delivered: Bool
        var note: String
    }

    // MARK: 0. check-signing-key

    /// Before any work: a worker that could not sign the link would build an archive nobody
    /// is sent. A step of its own so that reading the key file happens outside the snapshot's
    /// transaction, which holds SQLite's writer; never recorded, so every attempt checks the
    /// key of the worker that claimed it.
    private func checkSigningKey(_ context: StepContext) async throws -> StepResult {
        _ = try withSigningKey { try services.requireLinkSigner() }
        return StepResult(output: nil, recorded: false)
    }

    // MARK: 1. snapshot

    /// Database only, so it happens exactly once: the export id and the cut-off instant
    /// that every later step, and every rerun, uses.
    private func snapshot(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let payload = try context.payload(ExportPayload.self)
        guard ArchiveFormat(rawValue: payload.format) != nil else {
            throw PermanentJobFailure("unknown archive format '\(payload.format)' (zip or tar.gz)")
        }
        try Self.requireExportable(accountID: payload.accountID, state: try tx.deletionState(key: payload.accountID), allowPending: payload.allowPending)
        let cutoff = Date(timeIntervalSince1970: context.now.timeIntervalSince1970.rounded(.down))
        let exportID = UUID().uuidString.lowercased()
        try tx.insertExport(ExportRecord(
            id: exportID, accountID: payload.accountID, jobID: context.job.id, format: payload.format, state: .building,
            requestedBy: payload.requestedBy, cutoffAt: cutoff))
        return try .output(Snapshot(exportID: exportID, cutoffAt: cutoff))
    }

    // MARK: 2. write-archive

    /// Builds the archive in a scratch folder named by the export id and stores it under
    /// the temporary key: a rerun after a crash overwrites both instead of adding more.
    private func writeArchive(_ context: StepContext) async throws -> StepResult {
        let (payload, snapshot, format) = try inputs(context)
        // A worker started without `--exports` would publish the archive among the app's
        // files; the job is not at fault, so it waits for a worker that has the setting.
        guard services.exportsApart else {
            throw WorkerNotReady("""
                this worker has no export store (--exports / LIFECYCLE_EXPORTS): an archive in the blob store sits among the \
                app's files, which it may serve to anyone; this export waits until a worker with an export store runs it
                """)
        }
        let settings = try ExportSettings(policies: services.policies)
        let expiresAt = Date(timeIntervalSince1970: (context.now.timeIntervalSince1970 + settings.linkLifetime).rounded(.down))
        let (built, key, readBackFile) = try await buildAndStore(context, payload, snapshot, format, settings, expiresAt)
        return try .output(Written(
            temporaryKey: key, bytes: built.bytes, entries: built.entries, expiresAt: expiresAt, rowCounts: built.rowCounts,
            photos: built.photos, omittedPhotos: built.omittedFiles,
            tablesSeconds: milliseconds(built.tablesSeconds), archiveSeconds: milliseconds(built.archiveSeconds),
            archiveCPUSeconds: milliseconds(built.archiveCPUSeconds), finalSyncSeconds: milliseconds(built.finalSyncSeconds),
            readBackFile: readBackFile))
    }

    private func milliseconds(_ seconds: Double) -> Double {
        (seconds * 1_000).rounded() / 1_000
    }

    private func buildAndStore(
        _ context: StepContext, _ payload: ExportPayload, _ snapshot: Snapshot, _ format: ArchiveFormat,
        _ settings: ExportSettings, _ expiresAt: Date
    ) async throws -> (BuiltArchive, String, StoredFileIdentity?) {
        let work = ExportScratch.workDirectory(for: services.exports, exportID: snapshot.exportID)
        // Whatever happens, no copy of the account's data stays in the scratch folder.
        defer { try? FileManager.default.removeItem(atPath: work) }
        try await requireStillExportable(payload, snapshot, format)
        let built = try await ExportArchiveBuilder(
            services: services, settings: settings, appData: try await appData.appData(services), exportID: snapshot.exportID,
            subjectKey: payload.accountID, format: format, cutoff: snapshot.cutoffAt, expiresAt: expiresAt,
            skipMissingFiles: payload.skipMissingPhotos, logger: context.logger, progress: context.progress
        ).build()
        let key = ExportNames.temporaryKey(accountID: payload.accountID, exportID: snapshot.exportID, format: format)
        try await requireStillExportable(payload, snapshot, format)
        _ = try await services.exports.put(key: key, fromFile: built.path, moving: true)
        // Only if the blob store renamed this very file into place does the stored archive
        // hold the bytes that were compared, and the verification rely on them.
        var readBackFile: StoredFileIdentity?
        if let compared = built.comparedFile, let files = services.exports as? FileSystemBlobStore,
           let stored = StoredFileIdentity(path: try files.path(for: key)), stored.isSameFile(as: compared) {
            readBackFile = stored
        }
        // Purge lists the account's blobs once the account is `purging`: an archive stored
        // just after that listing would outlive the account, so look once more.
        try await requireStillExportable(payload, snapshot, format)
        return (built, key, readBackFile)
    }

    // MARK: 3. verify-archive

    /// Reads the stored archive back and checks every entry against manifest.json. A
    /// failed check writes the archive again once (same names, same content) before
    /// giving up for this attempt.
    private func verifyArchive(_ context: StepContext) async throws -> StepResult {
        let (payload, snapshot, format) = try inputs(context)
        let written = try output(context, "write-archive", Written.self)
        let root = ExportNames.rootFolder(accountID: payload.accountID, cutoff: snapshot.cutoffAt)
        do {
            let summary = try await verifyStored(
                key: written.temporaryKey, root: root, exportID: snapshot.exportID, format: format, readBackFile: written.readBackFile)
            return try .output(Verified(entries: summary.entries, bytes: written.bytes, omittedPhotos: written.omittedPhotos))
        } catch let failure as ExportVerificationFailure {
            context.logger.warning("the stored archive failed verification; writing it again", metadata: ["reason": "\(failure.message)"])
            let settings = try ExportSettings(policies: services.policies)
            let (built, key, readBackFile) = try await buildAndStore(context, payload, snapshot, format, settings, written.expiresAt)
            let summary = try await verifyStored(
                key: key, root: root, exportID: snapshot.exportID, format: format, readBackFile: readBackFile)
            return try .output(Verified(entries: summary.entries, bytes: built.bytes, omittedPhotos: built.omittedFiles))
        }
    }

    /// `readBackFile`: the archive file whose every byte was compared as it was written;
    /// if the stored archive is still that file, its entries' data is not read again.
    private func verifyStored(
        key: String, root: String, exportID: String, format: ArchiveFormat, readBackFile: StoredFileIdentity?
    ) async throws -> ExportArchiveVerifier.Summary {
        if let files = services.exports as? FileSystemBlobStore {
            let path = try files.path(for: key)
            let compared = readBackFile != nil && StoredFileIdentity(path: path) == readBackFile
            return try await BlockingWork.run {
                try ExportArchiveVerifier.verify(path: path, root: root, exportID: exportID, format: format, comparedWhenWritten: compared)
            }
        }
        // Other stores: fetch a local copy first; a ZIP is read through its central directory, which needs seeking.
        let work = ExportScratch.workDirectory(for: services.exports, exportID: exportID)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: work) }
        let local = work + "/verify.\(format.fileExtension)"
        let output = try HashingFileOutput(path: local)
        try await services.exports.read(key: key, chunkSize: 1 << 20) { chunk in
            output.append(UnsafeBufferPointer(start: chunk.baseAddress?.assumingMemoryBound(to: UInt8.self), count: chunk.count))
            try output.flushIfFull()
        }
        _ = try output.finish(archivePath: "")
        return try await BlockingWork.run { try ExportArchiveVerifier.verify(path: local, root: root, exportID: exportID, format: format) }
    }

    // MARK: 4. publish

    /// A rename in the blob store; run again, it finds the archive already at its final key.
    private func publish(_ context: StepContext) async throws -> StepResult {
        let (payload, snapshot, format) = try inputs(context)
        let written = try output(context, "write-archive", Written.self)
        try await requireStillExportable(payload, snapshot, format)
        let archiveKey = ExportNames.archiveKey(accountID: payload.accountID, exportID: snapshot.exportID, format: format)
        try await services.exports.move(from: written.temporaryKey, to: archiveKey)
        return try .output(Published(archiveKey: archiveKey))
    }

    // MARK: 5. mark-ready

    private func markReady(_ context: StepContext, _ tx: Store.Transaction) throws -> StepResult {
        let (_, snapshot, _) = try inputs(context)
        let written = try output(context, "write-archive", Written.self)
        let verified = try output(context, "verify-archive", Verified.self)
        let published = try output(context, "publish", Published.self)
        guard var export = try tx.export(id: snapshot.exportID) else {
            // Only a purge removes export rows, and it cancelled this job when it began.
            throw JobWithdrawn("export \(snapshot.exportID) has no row any more: the account's purge removed it")
        }
        export.state = .ready
        export.blobKey = published.archiveKey
        export.byteSize = verified.bytes
        export.omittedPhotos = verified.omittedPhotos
        export.completedAt = context.now
        export.expiresAt = written.expiresAt
        try tx.updateExport(export)
        LifecycleMetrics.exportReady(bytes: verified.bytes)
        return .done
    }

    // MARK: 6. sign-link

    /// Pure: the same key, id and expiry give the same link however often it runs. A blob
    /// store that signs its own download URLs (S3) gives one straight to the archive;
    /// otherwise the link is the app's HMAC link to its download endpoint.
    private func signLink(_ context: StepContext) async throws -> StepResult {
        let (_, snapshot, _) = try inputs(context)
        let written = try output(context, "write-archive", Written.self)
        if services.exports.downloadURLLifetimeLimit != nil {
            let published = try output(context, "publish", Published.self)
            do {
                if let url = try services.exports.downloadURL(key: published.archiveKey, expiresAt: written.expiresAt, now: context.now) {
                    return try .output(Signed(link: url))
                }
            } catch let error as BlobStoreError {
                throw PermanentJobFailure("\(error.message); then `lifecycle jobs retry \(context.job.id)` finishes this export")
            }
        }
        let settings = try ExportSettings(policies: services.policies)
        let signer = try withSigningKey { try services.linkSigner() }
        return try .output(Signed(link: signer.link(base: settings.linkBaseURL, exportID: snapshot.exportID, expiresAt: written.expiresAt)))
    }

    // MARK: 7. notify

    /// The user row names the recipient (the map's `email:` column) and the name it greets
    /// (`greeting:`); without an address the message waits in the outbox for the app.
    /// Repeated after a crash, the insert finds the message already there by its unique key.
    private func notify(_ context: StepContext) async throws -> StepResult {
        let (payload, snapshot, _) = try inputs(context)
        let written = try output(context, "write-archive", Written.self)
        let signed = try output(context, "sign-link", Signed.self)
        let settings = try ExportSettings(policies: services.policies)
        let data = try await appData.appData(services)
        let key = payload.accountID
        let now = context.now
        let stored = try await services.store.write { tx in
            guard try data.exists(key: key, in: tx) else { throw PermanentJobFailure("account \(key) no longer exists") }
            return try tx.insertOutboxMessage(ExportNotification.message(
                accountID: key, recipient: try data.email(key: key, in: tx), greetingName: try data.greetingName(key: key, in: tx),
                exportID: snapshot.exportID,
                link: signed.link, expiresAt: written.expiresAt, lifetimeDays: settings.linkLifetimeDays, now: now))
        }
        return try .output(Notified(outboxID: stored.id ?? 0))
    }

    // MARK: 8. deliver

    /// At least once: a crash after the mail command succeeded and before the outbox row
    /// is marked sends the message again on the rerun; never zero times.
    private func deliver(_ context: StepContext) async throws -> StepResult {
        let (_, snapshot, _) = try inputs(context)
        let settings = try ExportSettings(policies: services.policies)
        guard !settings.sendmailCommand.isEmpty else {
            return try .output(Delivered(delivered: false, note: "left in the outbox for the app to deliver (no sendmail_command)"))
        }
        let key = ExportNotification.uniqueKey(exportID: snapshot.exportID)
        guard let message = try await services.store.read({ tx in try tx.outboxMessage(uniqueKey: key) }), let id = message.id else {
            throw PermanentJobFailure("outbox message \(key) is missing")
        }
        if message.state == .delivered {
            return try .output(Delivered(delivered: true, note: "already delivered"))
        }
        guard message.recipient != nil else {
            return try .output(Delivered(delivered: false, note: "the account has no email address; left in the outbox"))
        }
        try await SendmailDelivery(command: settings.sendmailCommand).deliver(message, id: id, recordingIn: services.store, at: context.now)
        return try .output(Delivered(delivered: true, note: "handed to \(settings.sendmailCommand[0])"))
    }

    // MARK: Shared checks

    /// The HMAC key, as `load` reads it. Without a usable one this worker is not set up for exports (a cron line that never
    /// read the environment file): the job is not at fault, so it waits, its attempts
    /// untouched, for a worker that has the key, rather than dying with the link unsent.
    private func withSigningKey<Signer>(_ load: () throws -> Signer) throws -> Signer {
        do {
            return try load()
        } catch let error as LifecycleError {
            throw WorkerNotReady("\(error.message); this export waits until a worker that has the key runs it")
        }
    }

    static func requireExportable(accountID: String, state: AccountState, allowPending: Bool) throws {
        switch state {
        case .active:
            return
        case .pendingDeletion where allowPending:
            return
        // The user's deletion (or its purge) overtook the export they asked for: the job is
        // withdrawn, not failed (Jobs/README.md, "Jobs on one account").
        case .pendingDeletion:
            throw JobWithdrawn("account \(accountID) is scheduled for deletion; only an operator export (--allow-pending) may read it")
        case .purging, .purged:
            throw JobWithdrawn("account \(accountID) is \(state.rawValue): its data is being or has been deleted, so it is not exported")
        }
    }

    /// Purge may start while an export runs. Then the export stops (withdrawn: the purge
    /// cancelled it and audited that) and removes its temporary archive rather than leave a
    /// copy of the data behind.
    private func requireStillExportable(_ payload: ExportPayload, _ snapshot: Snapshot, _ format: ArchiveFormat) async throws {
        let accountID = payload.accountID
        let state = try await services.store.read { tx in try tx.deletionState(key: accountID) }
        do {
            try Self.requireExportable(accountID: accountID, state: state, allowPending: payload.allowPending)
        } catch {
            try? await services.exports.delete(keys: [ExportNames.temporaryKey(accountID: accountID, exportID: snapshot.exportID, format: format)])
            throw error
        }
    }

    private func inputs(_ context: StepContext) throws -> (ExportPayload, Snapshot, ArchiveFormat) {
        let payload = try context.payload(ExportPayload.self)
        let snapshot = try output(context, "snapshot", Snapshot.self)
        guard let format = ArchiveFormat(rawValue: payload.format) else {
            throw PermanentJobFailure("unknown archive format '\(payload.format)'")
        }
        return (payload, snapshot, format)
    }

    private func output<T: Decodable>(_ context: StepContext, _ step: String, _ type: T.Type) throws -> T {
        guard let value = try context.output(of: step, as: type) else {
            throw PermanentJobFailure("job \(context.job.id): step '\(step)' left no output")
        }
        return value
    }
}

/// Runs synchronous work that reads a whole archive on a thread of its own, off the
/// cooperative pool the lease heartbeat needs.
enum BlockingWork {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }
}
