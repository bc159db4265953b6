import Archiving
import Foundation
import JobRunner

public enum ExportJobs {
    /// Builds, publishes and announces one account's archive.
    public static let exportKind = "export"
    /// Deletes archives whose link expired; scheduled by cron in the policy.
    public static let expiryKind = "export-expiry"

    public static func kinds<Store: LifecycleStore>(for services: LifecycleServices<Store>) -> [JobKind<Store.Transaction>] {
        [
            ExportJob(services: services, appData: AppDataCache()).kind,
            ExportExpiryJob(services: services).kind,
        ]
    }

    /// One live export per account: asking again returns the same job.
    public static func uniqueKey(accountID: String) -> String { "export:\(accountID)" }

    /// Cancels the account's export job, if one is queued or running, as its deletion is
    /// requested (`actor` "deletion") or its purge begins ("purge"): a queued one never
    /// starts, a running one stops at its next check of the account (and removes its
    /// temporary archive). The audit trail, which outlives the account, keeps which export
    /// went and why.
    static func withdraw<Store: LifecycleStore>(
        accountID: String, actor: String, purgeJob: JobID, store: Store, now: Date, in tx: Store.Transaction
    ) throws {
        // A rerun of the purge's first step finds the cancellation already requested.
        guard let live = try store.liveJob(uniqueKey: uniqueKey(accountID: accountID), in: tx), live.kind == exportKind,
              !live.cancelRequested
        else { return }
        _ = try store.cancel(jobID: live.id, now: now, in: tx)
        try tx.recordAudit(AuditEvent(
            at: now, actor: actor, action: "export.cancel", accountID: accountID, outcome: "cancelled",
            detail: ["export_job": .int(live.id), "purge_job": .int(purgeJob)]))
    }

    /// The outbox key of an export's "ready" notification: one message per export.
    public static func notificationKey(exportID: String) -> String { "export-ready:\(exportID)" }
}

public struct ExportRequest: Sendable {
    /// The account, as the caller names it (`AccountReference`).
    public var account: AccountReference
    /// nil: the policy's `default_format`.
    public var format: ArchiveFormat?
    /// Operators only: export an account that is scheduled for deletion.
    public var allowPending: Bool
    /// Who asked, when it is not the user: recorded in the audit trail.
    public var operatorName: String?
    /// Leave out photos whose blob is missing or corrupt, listing each in manifest.json.
    public var skipMissingPhotos: Bool

    public init(account: AccountReference, format: ArchiveFormat? = nil, allowPending: Bool = false, operatorName: String? = nil, skipMissingPhotos: Bool = false) {
        self.account = account
        self.format = format
        self.allowPending = allowPending
        self.operatorName = operatorName
        self.skipMissingPhotos = skipMissingPhotos
    }
}

public struct ExportRequestOutcome: Sendable {
    public var job: JobRecord
    /// False when a live export job for the account already existed and is returned instead.
    public var created: Bool
    public var accountID: String
}

/// How `exports verify-link` judged a link.
public enum ExportLinkCheck: Sendable, Equatable {
    case valid(ExportRecord)
    /// Past its expiry (signature fine), or the archive was already deleted by the expiry job.
    case expired(exportID: String, expiresAt: Date)
    /// Forged, altered, revoked, or naming an export that does not exist.
    case invalid(reason: String)
}

extension LifecycleServices {
    public var exportSettings: ExportSettings {
        get throws { try ExportSettings(policies: policies) }
    }

    /// `fileOption`: the calling command's key-file option, named in the advice when there is no key.
    public func linkSigner(fileOption: String? = nil) throws -> LinkSigner {
        var environment = ProcessInfo.processInfo.environment
        if let signingKeyFile { environment[SigningKeySource.environmentFile] = signingKeyFile }
        return try SigningKeySource.load(settings: try exportSettings, jobsDirectory: jobsDirectory, fileOption: fileOption, environment: environment)
    }

    /// The check made before any work that ends in a download link: the HMAC signer, or
    /// nothing where the blob store signs its own links (S3) and no key is needed.
    @discardableResult
    public func requireLinkSigner(fileOption: String? = nil) throws -> LinkSigner? {
        guard exports.downloadURLLifetimeLimit == nil else { return nil }
        return try linkSigner(fileOption: fileOption)
    }

    /// Enqueues an export, in one transaction with its checks: the account must exist and
    /// not be deleted, a pending deletion needs an operator, a live export is returned as
    /// is, and the rate limit counts exports completed in the policy's window.
    /// `cache`: a server's, kept between requests; without it the data map and the catalog are read again.
    public func requestExport(_ request: ExportRequest, cache: AppDataCache = AppDataCache()) async throws -> ExportRequestOutcome {
        let settings = try exportSettings
        // The blob store holds the app's files (its MEDIA_ROOT, its Storage bucket), which it
        // may serve to anyone: an archive there is handed out past its link's signature and
        // expiry. A folder of its own is the default on a disk; on S3 there is none to take.
        // Checked first: the link checks below are the export store's.
        if !exportsApart {
            throw LifecycleError(.badConfiguration, """
                export archives need a place of their own: the blob store holds the app's files, which it may serve to \
                anyone. Set --exports / LIFECYCLE_EXPORTS to a folder, or to an S3 prefix of a private bucket; nothing \
                was queued
                """)
        }
        // Refuse now rather than build an archive nobody can be sent a link to.
        if let limit = exports.downloadURLLifetimeLimit {
            guard settings.linkLifetime <= limit else {
                throw LifecycleError(.badInput, "export.link_lifetime_days is \(settings.linkLifetimeDays), but the export store signs download links for at most \(Int(limit / 86_400)) days: set link_lifetime_days to \(Int(limit / 86_400)) or less in \(jobsDirectory)/policies/export.yaml")
            }
        } else {
            _ = try linkSigner()
        }
        // Loading it checks the map against the database: a table holding the user's rows that
        // the map neither exports nor ignores refuses the export here, before a job is queued.
        let directory = try await self.directory(cache: cache)
        if request.allowPending, (request.operatorName ?? "").isEmpty {
            throw LifecycleError(.badInput, "exporting an account scheduled for deletion is an operator action: name the operator")
        }
        let format = request.format ?? settings.defaultFormat
        let requestedBy = request.operatorName.map { "operator:\($0)" } ?? "user"
        let policy = try policies.policy(for: ExportJobs.exportKind)
        let now = clock.now()
        let store = self.store
        return try await store.write { tx in
            let reference = request.account
            guard let id = try directory.find(reference, in: tx),
                  let account = try directory.entry(id: id, in: tx, locking: false, now: now) else {
                throw LifecycleError.noSuchAccount(reference)
            }
            switch account.state {
            case .purging, .purged:
                throw LifecycleError(.noSuchAccount, "account \(account.id) is deleted (\(account.state.rawValue)); there is nothing to export")
            case .pendingDeletion where !request.allowPending:
                let after = account.purgeAfter.map { " (purge after \(ISO8601.format($0)))" } ?? ""
                throw LifecycleError(
                    .permissionDenied, "account \(account.id) is scheduled for deletion\(after); only an operator may export it: add --allow-pending --operator NAME (audited)",
                    forApp: .init(
                        code: "pending_deletion",
                        message: "account \(account.id) is scheduled for deletion\(after): its data cannot be exported unless it is restored first (signing in again restores it)"))
            case .active, .pendingDeletion:
                break
            }
            let key = ExportJobs.uniqueKey(accountID: account.id)
            if let live = try store.liveJob(uniqueKey: key, in: tx) {
                return ExportRequestOutcome(job: live, created: false, accountID: account.id)
            }
            if settings.rateLimitHours > 0 {
                let completions = try tx.exportCompletions(accountID: account.id, since: now.addingTimeInterval(-settings.rateLimitWindow))
                if completions.count >= settings.rateLimitCount {
                    let next = completions[completions.count - settings.rateLimitCount].addingTimeInterval(settings.rateLimitWindow)
                    throw LifecycleError(.tryLater, "account \(account.id) already has \(completions.count) export(s) completed in the last \(settings.rateLimitHours) hours; the next export is allowed at \(ISO8601.format(next))", retryAt: next)
                }
            }
            let payload = ExportPayload(
                accountID: account.id, format: format.rawValue, skipMissingPhotos: request.skipMissingPhotos,
                allowPending: request.allowPending && account.state == .pendingDeletion, requestedBy: requestedBy)
            let outcome = try store.enqueue(
                EnqueueRequest(kind: ExportJobs.exportKind, payload: try JobJSON.encode(payload), uniqueKey: key), policy: policy, now: now, in: tx)
            try tx.recordAudit(AuditEvent(
                at: now, actor: requestedBy, action: "export.request", accountID: account.id,
                outcome: account.state == .pendingDeletion ? "queued-while-pending-deletion" : "queued",
                detail: ["job": .int(outcome.job.id), "format": .string(format.rawValue), "skip_missing_photos": .bool(request.skipMissingPhotos)]))
            return ExportRequestOutcome(job: outcome.job, created: true, accountID: account.id)
        }
    }

    /// Kills the link at once and deletes the archive. Revoking again retries the deletion.
    public func revokeExport(id: String, operatorName: String, reason: String?) async throws -> ExportRecord {
        let now = clock.now()
        let revoked: ExportRecord = try await store.write { tx in
            guard var export = try tx.export(id: id) else {
                throw LifecycleError(.badInput, "no export with id '\(id)'; `lifecycle exports list ACCOUNT` shows them")
            }
            switch export.state {
            case .building:
                throw LifecycleError(.badInput, "export \(id) is still being built; cancel its job with `lifecycle jobs cancel \(export.jobID.map(String.init) ?? "?")` instead")
            case .revoked, .expired:
                return export
            case .ready:
                export.state = .revoked
                export.revokedAt = now
                try tx.updateExport(export)
                try tx.recordAudit(AuditEvent(
                    at: now, actor: "operator:\(operatorName)", action: "export.revoke", accountID: export.accountID,
                    outcome: "revoked", detail: ["export": .string(id), "reason": reason.map(JSONValue.string) ?? .null]))
                return export
            }
        }
        if revoked.state == .revoked {
            let format = ArchiveFormat(rawValue: revoked.format) ?? .zip
            try await deleteExportKeys([
                revoked.blobKey, ExportNames.temporaryKey(accountID: revoked.accountID, exportID: revoked.id, format: format),
            ].compactMap { $0 })
        }
        return revoked
    }

    /// The signature first (an altered expiry is invalid, never merely expired), then
    /// the export row: revoked or unknown exports are invalid, deleted archives expired.
    public func checkExportLink(_ link: String) async throws -> ExportLinkCheck {
        if exports.downloadURLLifetimeLimit != nil { return try await checkStoreSignedLink(link) }
        let signer = try linkSigner()
        let now = clock.now()
        switch signer.verify(link, now: now) {
        case .invalid(let reason):
            return .invalid(reason: reason)
        case .expired(let exportID, let expiresAt):
            return .expired(exportID: exportID, expiresAt: expiresAt)
        case .valid(let exportID, let expiresAt):
            guard let export = try await store.read({ tx in try tx.export(id: exportID) }) else {
                return .invalid(reason: "export \(exportID) does not exist (deleted with its account?)")
            }
            if let refusal = Self.refusal(of: export, expiresAt: expiresAt) { return refusal }
            guard let stored = export.expiresAt, LinkSigner.unixSeconds(stored) == LinkSigner.unixSeconds(expiresAt) else {
                return .invalid(reason: "the link's expiry does not match export \(exportID)")
            }
            return .valid(export)
        }
    }

    /// The link of a ready export, as the notification carried it.
    public func exportLink(for export: ExportRecord) throws -> String? {
        guard export.state == .ready, let expiresAt = export.expiresAt else { return nil }
        if exports.downloadURLLifetimeLimit != nil {
            return try export.blobKey.flatMap { key in try exports.downloadURL(key: key, expiresAt: expiresAt, now: clock.now()) }
        }
        return try linkSigner().link(base: try exportSettings.linkBaseURL, exportID: export.id, expiresAt: expiresAt)
    }

    /// A link the blob store signed (a presigned S3 URL) names the archive's key, and so the
    /// export: it is valid when it is exactly the URL the store signs for that export now.
    private func checkStoreSignedLink(_ link: String) async throws -> ExportLinkCheck {
        guard let components = URLComponents(string: link.trimmingCharacters(in: .whitespacesAndNewlines)), components.scheme != nil else {
            return .invalid(reason: "not a URL")
        }
        let file = (components.path as NSString).lastPathComponent
        guard let format = ArchiveFormat.allCases.first(where: { file.hasSuffix("." + $0.fileExtension) }) else {
            return .invalid(reason: "the link names no export archive")
        }
        let exportID = String(file.dropLast(format.fileExtension.count + 1))
        guard BlobKey.isSafeSegment(exportID) else { return .invalid(reason: "the link names no export archive") }
        guard let export = try await store.read({ tx in try tx.export(id: exportID) }) else {
            return .invalid(reason: "export \(exportID) does not exist (deleted with its account?)")
        }
        if let refusal = Self.refusal(of: export, expiresAt: clock.now()) { return refusal }
        // The URL depends only on the key and the expiry; `now` only stops signing further
        // ahead than the store can, which recomputing an issued link never does.
        guard let expiresAt = export.expiresAt, let key = export.blobKey,
              let expected = try exports.downloadURL(key: key, expiresAt: expiresAt, now: expiresAt) else {
            return .invalid(reason: "export \(exportID) has no archive")
        }
        guard expected == link.trimmingCharacters(in: .whitespacesAndNewlines) else {
            return .invalid(reason: "the signature does not match (the link was altered or signed with other credentials)")
        }
        return clock.now() < expiresAt ? .valid(export) : .expired(exportID: exportID, expiresAt: expiresAt)
    }

    /// Why a well-signed link to `export` still does not download; nil for a ready export.
    /// `expiresAt` stands in for an expired export's missing expiry.
    private static func refusal(of export: ExportRecord, expiresAt: Date) -> ExportLinkCheck? {
        switch export.state {
        case .revoked:
            return .invalid(reason: "export \(export.id) was revoked at \(export.revokedAt.map(ISO8601.format) ?? "?")")
        case .building:
            return .invalid(reason: "export \(export.id) is not published yet")
        case .expired:
            return .expired(exportID: export.id, expiresAt: export.expiresAt ?? expiresAt)
        case .ready:
            return nil
        }
    }
}
