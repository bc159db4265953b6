import ChildProcesses
import Foundation
import PostgresTesting
import Testing

/// The docs an operator follows at 3 a.m. are checked against the binary they describe:
/// every `lifecycle` command line in them names a real subcommand and real options, and
/// every piece of advice an error message gives does too.
struct DocsCommandLineTests {
    /// Every file that shows `lifecycle` command lines to an operator.
    static var documents: [String] {
        let runbooks = (try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/Jobs/runbooks")) ?? []
        let cron = (try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/Jobs/cron")) ?? []
        return manual + ["Jobs/README.md"]
            + runbooks.filter { $0.hasSuffix(".md") }.sorted().map { "Jobs/runbooks/" + $0 }
            + cron.sorted().map { "Jobs/cron/" + $0 }
    }

    /// The README and every page of docs/, a new page included as soon as it is there.
    static var manual: [String] {
        let pages = (try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/docs")) ?? []
        return ["README.md"] + pages.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    @Test
    func everyDocumentedCommandLineNamesRealCommandsAndOptions() async throws {
        let tree = try await CommandTree.load()
        var checked = 0
        var problems: [String] = []
        var filesWithCommands: Set<String> = []
        for document in Self.documents {
            let text = try String(contentsOfFile: repositoryRoot + "/" + document, encoding: .utf8)
            for line in CommandLines.invocations(in: text, markdown: document.hasSuffix(".md")) {
                checked += 1
                filesWithCommands.insert(document)
                if let problem = tree.problem(with: line.arguments) {
                    problems.append("\(document):\(line.number): `\(line.text)`: \(problem)")
                }
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        // The extractor itself could break and find nothing: each runbook and unit that runs
        // lifecycle must have been seen, and the docs hold a few hundred command lines.
        #expect(checked > 150, "only \(checked) command lines found")
        // A page of docs/ may explain without a command line (the runner's guarantees); the
        // README and the pages as a whole may not.
        #expect(Self.manual.count > 8, "\(Self.manual)")
        #expect(Self.manual.filter(filesWithCommands.contains).count > 8, "\(filesWithCommands.sorted())")
        for document in Self.documents where !document.hasSuffix(".timer") && !document.hasPrefix("docs/") {
            #expect(filesWithCommands.contains(document), "no lifecycle command line found in \(document)")
        }
    }

    /// The checker itself: each kind of mistake a doc line could make is caught, and the
    /// forms the docs use for placeholders are not mistaken for one.
    @Test
    func theCheckerTellsRealCommandLinesFromBrokenOnes() async throws {
        let tree = try await CommandTree.load()
        let good = [
            "lifecycle jobs retry 123   # fresh attempt budget",
            "sudo -u lifecycle -E lifecycle worker --once --kind runner.probe",
            "LIFECYCLE_NOW=2026-12-31T03:00:00Z lifecycle worker --once",
            "lifecycle copy-store --to-database postgres://… [--to-blobs DIR|s3://…]",
            "$B accounts hold ACCOUNT --reason \"case 881\" [--until 2027-01-31]",
            "ExecStart=/usr/local/bin/lifecycle purge --log-format json",
            "5 * * * *  /usr/local/bin/lifecycle jobs check --quiet --overdue-after 900 >>/var/log/x 2>&1",
            "lifecycle help delete",
            "lifecycle --version",
            "* * * * *  /bin/sh -c 'set -a; . /etc/lifecycle/environment; set +a; exec /usr/local/bin/lifecycle worker --once' >>/var/log/x 2>&1",
        ]
        for line in good {
            let found = CommandLines.invocations(in: line, markdown: false)
            #expect(found.count == 1, "\(line)")
            for invocation in found { #expect(tree.problem(with: invocation.arguments) == nil, "\(line)") }
        }
        let bad = [
            "lifecycle jobs retyr 123": "no subcommand",
            "lifecycle worker --onse": "no option --onse",
            "lifecycle purge --wait": "no option --wait",
            "sudo -u lifecycle -E lifecycle jobs probe --number 3": "no option --number",
            "lifecycle frobnicate": "no subcommand",
            "* * * * * /bin/sh -c 'exec /usr/local/bin/lifecycle worker --onse'": "no option --onse",
        ]
        for (line, problem) in bad {
            let found = CommandLines.invocations(in: line, markdown: false)
            #expect(found.count == 1, "\(line)")
            for invocation in found {
                let said = tree.problem(with: invocation.arguments)
                #expect(said?.contains(problem) == true, "\(line): \(said ?? "no problem found")")
            }
        }
        // Not invocations: the user, the schema, a sentence.
        for line in [
            "createdb -O lifecycle lifecycle", "adduser --system --home /var/lib/lifecycle lifecycle", "created a lifecycle installation in x",
            "Description=Account lifecycle job worker (lifecycle worker)",
        ] {
            #expect(CommandLines.invocations(in: line, markdown: false).isEmpty, "\(line)")
        }
    }
}

/// The CLI's commands and options, as the binary itself describes them.
struct CommandTree: Decodable, Sendable {
    struct Name: Decodable, Sendable {
        var kind: String
        var name: String
        var spelled: String { kind == "long" ? "--" + name : "-" + name }
    }

    struct Argument: Decodable, Sendable {
        var kind: String
        var names: [Name]?
        var shouldDisplay: Bool
    }

    var commandName: String
    var aliases: [String]?
    var subcommands: [CommandTree]?
    var arguments: [Argument]?
    var defaultSubcommand: String?

    private struct Dump: Decodable { var command: CommandTree }

    static func load() async throws -> CommandTree {
        let json = try await runTool(lifecycleBinary, ["--experimental-dump-help"])
        return try JSONDecoder().decode(Dump.self, from: Data(json.utf8)).command
    }

    /// Each command with the words that invoke it (`["jobs", "probe"]`), the root first.
    var commands: [(path: [String], command: CommandTree)] {
        var all: [(path: [String], command: CommandTree)] = [([], self)]
        for sub in subcommands ?? [] {
            all += sub.commands.map { ([sub.commandName] + $0.path, $0.command) }
        }
        return all
    }

    func argument(named spelled: String) -> Argument? {
        arguments?.first { $0.names?.contains { $0.spelled == spelled } == true }
    }

    func subcommand(named word: String) -> CommandTree? {
        subcommands?.first { $0.commandName == word || $0.aliases?.contains(word) == true }
    }

    /// Every option spelling anywhere in the tree.
    var allOptions: Set<String> {
        Set(commands.flatMap { $0.command.arguments ?? [] }.flatMap { $0.names ?? [] }.map(\.spelled))
    }

    /// What is wrong with `lifecycle <arguments>`, nil when the subcommand path and every
    /// option exist. Values and positionals are not judged: docs write them as placeholders.
    func problem(with arguments: [String]) -> String? {
        var command = self
        var path = ["lifecycle"]
        var index = 0
        var positionals = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if word == "--" { break }
            if word.hasPrefix("-"), word.count > 1, Double(word) == nil {
                let name = String(word.prefix { $0 != "=" })
                if ["--help", "-h"].contains(name) || (name == "--version" && path.count == 1) { continue }
                guard let argument = command.argument(named: name) else {
                    return "`\(path.joined(separator: " "))` has no option \(name)"
                }
                if argument.kind == "option", !word.contains("=") { index += 1 }
                continue
            }
            // `…` stands for words left out: past it the subcommand is not known, only said to be there.
            if word == "…" || word == "..." {
                if positionals == 0, command.subcommands?.isEmpty == false { return nil }
                continue
            }
            if positionals == 0, let subcommands = command.subcommands, !subcommands.isEmpty {
                if word == "help" { return nil }
                if let sub = command.subcommand(named: word) {
                    command = sub
                    path.append(word)
                    continue
                }
                guard let fallback = command.defaultSubcommand.flatMap(command.subcommand(named:)) else {
                    return "`\(path.joined(separator: " "))` has no subcommand \(word)"
                }
                command = fallback
            }
            positionals += 1
        }
        return nil
    }
}

/// `lifecycle` invocations found in a document: fenced code blocks (and the lines of a
/// crontab or a unit file) and, in Markdown prose, inline code that starts with one.
enum CommandLines {
    struct Invocation {
        var number: Int
        var text: String
        /// The words after the binary.
        var arguments: [String]
    }

    static func invocations(in text: String, markdown: Bool) -> [Invocation] {
        var found: [Invocation] = []
        let lines = text.components(separatedBy: "\n")
        var inBlock = false
        var blockIsShell = true
        var pending: (number: Int, text: String)?
        for (offset, line) in lines.enumerated() {
            let number = offset + 1
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if markdown, trimmed.hasPrefix("```") {
                inBlock.toggle()
                let language = trimmed.dropFirst(3).trimmingCharacters(in: .whitespaces)
                blockIsShell = ["", "sh", "bash", "shell", "console"].contains(language)
                continue
            }
            if markdown && !inBlock {
                found += inlineCode(in: line).flatMap { span in
                    shellCommands(span).map { Invocation(number: number, text: span, arguments: $0) }
                }
                continue
            }
            if markdown && !blockIsShell { continue }
            // A line ending in a backslash goes on in the next one.
            let joined = (pending.map { $0.text + " " } ?? "") + trimmed
            let start = pending?.number ?? number
            if joined.hasSuffix("\\") {
                pending = (start, String(joined.dropLast()))
                continue
            }
            pending = nil
            found += shellCommands(commandText(of: joined)).map { Invocation(number: start, text: joined, arguments: $0) }
        }
        return found
    }

    /// The shell command a line of a block, unit file or crontab runs: systemd's `Exec…=`
    /// and a crontab's five time fields stripped.
    static func commandText(of line: String) -> String {
        if let range = line.range(of: #"^Exec[A-Za-z]*=[-@:+!]*"#, options: .regularExpression) {
            return String(line[range.upperBound...])
        }
        // Any other setting of a unit (`Description=… (lifecycle worker)`) runs nothing.
        if line.range(of: #"^[A-Z][A-Za-z]*="#, options: .regularExpression) != nil { return "" }
        if let range = line.range(of: #"^([0-9*/,-]+\s+){5}"#, options: .regularExpression) {
            return String(line[range.upperBound...])
        }
        if line.hasPrefix("$ ") { return String(line.dropFirst(2)) }
        return line
    }

    /// The spans between backticks on one line.
    static func inlineCode(in line: String) -> [String] {
        let parts = line.components(separatedBy: "`")
        return stride(from: 1, to: parts.count - 1, by: 2).map { parts[$0] }
    }

    /// For each simple command in `text` whose program is lifecycle, its arguments.
    static func shellCommands(_ text: String) -> [[String]] {
        var commands: [[String]] = []
        for segment in segments(words(text)) {
            var rest = segment[...]
            // What runs the command for it: `sudo -u USER -E`, `env NAME=value`, `NAME=value`.
            while let first = rest.first {
                if first.range(of: #"^[A-Za-z_][A-Za-z0-9_]*="#, options: .regularExpression) != nil || ["env", "exec", "time", "nohup"].contains(first) {
                    rest = rest.dropFirst()
                } else if first == "sudo" {
                    rest = rest.dropFirst()
                    while let option = rest.first, option.hasPrefix("-") {
                        rest = rest.dropFirst(["-u", "-g", "-C"].contains(option) ? 2 : 1)
                    }
                } else {
                    break
                }
            }
            guard let program = rest.first else { continue }
            let name = program.split(separator: "/").last.map(String.init)
            // `sh -c '… exec lifecycle worker --once'`, as a crontab line that reads an environment file runs it.
            if name == "sh" || name == "bash", let flag = rest.firstIndex(of: "-c"), flag + 1 < rest.endIndex {
                commands += shellCommands(rest[flag + 1])
                continue
            }
            guard program == "$B" || program == "${B}" || name == "lifecycle" else { continue }
            commands.append(Array(rest.dropFirst()))
        }
        return commands
    }

    /// Words as the shell splits them (quotes removed), a comment dropped, the brackets around
    /// an optional part taken off.
    static func words(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var started = false
        func flush() {
            if started {
                let stripped = current.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
                if !stripped.isEmpty { words.append(stripped) }
            }
            current = ""
            started = false
        }
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "'" || character == "\"" {
                quote = character
                started = true
            } else if character == "#" && !started {
                break
            } else if character.isWhitespace {
                flush()
            } else if character == ";" {
                flush()
                words.append(";")
            } else {
                current.append(character)
                started = true
            }
        }
        flush()
        return words
    }

    /// Words split into simple commands at `|`, `&&`, `||`, `;`, `&`; a redirection ends one.
    static func segments(_ words: [String]) -> [[String]] {
        var segments: [[String]] = [[]]
        var redirected = false
        for word in words {
            if ["|", "||", "&&", ";", "&"].contains(word) {
                segments.append([])
                redirected = false
            } else if redirected || word.hasPrefix(">") || word.hasPrefix("<") || word.range(of: #"^[0-9]>"#, options: .regularExpression) != nil {
                redirected = true
            } else {
                segments[segments.count - 1].append(word)
            }
        }
        return segments.filter { !$0.isEmpty }
    }
}

/// `lifecycle <command> --help` for every command, as wide as a terminal can be, so that
/// ArgumentParser wraps nothing and each line shows a line of the source text: a help text
/// written as one string per paragraph never shows a paragraph cut off mid-sentence.
struct HelpTextTests {
    /// The help of each command in the tree, with the words that invoke it.
    static func helps() async throws -> [(command: String, tree: CommandTree, text: String)] {
        let tree = try await CommandTree.load()
        var helps: [(command: String, tree: CommandTree, text: String)] = []
        for (path, command) in tree.commands {
            let run = try await HelpTextTests.help(path)
            helps.append((path.isEmpty ? "lifecycle" : path.joined(separator: " "), command, run))
        }
        return helps
    }

    static func help(_ path: [String]) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: lifecycleBinary)
        process.arguments = path + ["--help"]
        process.environment = ProcessInfo.processInfo.environment.merging(["COLUMNS": "1000"]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = await onThreadOfItsOwn { output.fileHandleForReading.readDataToEndOfFile() }
        await process.exited()
        guard process.terminationStatus == 0 else { throw CLITestFailure("lifecycle \(path) --help exited \(process.terminationStatus)") }
        return String(decoding: data, as: UTF8.self)
    }

    /// Lines of text that end where no sentence or list heading ends (a word, a comma) and
    /// are followed at the same indentation by more of the same text: a line break written
    /// into the middle of a paragraph. A more-indented next line is the body of a heading
    /// (`lifecycle delete ACCOUNT --password-stdin` above what it does), a bullet a list item.
    static func brokenParagraphs(in text: [Substring]) -> [String] {
        func indentation(_ line: Substring) -> Int { line.prefix { $0 == " " }.count }
        var broken: [String] = []
        for (line, next) in zip(text, text.dropFirst()) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let following = next.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !following.isEmpty, indentation(line) == indentation(next) else { continue }
            if following.hasPrefix("* ") || following.hasPrefix("- ") { continue }
            let ending = trimmed.reversed().drop { ")\"'`".contains($0) }.first
            if let ending, ".:!?".contains(ending) { continue }
            broken.append("\(trimmed) ⏎ \(following)")
        }
        return broken
    }

    @Test
    func noParagraphOfAnyHelpBreaksMidSentence() async throws {
        var problems: [String] = []
        for (command, _, text) in try await Self.helps() {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            // The overview: the abstract and the discussion, up to the usage line.
            let overview = lines.prefix { !$0.hasPrefix("USAGE:") }
            for broken in Self.brokenParagraphs(in: Array(overview)) { problems.append("\(command): \(broken)") }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test
    func theRuleCatchesALineBreakInsideASentenceAndNothingElse() {
        let broken = Self.brokenParagraphs(in: ["Exit codes: 0 ok, 64 usage,", "69 a service unavailable.", "  One sentence.", "  Another starts here and", "  ends here."])
        #expect(broken == ["Exit codes: 0 ok, 64 usage, ⏎ 69 a service unavailable.", "Another starts here and ⏎ ends here."])
        #expect(Self.brokenParagraphs(in: ["lifecycle delete ACCOUNT --password-stdin", "  The user's request.", "Every kind:", "* export", "* purge"]).isEmpty)
    }

    /// ArgumentParser shortens a usage line of more than 12 options to `<options>`; a usage
    /// written by hand instead must not forget one.
    @Test
    func everyUsageLineShowsTheCommandsOptionsAndNoDefaultIsPrintedTwice() async throws {
        for (command, tree, text) in try await Self.helps() {
            // The usage block: from `USAGE:` to the blank line after it (a hand-written one may have several lines).
            let usage = text.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("USAGE:") }
                .prefix { !$0.isEmpty }.joined(separator: "\n")
            #expect(!usage.contains("<options>"), "\(command): \(usage)")
            let shown = Set(CommandLines.words(String(usage)).map { String($0.prefix { $0 != "=" }) })
            for argument in tree.arguments ?? [] where argument.kind != "positional" && argument.shouldDisplay {
                let spellings = (argument.names ?? []).map(\.spelled)
                if spellings.contains("--help") || spellings.contains("--version") { continue }
                #expect(spellings.contains { shown.contains($0) }, "\(command): \(spellings) missing from \(usage)")
            }
            for line in text.split(separator: "\n") {
                let defaults = line.components(separatedBy: "(default").count - 1
                #expect(defaults <= 1, "\(command): \(line)")
            }
        }
    }
}

/// The runbooks' blocks that can run here, marked `<!-- walkthrough: NAME -->`, run by bash
/// as written (`lifecycle` being the binary under test, `sudo -u USER -E` running the rest
/// as this user), and what their comments say a line prints (`# "worker: 1 succeeded", exit 0`)
/// looked for in the output: a runbook whose step fails, or prints something else, fails here.
@Suite(.serialized)
struct RunbookWalkthroughTests {
    /// The fenced block right after `<!-- walkthrough: NAME -->` in `document`.
    static func block(_ document: String, _ name: String) throws -> String {
        let text = try String(contentsOfFile: repositoryRoot + "/" + document, encoding: .utf8)
        guard let marker = text.range(of: "<!-- walkthrough: \(name) -->"),
              let open = text.range(of: "```sh\n", range: marker.upperBound..<text.endIndex),
              text[marker.upperBound..<open.lowerBound].allSatisfy(\.isWhitespace),
              let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex) else {
            throw CLITestFailure("\(document) has no ```sh block right after <!-- walkthrough: \(name) -->")
        }
        return String(text[open.upperBound..<close.lowerBound])
    }

    /// What the block's comments promise: each `"quoted"` text (an ellipsis standing for
    /// anything) the output must show, in the order they are written.
    static func statedOutputs(of block: String) -> [[String]] {
        block.split(separator: "\n").compactMap { line -> [String]? in
            guard let hash = line.range(of: "# ") else { return nil }
            let comment = line[hash.upperBound...]
            let quoted = comment.split(separator: "\"", omittingEmptySubsequences: false)
            guard quoted.count >= 3 else { return nil }
            return stride(from: 1, to: quoted.count - 1, by: 2).flatMap { quoted[$0].components(separatedBy: "…") }
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    static func expectStatedOutputs(of block: String, in run: Run, sourceLocation: SourceLocation = #_sourceLocation) {
        let output = run.output
        let stated = statedOutputs(of: block)
        #expect(!stated.isEmpty, "the block states no output", sourceLocation: sourceLocation)
        var rest = output[...]
        for fragments in stated {
            for fragment in fragments {
                guard let found = rest.range(of: fragment) else {
                    Issue.record("the runbook says \"\(fragment)\" is printed; the output from there on is:\n\(rest)\n\(run)", sourceLocation: sourceLocation)
                    return
                }
                rest = rest[found.upperBound...]
            }
        }
    }

    struct Run: CustomStringConvertible {
        var status: Int32
        /// Standard output, where the stated outputs are looked for: standard error holds
        /// bash's trace of each command, which the expectations must not be found in.
        var output: String
        var errors: String
        var description: String { "exit \(status)\nstdout:\n\(output)\nstderr:\n\(errors)" }
    }

    /// bash -euxo pipefail in a temporary folder of its own, `lifecycle` and `sudo` defined as
    /// above, no LIFECYCLE_* setting of the test's own environment let in but `environment`.
    static func run(_ block: String, environment: [String: String]) async throws -> Run {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("runbook-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let prelude = """
            lifecycle() { "$B" "$@"; }
            sudo() { while [[ $1 == -* ]]; do if [[ $1 == -u ]]; then shift; fi; shift; done; "$@"; }

            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-euxo", "pipefail", "-c", prelude + block]
        process.currentDirectoryURL = URL(fileURLWithPath: folder)
        var inherited = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LIFECYCLE_") }
        inherited["B"] = lifecycleBinary
        inherited["TMPDIR"] = folder
        inherited["LIFECYCLE_JOBS_DIR"] = repositoryRoot + "/Jobs"
        inherited["LIFECYCLE_BLOBS"] = folder + "/blobs"
        process.environment = inherited.merging(environment) { $1 }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let (data, problems) = await onThreadOfItsOwn {
            (output.fileHandleForReading.readDataToEndOfFile(), errors.fileHandleForReading.readDataToEndOfFile())
        }
        await process.exited()
        return Run(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self), errors: String(decoding: problems, as: UTF8.self))
    }

    /// scale-out.md's first steps, on an empty database of a real PostgreSQL server: the URL
    /// in the runbook stands for the test's own.
    @Test
    func scaleOutsFirstStepsWorkOnAnEmptyPostgresDatabase() async throws {
        var block = try Self.block("Jobs/runbooks/scale-out.md", "postgres")
        let placeholder = "postgres://lifecycle:PASSWORD@db.internal:5432/lifecycle?sslmode=require"
        try #require(block.contains(placeholder), "scale-out.md's block no longer uses the URL this test puts its own in place of")
        let cluster = try await ThrowawayPostgres.shared()
        block = block.replacingOccurrences(of: placeholder, with: cluster.url(database: try await cluster.createDatabase(), pool: 2))
        let walk = try await Self.run(block, environment: [:])
        #expect(walk.status == 0, "\(walk)")
        Self.expectStatedOutputs(of: block, in: walk)
    }

    /// jobs.md's canary and its pause and resume, as written, on a fresh installation of each backend.
    @Test(arguments: Backend.allCases)
    func jobsRunbooksCanaryAndPauseRunAsWritten(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let environment = ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs]
        let made = try await Self.run("lifecycle init", environment: environment)
        try #require(made.status == 0, "\(made)")
        for name in ["canary", "pause"] {
            let block = try Self.block("Jobs/runbooks/jobs.md", name)
            let walk = try await Self.run(block, environment: environment)
            #expect(walk.status == 0, "\(name): \(walk)")
            Self.expectStatedOutputs(of: block, in: walk)
        }
    }

    /// deletion-and-purge.md's deletion without a grace period, on an installation holding
    /// the runbook's user@example.com: she is purged and verified.
    @Test(arguments: Backend.allCases)
    func deletionRunbooksImmediateDeletionPurgesTheAccount(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "u-1", email: "user@example.com", profilePhoto: nil, entryPhoto: nil),
            ImportFixture.account(id: "u-2", profilePhoto: nil, entryPhoto: nil),
        ])
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        try #require(imported.status == 0, "\(imported.stderr)")
        let block = try Self.block("Jobs/runbooks/deletion-and-purge.md", "immediately")
        let walk = try await Self.run(block, environment: ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs])
        #expect(walk.status == 0, "\(walk)")
        Self.expectStatedOutputs(of: block, in: walk)
        #expect(try await workspace.state(of: "u-1") == "purged")
        #expect(try await workspace.state(of: "u-2") == "active")

        // Then section 4's proof, for her: ACCOUNT_ID stands for u-1.
        let environment = ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs]
        var gone = try Self.block("Jobs/runbooks/deletion-and-purge.md", "gone")
        var audit = try Self.block("Jobs/runbooks/deletion-and-purge.md", "audit")
        try #require(gone.contains("ACCOUNT_ID") && audit.contains("ACCOUNT_ID"), "deletion-and-purge.md's proof no longer names ACCOUNT_ID, which this test puts its own in place of")
        gone = gone.replacingOccurrences(of: "ACCOUNT_ID", with: "u-1")
        audit = audit.replacingOccurrences(of: "ACCOUNT_ID", with: "u-1")
        let shown = try await Self.run(gone, environment: environment)
        #expect(shown.status == 0, "\(shown)")
        // What the text after the block says it shows.
        for promised in [#""state":"purged""#, #""purged_at":"#, #""lookup":{}"#, #""photos":0"#] {
            #expect(shown.output.contains(promised), "\(promised): \(shown)")
        }
        for never in ["user@example.com", "Lovelace", "Runs at dawn", "Europe/London"] {
            #expect(!shown.output.contains(never), "\(never): \(shown)")
        }
        let told = try await Self.run(audit, environment: environment)
        #expect(told.status == 0, "\(told)")
        Self.expectStatedOutputs(of: audit, in: told)
    }

    /// deletion-and-purge.md's deletion of a part on request (section 6), on an installation
    /// holding an account with a profile photo and a journal photo: KEY stands for hers, and
    /// her photos go while her account and journal stay.
    @Test(arguments: Backend.allCases)
    func deletionRunbooksPartDeletionErasesThePhotos(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "u-1"), ImportFixture.account(id: "u-2")])
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        try #require(imported.status == 0, "\(imported.stderr)")
        try #require(try await workspace.photos(of: "u-1").count == 1)
        try #require(try await workspace.account(id: "u-1")?.profilePhotoKey != nil)
        var block = try Self.block("Jobs/runbooks/deletion-and-purge.md", "part")
        try #require(block.contains("KEY"), "deletion-and-purge.md's part block no longer names KEY, which this test puts its own in place of")
        block = block.replacingOccurrences(of: "KEY", with: "u-1")
        let walk = try await Self.run(block, environment: ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs])
        #expect(walk.status == 0, "\(walk)")
        Self.expectStatedOutputs(of: block, in: walk)
        #expect(try await workspace.photos(of: "u-1").isEmpty)
        #expect(try await workspace.account(id: "u-1")?.profilePhotoKey == nil)
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/accounts/u-1/upload-import.heic"))
        #expect(try await workspace.photos(of: "u-2").count == 1)
        #expect(try await workspace.account(id: "u-2")?.profilePhotoKey != nil)
        #expect(try await workspace.state(of: "u-1") == "active")
    }

    /// export.md's key, its exports for a support ticket and the revocation of one, on an
    /// installation holding ada@example.com: the key is made where the test's installation
    /// keeps it, the policy allows the runbook's two exports of one account in a day, and the
    /// revoked export and its link are the ones the walk made.
    @Test(arguments: Backend.allCases)
    func exportRunbooksExportAndRevocationRunAsWritten(_ backend: Backend) async throws {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID().uuidString)").path
        try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs", toPath: jobs)
        defer { try? FileManager.default.removeItem(atPath: jobs) }
        let policy = jobs + "/policies/export.yaml"
        let text = try String(contentsOfFile: policy, encoding: .utf8)
        try #require(text.contains("rate_limit_count: 1\n"))
        try text.replacingOccurrences(of: "rate_limit_count: 1\n", with: "rate_limit_count: 2\n").write(toFile: policy, atomically: true, encoding: .utf8)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "ada"), ImportFixture.account(id: "u-2")])
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        try #require(imported.status == 0, "\(imported.stderr)")

        let keyFile = workspace.root + "/signing.key"
        var key = try Self.block("Jobs/runbooks/export.md", "key")
        try #require(key.contains("/etc/lifecycle/signing.key"), "export.md's key block no longer writes /etc/lifecycle/signing.key, which this test puts its own in place of")
        key = key.replacingOccurrences(of: "/etc/lifecycle/signing.key", with: keyFile)
        let made = try await Self.run(key, environment: [:])
        try #require(made.status == 0, "\(made)")
        let written = try String(contentsOfFile: keyFile, encoding: .utf8)
        #expect(written.range(of: #"^[0-9a-f]{64}\n$"#, options: .regularExpression) != nil, "\(written)")
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let environment = [
            "LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs, "LIFECYCLE_JOBS_DIR": jobs,
            "LIFECYCLE_SIGNING_KEY_FILE": keyFile,
        ]
        let exports = try Self.block("Jobs/runbooks/export.md", "run")
        let exported = try await Self.run(exports, environment: environment)
        #expect(exported.status == 0, "\(exported)")
        Self.expectStatedOutputs(of: exports, in: exported)

        let link = try #require(exported.output.split(separator: "\n").lazy.compactMap { line -> String? in
            guard let range = line.range(of: "link:") else { return nil }
            return line[range.upperBound...].trimmingCharacters(in: .whitespaces)
        }.first, "no link in \(exported)")
        let id = try #require(link.split(separator: "/").last?.split(separator: "?").first.map(String.init))
        var revoke = try Self.block("Jobs/runbooks/export.md", "revoke")
        let url = "https://…/exports/5f0c…?expires=…&sig=…"
        for placeholder in [url, "5f0c…"] {
            try #require(revoke.contains(placeholder), "export.md's revoke block no longer uses \(placeholder), which this test puts its own in place of")
        }
        revoke = revoke.replacingOccurrences(of: url, with: link).replacingOccurrences(of: "5f0c…", with: id)
        let revoked = try await Self.run(revoke, environment: environment)
        #expect(revoked.status == 0, "\(revoked)")
        Self.expectStatedOutputs(of: revoke, in: revoked)
        #expect(revoked.output.contains(id))
    }

    /// export.md's search for a stuck export, on an installation whose export of ada died
    /// on a photo missing from the blob store: the runbook's job 123 stands for that export's.
    @Test(arguments: Backend.allCases)
    func exportRunbooksStuckExportIsFoundAsWritten(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "ada", profilePhoto: nil)])
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        try #require(imported.status == 0, "\(imported.stderr)")
        try FileManager.default.removeItem(atPath: workspace.blobs + "/accounts/ada/photos/ada-p1")
        let key = ["LIFECYCLE_SIGNING_KEY": (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "")]
        let failed = try await workspace.run(["export", "ada@example.com", "--wait"], environment: key)
        try #require(failed.status == 65 && failed.stderr.contains("which is not in the blob store"), "\(failed.stderr)")
        let job = try #require(failed.stderr.range(of: #"export job #[0-9]+"#, options: .regularExpression).map { failed.stderr[$0].dropFirst("export job #".count) })

        var block = try Self.block("Jobs/runbooks/export.md", "stuck")
        try #require(block.contains("jobs show 123"), "export.md's stuck block no longer shows job 123, which this test puts its own in place of")
        block = block.replacingOccurrences(of: "jobs show 123", with: "jobs show \(job)")
        let walk = try await Self.run(block, environment: ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs].merging(key) { $1 })
        #expect(walk.status == 0, "\(walk)")
        Self.expectStatedOutputs(of: block, in: walk)
        #expect(walk.output.contains("#\(job) export dead"), "\(walk)")
        #expect(walk.output.contains("✓ snapshot"), "\(walk)")
        #expect(walk.output.contains("· write-archive"), "\(walk)")
    }

    /// photos.md's normalisation commands, on an installation whose imported profile photos
    /// wait to be normalised: afterwards none is pending and each one's job succeeded.
    @Test(arguments: Backend.allCases)
    func photosRunbooksNormalisationRunsAsWritten(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "ada"), ImportFixture.account(id: "u-2", profilePhoto: "photos/avatar-alpha.png")])
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        try #require(imported.status == 0, "\(imported.stderr)")
        let block = try Self.block("Jobs/runbooks/photos.md", "normalize")
        let walk = try await Self.run(block, environment: ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs])
        #expect(walk.status == 0, "\(walk)")
        Self.expectStatedOutputs(of: block, in: walk)
        #expect(walk.output.contains("normalised 2, rejected 0"), "\(walk)")
        let pending = try await workspace.run(["photos", "list", "--state", "pending"])
        #expect(pending.status == 0 && pending.stdout.contains("no profile photos in state pending"), "\(pending.stdout)\(pending.stderr)")
    }

    /// photos.md's investigation of a rejected upload, on an installation whose one profile
    /// photo is a GIF named .jpg: the upload is looked at while it waits (the runbook's file is
    /// its key), then refused by `photos normalize --all` (the runbook's account and job are
    /// that account and its photo job).
    @Test(arguments: Backend.allCases)
    func photosRunbooksRejectedUploadInvestigationRunsAsWritten(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "bob", profilePhoto: "photos/upload.jpg", entryPhoto: nil)])
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        // A 1×1 GIF: what a renamed upload is, and a file `file` and vipsheader read.
        try Data(base64Encoded: "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")!.write(to: URL(fileURLWithPath: fixture.directory + "/photos/upload.jpg"))
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        try #require(imported.status == 0, "\(imported.stderr)")
        let environment = ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs]
        let pending = try #require(try await workspace.profilePhotos()["bob"])
        try #require(pending.state == "pending")

        var look = try Self.block("Jobs/runbooks/photos.md", "upload")
        let placeholder = "blobs/<file>"
        try #require(look.contains(placeholder), "photos.md's upload block no longer uses \(placeholder), which this test puts its own in place of")
        look = look.replacingOccurrences(of: placeholder, with: workspace.blobs + "/" + pending.file)
        let looked = try await Self.run(look, environment: environment)
        #expect(looked.status == 0, "\(looked)")
        Self.expectStatedOutputs(of: look, in: looked)
        #expect(looked.output.contains("GIF image data"), "\(looked)")
        #expect(looked.errors.contains("unsupportedType: content is GIF"), "\(looked)")

        let normalised = try await workspace.run(["photos", "normalize", "--all"])
        try #require(normalised.status == 0 && normalised.stdout.contains("rejected 1"), "\(normalised.stdout)\(normalised.stderr)")
        let jobs = try await workspace.run(["jobs", "list", "--kind", "photos.normalize-column"])
        let job = try #require(jobs.stdout.split(separator: "\n").first { $0.hasSuffix("key photo:\(pending.file)") }?.dropFirst().prefix { $0.isNumber }, "\(jobs.stdout)")
        #expect(!FileManager.default.fileExists(atPath: workspace.blobs + "/" + pending.file), "a refused upload is deleted")

        var rejected = try Self.block("Jobs/runbooks/photos.md", "rejected")
        try #require(rejected.contains("<job id>") && rejected.contains("<account>"), "photos.md's rejected block no longer uses <job id> and <account>, which this test puts its own in place of")
        rejected = rejected.replacingOccurrences(of: "<job id>", with: String(job)).replacingOccurrences(of: "<account>", with: "bob")
        let walk = try await Self.run(rejected, environment: environment)
        #expect(walk.status == 0, "\(walk)")
        Self.expectStatedOutputs(of: rejected, in: walk)
        #expect(walk.output.contains("unsupportedType"), "\(walk)")
        #expect(walk.output.contains("This file type is not supported. Please use JPG, PNG, or HEIC."), "\(walk)")
    }

    /// install.md's "Check it works", on an installation made as its step 3 makes one.
    @Test
    func installsCheckItWorksPassesOnAFreshInstallation() async throws {
        let workspace = try Workspace()
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let environment = ["LIFECYCLE_DATABASE": workspace.database, "LIFECYCLE_BLOBS": workspace.blobs]
        let made = try await Self.run("lifecycle init", environment: environment)
        try #require(made.status == 0, "\(made)")
        let block = try Self.block("Jobs/runbooks/install.md", "check")
        let walk = try await Self.run(block, environment: environment)
        #expect(walk.status == 0, "\(walk)")
        Self.expectStatedOutputs(of: block, in: walk)
    }
}

/// Advice in the product's messages (`run \`lifecycle jobs retry 12\``, `use \`--operator NAME\``)
/// names commands and options that exist: every backticked `lifecycle …` or `--option` in a
/// string literal of Sources/ is checked against the command tree.
struct AdviceInMessagesTests {
    static func sourceFiles() throws -> [String] {
        let root = repositoryRoot + "/Sources"
        let enumerator = FileManager.default.enumerator(atPath: root)
        var files: [String] = []
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix(".swift") { files.append(path) }
        }
        return files.sorted()
    }

    /// The backticked spans of a literal's text that advise a command line or an option.
    static func advice(in text: String) -> [String] {
        CommandLines.inlineCode(in: text.replacingOccurrences(of: "\n", with: " ")).filter { span in
            span.hasPrefix("--") || !CommandLines.shellCommands(span).isEmpty
        }
    }

    static func problem(with span: String, tree: CommandTree, options: Set<String>) -> String? {
        let commands = CommandLines.shellCommands(span)
        if let command = commands.first { return tree.problem(with: command) }
        let unknown = CommandLines.words(span).filter { $0.hasPrefix("--") }.map { String($0.prefix { $0 != "=" }) }.filter { !options.contains($0) }
        return unknown.isEmpty ? nil : "no command has \(unknown.joined(separator: ", "))"
    }

    @Test
    func everyCommandAndOptionAMessageRecommendsExists() async throws {
        let tree = try await CommandTree.load()
        let options = tree.allOptions.union(["--help", "--version"])
        var checked = 0
        var problems: [String] = []
        for file in try Self.sourceFiles() {
            let source = try String(contentsOfFile: repositoryRoot + "/Sources/" + file, encoding: .utf8)
            for literal in SwiftStringLiterals.scan(source) {
                for span in Self.advice(in: literal.text) {
                    checked += 1
                    if let problem = Self.problem(with: span, tree: tree, options: options) {
                        problems.append("Sources/\(file):\(literal.line): `\(span)`: \(problem)")
                    }
                }
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        #expect(checked > 40, "only \(checked) pieces of advice found")
    }

    /// An option named in a message without backticks ("needs --operator NAME") exists too.
    /// PostgresTesting's literals are initdb's own arguments, not advice to anyone.
    @Test
    func everyOptionAMessageNamesExists() async throws {
        let options = try await CommandTree.load().allOptions
        var checked = 0
        var problems: [String] = []
        for file in try Self.sourceFiles() where !file.hasPrefix("PostgresTesting/") {
            let source = try String(contentsOfFile: repositoryRoot + "/Sources/" + file, encoding: .utf8)
            for literal in SwiftStringLiterals.scan(source) {
                for match in literal.text.matches(of: /(?:^|[^\w-])(--[a-z][a-z0-9-]*)/) {
                    checked += 1
                    if !options.contains(String(match.1)) { problems.append("Sources/\(file):\(literal.line): \(match.1) in \"\(literal.text)\"") }
                }
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        #expect(checked > 100, "only \(checked) options found in messages")
    }

    @Test
    func literalsAreReadAsTheCompilerReadsThem() async throws {
        let source = ##"""
            // "`lifecycle nope`" in a comment is not a message
            let a = "run `lifecycle jobs retry \(job.id)` first"
            let b = """
                multi \
                line with `--operator NAME`
                """
            let c = #"raw "`lifecycle purge`" \#(x)"#
            """##
        let texts = SwiftStringLiterals.scan(source).map(\.text)
        #expect(texts == ["run `lifecycle jobs retry X` first", "multi line with `--operator NAME`", #"raw "`lifecycle purge`" X"#])
        let tree = try await CommandTree.load()
        #expect(Self.problem(with: "lifecycle jobs retyr X", tree: tree, options: tree.allOptions) != nil)
        #expect(Self.problem(with: "--operater NAME", tree: tree, options: tree.allOptions) != nil)
        #expect(Self.problem(with: "--operator NAME", tree: tree, options: tree.allOptions) == nil)
    }
}

/// The string literals of a Swift file with their first line: escapes decoded, an
/// interpolation read as `X`, a multi-line literal's indentation and continued lines as the
/// compiler reads them. Comments are skipped.
struct SwiftStringLiterals {
    private let characters: [Character]
    private var index = 0
    private var line = 1
    private var found: [(line: Int, text: String)] = []

    static func scan(_ source: String) -> [(line: Int, text: String)] {
        var lexer = SwiftStringLiterals(characters: Array(source))
        lexer.code(untilClosingParenthesis: false)
        return lexer.found
    }

    private init(characters: [Character]) { self.characters = characters }

    private func peek(_ offset: Int = 0) -> Character? {
        index + offset < characters.count ? characters[index + offset] : nil
    }

    private func starts(with text: String) -> Bool {
        for (offset, character) in text.enumerated() where peek(offset) != character { return false }
        return true
    }

    private mutating func advance(_ count: Int = 1) {
        for _ in 0..<count where index < characters.count {
            if characters[index] == "\n" { line += 1 }
            index += 1
        }
    }

    /// The `#`s before a literal's opening quote, nil when none opens here.
    private func stringOpening() -> Int? {
        var hashes = 0
        while peek(hashes) == "#" { hashes += 1 }
        return peek(hashes) == "\"" ? hashes : nil
    }

    private mutating func code(untilClosingParenthesis: Bool) {
        var depth = 0
        while let character = peek() {
            if starts(with: "//") {
                while let next = peek(), next != "\n" { advance() }
            } else if starts(with: "/*") {
                var nesting = 0
                repeat {
                    if starts(with: "/*") { nesting += 1; advance(2) } else if starts(with: "*/") { nesting -= 1; advance(2) } else { advance() }
                } while nesting > 0 && peek() != nil
            } else if let hashes = stringOpening() {
                string(hashes: hashes)
            } else {
                if character == "(" { depth += 1 }
                if character == ")" {
                    if depth == 0 && untilClosingParenthesis { advance(); return }
                    depth -= 1
                }
                advance()
            }
        }
    }

    private mutating func string(hashes: Int) {
        let first = line
        advance(hashes)
        let multiline = starts(with: "\"\"\"")
        advance(multiline ? 3 : 1)
        let close = (multiline ? "\"\"\"" : "\"") + String(repeating: "#", count: hashes)
        let escape = "\\" + String(repeating: "#", count: hashes)
        var text = ""
        func skipIndentation() { while peek() == " " || peek() == "\t" { advance() } }
        if multiline {
            advance()  // the line break after the opening quotes
            skipIndentation()
        }
        while let character = peek() {
            if starts(with: close) {
                advance(close.count)
                break
            }
            if starts(with: escape) {
                advance(escape.count)
                guard let escaped = peek() else { break }
                advance()
                switch escaped {
                case "(":
                    code(untilClosingParenthesis: true)
                    text += "X"
                case "\n": skipIndentation()
                case "n": text += "\n"
                case "t": text += "\t"
                case "u": while let next = peek(), next != "}" { advance() }; advance()
                default: text.append(escaped)
                }
                continue
            }
            if character == "\n" && !multiline { break }
            text.append(character)
            advance()
            if character == "\n" { skipIndentation() }
        }
        if multiline, text.hasSuffix("\n") { text.removeLast() }
        found.append((first, text))
    }
}

/// The API calls the docs show are the API openapi.yaml describes, and the runnable ones
/// answer as the docs say from a real `lifecycle serve`.
struct DocumentedAPICallTests {
    /// `METHOD /v1/…` with `{name}` for each path parameter, from openapi.yaml.
    static func specified() throws -> Set<String> {
        let spec = try String(contentsOfFile: repositoryRoot + "/Sources/LifecycleServer/openapi.yaml", encoding: .utf8)
        var operations: Set<String> = []
        var path: String?
        for line in spec.split(separator: "\n") {
            if line.hasPrefix("  /"), line.hasSuffix(":"), !line.hasPrefix("   ") {
                path = String(line.dropFirst(2).dropLast())
            } else if !line.hasPrefix(" ") {
                path = nil
            } else if let path, let method = ["get", "put", "post", "delete", "patch", "head"].first(where: { line == "    \($0):" }) {
                operations.insert(method.uppercased() + " " + Self.template(path))
            }
        }
        return operations
    }

    /// A path with every parameter, `{account}` or `<account>`, written `{}`, without a query.
    static func template(_ path: String) -> String {
        let bare = path.split(separator: "?").first.map(String.init) ?? path
        return bare.replacingOccurrences(of: #"(\{[^}]*\}|<[^>]*>)"#, with: "{}", options: .regularExpression)
    }

    /// `METHOD /v1/…` in the docs' prose and curl lines (`curl -X METHOD …/v1/…`, GET by default).
    static func documented() throws -> [(place: String, call: String)] {
        var calls: [(place: String, call: String)] = []
        for document in DocsCommandLineTests.documents where document.hasSuffix(".md") {
            let text = try String(contentsOfFile: repositoryRoot + "/" + document, encoding: .utf8)
            for (offset, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let place = "\(document):\(offset + 1)"
                let line = String(line)
                for match in line.matches(of: /\b(GET|PUT|POST|DELETE|PATCH|HEAD) (\/v1\/[^\s`),;]*)/) {
                    calls.append((place, "\(match.1) \(Self.template(String(match.2)))"))
                }
                if line.contains("curl "), let url = line.firstMatch(of: /https?:\/\/[^\s\/]+(\/v1\/[^\s'"]*)/) {
                    let method = line.firstMatch(of: /(?:-X|--request) ([A-Z]+)/).map { String($0.1) } ?? "GET"
                    calls.append((place, "\(method) \(Self.template(String(url.1)))"))
                }
            }
        }
        return calls
    }

    @Test
    func everyDocumentedAPICallIsInTheOpenAPIDescription() throws {
        let specified = try Self.specified()
        #expect(specified.count >= 9, "\(specified)")
        #expect(specified.contains("GET /v1/accounts/{}"))
        let documented = try Self.documented()
        #expect(documented.count >= 8, "\(documented)")
        for (place, call) in documented {
            #expect(specified.contains(call), "\(place): \(call) is not in openapi.yaml")
        }
    }

    /// serve.md's curl lines, against a real server: its address and token file stand for
    /// the test's own.
    @Test
    func serveRunbooksCurlLinesAnswerAsTheRunbookSays() async throws {
        let workspace = try Workspace()
        defer { try? FileManager.default.removeItem(atPath: workspace.root) }
        let tokenFile = workspace.root + "/api-token"
        try "b7e15d2a94c3f80e61d4a2c9f3b05e78d1c6a4f2".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        try await workspace.ensureInitialised()
        let server = try await ServeTests.Server.start(workspace, arguments: ["--api-token-file", tokenFile])
        var block = try RunbookWalkthroughTests.block("Jobs/runbooks/serve.md", "api")
        for placeholder in ["http://127.0.0.1:8080", "/etc/lifecycle/api-token"] {
            try #require(block.contains(placeholder), "serve.md's api block no longer uses \(placeholder), which this test puts its own in place of")
        }
        block = block.replacingOccurrences(of: "http://127.0.0.1:8080", with: "http://" + server.base)
            .replacingOccurrences(of: "/etc/lifecycle/api-token", with: tokenFile)
        let walk = try await RunbookWalkthroughTests.run(block, environment: [:])
        #expect(await server.stop() == 0)
        #expect(walk.status == 0, "\(walk)")
        RunbookWalkthroughTests.expectStatedOutputs(of: block, in: walk)
    }
}

/// The README is a map into docs/: every relative link in the docs leads to a file of the
/// repository, and to a heading of it when the link names one, as GitHub renders them.
struct DocsLinkTests {
    struct Link {
        var line: Int
        var target: String
    }

    /// The targets of `[text](target)`, `![alt](target)` and `[name]: target` outside code,
    /// leaving out URLs and mail addresses.
    static func relativeLinks(in text: String) -> [Link] {
        var links: [Link] = []
        var inBlock = false
        for (offset, line) in text.components(separatedBy: "\n").enumerated() {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inBlock.toggle()
                continue
            }
            if inBlock { continue }
            // Code spans are text, whatever they hold; what is between them is not.
            let prose = line.components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
            var targets = prose.matches(of: /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/).map { String($0.1) }
            if let reference = prose.firstMatch(of: /^\s*\[[^\]]+\]:\s*(\S+)/) { targets.append(String(reference.1)) }
            for target in targets where !target.contains("://") && !target.hasPrefix("mailto:") {
                links.append(Link(line: offset + 1, target: target))
            }
        }
        return links
    }

    /// GitHub's anchor for a heading: lower case, spaces as `-`, every other character but
    /// letters, digits, `-` and `_` left out.
    static func anchor(of heading: String) -> String {
        var anchor = ""
        for character in heading.lowercased() {
            if character == " " {
                anchor.append("-")
            } else if character.isLetter || character.isNumber || character == "-" || character == "_" {
                anchor.append(character)
            }
        }
        return anchor
    }

    /// The anchors of a markdown file's headings; a repeated one gets `-1`, `-2`, … as on GitHub.
    static func anchors(in text: String) -> Set<String> {
        var anchors: Set<String> = []
        var inBlock = false
        for line in text.components(separatedBy: "\n") {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") { inBlock.toggle() }
            guard !inBlock, let heading = line.firstMatch(of: /^#{1,6}\s+(.*?)\s*#*\s*$/) else { continue }
            let base = anchor(of: String(heading.1))
            var candidate = base
            var repeats = 0
            while anchors.contains(candidate) {
                repeats += 1
                candidate = "\(base)-\(repeats)"
            }
            anchors.insert(candidate)
        }
        return anchors
    }

    /// Each link of `text` (the file `document`, a path from `root`) that leads nowhere: to a
    /// file that is not there or outside `root`, or to a heading its markdown file lacks.
    static func brokenLinks(in text: String, of document: String, root: String) -> [String] {
        let folder = URL(fileURLWithPath: root + "/" + document).deletingLastPathComponent()
        var broken: [String] = []
        for link in relativeLinks(in: text) {
            let parts = link.target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let path = parts[0].removingPercentEncoding ?? parts[0]
            let place = "\(document):\(link.line): (\(link.target))"
            // `#heading` alone is a heading of this same text.
            var target = text
            if !path.isEmpty {
                let file = folder.appendingPathComponent(path).standardizedFileURL
                guard file.path.hasPrefix(root + "/"), FileManager.default.fileExists(atPath: file.path) else {
                    broken.append("\(place): no such file in the repository")
                    continue
                }
                guard parts.count == 2, file.pathExtension == "md" else { continue }
                target = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            }
            if parts.count == 2, !anchors(in: target).contains(parts[1]) {
                broken.append("\(place): no heading #\(parts[1]) there")
            }
        }
        return broken
    }

    @Test
    func everyRelativeLinkInTheDocsLeadsToAFileAndHeadingThatExist() throws {
        var links = 0
        var broken: [String] = []
        for document in DocsCommandLineTests.documents where document.hasSuffix(".md") {
            let text = try String(contentsOfFile: repositoryRoot + "/" + document, encoding: .utf8)
            links += Self.relativeLinks(in: text).count
            broken += Self.brokenLinks(in: text, of: document, root: repositoryRoot)
        }
        #expect(broken.isEmpty, "\(broken.joined(separator: "\n"))")
        // The README links every page of docs/; an extractor that found none would pass anything.
        let readme = try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
        let linked = Set(Self.relativeLinks(in: readme).map { $0.target.split(separator: "#").first.map(String.init) ?? "" })
        for page in DocsCommandLineTests.manual where page.hasPrefix("docs/") {
            #expect(linked.contains(page), "README.md does not link \(page)")
        }
        #expect(links > 20, "only \(links) links found")
    }

    /// The checker itself: a missing file, a missing heading and a link out of the
    /// repository are caught; URLs, code and headings that exist are not mistaken for one.
    @Test
    func theLinkCheckerTellsBrokenLinksFromGoodOnes() {
        let page = """
            # A page

            ## The app backend's API, `/v1`

            [fine](runner.md), [fine](../README.md#tour), [fine](#the-app-backends-api-v1), [fine](#a-page),
            [fine](../Jobs/runbooks/), [web](https://example.com/missing.md), `[code](nowhere.md)`,
            [gone](nowhere.md)
            [no heading](runner.md#no-such-heading)
            [outside](../../etc/passwd)

            ```
            [in a block](also-nowhere.md)
            ```
            [ref]: ./missing-too.md
            """
        let broken = Self.brokenLinks(in: page, of: "docs/example.md", root: repositoryRoot)
        #expect(broken.count == 4, "\(broken)")
        for target in ["(nowhere.md)", "(runner.md#no-such-heading)", "(../../etc/passwd)", "(./missing-too.md)"] {
            #expect(broken.contains { $0.contains(target) }, "\(target) not found broken in \(broken)")
        }
        #expect(Self.anchor(of: "Walk-through: a Django project") == "walk-through-a-django-project")
        #expect(Self.anchors(in: "# Tour\n## Tour\n```\n# not a heading\n```") == ["tour", "tour-1"])
    }
}
