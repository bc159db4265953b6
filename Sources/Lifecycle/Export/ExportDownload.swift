import Archiving
import Foundation
import JobRunner

/// What a request for an export's download link comes to, checked as `exports verify-link`
/// checks it but told apart the way an HTTP client needs: a link that was never signed
/// (or was altered) is forbidden; a signed one whose export is gone or unknown, or whose
/// time is up, is not found or gone.
public enum ExportDownloadDecision: Sendable, Equatable {
    /// The archive of a ready export, at a path on this machine.
    case file(ExportRecord, path: String)
    /// The archive of a ready export in a blob store that serves it itself (S3): the
    /// presigned URL, which answers range requests itself.
    case redirect(ExportRecord, url: String)
    /// The signature does not match: forged or altered. Says nothing about whether the export exists.
    case forbidden(reason: String)
    /// Signed, but no such export (deleted with its account) or not published yet.
    case notFound(exportID: String, reason: String)
    /// Signed, but its link expired or was revoked.
    case gone(ExportRecord?, exportID: String, reason: String)
}

extension LifecycleServices {
    /// `exportID` and the link's query (`expires=…&sig=…`) as the request carried them.
    public func exportDownload(exportID: String, query: String) async throws -> ExportDownloadDecision {
        guard BlobKey.isSafeSegment(exportID) else { return .forbidden(reason: "the link names no export") }
        let now = clock.now()
        if exports.downloadURLLifetimeLimit != nil {
            // Links of a store that signs its own URLs point at the store, not here.
            return .notFound(exportID: exportID, reason: "download links of this installation point at its blob store, not at this server")
        }
        let verdict = try linkSigner().verify("http://link.invalid/exports/\(exportID)?\(query)", now: now)
        let signed: (exportID: String, expiresAt: Date, expired: Bool)
        switch verdict {
        case .invalid(let reason): return .forbidden(reason: reason)
        case .valid(let id, let expiresAt): signed = (id, expiresAt, false)
        case .expired(let id, let expiresAt): signed = (id, expiresAt, true)
        }
        guard let export = try await store.read({ tx in try tx.export(id: signed.exportID) }) else {
            return .notFound(exportID: signed.exportID, reason: "export \(signed.exportID) does not exist (deleted with its account?)")
        }
        guard let stored = export.expiresAt, LinkSigner.unixSeconds(stored) == LinkSigner.unixSeconds(signed.expiresAt) else {
            // Signed with this key for another expiry than the export has: not its link.
            return .forbidden(reason: "the link's expiry does not match export \(export.id)")
        }
        switch export.state {
        case .revoked:
            return .gone(export, exportID: export.id, reason: "export \(export.id) was revoked at \(export.revokedAt.map(ISO8601.format) ?? "?")")
        case .expired:
            return .gone(export, exportID: export.id, reason: "export \(export.id) expired at \(ISO8601.format(stored)); the user can ask for a new one")
        case .building:
            return .notFound(exportID: export.id, reason: "export \(export.id) is not published yet")
        case .ready:
            break
        }
        if signed.expired {
            return .gone(export, exportID: export.id, reason: "the link expired at \(ISO8601.format(stored)); the user can ask for a new export")
        }
        guard let key = export.blobKey else { return .notFound(exportID: export.id, reason: "export \(export.id) has no archive") }
        let holder = try await exportStore(holding: key)
        if let files = holder as? FileSystemBlobStore {
            return .file(export, path: try files.path(for: key))
        }
        guard let url = try holder.downloadURL(key: key, expiresAt: stored, now: now) else {
            return .notFound(exportID: export.id, reason: "the blob store cannot serve export \(export.id)")
        }
        return .redirect(export, url: url)
    }

    /// One download, in the account's audit: when, what status, how many bytes were sent,
    /// and who asked as a keyed hash of their address (the same client reads the same
    /// hash, and the address itself is never stored).
    public func auditDownload(_ export: ExportRecord, status: Int, bytes: Int64, range: String?, client: String?) async throws {
        let now = clock.now()
        var base: [String: JSONValue] = ["export": .string(export.id), "status": .int(status), "bytes": .int(bytes)]
        if let range { base["range"] = .string(range) }
        let (detail, store, account) = (base, self.store, export.accountID)
        try await store.write { tx in
            var entry = detail
            if let client { entry["client"] = .string(LookupDigest.digest(client, salt: try tx.lookupSalt())) }
            try tx.recordAudit(AuditEvent(
                at: now, actor: "download", action: "export.download", accountID: account, outcome: "\(status)", detail: entry))
        }
    }
}

extension ExportRecord {
    /// What a browser saves the archive as: the name of the folder inside it, with the format's extension.
    public var downloadFileName: String {
        ExportNames.rootFolder(accountID: accountID, cutoff: cutoffAt) + "." + (ArchiveFormat(rawValue: format) ?? .zip).fileExtension
    }

    public var contentType: String {
        ArchiveFormat(rawValue: format) == .tarGzip ? "application/gzip" : "application/zip"
    }
}
