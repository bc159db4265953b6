import ChildProcesses
import Foundation
import GRDB
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// `accounts import` against a hostile file: photo paths that try to leave their folder,
/// files that would hang a reader, lines built to be slow or to lose data, and a disk or
/// database that gives out half-way. Each case refuses its line (or stops the run with
/// its own exit code) and leaves the rest intact.
@Suite(.serialized)
struct ImportHardeningTests {
    /// A file outside every import folder whose bytes must never reach a blob.
    static let secret: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("import-secret-\(UUID().uuidString).jpg").path
        _ = FileManager.default.createFile(atPath: path, contents: Data("TOP-SECRET-\(UUID().uuidString)".utf8))
        return path
    }()

    @Test(arguments: Backend.allCases)
    func photoPathsThatLeaveTheFolderAreRefusedAndTheOtherLinesImported(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "abs", entryPhoto: Self.secret),
            ImportFixture.account(id: "dotdot", entryPhoto: "photos/../../" + (Self.secret as NSString).lastPathComponent),
            ImportFixture.account(id: "link-out", entryPhoto: "photos/link-out.jpg"),
            ImportFixture.account(id: "chain", entryPhoto: "photos/chain-1.jpg"),
            ImportFixture.account(id: "environ", entryPhoto: "photos/environ.jpg"),
            ImportFixture.account(id: "proc", entryPhoto: "/proc/self/environ"),
            ImportFixture.account(id: "link-in", entryPhoto: "photos/link-in.jpg"),
            ImportFixture.account(id: "good"),
        ])
        let photos = fixture.directory + "/photos"
        try FileManager.default.createSymbolicLink(atPath: photos + "/link-out.jpg", withDestinationPath: Self.secret)
        // A chain whose every link looks local until the last one.
        try FileManager.default.createSymbolicLink(atPath: photos + "/chain-1.jpg", withDestinationPath: "chain-2.jpg")
        try FileManager.default.createSymbolicLink(atPath: photos + "/chain-2.jpg", withDestinationPath: "../../" + (Self.secret as NSString).lastPathComponent)
        try FileManager.default.createSymbolicLink(atPath: photos + "/environ.jpg", withDestinationPath: "/proc/self/environ")
        // A link that stays inside the folder is an ordinary way to lay out photos.
        try FileManager.default.createSymbolicLink(atPath: photos + "/link-in.jpg", withDestinationPath: "run.jpg")

        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("line 1: entries[0].photos[0].file: photo path '\(Self.secret.prefix(56))"))
        #expect(result.stderr.contains("is absolute; photo paths are relative to the import folder"))
        #expect(result.stderr.contains("line 2: entries[0].photos[0].file: photo path 'photos/../../"))
        #expect(result.stderr.contains("has a '..' component"))
        #expect(result.stderr.contains("line 3: entries[0].photos[0].file: photo file 'photos/link-out.jpg' leads outside the import folder"))
        #expect(result.stderr.contains("line 4: entries[0].photos[0].file: photo file 'photos/chain-1.jpg' leads outside the import folder"))
        #expect(result.stderr.contains("line 5: entries[0].photos[0].file: photo file 'photos/environ.jpg' leads outside the import folder"))
        #expect(result.stderr.contains("line 6: entries[0].photos[0].file: photo path '/proc/self/environ' is absolute"))
        #expect(try await workspace.strings("SELECT id FROM accounts ORDER BY id") == ["good", "link-in"])

        // Nothing of the secret, or of any process's environment, reached the blob store.
        let secretBytes = try Data(contentsOf: URL(fileURLWithPath: Self.secret))
        let stored = FileManager.default.enumerator(atPath: workspace.blobs)?.allObjects.compactMap { $0 as? String } ?? []
        for key in stored {
            let data = FileManager.default.contents(atPath: workspace.blobs + "/" + key) ?? Data()
            #expect(data != secretBytes, "\(key) holds the secret file")
            #expect(data.range(of: Data("PATH=".utf8)) == nil, "\(key) holds an environment")
        }
        let linked = try #require(try await workspace.photos(of: "link-in").first { $0.role == .entry })
        let run = try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/Jobs/demo/photos/run.jpg"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: workspace.blobs + "/" + linked.blobKey)) == run)
    }

    @Test func kernelFilesAreRefusedEvenFromAPhotoRootThatHoldsThem() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "environ", profilePhoto: nil, entryPhoto: "environ")])
        let result = try await workspace.run(["accounts", "import", fixture.path, "--photos-root", "/proc/self"])
        #expect(result.status == 65)
        #expect(result.stderr.contains("photo file 'environ' is a kernel-generated file (/proc, /sys), not a photo"), "\(result.stderr)")
    }

    @Test func aFIFOAndADeviceAreRefusedAtOnceInsteadOfHangingTheImport() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "fifo", entryPhoto: "photos/pipe.jpg"),
            ImportFixture.account(id: "good"),
        ])
        #expect(mkfifo(fixture.directory + "/photos/pipe.jpg", 0o600) == 0)
        let fifo = try #require(try await workspace.runWithin(seconds: 60, ["accounts", "import", fixture.path]), "the import hung on a FIFO")
        #expect(fifo.status == 65)
        #expect(fifo.stderr.contains("line 1: entries[0].photos[0].file: photo file 'photos/pipe.jpg' is a FIFO (named pipe), not a regular file"), "\(fifo.stderr)")
        #expect(try await workspace.strings("SELECT id FROM accounts") == ["good"])

        // /dev/zero would be read forever; /dev itself as the photo root names it legitimately.
        let device = try ImportFixture(lines: [ImportFixture.account(id: "zero", profilePhoto: nil, entryPhoto: "zero")])
        let zero = try #require(
            try await workspace.runWithin(seconds: 60, ["accounts", "import", device.path, "--photos-root", "/dev"]), "the import hung on /dev/zero")
        #expect(zero.status == 65)
        #expect(zero.stderr.contains("photo file 'zero' is a character device, not a regular file"), "\(zero.stderr)")
    }

    @Test(arguments: Backend.allCases)
    func aLineLongerThanThePolicyAllowsIsRefusedAndTheNextOneImported(_ backend: Backend) async throws {
        let jobs = try JobsFolder(policies: ["import.yaml": "import:\n  max_line_bytes: 65536\n"])
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs.path)
        let long = ImportFixture.account(id: "long").replacingOccurrences(
            of: "Tempo run 🏃 café 東京", with: String(repeating: "x", count: 200_000))
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "first"), long, ImportFixture.account(id: "after")])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        #expect(result.stderr.contains("line 2: line: is \(long.utf8.count) bytes, longer than the 65536 allowed (import.max_line_bytes)"), "\(result.stderr)")
        #expect(try await workspace.strings("SELECT id FROM accounts ORDER BY id") == ["after", "first"])
    }

    @Test func aLineThatIsNotUTF8IsRefusedNotRepaired() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "good")])
        var bytes = Array(ImportFixture.account(id: "latin1", profilePhoto: nil).utf8)
        let bio = try #require(bytes.firstRange(of: Array("Runs at dawn".utf8)))
        bytes[bio.lowerBound] = 0xE9  // "é" in Latin-1: not UTF-8 on its own
        let handle = try #require(FileHandle(forWritingAtPath: fixture.path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes + [0x0A]))
        try handle.close()
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        #expect(result.stderr.contains("line 2: line: is not valid UTF-8 (byte \(bio.lowerBound + 1) of the line)"), "\(result.stderr)")
        #expect(try await workspace.strings("SELECT id FROM accounts") == ["good"])
    }

    @Test(arguments: Backend.allCases)
    func controlCharactersAreRefusedAndLineBreaksInFreeTextStoredExactly(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        func line(_ id: String, bio: String = "Runs at dawn", text: String = "Tempo run 🏃 café 東京", display: String = "Ada") -> String {
            ImportFixture.account(id: id, profilePhoto: nil)
                .replacingOccurrences(of: #""bio":"Runs at dawn""#, with: #""bio":"\#(bio)""#)
                .replacingOccurrences(of: #""text":"Tempo run 🏃 café 東京""#, with: #""text":"\#(text)""#)
                .replacingOccurrences(of: #""display_name":"Ada""#, with: #""display_name":"\#(display)""#)
        }
        let fixture = try ImportFixture(lines: [
            line("nul-bio", bio: #"before\u0000after"#),
            line("nul-text", text: #"dear diary\u0000 the rest"#),
            line("escape", text: #"colour \u001b[31m red"#),
            line("newline-name", display: #"Ada\nLovelace"#),
            line("form-feed", text: #"one\ftwo"#),
            line("kept", bio: #"line one\nline two\tend"#, text: #"first\r\nsecond\n\tindented\rold mac"#),
        ])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        #expect(result.stderr.contains("line 1: bio: contains the control character U+0000 at character 7; only tab and line breaks are allowed here"), "\(result.stderr)")
        #expect(result.stderr.contains("line 2: entries[0].text: contains the control character U+0000 at character 11"))
        #expect(result.stderr.contains("line 3: entries[0].text: contains the control character U+001B at character 8"))
        #expect(result.stderr.contains("line 4: display_name: contains the control character U+000A at character 4; this field must be a single line of text"))
        #expect(result.stderr.contains("line 5: entries[0].text: contains the control character U+000C at character 4"))
        #expect(try await workspace.strings("SELECT id FROM accounts") == ["kept"])
        #expect(try await workspace.account(id: "kept")?.bio == "line one\nline two\tend")
        #expect(try await workspace.string("SELECT text FROM journal_entries WHERE account_id = 'kept'") == "first\r\nsecond\n\tindented\rold mac")
    }

    @Test(arguments: Backend.allCases)
    func theLongestIDsTheReadmeAllowsImportWithTheirPhotosAndNormalise(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let longest = String(repeating: "a", count: 128)
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: String(repeating: "b", count: 121), email: "b121@example.com", childIDs: "b121"),
            ImportFixture.account(id: longest, email: "a128@example.com", childIDs: "a128"),
            ImportFixture.account(id: "after"),
        ])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("imported 3 account(s)"))
        let upload = try #require(try await workspace.account(id: longest)?.profilePhotoKey)
        #expect(BlobKey.isSafe(upload))
        #expect(FileManager.default.fileExists(atPath: workspace.blobs + "/" + upload))

        let worker = try await workspace.run(["worker", "--once"])
        #expect(worker.status == 0, "\(worker.stderr)")
        let normalised = try #require(try await workspace.profilePhotos()[longest])
        #expect(normalised.state == "normalized" && normalised.file != upload)
        #expect(FileManager.default.fileExists(atPath: workspace.blobs + "/" + normalised.file))
    }

    @Test func anEmailWithACommaOrADisplayNameIsRefused() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "comma", email: "victim@example.com,attacker@evil.test"),
            ImportFixture.account(id: "named", email: "Ada <ada@example.com>"),
            ImportFixture.account(id: "list", email: "victim,attacker@example.com"),
            ImportFixture.account(id: "good", email: "ada.lovelace+runs@example.co.uk"),
        ])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        #expect(result.stderr.contains("line 1: email: must be one email address like ada@example.com; it has more than one '@'"), "\(result.stderr)")
        #expect(result.stderr.contains("line 2: email: must be one email address like ada@example.com; ' ' is not allowed in an address"))
        #expect(result.stderr.contains("line 3: email: must be one email address like ada@example.com; ',' is not allowed in an address"))
        #expect(try await workspace.strings("SELECT id FROM accounts") == ["good"])
    }

    @Test func aRefusedValueCannotForgeALineInTheOutputOrTheTextLog() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let forged = "2026-01-01T00:00:00Z notice lifecycle: account purged account=ada"
        let fixture = try ImportFixture(lines: [
            // A value quoted back in the refusal, and a field name, each carrying a line break.
            ImportFixture.account(id: "forge-1", profilePhoto: nil).replacingOccurrences(
                of: #""created_at":"2025-01-02T03:04:05Z""#, with: #""created_at":"x\n\#(forged)""#),
            ImportFixture.account(id: "forge-2", profilePhoto: nil).replacingOccurrences(
                of: #""bio":"#, with: #""x\n\#(forged)":1,"bio":"#),
        ])
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 65)
        let lines = result.stderr.split(separator: "\n")
        #expect(!lines.contains { $0.hasPrefix(forged) }, "\(result.stderr)")
        #expect(lines.contains { $0.contains("import line refused") && $0.contains("line=1") && $0.contains(#"x\n2026-01-01"#) })
        #expect(lines.contains { $0.contains("import line refused") && $0.contains("line=2") && $0.contains(#"x\n2026-01-01"#) })
        #expect(lines.contains { $0.hasPrefix("line 2: ") && $0.contains(#"x\n2026-01-01"#) && $0.contains("is not a known field") })
    }

    @Test func passwordStandardInputIsReadOnlyUpToTheLongestPassword() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "ada", profilePhoto: nil)])
        #expect(try await workspace.run(["accounts", "import", fixture.path]).status == 0)
        let endless = try #require(
            try await workspace.runWithin(seconds: 60, ["delete", "ada", "--password-stdin"], stdinPath: "/dev/zero"),
            "reading /dev/zero as a password did not stop")
        #expect(endless.status == 65)
        #expect(endless.stderr.contains("the password on standard input is longer than 4096 bytes"), "\(endless.stderr)")
        #expect(try await workspace.account(id: "ada")?.state == .active)
    }

    @Test func everythingTheToolCreatesIsPrivateWhateverTheUmask() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "ada")])
        let result = try await workspace.run(["accounts", "import", fixture.path], wrapper: ["/bin/sh", "-c", #"umask 000; exec "$0" "$@""#])
        #expect(result.status == 0, "\(result.stderr)")
        // (-wal and -shm are gone once the last connection closes; IntakeTests checks them open.)
        for file in ["lifecycle.sqlite", "lifecycle.sqlite.migrate-lock"] {
            #expect(mode(workspace.root + "/" + file) == 0o600, "\(file)")
        }
        var checked = 0
        let walker = FileManager.default.enumerator(atPath: workspace.blobs)
        #expect(mode(workspace.blobs) == 0o700)
        while let relative = walker?.nextObject() as? String {
            let path = workspace.blobs + "/" + relative
            let isDirectory = (try? FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType) == .typeDirectory
            #expect(mode(path) == (isDirectory ? 0o700 : 0o600), "\(relative)")
            checked += 1
        }
        #expect(checked >= 6)
    }

    // MARK: - The disk and the database giving out

    @Test func aFullBlobDiskStopsTheImportWith75AndTheRestImportsOnceThereIsRoom() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: [
            ImportFixture.account(id: "no-photos", profilePhoto: nil, entryPhoto: nil),
            ImportFixture.account(id: "with-photos"),
        ])
        // Migrations first, on the roomy disk; then the blob folder becomes a 64 KiB tmpfs.
        #expect(try await workspace.run(["migrate"]).status == 0)
        let full = try await workspace.run(
            ["accounts", "import", fixture.path], wrapper: privateMount(#"mount -t tmpfs -o size=64k,mode=0700 tmpfs "$BLOBS""#, ["BLOBS": workspace.blobs]))
        #expect(full.status == 75, "\(full.stderr)")
        #expect(full.stdout.contains("stopped at line 2: imported 1 account(s)"), "\(full.stdout)")
        #expect(full.stderr.contains("No space left on device"))
        #expect(full.stderr.contains("Free space and run the same command again"))
        #expect(try await workspace.strings("SELECT id FROM accounts") == ["no-photos"])
        #expect(try await workspace.int("SELECT COUNT(*) FROM photos") == 0)

        let again = try await workspace.run(["accounts", "import", fixture.path])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("imported 1 account(s), 1 already present"))
    }

    @Test func aFullDatabaseDiskStopsTheImportWith75NamingTheFileAndNoLineIsHalfImported() async throws {
        let workspace = try await Workspace.make(.sqlite)
        #expect(try await workspace.run(["migrate"]).status == 0)
        // Lines of ~400 KB of journal text: the second or third fills a 1 MiB disk.
        let big = String(repeating: "lorem ipsum ", count: 35_000)
        let fixture = try ImportFixture(lines: (1...6).map { index in
            ImportFixture.account(id: "big-\(index)", profilePhoto: nil, entryPhoto: nil).replacingOccurrences(of: "Tempo run 🏃 café 東京", with: big)
        })
        let disk = workspace.root + "/small-disk"
        let saved = workspace.root + "/saved"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: saved, withIntermediateDirectories: true)
        try workspace.store().checkpoint()
        // The database moves onto a 1 MiB tmpfs for the run (its files, not the folder of
        // export archives beside it); afterwards its files are copied out (the tmpfs goes with the run's mount namespace) so the test can look inside.
        let smallDatabase = disk + "/lifecycle.sqlite"
        let script = #"""
            copy() { find "$1" -maxdepth 1 -type f -name 'lifecycle.sqlite*' -exec cp {} "$2"/ \; ; }
            mount -t tmpfs -o size=1m,mode=0700 tmpfs "$DISK" && copy "$ROOT" "$DISK" || exit 99
            "$@"; status=$?
            copy "$DISK" "$SAVED"; exit $status
            """#
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = unshareArguments() + ["/bin/sh", "-c", script, "sh", lifecycleBinary, "accounts", "import", fixture.path,
            "--database", smallDatabase, "--blobs", workspace.blobs, "--jobs-dir", workspace.jobsDirectory]
        var environment = ProcessInfo.processInfo.environment
        environment["DISK"] = disk
        environment["ROOT"] = workspace.root
        environment["SAVED"] = saved
        process.environment = environment
        let stdout = Pipe(), stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let (out, err) = await onThreadOfItsOwn {
            (String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
             String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        }
        await process.exited()
        #expect(process.terminationStatus == 75, "\(out)\n\(err)")
        #expect(err.contains("writing the SQLite database \(smallDatabase) failed"), "\(err)")
        #expect(err.contains("Free space and run the same command again"))

        // What was committed is whole: every account imported has its entry, none is half there.
        let queue = try DatabaseQueue(path: saved + "/lifecycle.sqlite")
        let (accounts, entries, check) = try await queue.read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM accounts")!, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM journal_entries")!,
             try String.fetchOne(db, sql: "PRAGMA integrity_check"))
        }
        #expect(check == "ok")
        #expect(accounts == entries)
        #expect(accounts < 6)
        #expect(out.contains("stopped at line \(accounts + 1): imported \(accounts) account(s)"), "\(out)")
    }

    @Test func aReadOnlyBlobDirectoryExits73NamingIt() async throws {
        let workspace = try await Workspace.make(.sqlite)
        #expect(try await workspace.run(["migrate"]).status == 0)
        let fixture = try ImportFixture(lines: [ImportFixture.account(id: "ada")])
        let result = try await workspace.run(
            ["accounts", "import", fixture.path],
            wrapper: privateMount(#"mount --bind "$BLOBS" "$BLOBS" && mount -o remount,bind,ro "$BLOBS""#, ["BLOBS": workspace.blobs]))
        #expect(result.status == 73, "\(result.stderr)")
        #expect(result.stderr.contains("blob directory \(workspace.blobs)"))
        #expect(result.stderr.contains("Read-only file system"))
        #expect(result.stderr.contains("Make the blob directory (--blobs, or LIFECYCLE_BLOBS) writable"))
        #expect(!result.stderr.contains("Fix the refused lines"))
        #expect(try await workspace.int("SELECT COUNT(*) FROM accounts") == 0)
    }

    @Test func aDatabaseFileThatIsNotADatabaseExits69NamingIt() async throws {
        let workspace = try await Workspace.make(.sqlite)
        try await workspace.ensureInitialised()
        try Data(String(repeating: "this is not a database. ", count: 400).utf8).write(to: URL(fileURLWithPath: workspace.database))
        let result = try await workspace.run(["accounts", "show", "ada"])
        #expect(result.status == 69, "\(result.stderr)")
        #expect(result.stderr.contains("the SQLite database \(workspace.database) is damaged"))
        #expect(result.stderr.contains("restore it from a backup"))
        #expect(!result.stderr.contains("This is a bug"))
    }

    @Test func aCorruptPageExits69NamingTheFile() async throws {
        let workspace = try await Workspace.make(.sqlite)
        let fixture = try ImportFixture(lines: (1...30).map { ImportFixture.account(id: "u-\($0)", profilePhoto: nil) })
        #expect(try await workspace.run(["accounts", "import", fixture.path]).status == 0)
        try workspace.store().checkpoint()
        // Every page after the first (the schema) overwritten: any table read hits one.
        let handle = try #require(FileHandle(forUpdatingAtPath: workspace.database))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4096))
        try handle.close()
        let result = try await workspace.run(["accounts", "show", "u-1"])
        #expect(result.status == 69, "\(result.stderr)")
        #expect(result.stderr.contains("the SQLite database \(workspace.database) is damaged"))
    }

    // MARK: - Helpers

    private func mode(_ path: String) -> Int {
        var status = stat()
        guard stat(path, &status) == 0 else { return -1 }
        return Int(status.st_mode & 0o777)
    }

    /// `unshare` options for a mount namespace of the command's own: as root a plain one,
    /// otherwise inside a user namespace where the caller is root (Debian allows both).
    private func unshareArguments() -> [String] {
        getuid() == 0 ? ["--mount", "--propagation", "private"] : ["--user", "--map-root-user", "--mount", "--propagation", "private"]
    }

    /// A wrapper that runs `setup` in a mount namespace of the command's own, so the
    /// mounts it makes vanish with it, then execs the command.
    private func privateMount(_ setup: String, _ environment: [String: String]) -> [String] {
        let assignments = environment.map { "\($0.key)='\($0.value)'" }.joined(separator: " ")
        return ["/usr/bin/unshare"] + unshareArguments() + ["/bin/sh", "-c", "\(assignments); \(setup) || exit 99; exec \"$0\" \"$@\""]
    }
}

/// A Jobs directory of the test's own: the repository's policies plus overrides.
struct JobsFolder {
    let path: String

    init(policies overrides: [String: String]) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID().uuidString)").path
        try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs", toPath: path)
        for (file, text) in overrides {
            try text.write(toFile: path + "/policies/" + file, atomically: true, encoding: .utf8)
        }
    }
}

extension Workspace {
    /// Runs a command that must end on its own within `seconds`; one that does not is
    /// killed and nil returned, so a hang fails its test instead of the whole run.
    func runWithin(seconds: TimeInterval, _ command: [String], stdinPath: String? = nil) async throws -> CommandResult? {
        if Self.needsInstallation(command) { try await ensureInitialised() }
        let (process, out, err) = try process(command, stdinPath: stdinPath)
        let finished = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in finished.signal() }
        if !process.isRunning { finished.signal() }
        guard await onThreadOfItsOwn({ finished.wait(timeout: .now() + seconds) == .success }) else {
            kill(process.processIdentifier, SIGKILL)
            await process.exited()
            return nil
        }
        await process.exited()
        return CommandResult(
            status: process.terminationStatus,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }
}
