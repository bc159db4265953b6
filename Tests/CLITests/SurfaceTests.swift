import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import PostgresTesting
import Testing

/// What an operator and their scripts read: every command's `--json` through one schema,
/// the README's tour as written, the units and crontab in Jobs/cron as they would run, and
/// the terminal's progress line.
@Suite(.serialized)
struct SurfaceTests {
    /// A shell command in `directory`, stdout and stderr apart (through files: a chatty child never blocks on a pipe).
    static func shell(
        _ command: String, in directory: String, environment: [String: String] = [:], stdin: String? = nil
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", command]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var env = ProcessInfo.processInfo.environment
        for name in env.keys where name.hasPrefix("LIFECYCLE_") { env.removeValue(forKey: name) }
        env.merge(environment) { $1 }
        process.environment = env
        let id = UUID().uuidString
        let out = directory + "/.out-\(id)", err = directory + "/.err-\(id)", input = directory + "/.in-\(id)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        _ = FileManager.default.createFile(atPath: input, contents: Data((stdin ?? "").utf8))
        defer { for path in [out, err, input] { try? FileManager.default.removeItem(atPath: path) } }
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        process.standardInput = FileHandle(forReadingAtPath: input)
        try process.run()
        await process.exited()
        return (process.terminationStatus, try String(contentsOfFile: out, encoding: .utf8), try String(contentsOfFile: err, encoding: .utf8))
    }

    static func scratch(_ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    // MARK: One JSON surface

    /// Every leaf command of the CLI, as its own help describes the tree.
    static func everyCommand() async throws -> Set<String> {
        let dump = try await shell("'\(lifecycleBinary)' --experimental-dump-help", in: repositoryRoot)
        #expect(dump.status == 0)
        struct Node: Decodable {
            var commandName: String
            var subcommands: [Node]?
            /// false for a command left out of the help (`sha256`, a benchmark's floor): not the operator's surface.
            var shouldDisplay: Bool?
        }
        struct Dump: Decodable { var command: Node }
        var leaves: Set<String> = []
        func walk(_ node: Node, _ path: [String]) {
            let subcommands = (node.subcommands ?? []).filter { $0.commandName != "help" && $0.shouldDisplay != false }
            if subcommands.isEmpty, !path.isEmpty { leaves.insert(path.joined(separator: " ")) }
            for sub in subcommands { walk(sub, path + [sub.commandName]) }
        }
        walk(try JSONDecoder().decode(Dump.self, from: Data(dump.stdout.utf8)).command, [])
        return leaves
    }

    @Test func everyCommandsJSONHoldsTheSchema() async throws {
        let workspace = try Workspace()
        let signing = ["LIFECYCLE_SIGNING_KEY": "84a19d69858dcd6318f11c74599c51b497898978b6589b05a8a718d587f042f0"]
        struct Case: Encodable {
            var command: String
            var definition: String
            var output: JSONValue
        }
        var cases: [Case] = []
        var covered: Set<String> = []
        /// Runs `arguments --json`, which must exit `status` and print exactly one JSON document.
        func json(_ arguments: [String], words: Int = 2, definition: String? = nil, status: Int32 = 0, stdin: String? = nil) async throws -> JSONValue {
            let command = arguments.prefix { !$0.hasPrefix("-") }.prefix(words).joined(separator: " ")
            let result = try await workspace.run(arguments + ["--json"], environment: signing, stdin: stdin)
            #expect(result.status == status, "\(arguments): \(result.stderr)")
            let output = try JSONDecoder().decode(JSONValue.self, from: Data(result.stdout.utf8))
            #expect(result.stdout.hasSuffix("}\n") || result.stdout.hasSuffix("]\n"), "\(arguments): one document, one line: \(result.stdout)")
            covered.insert(command)
            cases.append(Case(command: arguments.joined(separator: " "), definition: definition ?? command.replacingOccurrences(of: " ", with: "_")
                .replacingOccurrences(of: "-", with: "_"), output: output))
            return output
        }
        func field(_ value: JSONValue, _ path: String...) -> JSONValue? {
            path.reduce(Optional(value)) { current, key in
                if case .object(let members)? = current { return members[key] }
                if case .array(let items)? = current, let index = Int(key), items.indices.contains(index) { return items[index] }
                return nil
            }
        }

        _ = try await json(["demo"], words: 1)
        _ = try await json(["init"], words: 1)
        _ = try await json(["migrate"], words: 1)
        _ = try await json(["accounts", "import", workspace.root + "/demo-input/accounts.jsonl"], status: 65)  // linus was purged
        _ = try await json(["accounts", "show", "ada"])
        _ = try await json(["accounts", "set-password", "ada", "--password-stdin"], stdin: "another secret")
        _ = try await json(["accounts", "hold", "grace", "--reason", "case 1"])
        _ = try await json(["accounts", "unhold", "grace"])
        _ = try await json(["jobs", "list"])
        _ = try await json(["jobs", "show", "4"])
        let probe = try await json(["jobs", "probe", "--fail-attempts", "1"])
        guard case .number(let probeID)? = field(probe, "first") else { throw CLITestFailure("no probe id in \(probe)") }
        _ = try await json(["jobs", "cancel", "\(Int(probeID))"])
        _ = try await json(["jobs", "retry", "\(Int(probeID))"])
        _ = try await json(["worker", "--once"], words: 1, status: 75)  // the probe fails once
        _ = try await json(["jobs", "check"])
        _ = try await json(["jobs", "pause", ProbeJobs.probeKind])
        _ = try await json(["jobs", "resume", ProbeJobs.probeKind])
        let export = try await json(["export", "grace", "--wait"], words: 1)
        _ = try await json(["exports", "list", "grace"])
        guard case .string(let link)? = field(export, "link"), case .string(let exportID)? = field(export, "export_id") else {
            throw CLITestFailure("no link in \(export)")
        }
        _ = try await json(["exports", "verify-link", link])
        _ = try await json(["exports", "revoke", exportID, "--operator", "ops"])
        _ = try await json(["delete", "grace", "--password-stdin"], words: 1, stdin: DeletionLines.password)
        _ = try await json(["restore", "grace"], words: 1)
        _ = try await json(["purge"], words: 1)
        _ = try await json(["purge", "--dry-run"], words: 1, definition: "purge_dry_run")
        _ = try await json(["audit", "linus@example.com"], words: 1)
        _ = try await json(["photos", "normalize", "--all"])
        _ = try await json(["photos", "normalize-file", repositoryRoot + "/Jobs/demo/photos/run.jpg", workspace.root + "/out.jpg"])
        _ = try await json(["photos", "list", "--account", "ada"])
        _ = try await json(["map", "check"])
        // A first map for the demo's database, written beside it (the shipped one stays).
        var fresh = workspace
        fresh.jobsDirectory = workspace.root + "/generated-jobs"
        let generated = try await fresh.run(["map", "init", "--json"])
        #expect([0, 65].contains(generated.status), "\(generated.stderr)")
        cases.append(Case(command: "map init", definition: "map_init", output: try JSONDecoder().decode(JSONValue.self, from: Data(generated.stdout.utf8))))
        covered.insert("map init")
        // The server says where it listens, then serves until SIGTERM.
        let (server, serverOut, _) = try workspace.process(["serve", "--listen", "127.0.0.1:0", "--json"], environment: signing)
        var listening = ""
        _ = try await eventually(timeout: 60) {
            listening = (try? String(contentsOfFile: serverOut, encoding: .utf8)) ?? ""
            return listening.hasSuffix("\n") || !server.isRunning
        }
        kill(server.processIdentifier, SIGTERM)
        await server.exited()
        #expect(server.terminationStatus == 0)
        cases.append(Case(command: "serve", definition: "serve", output: try JSONDecoder().decode(JSONValue.self, from: Data(listening.utf8))))
        covered.insert("serve")
        let cluster = try await ThrowawayPostgres.shared()
        let destination = cluster.url(database: try await cluster.createDatabase(), pool: 2)
        _ = try await json(["copy-store", "--to-database", destination, "--to-blobs", workspace.root + "/copied-blobs"], words: 1)

        let commands = try await Self.everyCommand()
        #expect(covered == commands, "commands without a --json case: \(commands.subtracting(covered).sorted())")

        let check = try await Self.shell(
            "'\(repositoryRoot)/.build-tools/venv/bin/python' '\(repositoryRoot)/Tests/CLITests/Schemas/json/check.py'",
            in: workspace.root, stdin: try JobJSON.encode(cases))
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
    }

    /// `make bench`'s floor for the export: the export's SHA-256, which must be sha256sum's.
    @Test func theSHA256CommandPrintsWhatSha256sumPrintsAndExits66ForAFileItCannotRead() async throws {
        let directory = try Self.scratch("sha256")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Several of its 256 KiB reads and a ragged end, and an empty file.
        var generator = SystemRandomNumberGenerator()
        try Data((0..<(3 * 262_144 + 77)).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: URL(fileURLWithPath: directory + "/photo.jpg"))
        _ = FileManager.default.createFile(atPath: directory + "/empty", contents: Data())
        let ours = try await Self.shell("'\(lifecycleBinary)' sha256 photo.jpg empty", in: directory)
        let reference = try await Self.shell("sha256sum photo.jpg empty", in: directory)
        #expect(ours.status == 0, "\(ours.stderr)")
        #expect(ours.stdout == reference.stdout)
        let missing = try await Self.shell("'\(lifecycleBinary)' sha256 photo.jpg no-such-file", in: directory)
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("no-such-file"))
    }

    @Test func theSchemaCheckRefusesCamelCaseAndJSONInStrings() async throws {
        let root = try Self.scratch("schema")
        let cases = #"""
            [{"command": "bad keys", "definition": "migrate", "output": {"database": "x", "migrations": ["a"], "appliedAt": 1}},
             {"command": "json in a string", "definition": "migrate", "output": {"database": "{\"a\":1}", "migrations": ["a"]}},
             {"command": "missing key", "definition": "migrate", "output": {"database": "x"}}]
            """#
        let check = try await Self.shell(
            "'\(repositoryRoot)/.build-tools/venv/bin/python' '\(repositoryRoot)/Tests/CLITests/Schemas/json/check.py'", in: root, stdin: cases)
        #expect(check.status == 1)
        for command in ["bad keys", "json in a string", "missing key"] { #expect(check.stdout.contains(command + ":"), "\(check.stdout)") }
    }

    // MARK: The README's tour

    @Test func theReadmeTourRunsAsWritten() async throws {
        let readme = try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
        let start = try #require(readme.range(of: "(each line exits 0):\n\n```\n"), "the tour block in README.md")
        let end = try #require(readme.range(of: "\n```", range: start.upperBound..<readme.endIndex))
        let lines = readme[start.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
        #expect(lines.count >= 10)

        // What `make run` leaves: the demo in ./demo of a checkout (Jobs/ beside it).
        let root = try Self.scratch("tour")
        try FileManager.default.createSymbolicLink(atPath: root + "/Jobs", withDestinationPath: repositoryRoot + "/Jobs")
        try FileManager.default.createDirectory(atPath: root + "/.build/debug", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/.build/debug/lifecycle", withDestinationPath: lifecycleBinary)
        let makefile = try String(contentsOfFile: repositoryRoot + "/Makefile", encoding: .utf8)
        #expect(makefile.contains("$(BIN) demo --database $(DEMO_DIR)/lifecycle.sqlite --blobs $(DEMO_DIR)/blobs --jobs-dir Jobs"))
        let demo = try await Self.shell(".build/debug/lifecycle demo --database demo/lifecycle.sqlite --blobs demo/blobs --jobs-dir Jobs", in: root)
        #expect(demo.status == 0, "\(demo.stderr)")

        // One shell, as a newcomer types them: each line must exit 0.
        var script = "set -u\n"
        for (index, line) in lines.enumerated() {
            script += "\(line)\nstatus=$?; echo \"TOUR \(index) $status\" >&2; [ $status -eq 0 ] || exit 1\n"
        }
        let tour = try await Self.shell(script, in: root)
        #expect(tour.status == 0, "\(tour.stderr.suffix(3_000))")
        #expect(tour.stderr.contains("TOUR \(lines.count - 1) 0"))
        #expect(tour.stdout.contains("worker: 3 succeeded"))
        #expect(tour.stdout.contains("account linus  state: purged"))
    }

    // MARK: Jobs/cron as installed

    @Test func theUnitsVerifyAndTheCrontabLinesRunAsWritten() async throws {
        let root = try Self.scratch("cron")
        let cron = repositoryRoot + "/Jobs/cron"
        let units = try FileManager.default.contentsOfDirectory(atPath: cron).filter { $0.hasSuffix(".service") || $0.hasSuffix(".timer") }.sorted()
        #expect(units.contains("lifecycle-worker.service") && units.contains("lifecycle-check.timer") && units.contains("lifecycle-purge.timer"))
        for unit in units {
            let text = try String(contentsOfFile: cron + "/" + unit, encoding: .utf8)
            if unit.hasSuffix(".timer") { #expect(text.contains("OnCalendar=") && text.contains(" UTC"), "\(unit) runs in UTC") }
            try text.replacingOccurrences(of: "/usr/local/bin/lifecycle", with: lifecycleBinary).write(toFile: root + "/" + unit, atomically: true, encoding: .utf8)
        }
        // A missing systemd-analyze is a failure, never a quiet pass: the units would go unchecked.
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"),
                     "systemd-analyze is missing: run make test (it installs systemd)")
        let verify = try await Self.shell("systemd-analyze verify --man=no " + units.map { "./" + $0 }.joined(separator: " "), in: root)
        #expect(verify.status == 0 && verify.stdout.isEmpty && verify.stderr.isEmpty, "\(verify.stdout)\(verify.stderr)")

        // The crontab's lines, run against a fresh installation in place of /var/lib/lifecycle.
        let crontab = try String(contentsOfFile: cron + "/lifecycle.crontab", encoding: .utf8)
        #expect(crontab.contains("\nCRON_TZ=UTC\n"))
        let entries = crontab.split(separator: "\n").filter { $0.first == "*" || ($0.first?.isNumber ?? false) }
        #expect(entries.count == 2)
        for folder in ["lib/lifecycle", "lib/node_exporter/textfile", "log/lifecycle"] {
            try FileManager.default.createDirectory(atPath: root + "/var/" + folder, withIntermediateDirectories: true)
        }
        // Every line reads install.md's environment file: here one with only a comment, the
        // settings coming from the test's environment (CrontabRouteTests runs it with cron's).
        try FileManager.default.createDirectory(atPath: root + "/etc/lifecycle", withIntermediateDirectories: true)
        try "# as /etc/lifecycle/environment\n".write(toFile: root + "/etc/lifecycle/environment", atomically: true, encoding: .utf8)
        let environment = [
            "LIFECYCLE_DATABASE": root + "/var/lib/lifecycle/lifecycle.sqlite", "LIFECYCLE_BLOBS": root + "/var/lib/lifecycle/blobs",
            "LIFECYCLE_JOBS_DIR": repositoryRoot + "/Jobs",
        ]
        #expect(try await Self.shell("'\(lifecycleBinary)' init", in: root, environment: environment).status == 0)
        #expect(try await Self.shell("'\(lifecycleBinary)' jobs probe --count 2", in: root, environment: environment).status == 0)
        for entry in entries {
            let fields = entry.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            #expect(fields.count == 6, "five time fields and a command: \(entry)")
            let command = String(fields[5]).replacingOccurrences(of: "/usr/local/bin/lifecycle", with: lifecycleBinary)
                .replacingOccurrences(of: "/var/", with: root + "/var/")
                .replacingOccurrences(of: "/etc/lifecycle/", with: root + "/etc/lifecycle/")
            let run = try await Self.shell(command, in: root, environment: environment)
            #expect(run.status == 0, "\(entry)\n\(run.stdout)\(run.stderr)")
            // Cron mails nothing when all is well.
            #expect(run.stdout.isEmpty && run.stderr.isEmpty, "\(entry) printed: \(run.stdout)\(run.stderr)")
        }
        #expect(try String(contentsOfFile: root + "/var/lib/node_exporter/textfile/lifecycle-worker.prom", encoding: .utf8)
            .contains(#"lifecycle_jobs{run="worker",kind="runner.probe",state="succeeded"} 2"#))
        // The worker's log kept what it did, one JSON object a line.
        let log = try String(contentsOfFile: root + "/var/log/lifecycle/worker.log", encoding: .utf8).split(separator: "\n")
        #expect(!log.isEmpty && log.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil }, "\(log)")
        #expect(log.contains { $0.contains(#""succeeded":"#) && $0.contains(#""attention":[]"#) })
    }

    // MARK: The terminal

    /// Under a pseudo-terminal (`script`), the worker draws its progress line with a total
    /// while jobs log warnings: every log line starts on a line of its own, never after the
    /// progress text.
    @Test func theProgressLineHasATotalAndLogLinesNeverLandInsideIt() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            Issue.record("util-linux `script` is missing: it comes with every Debian system (bsdutils)")
            return
        }
        let workspace = try Workspace()
        #expect(try await workspace.run(["jobs", "probe", "--count", "300", "--fail-attempts", "1"]).status == 0)
        let command = ([lifecycleBinary, "worker", "--once", "--concurrency", "2"] + workspace.arguments([]).map { $0 })
            .map { "'\($0)'" }.joined(separator: " ")
        let run = try await Self.shell("script -qfec \"\(command)\" /dev/null", in: workspace.root, environment: ["TERM": "xterm"])
        #expect(run.status == 75, "\(run.stdout.suffix(2_000))")
        let output = run.stdout
        #expect(output.contains("\r\u{1B}[2Kjobs finished: "), "no progress line drawn")
        #expect(output.range(of: #"jobs finished: \d+/300 \(\d+%\)"#, options: .regularExpression) != nil, "no total in the progress line")
        #expect(output.range(of: #" · about \d+ s left"#, options: .regularExpression) != nil, "no time left in the progress line")
        var logLines = 0
        // By bytes: a terminal ends lines with CRLF, which Swift counts as one Character.
        for segment in output.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).map({ String(decoding: $0, as: UTF8.self) }) {
            guard let stamp = segment.range(of: #"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z (warning|info|notice|error) "#, options: .regularExpression) else {
                continue
            }
            logLines += 1
            let before = segment[..<stamp.lowerBound].utf8
            let visible = String(decoding: before.split(separator: 0x0D, omittingEmptySubsequences: false).last ?? Substring("").utf8, as: UTF8.self)
            #expect(visible.replacingOccurrences(of: "\u{1B}[2K", with: "").isEmpty, "a log line written into the progress line: \(segment.debugDescription)")
        }
        #expect(logLines >= 300, "every failed first attempt logs a warning")
    }
}
