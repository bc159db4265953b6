import ArgumentParser
import Foundation
import LifecycleRuntime

struct AccountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts", abstract: "Load, inspect and hold accounts.",
        subcommands: [ImportAccounts.self, ShowAccount.self, SetPasswordCommand.self, HoldAccount.self, UnholdAccount.self])
}

struct ImportAccounts: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import accounts from a JSONL file, one account per line.",
        discussion: """
            Photo paths are relative to the JSONL file's folder (or --photos-root) and must stay inside it:
            absolute paths, '..' and symbolic links leading out are refused, and only regular files are read.
            Each line is all-or-nothing; bad lines are reported with their line number and the others are \
            imported. Importing the same file again changes nothing.
            Exit 65 if any line was refused, 66 if the file does not exist; 75 if the disk filled up and 73 if \
            the blob directory is not writable (the lines before are imported: fix it and run the same command).
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The JSONL file.") var file: String
    @Option(name: .customLong("photos-root"), help: ArgumentHelp(
        "The folder photo paths are relative to (default: the JSONL file's folder).", valueName: "dir"))
    var photosRoot: String?

    func run() async throws {
        try await guarded {
            guard FileManager.default.fileExists(atPath: file) else {
                throw CLIFailure(.noInput, "\(file): no such file. Pass the path of a JSONL file with one account per line.")
            }
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let importer = try await AccountImporter(services: services)
        let progress = ProgressLine(label: "importing \(file)", total: Terminal.stderrIsTTY ? lineCount(file) : nil) { services.logger.info("\($0)") }
        let report: ImportReport
        do {
            report = try await importer.importFile(at: file, photosRoot: photosRoot) { line, report in
                progress.update(count: report.imported.count + report.unchanged.count, doing: "line \(line)")
            }
        } catch let interrupted as ImportInterrupted {
            progress.finish()
            print(interrupted.report, stoppedAt: interrupted.line)
            throw interrupted.underlying
        }
        progress.finish()
        print(report, stoppedAt: nil)
        return report.failures.isEmpty ? .ok : .dataError
    }

    private func print(_ report: ImportReport, stoppedAt line: Int?) {
        if options.json {
            // A JSON reader learns of the stop from the exit code and the message on stderr.
            try? Terminal.printJSON(report)
            return
        }
        let done = "imported \(report.imported.count) account(s), \(report.unchanged.count) already present, \(report.failures.count) line(s) refused, \(report.photosStored) photo(s) stored"
        Terminal.line(line.map { "stopped at line \($0): \(done) before it" } ?? done)
        for failure in report.failures {
            Terminal.note("line \(failure.line): \(failure.reason)")
        }
        if line != nil {
            Terminal.note("Lines before the stop are imported; once the cause below is fixed, run the same command again.")
        } else if !report.failures.isEmpty {
            Terminal.note("Fix the refused lines and run the same command again: lines already imported are left as they are.")
        }
    }
}

/// An account as the map finds it: lifecycle's record of its deletion, the values an
/// operator names it by (its lookup columns; none once erased) and its rows per mapped table.
struct AccountSummary: Codable {
    var key: String
    var table: String
    var state: AccountState
    var deletionRequestedAt: Date?
    var purgeAfter: Date?
    var purgedAt: Date?
    var lookup: [String: String]
    var rows: [String: Int]

    enum CodingKeys: String, CodingKey {
        case key, table, state, deletionRequestedAt = "deletion_requested_at", purgeAfter = "purge_after", purgedAt = "purged_at", lookup, rows
    }
}

struct ShowAccount: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show one account by id or email (exit 67 if there is none).")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let directory = try await services.directory()
        let data = directory.data
        let named = account
        let found = try await services.store.read { tx -> AccountSummary? in
            // A purged user whose row the map deletes is found by its key in lifecycle's record;
            // only then is "not found" asked again as deletion asks it: a row this role cannot
            // see (row level security) is exit 77, not "no account".
            guard let key = try data.resolve(.operator(named), in: tx) ?? tx.subject(key: named)?.key
                    ?? directory.find(.operator(named), in: tx) else { return nil }
            let record = try tx.subject(key: key)
            var lookup: [String: String] = [:]
            for column in data.plan.subject.lookup {
                if let value = try tx.rows(data.sql.subjectValue(column: column, key: key)).first?.first?.text { lookup[column] = value }
            }
            return AccountSummary(
                key: key, table: data.displayName(data.plan.subject.table), state: record?.state ?? .active,
                deletionRequestedAt: record?.deletionRequestedAt, purgeAfter: record?.purgeAfter, purgedAt: record?.purgedAt,
                lookup: lookup, rows: try data.rowCounts(key: key, in: tx))
        }
        guard let summary = found else { throw LifecycleError.noSuchAccount(named) }
        if options.json {
            try Terminal.printJSON(summary)
            return .ok
        }
        Terminal.line("account \(summary.key) (\(summary.table))  state: \(summary.state.rawValue)")
        for column in data.plan.subject.lookup {
            // The app's text: a control character in it would be the terminal's to obey.
            guard let value = summary.lookup[column] else { continue }
            let escaped = value.unicodeScalars.contains { $0.properties.generalCategory == .control }
            Terminal.line("  \(column): \(escaped ? String(reflecting: value) : value)")
        }
        if let purgeAfter = summary.purgeAfter, summary.state != .purged { Terminal.line("  deletion requested; purge after \(ISO8601.format(purgeAfter))") }
        if let purgedAt = summary.purgedAt { Terminal.line("  purged at \(ISO8601.format(purgedAt))") }
        Terminal.line("  rows: " + summary.rows.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
        return .ok
    }
}

/// Lines in a file (its newline bytes, plus a last line without one), read in 1 MiB
/// chunks: the total an import's progress counts down to. Nil if it cannot be read.
func lineCount(_ path: String) -> Int? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    var lines = 0
    var last: UInt8 = 0x0A
    while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty {
        lines += chunk.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        last = chunk.last ?? last
    }
    return lines + (last == 0x0A ? 0 : 1)
}
