import ArgumentParser
import Foundation
import LifecycleRuntime

struct ExportCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export one account's data: JSON and CSV of the user row and every table, and the files they name, in one archive, with a signed download link.",
        usage: """
            lifecycle export <account> [--format <format>] [--wait] [--allow-pending --operator <name>] [--skip-missing-photos]
                             [--signing-key-file <path>] \(GlobalOptions.usage)
            """,
        discussion: """
            Enqueues an export job (one live export per account: asking again returns the same job). With --wait \
            the job runs in this process and the archive location, the download link and its expiry are printed.
            The user's notification goes to the outbox (and to export.sendmail_command when set).
            Needs a signing key: LIFECYCLE_SIGNING_KEY, LIFECYCLE_SIGNING_KEY_FILE, --signing-key-file or \
            export.signing_key_file in Jobs/policies/export.yaml; without one the command refuses (exit 69).
            With an s3:// blob store the link is an S3 presigned URL instead, and no signing key is needed.
            Exit codes: 0 queued or done, 65 the export failed (the message names the cause, e.g. a missing photo), \
            67 no such account or it was deleted, 69 no signing key, 75 rate limit (the message says when the next \
            export is allowed) or the job is retrying, 77 the account is scheduled for deletion (operators: --allow-pending).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String
    @Option(help: ArgumentHelp("zip or tar.gz (default: export.default_format in the policy, zip).", valueName: "format"))
    var format: String?
    @Flag(help: "Run the export now in this process and print where the archive is, the link and its expiry.")
    var wait = false
    @Flag(name: .customLong("allow-pending"), help: "Operators: export an account scheduled for deletion (needs --operator; audited).")
    var allowPending = false
    @Option(name: .customLong("operator"), help: ArgumentHelp("Who runs this export on the user's behalf (audited).", valueName: "name"))
    var operatorName: String?
    @Flag(name: .customLong("skip-missing-photos"), help: "Leave out photos whose blob is missing or corrupt; each is listed in manifest.json.")
    var skipMissingPhotos = false
    @Option(name: .customLong("signing-key-file"), help: ArgumentHelp("File holding the link-signing key (mode 0600).", valueName: "path"))
    var signingKeyFile: String?

    func validate() throws {
        if let format, (try? ExportSettings.format(named: format)) == nil {
            throw ValidationError("--format must be zip or tar.gz (got '\(format)')")
        }
        if allowPending, (operatorName ?? "").trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--allow-pending needs --operator NAME: exporting an account scheduled for deletion is audited")
        }
    }

    func run() async throws {
        try await guarded {
            try await options.withServices(self, signingKeyFile: signingKeyFile)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        // Before the request refuses it: this command's advice can name its own option.
        try services.requireLinkSigner(fileOption: "--signing-key-file")
        let request = ExportRequest(
            account: .operator(account), format: try format.map(ExportSettings.format(named:)), allowPending: allowPending,
            operatorName: operatorName, skipMissingPhotos: skipMissingPhotos)
        let outcome = try await services.requestExport(request)
        if !outcome.created {
            Terminal.note("an export of \(outcome.accountID) is already \(outcome.job.state.rawValue): job #\(outcome.job.id) (one live export per account)")
        }
        guard wait else {
            if options.json {
                try Terminal.printJSON(ExportQueuedReport(jobID: outcome.job.id, accountID: outcome.accountID, created: outcome.created, state: outcome.job.state.rawValue))
            } else {
                Terminal.line("export job #\(outcome.job.id) for account \(outcome.accountID) is \(outcome.job.state.rawValue); `lifecycle worker --once` runs it (or use --wait)")
            }
            return .ok
        }
        let export = try await runExportToCompletion(services: services, jobID: outcome.job.id)
        try await printReadyExport(export, services: services, json: options.json)
        return .ok
    }
}

struct ExportQueuedReport: Codable {
    var jobID: Int64
    var accountID: String
    var created: Bool
    var state: String

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id", accountID = "account_id", created, state
    }
}

/// Runs due export jobs in this process until the given one is finished. A job held by
/// another worker is waited for; once its lease runs out (that worker died) it is taken over here.
func runExportToCompletion<Store: LifecycleStore>(services: LifecycleServices<Store>, jobID: JobID) async throws -> ExportRecord {
    while true {
        let summary = try await runWorker(services: services, once: true, concurrency: 1, kinds: [ExportJobs.exportKind])
        // A job this process cannot run as it is set up (its signing key became unusable
        // after this command checked it) goes back to the queue due at once: claiming it
        // again every half second would never end. Another worker that has the key runs it.
        if summary.notReady > 0 {
            throw CLIFailure(.unavailable, summary.failures.joined(separator: "\n"))
        }
        guard let job = try await services.store.job(id: jobID) else {
            throw CLIFailure(.software, "export job #\(jobID) disappeared from the queue")
        }
        switch job.state {
        case .succeeded:
            guard let export = try await services.store.read({ tx in try tx.export(jobID: jobID) }) else {
                throw CLIFailure(.software, "export job #\(jobID) succeeded but left no export row")
            }
            return export
        case .dead:
            throw CLIFailure(.dataError, "export job #\(jobID) failed: \(job.lastError ?? "no error recorded")\nAfter fixing the cause: `lifecycle jobs retry \(jobID)` (finished steps are kept).")
        case .cancelled:
            throw CLIFailure(.dataError, "export job #\(jobID) was cancelled; `lifecycle jobs retry \(jobID)` queues it again")
        case .retrying:
            throw CLIFailure(.tryLater, "export job #\(jobID) failed this attempt and retries at \(ISO8601.format(job.runAt)): \(job.lastError ?? "")\n`lifecycle jobs show \(jobID)` shows its steps.")
        case .queued where job.runAt > services.clock.now():
            throw CLIFailure(.tryLater, "export job #\(jobID) is scheduled for \(ISO8601.format(job.runAt))")
        case .queued, .running:
            let holder = job.leaseOwner.map { " by worker \($0)" } ?? ""
            Terminal.note("export job #\(jobID) is running\(holder); waiting for it")
            try await Task.sleep(nanoseconds: 500_000_000)
        }
    }
}

struct ReadyExportReport: Codable {
    var exportID: String
    var accountID: String
    var jobID: Int64?
    var format: String
    var state: String
    var archiveKey: String?
    var archivePath: String?
    var bytes: Int64?
    var omittedPhotos: Int
    var link: String?
    var expiresAt: Date?
    var notification: String?

    enum CodingKeys: String, CodingKey {
        case exportID = "export_id", accountID = "account_id", jobID = "job_id", format, state, archiveKey = "archive_key"
        case archivePath = "archive_path", bytes, omittedPhotos = "omitted_photos", link, expiresAt = "expires_at", notification
    }
}

func printReadyExport<Store: LifecycleStore>(
    _ export: ExportRecord, services: LifecycleServices<Store>, json: Bool, say: (String) -> Void = { Terminal.line($0) }
) async throws {
    let link = try services.exportLink(for: export)
    let path = export.blobKey.flatMap(services.exportLocation(of:))
    let key = ExportJobs.notificationKey(exportID: export.id)
    let notification = try await services.store.read { tx in try tx.outboxMessage(uniqueKey: key) }.map(describeNotification)
    let report = ReadyExportReport(
        exportID: export.id, accountID: export.accountID, jobID: export.jobID, format: export.format, state: export.state.rawValue,
        archiveKey: export.blobKey, archivePath: path, bytes: export.byteSize, omittedPhotos: export.omittedPhotos, link: link,
        expiresAt: export.expiresAt, notification: notification)
    if json {
        try Terminal.printJSON(report)
        return
    }
    let omitted = export.omittedPhotos > 0 ? "; \(export.omittedPhotos) file(s) left out, listed in manifest.json" : ""
    say("export \(export.id) of account \(export.accountID) is \(export.state.rawValue) (\(export.format), \(export.byteSize ?? 0) bytes\(omitted))")
    say("  archive: \(path ?? export.blobKey ?? "-")")
    say("  link:    \(link ?? "-")")
    say("  expires: \(export.expiresAt.map(ISO8601.format) ?? "-")")
    if let notification { say("  notification: \(notification)") }
}

struct ExportsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exports", abstract: "List exports, check a download link, revoke one.",
        subcommands: [ListExports.self, VerifyExportLink.self, RevokeExport.self])
}

struct ListExports: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "An account's exports, newest first, with their state and expiry (exit 67 if no such account).")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let directory = try await services.directory()
        let reference = AccountReference.operator(account)
        guard let accountID = try await services.store.read({ tx in try directory.find(reference, in: tx) }) else {
            throw LifecycleError.noSuchAccount(account)
        }
        let (exports, messages) = try await services.store.read { tx in
            (try tx.exports(accountID: accountID), try tx.outboxMessages(accountID: accountID))
        }
        let live = try await services.store.jobs(matching: JobFilter(
            states: JobState.liveStates, kinds: [ExportJobs.exportKind], uniqueKey: ExportJobs.uniqueKey(accountID: accountID), limit: 1))
        let byKey = Dictionary(messages.map { ($0.uniqueKey, $0) }, uniquingKeysWith: { first, _ in first })
        // Store-signed links (S3) need no key and are shown; HMAC links stay with `export --wait`.
        let showsLinks = services.exports.downloadURLLifetimeLimit != nil
        let rows = try exports.map { export in
            ExportListEntry(
                export: export, notification: byKey[ExportJobs.notificationKey(exportID: export.id)].map(describeNotification),
                link: showsLinks ? try services.exportLink(for: export) : nil)
        }
        if options.json {
            try Terminal.printJSON(ExportList(accountID: accountID, exports: rows, liveJob: live.first))
            return .ok
        }
        if let job = live.first {
            Terminal.line("in progress: \(describe(job))")
        }
        if rows.isEmpty {
            Terminal.line("account \(accountID) has no exports")
        }
        for row in rows {
            let export = row.export
            var line = "\(export.id)  \(export.state.rawValue)  \(export.format)"
            if let bytes = export.byteSize { line += "  \(bytes) bytes" }
            line += "  cut \(ISO8601.format(export.cutoffAt))"
            if let expires = export.expiresAt { line += "  expires \(ISO8601.format(expires))" }
            if let revoked = export.revokedAt { line += "  revoked \(ISO8601.format(revoked))" }
            line += "  by \(export.requestedBy)"
            if let job = export.jobID { line += "  job #\(job)" }
            Terminal.line(line)
            if let link = row.link { Terminal.line("    link: \(link)") }
            if let notification = row.notification { Terminal.line("    notification: \(notification)") }
        }
        return .ok
    }
}

/// The outbox row's state in words, for the operator who wonders what the user got.
func describeNotification(_ message: OutboxMessage) -> String {
    switch message.state {
    case .delivered:
        "delivered to \(message.recipient ?? "?") at \(message.deliveredAt.map(ISO8601.format) ?? "?")"
    case .pending:
        "outbox #\(message.id ?? 0) pending for \(message.recipient ?? "(no email)")"
            + (message.lastError.map { " (last attempt: \($0))" } ?? " (the app delivers it, or set export.sendmail_command)")
    }
}

struct ExportListEntry: Codable {
    var export: ExportRecord
    var notification: String?
    /// Only for blob stores that sign their own download URLs; absent otherwise.
    var link: String?

    enum CodingKeys: String, CodingKey {
        case export, notification, link
    }
}

struct ExportList: Codable {
    var accountID: String
    var exports: [ExportListEntry]
    var liveJob: JobRecord?

    enum CodingKeys: String, CodingKey {
        case accountID = "account_id", exports, liveJob = "live_job"
    }
}

struct VerifyExportLink: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-link",
        abstract: "Check a download link: valid (exit 0), expired (65) or invalid: forged, altered or revoked (77).")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The link, as the user received it.") var url: String
    @Option(name: .customLong("signing-key-file"), help: ArgumentHelp("File holding the link-signing key (mode 0600).", valueName: "path"))
    var signingKeyFile: String?

    struct Report: Codable {
        var verdict: String
        var exportID: String?
        var accountID: String?
        var expiresAt: Date?
        var archiveKey: String?
        var reason: String?

        enum CodingKeys: String, CodingKey {
            case verdict, exportID = "export_id", accountID = "account_id", expiresAt = "expires_at", archiveKey = "archive_key", reason
        }
    }

    func run() async throws {
        try await guarded {
            try await options.withServices(self, signingKeyFile: signingKeyFile)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let report: Report
        let status: ExitStatus
        try services.requireLinkSigner(fileOption: "--signing-key-file")
        switch try await services.checkExportLink(url) {
        case .valid(let export):
            report = Report(verdict: "valid", exportID: export.id, accountID: export.accountID, expiresAt: export.expiresAt, archiveKey: export.blobKey)
            status = .ok
        case .expired(let exportID, let expiresAt):
            report = Report(verdict: "expired", exportID: exportID, expiresAt: expiresAt, reason: "the link expired at \(ISO8601.format(expiresAt)); the user can ask for a new export")
            status = .dataError
        case .invalid(let reason):
            report = Report(verdict: "invalid", reason: reason)
            status = .permissionDenied
        }
        if options.json {
            try Terminal.printJSON(report)
        } else {
            var line = report.verdict
            if let id = report.exportID { line += ": export \(id)" }
            if let account = report.accountID { line += " of account \(account)" }
            if status == .ok, let expires = report.expiresAt { line += ", expires \(ISO8601.format(expires))" }
            if let key = report.archiveKey, status == .ok { line += ", archive \(key)" }
            if let reason = report.reason { line += " — \(reason)" }
            Terminal.line(line)
        }
        return status
    }
}

struct RevokeExport: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke an export's download link and delete its archive (audited). Running it again retries the deletion.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "Export id, as `lifecycle exports list` shows it.") var exportID: String
    @OptionGroup var operatorOption: OperatorOption
    @Option(help: ArgumentHelp("Why (audited), e.g. a ticket number.", valueName: "text")) var reason: String?

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let export = try await services.revokeExport(id: exportID, operatorName: operatorOption.operatorName, reason: reason)
        if options.json {
            try Terminal.printJSON(export)
        } else if export.state == .revoked {
            Terminal.line("export \(export.id) of account \(export.accountID) is revoked: its link no longer verifies and its archive is deleted")
        } else {
            Terminal.line("export \(export.id) is \(export.state.rawValue); its archive is already gone")
        }
        return .ok
    }
}
