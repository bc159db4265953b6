import ChildProcesses
import Foundation
import Testing

/// The cron route of Jobs/runbooks/install.md as an installation runs it: the crontab's own
/// lines, with the environment file the runbook sets up, under cron's bare environment; and
/// a worker without the signing key, which must leave an export waiting, not bury it.
@Suite(.serialized)
struct CrontabRouteTests {
    static let key = "11032620334708c10a9039d2cf11f4e130e1c7d5b376a60278dcb382aba56f8b"

    /// The shipped crontab's variable lines and the command of the line whose schedule is
    /// `schedule`, with the runbook's paths replaced by this installation's. Every path must be
    /// there to be replaced: a line that no longer names one is a changed route, not a pass.
    func crontab(_ workspace: Workspace, environmentFile: String, schedule: String) throws -> (variables: [String: String], command: String) {
        let text = try String(contentsOfFile: repositoryRoot + "/Jobs/cron/lifecycle.crontab", encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && !$0.isEmpty }
        var variables: [String: String] = [:]
        for line in lines where !line.hasPrefix("*") && !(line.first?.isNumber ?? false) {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { variables[parts[0]] = parts[1] }
        }
        let line = try #require(lines.first { $0.hasPrefix(schedule + " ") }, "no crontab line at \(schedule)")
        var command = String(line.dropFirst(schedule.count)).trimmingCharacters(in: .whitespaces)
        let paths = [
            ("/etc/lifecycle/environment", environmentFile), ("/usr/local/bin/lifecycle", lifecycleBinary),
            ("/var/log/lifecycle", workspace.root + "/log"), ("/var/lib/node_exporter/textfile", workspace.root + "/textfile"),
        ]
        // Every line reads the environment file; the worker's also logs and writes metrics.
        for (index, (installed, here)) in paths.enumerated() {
            if index < 2 || schedule == "* * * * *" {
                #expect(command.contains(installed), "the crontab's line no longer names \(installed): \(command)")
            }
            command = command.replacingOccurrences(of: installed, with: here)
        }
        let defaults = [
            "LIFECYCLE_DATABASE": workspace.root + "/lifecycle.sqlite", "LIFECYCLE_BLOBS": workspace.blobs,
            "LIFECYCLE_JOBS_DIR": workspace.jobsDirectory,
        ]
        for (name, value) in defaults {
            #expect(variables[name] != nil, "the crontab no longer sets \(name)")
            variables[name] = value
        }
        return (variables, command)
    }

    /// Runs a crontab command as cron does: `SHELL -c`, with only cron's own variables and the crontab's.
    func runAsCron(_ command: String, variables: [String: String], root: String) async throws -> Int32 {
        try FileManager.default.createDirectory(atPath: root + "/log", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/textfile", withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: variables["SHELL"] ?? "/bin/sh")
        process.arguments = ["-c", command]
        process.environment = ["HOME": root, "LOGNAME": NSUserName(), "PATH": "/usr/bin:/bin"].merging(variables) { $1 }
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        await process.exited()
        return process.terminationStatus
    }

    /// The environment file as install.md says to write it: the key file's name, and on
    /// PostgreSQL the URL in single quotes (it holds `?` and `&`).
    func environmentFile(_ workspace: Workspace) throws -> String {
        let keyFile = workspace.root + "/signing.key"
        _ = FileManager.default.createFile(atPath: keyFile, contents: Data((Self.key + "\n").utf8), attributes: [.posixPermissions: 0o600])
        var lines = ["# as /etc/lifecycle/environment", "LIFECYCLE_SIGNING_KEY_FILE=\(keyFile)"]
        if let url = workspace.postgresURL { lines.append("LIFECYCLE_DATABASE='\(url)'") }
        let file = workspace.root + "/environment"
        _ = FileManager.default.createFile(atPath: file, contents: Data((lines.joined(separator: "\n") + "\n").utf8), attributes: [.posixPermissions: 0o640])
        return file
    }

    /// u1's one export: its state, its archive's path and the link her notification carries.
    func listed(_ workspace: Workspace) async throws -> (state: String?, archive: String?, link: String?) {
        let export = try await workspace.query("SELECT state, blob_key FROM \(workspace.ownTable("exports")) WHERE account_id = 'u1'")
        let body = try await workspace.string("SELECT body FROM \(workspace.ownTable("outbox")) WHERE account_id = 'u1'") ?? ""
        let link = body.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("https://") }.map(String.init)
        return (export.first?[0] ?? nil, (export.first?[1] ?? nil).map { workspace.exportArchives + "/" + $0 }, link)
    }

    @Test(arguments: Backend.allCases)
    func theCrontabsWorkerLineWithTheRunbooksEnvironmentFileFinishesAnExport(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        // Asked for as the app's API would: by a process that has the key.
        let asked = try await workspace.run(["export", "u1"], environment: ["LIFECYCLE_SIGNING_KEY": Self.key])
        #expect(asked.status == 0, "\(asked.stderr)")

        let (variables, command) = try crontab(workspace, environmentFile: try environmentFile(workspace), schedule: "* * * * *")
        let status = try await runAsCron(command, variables: variables, root: workspace.root)
        let log = (try? String(contentsOfFile: workspace.root + "/log/worker.log", encoding: .utf8)) ?? ""
        #expect(status == 0, "\(log)")

        let export = try await listed(workspace)
        #expect(export.state == "ready", "\(export) \(log)")
        let link = try #require(export.link, "\(export)")
        let verdict = try await workspace.run(["exports", "verify-link", link], environment: ["LIFECYCLE_SIGNING_KEY": Self.key])
        #expect(verdict.status == 0, "\(verdict.stdout) \(verdict.stderr)")
        let archive = try #require(export.archive, "\(export)")
        let report = try await ExportCLI.checkWithPython(archive, format: "zip")
        #expect(report.names.contains(report.root + "/manifest.json"))
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("outbox")) WHERE account_id = 'u1'") == 1)

        // The hourly check line, read the same way, finds the queue healthy.
        let (checkVariables, check) = try crontab(workspace, environmentFile: workspace.root + "/environment", schedule: "5 * * * *")
        #expect(try await runAsCron(check, variables: checkVariables, root: workspace.root) == 0)
    }

    @Test(arguments: Backend.allCases)
    func anExportWhoseWorkerLacksTheKeyWaitsWithItsAttemptsAndFinishesOnceTheKeyIsThere(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let asked = try await workspace.run(["export", "u1", "--json"], environment: ["LIFECYCLE_SIGNING_KEY": Self.key])
        #expect(asked.status == 0, "\(asked.stderr)")
        let job = try #require(try JSONSerialization.jsonObject(with: Data(asked.stdout.utf8)) as? [String: Any])["job_id"] as? Int

        // Twice, as two cron minutes would: neither uses an attempt, nor builds anything.
        for _ in 0..<2 {
            let keyless = try await workspace.run(["worker", "--once"])
            #expect(keyless.status == 69, "\(keyless.stdout) \(keyless.stderr)")
            #expect(keyless.stderr.contains("no signing key for download links"), "\(keyless.stderr)")
            // The worker takes no --signing-key-file: its advice names what it reads.
            #expect(!keyless.stderr.contains("--signing-key-file"), "\(keyless.stderr)")
            #expect(keyless.stderr.contains("LIFECYCLE_SIGNING_KEY_FILE"), "\(keyless.stderr)")
        }
        let row = try await workspace.query("SELECT state, attempt, last_error FROM \(workspace.ownTable("jobs")) WHERE id = \(try #require(job))")
        #expect(row.first?[0] == "queued" && row.first?[1] == "0", "\(row)")
        #expect(row.first?[2]?.contains("no signing key") == true, "\(row)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("exports"))") == 0)
        // What the hourly check mails once it has waited: the job and why.
        let check = try await workspace.run(["jobs", "check", "--overdue-after", "0"])
        #expect(check.status == 75)
        #expect(check.stdout.contains("export job #\(job!)") && check.stdout.contains("no signing key"), "\(check.stdout)")

        let keyed = try await workspace.run(["worker", "--once"], environment: ["LIFECYCLE_SIGNING_KEY": Self.key])
        #expect(keyed.status == 0, "\(keyed.stdout) \(keyed.stderr)")
        let export = try await listed(workspace)
        #expect(export.state == "ready" && export.link != nil, "\(export)")
        let done = try await workspace.query("SELECT state, attempt FROM \(workspace.ownTable("jobs")) WHERE id = \(job!)")
        #expect(done.first?[0] == "succeeded" && done.first?[1] == "1", "\(done)")
    }

    /// Each command's advice names only what that command accepts, and the exit codes are
    /// the ones serve.md and docs/operations.md give.
    @Test
    func theSigningKeyAdviceNamesOnlyWhatEachCommandAccepts() async throws {
        let workspace = try await Workspace.make(.sqlite)
        try await ExportCLI.importAccounts(workspace, [ImportFixture.account(id: "u1")])
        let serve = try await workspace.run(["serve", "--listen", "127.0.0.1:0"])
        #expect(serve.status == 69, "\(serve.stderr)")
        #expect(serve.stderr.contains("no signing key") && !serve.stderr.contains("--signing-key-file"), "\(serve.stderr)")
        #expect(serve.stderr.contains("LIFECYCLE_SIGNING_KEY_FILE") && serve.stderr.contains("export.signing_key_file"), "\(serve.stderr)")

        let loose = workspace.root + "/loose.key"
        _ = FileManager.default.createFile(atPath: loose, contents: Data(Self.key.utf8), attributes: [.posixPermissions: 0o644])
        let readable = try await workspace.run(["serve", "--listen", "127.0.0.1:0"], environment: ["LIFECYCLE_SIGNING_KEY_FILE": loose])
        #expect(readable.status == 69, "\(readable.stderr)")
        #expect(readable.stderr.contains("chmod 600"), "\(readable.stderr)")

        let export = try await workspace.run(["export", "u1"])
        #expect(export.status == 69)
        #expect(export.stderr.contains("--signing-key-file"), "\(export.stderr)")
    }
}
