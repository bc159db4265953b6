import ChildProcesses
import Foundation
import GRDB
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// Helpers for the export command tests: a signing key in the environment, the JSON
/// `export --wait --json` prints, and an independent check of an archive in Python.
enum ExportCLI {
    static let key = ["LIFECYCLE_SIGNING_KEY": "cli-tests-signing-key-0123456789abcdef"]

    struct Ready: Decodable {
        var exportID: String
        var accountID: String
        var jobID: Int64?
        var state: String
        var archiveKey: String?
        var archivePath: String?
        var link: String?
        var expiresAt: String?
        var omittedPhotos: Int

        enum CodingKeys: String, CodingKey {
            case exportID = "export_id", accountID = "account_id", jobID = "job_id", state, archiveKey = "archive_key"
            case archivePath = "archive_path", link, expiresAt = "expires_at", omittedPhotos = "omitted_photos"
        }
    }

    static func importAccounts(_ workspace: Workspace, _ lines: [String]) async throws {
        let fixture = try ImportFixture(lines: lines)
        let result = try await workspace.run(["accounts", "import", fixture.path])
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// `lifecycle export ACCOUNT --wait --json`, decoded.
    static func exportNow(_ workspace: Workspace, _ account: String, _ extra: [String] = [], environment: [String: String] = [:]) async throws -> Ready {
        let result = try await workspace.run(["export", account, "--wait", "--json"] + extra, environment: key.merging(environment) { $1 })
        #expect(result.status == 0, "\(result.stderr)")
        return try JSONDecoder().decode(Ready.self, from: Data(result.stdout.utf8))
    }

    /// Writes a photo blob and its row straight into the installation, the way another
    /// system's data might arrive: the id is whatever the test says, unchecked.
    static func insertPhoto(_ workspace: Workspace, accountID: String, photoID: String, blobName: String, source: String, takenAt: Date) async throws {
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        let key = "accounts/\(accountID)/photos/\(blobName)"
        let target = try blobs.path(for: key)
        try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: source, toPath: target)
        let digest = try FileDigest.sha256(ofFile: target)
        try await workspace.execute(
            """
            INSERT INTO photos (id, account_id, entry_id, role, blob_key, content_type, byte_size, sha256, taken_at, created_at)
            VALUES (?, ?, NULL, 'entry', ?, 'image/jpeg', ?, ?, ?, ?)
            """,
            [.text(photoID), .text(accountID), .text(key), .integer(Int(digest.size)), .text(digest.hex), .date(takenAt), .date(takenAt)])
    }

    /// The account's deletion state as lifecycle records it (and the app's `accounts.state` alike).
    static func setState(_ workspace: Workspace, _ accountID: String, _ state: String) async throws {
        try await workspace.execute("UPDATE accounts SET state = ? WHERE id = ?", [.text(state), .text(accountID)])
        let subjects = workspace.ownTable("subjects")
        try await workspace.execute(
            "INSERT INTO \(subjects) (subject_key, state, updated_at) VALUES (?, ?, CURRENT_TIMESTAMP) ON CONFLICT (subject_key) DO UPDATE SET state = excluded.state",
            [.text(accountID), .text(state)])
    }

    static func count(_ workspace: Workspace, _ sql: String) async throws -> Int {
        try await workspace.int(sql)
    }

    /// Reads the archive with Python's zipfile or tarfile (no code of ours involved): every
    /// name under one root with no `..` or absolute path, every manifest hash and size
    /// right, and every CSV parsed by the csv module equal to its JSON twin, formula
    /// cells apart. Prints the entry names and the manifest as JSON.
    static let pythonCheck = #"""
    import csv, hashlib, io, json, sys, tarfile, zipfile
    path, fmt = sys.argv[1], sys.argv[2]
    if fmt == "zip":
        archive = zipfile.ZipFile(path)
        assert archive.testzip() is None, "a CRC does not match"
        infos = archive.infolist()
        names = [i.filename for i in infos]
        for i in infos:
            if any(ord(c) > 127 for c in i.filename):
                assert i.flag_bits & 0x800, "UTF-8 flag missing on " + i.filename
            if "/photos/" in i.filename or "/files/" in i.filename:
                assert i.compress_type == zipfile.ZIP_STORED, "photo recompressed: " + i.filename
        read = archive.read
    else:
        archive = tarfile.open(path, "r:gz")
        members = archive.getmembers()
        assert all(m.isfile() for m in members)
        names = [m.name for m in members]
        read = lambda n: archive.extractfile(n).read()
    root = names[0].split("/")[0]
    for n in names:
        parts = n.split("/")
        assert not n.startswith("/") and "\\" not in n, n
        assert parts[0] == root and len(parts) > 1, n
        assert all(p not in ("", ".", "..") for p in parts), n
    assert len(set(names)) == len(names), "duplicate names"
    manifest = json.loads(read(root + "/manifest.json"))
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) | {"manifest.json"} == {n[len(root) + 1:] for n in names}, "manifest and archive differ"
    for p, f in listed.items():
        data = read(root + "/" + p)
        assert len(data) == f["bytes"], p
        assert hashlib.sha256(data).hexdigest() == f["sha256"], p
    for table, count in manifest["row_counts"].items():
        rows = json.loads(read(root + "/" + table + ".json").decode("utf-8"))
        body = list(csv.reader(io.StringIO(read(root + "/" + table + ".csv").decode("utf-8"), newline="")))
        header, cells = body[0], body[1:]
        assert len(rows) == len(cells) == count, table
        for obj, row in zip(rows, cells):
            assert list(obj.keys()) == header, table
            for key, cell in zip(header, row):
                value = obj[key]
                if value is None:
                    expected = ""
                elif isinstance(value, bool):
                    expected = "true" if value else "false"
                elif isinstance(value, str):
                    expected = ("'" + value) if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value
                else:
                    expected = str(value)
                assert cell == expected, (table, key, cell, expected)
    tables = {t: json.loads(read(root + "/" + t + ".json").decode("utf-8")) for t in manifest["row_counts"]}
    stored = {p: read(root + "/" + p).decode("latin-1") for p in listed if p.startswith("files/")}
    print(json.dumps({"names": names, "root": root, "manifest": manifest, "tables": tables, "files": stored}))
    """#

    struct PythonReport: Decodable {
        var names: [String]
        var root: String
    }

    static func checkWithPython(_ archive: String, format: String) async throws -> PythonReport {
        try JSONDecoder().decode(PythonReport.self, from: Data(try await pythonOutput(archive, format: format).utf8))
    }

    /// The check's whole output: besides names and root, `manifest`, `tables` (each
    /// table file's rows) and `files` (the content of every entry under files/).
    static func pythonOutput(_ archive: String, format: String) async throws -> String {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("check-\(UUID().uuidString).py").path
        try pythonCheck.write(toFile: script, atomically: true, encoding: .utf8)
        let result = try await tool("/usr/bin/env", ["python3", script, archive, format])
        #expect(result.status == 0, "python check failed: \(result.output)")
        return result.output
    }

    static func tool(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C.UTF-8"
        environment["PYTHONIOENCODING"] = "utf-8"
        process.environment = environment
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        await process.exited()
        try handle.close()
        return (process.terminationStatus, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }
}
