import ArgumentParser
import Foundation
import LifecycleRuntime

/// Passwords come only from standard input: arguments show up in `ps` and shell
/// history, the environment in /proc. One trailing newline (from `echo` or a
/// here-string) is not part of the password. At most the longest password any hash
/// format checks, plus that newline and one byte, is read: `--password-stdin <
/// /dev/zero` is refused at once instead of filling memory.
func readPasswordFromStandardInput() throws -> String {
    if isatty(STDIN_FILENO) == 1 {
        Terminal.note("Reading the password from standard input (it will be shown as you type); end it with Enter, then Ctrl-D.")
    }
    let limit = DeletionPolicy.maxPasswordBytes
    var data = Data()
    while data.count <= limit + 2, let chunk = try FileHandle.standardInput.read(upToCount: limit + 3 - data.count), !chunk.isEmpty {
        data.append(chunk)
    }
    if data.last == 0x0A {
        data.removeLast()
        if data.last == 0x0D { data.removeLast() }
    }
    guard data.count <= limit else {
        throw CLIFailure(.dataError, "the password on standard input is longer than \(limit) bytes; no supported password hash checks passwords that long")
    }
    guard let password = String(data: data, encoding: .utf8) else {
        throw CLIFailure(.dataError, "the password on standard input is not valid UTF-8")
    }
    guard !password.isEmpty else {
        throw CLIFailure(.usage, "no password on standard input; pipe it in, e.g. `printf '%s' \"$PASSWORD\" | lifecycle … --password-stdin`")
    }
    return password
}

struct DeleteCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete an account: the user's own request (password, 30-day grace) or a support/legal deletion.",
        usage: """
            lifecycle delete <account> --password-stdin
            lifecycle delete <account> --operator <name> --reason <text> [--immediately]
            lifecycle delete <account> --part <name> [--part <name> …] (--password-stdin | --operator <name> --reason <text>)
            each with \(GlobalOptions.usage)
            """,
        discussion: """
            The user's request (--password-stdin): the password is read from standard input. Wrong: "Incorrect password", \
            exit 77. Too many wrong attempts: refused until the time printed, exit 75. Right: the account is pending \
            deletion, every session is signed out, and the purge is scheduled after the grace period.

            Support or legal (--operator NAME --reason TEXT): without the password; audited with NAME and TEXT. \
            --immediately skips the grace period: the next `lifecycle purge` removes the account.

            Parts (--part NAME, with either of the above): only those parts of the account's data (the data map's \
            `parts:`, e.g. photos), the account staying open, without a grace period: a job erases them, verifies it, and \
            audits the receipt (`lifecycle audit ACCOUNT`); a worker runs it (`lifecycle worker --once`). Refused (exit 65) \
            for an account pending deletion or on hold.

            An account already pending deletion is left as it is (exit 0). Grace and lockout numbers: Jobs/policies/deletion.yaml.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String
    @Flag(name: .customLong("password-stdin"), help: "Read the user's password from standard input.") var passwordStdin = false
    @Option(name: .customLong("operator"), help: ArgumentHelp("Who deletes on the user's behalf (audited).", valueName: "name"))
    var operatorName: String?
    @Option(help: ArgumentHelp("Why (audited), e.g. a ticket number or legal reference.", valueName: "text")) var reason: String?
    @Flag(help: "With --operator: no grace period; the next purge run removes the account.") var immediately = false
    @Option(name: .customLong("part"), help: ArgumentHelp("Delete only this part of the account's data (repeatable; the data map's `parts:`).", valueName: "name"))
    var parts: [String] = []

    func validate() throws {
        if !parts.isEmpty && immediately {
            throw ValidationError("--immediately skips the grace period of an account's deletion; deleting a --part has none")
        }
        switch (passwordStdin, operatorName) {
        case (true, nil):
            guard reason == nil, !immediately else {
                throw ValidationError("--reason and --immediately belong to the operator path: --operator NAME --reason TEXT")
            }
        case (false, .some(let name)):
            guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--operator needs a name") }
            guard let reason, !reason.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ValidationError("an operator deletion needs --reason TEXT (it is audited)")
            }
        case (true, .some):
            throw ValidationError("use either --password-stdin (the user's own request) or --operator NAME --reason TEXT, not both")
        case (false, nil):
            throw ValidationError("pass --password-stdin and pipe the user's password in, or --operator NAME --reason TEXT for a support or legal deletion")
        }
    }

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let deletion = try DeletionService(services: services, directory: try await services.directory())
        if !parts.isEmpty { return try await deleteParts(deletion) }
        let result: DeletionRequestResult
        if let operatorName {
            result = try await deletion.requestDeletionByOperator(
                account: .operator(account), operatorName: operatorName, reason: reason ?? "", immediately: immediately)
        } else {
            let password = try readPasswordFromStandardInput()
            result = try await deletion.requestDeletion(account: .operator(account), password: password)
        }
        if options.json {
            try Terminal.printJSON(result)
            return .ok
        }
        Terminal.line(result.message)
        if result.outcome != .alreadyPending, let purgeAfter = result.purgeAfter {
            let job = result.purgeJobID.map { " (purge job #\($0))" } ?? ""
            Terminal.line("Account \(result.accountID): everything is removed on or after \(ISO8601.format(purgeAfter))\(job); \(result.sessionsRevoked) session(s) signed out\(result.tokensRevoked > 0 ? ", \(result.tokensRevoked) token(s) revoked" : "").")
        }
        return .ok
    }

    private func deleteParts<Store: LifecycleStore>(_ deletion: DeletionService<Store>) async throws -> ExitStatus {
        let result = if let operatorName {
            try await deletion.requestPartDeletionByOperator(account: .operator(account), parts: parts, operatorName: operatorName, reason: reason ?? "")
        } else {
            try await deletion.requestPartDeletion(account: .operator(account), password: try readPasswordFromStandardInput(), parts: parts)
        }
        if options.json {
            try Terminal.printJSON(result)
            return .ok
        }
        Terminal.line(result.message)
        Terminal.line("Account \(result.accountID): job #\(result.jobID) deletes \(result.parts.joined(separator: ", ")) (a worker runs it: `lifecycle worker --once`); its receipt: `lifecycle audit \(result.accountID)`.")
        return .ok
    }
}

struct RestoreCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Cancel a pending deletion before its purge date (what signing in again does in the app).",
        discussion: """
            Allowed only while the account is pending deletion and before its purge date; the scheduled purge is \
            cancelled in the same transaction. Sessions stay signed out: the user signs in again. Refused with \
            exit 65 once the purge date has passed or the purge has started. Audited with the operator's name.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let result = try await DeletionService(services: services, directory: try await services.directory()).restore(account: .operator(account), actor: operatorOption.actor)
        if options.json {
            try Terminal.printJSON(result)
        } else {
            let cancelled = result.cancelledJobID.map { "purge job #\($0) cancelled" } ?? "no purge job was scheduled"
            Terminal.line("Account \(result.accountID) restored: deletion cancelled (\(cancelled)). Its sessions stay signed out; the user signs in again.")
        }
        return .ok
    }
}

struct SetPasswordCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-password",
        abstract: "Set an account's password, read from standard input, stored as argon2id.",
        discussion: "For accounts whose imported hash is in a format that cannot be verified. Audited with the operator's name, without the password.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String
    @Flag(name: .customLong("password-stdin"), help: "Read the new password from standard input (required).") var passwordStdin = false

    func validate() throws {
        guard passwordStdin else {
            throw ValidationError("pass --password-stdin and pipe the new password in; passwords are never taken from arguments or the environment")
        }
    }

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let password = try readPasswordFromStandardInput()
        let format = try await DeletionService(services: services, directory: try await services.directory())
            .setPassword(account: .operator(account), password: password, actor: operatorOption.actor)
        if options.json {
            try Terminal.printJSON(["account": account, "hash_format": format])
        } else {
            Terminal.line("Password of account \(account) set (\(format)).")
        }
        return .ok
    }
}

struct PurgeCommandReport: Encodable {
    var sweep: SweepReport
    var run: PurgeRunSummary
    /// Purge jobs not done after the run (held by another process, backing off, dead).
    var attention: [JobAttention]
    /// Due purges that wait because deletion.purge is paused.
    var paused: PausedWork?
}

struct PurgeCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Purge every account whose grace period is over: the nightly cron entry.",
        discussion: """
            Enqueues a purge job for each due account that has none (e.g. accounts imported already pending), \
            runs the due purge jobs in this process, and prints how many accounts were purged, skipped (restored \
            meanwhile, or already done) and failed, and names the due accounts on hold (`accounts hold`), which \
            are left alone. Exit 0 when every due purge is done (held accounts apart); 75 when any purge is left \
            undone, whoever left it so: retrying, dead, held by another process, or waiting while deletion.purge \
            is paused (each named, with what to do); 77 when the residue scan after erasure found an account's \
            identifiers where the map neither erases nor allows them (its files kept, the table, column and row \
            named), or when the role it connects as is held back by row level security or lacks a privilege \
            (nothing changed: the account stays pending and its job waits). Overlapping runs are safe: each \
            account is purged exactly once.
            --dry-run changes nothing and lists each due account with the rows and blobs that would go; for an \
            app's own database it rehearses each account's erasure for real, inside a transaction that is then \
            rolled back, and reports per table what would be deleted and masked (the counts the receipt then \
            holds) or which table the database would refuse, and why (exit 75 when any would fail; 77 when the \
            residue scan would find an account's identifiers).
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var metrics: MetricsOption
    @Flag(name: .customLong("dry-run"), help: "List what would be purged; change nothing.") var dryRun = false
    @Option(help: "Purge (or list) at most this many accounts in this run.") var limit: Int?
    @Option(help: """
        Purges run at once in this process, at most the purge policy's concurrency (1 when --limit is given): the residue \
        scan serves the purges that reach it together in one pass over every table, so a nightly run of thousands of an \
        app's accounts goes faster with more at once.
        """) var concurrency: Int = 1024

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
        guard (1...1024).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 1024") }
    }

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let drain = try await PurgeDrain(services: services)
        if dryRun { return try await preview(drain) }

        let registry = metrics.start()
        let runReport = try await runPurges(drain)
        let report = runReport.run
        let store = drain.services.store
        let now = drain.services.clock.now()
        // A run with a limit leaves due purges queued on purpose: only what is stuck counts then.
        let attention = try await JobAttention.stuck(in: store, kinds: [DeletionJobs.purgeKind], now: now)
            .filter { limit == nil || $0.reason != .waiting }
        let paused = try await PausedWork.waiting(in: store, kinds: [DeletionJobs.purgeKind], now: now).first
        if options.json {
            try Terminal.printJSON(PurgeCommandReport(sweep: runReport.sweep, run: report, attention: attention, paused: paused))
        } else {
            let sweepReport = runReport.sweep
            Terminal.line("purge: \(report.purged.count) purged, \(report.skipped.count) skipped, \(report.failures.count) failed"
                          + (sweepReport.enqueued > 0 ? " (\(sweepReport.enqueued) due account(s) had no purge job and got one)" : ""))
            if let signedOut = sweepReport.sessionsSignedOut, signedOut > 0 {
                Terminal.line("\(signedOut) session(s) of accounts pending deletion signed out (begun without a reported sign-in)")
            }
            if !report.handedBack.isEmpty {
                Terminal.line("\(report.handedBack.count) purge(s) were handed back unfinished; the next run resumes them")
            }
            for failure in report.failures { Terminal.note("  " + failure) }
            if !report.failures.isEmpty {
                Terminal.note("Failed purges retry by themselves; see `lifecycle jobs list --kind \(DeletionJobs.purgeKind)` and Jobs/runbooks/deletion-and-purge.md.")
            }
            if !sweepReport.held.isEmpty {
                Terminal.line("\(sweepReport.held.count) due account(s) on hold, not purged: \(sweepReport.held.joined(separator: ", "))"
                    + " (`lifecycle audit ACCOUNT` shows each hold; `lifecycle accounts unhold ACCOUNT` lifts it)")
            }
            reportAttention(attention)
            if let paused { Terminal.note(paused.line) }
        }
        var status: ExitStatus = report.failures.isEmpty && attention.isEmpty && paused == nil ? .ok : .tryLater
        // Found residue is not a retry: it stays until the map or the data changes; nor is a
        // role that row level security or a missing privilege holds back.
        if report.failures.contains(where: { $0.contains(ResidueScan.marker) || $0.contains(AppErasure.accessRefusedMarker) })
            || attention.contains(where: { $0.reason == .dead && $0.lastError?.contains(ResidueScan.marker) == true }) {
            status = .permissionDenied
        }
        return await metrics.finish(registry, command: "purge", status: status, services: services)
    }

    private func preview<Store: LifecycleStore>(_ drain: PurgeDrain<Store>) async throws -> ExitStatus {
        let previews = try await drain.preview(limit: limit)
        let refused = previews.filter { $0.refused != nil }
        // Found residue is not a retry: 77, as the purge itself exits.
        let status: ExitStatus = refused.isEmpty ? .ok : refused.contains { $0.refused?.contains(ResidueScan.marker) == true } ? .permissionDenied : .tryLater
        if options.json {
            try Terminal.printJSON(previews)
            return status
        }
        for item in previews {
            let rows: String
            if let erase = item.erase {
                rows = erase.sorted { $0.key < $1.key }.map { table, count in
                    [count.deleted > 0 ? "\(table) deleted \(count.deleted)" : nil, count.masked > 0 ? "\(table) masked \(count.masked)" : nil]
                        .compactMap { $0 }.joined(separator: ", ")
                }.joined(separator: ", ")
            } else {
                rows = item.rows.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            }
            let date = item.purgeAfter.map { ISO8601.format($0) } ?? "-"
            Terminal.line("\(item.accountID)  \(item.state.rawValue)  purge_after \(date)  rows \(item.rowsTotal)\(rows.isEmpty ? "" : " (\(rows))")  blobs \(item.blobs) (\(item.blobBytes) bytes)")
            if let why = item.refused { Terminal.line("  would fail: \(why)") }
        }
        let rows = previews.reduce(0) { $0 + $1.rowsTotal }
        let blobs = previews.reduce(0) { $0 + $1.blobs }
        let bytes = previews.reduce(Int64(0)) { $0 + $1.blobBytes }
        Terminal.line("dry run: \(previews.count) account(s) would be purged (\(rows) rows, \(blobs) blobs, \(bytes) bytes); nothing was changed.")
        if !refused.isEmpty {
            Terminal.line("\(refused.count) of them would fail now (each rehearsed in a transaction that was rolled back): see above")
        }
        return status
    }

    /// The drain with a live progress line, cleared before the summary is printed.
    private func runPurges<Store: LifecycleStore>(_ drain: PurgeDrain<Store>) async throws -> PurgeRunReport {
        let logger = drain.services.logger
        let progress = ProgressLine(label: "accounts purged") { logger.info("\($0)") }
        defer { progress.finish() }
        return try await drain.run(limit: limit, concurrency: concurrency, beforeJob: TestBarrier.beforeJob) { event in
            switch event {
            case .due(let total): progress.setTotal(total)
            case .started(let account): progress.update(doing: "account \(account)")
            case .finished(let purged): progress.update(count: purged)
            }
        }
    }
}
