import ChildProcesses
import Foundation
import GRDB
import JobRunner
import Lifecycle
import SQLiteBackend

/// Accounts to import for the deletion and purge tests, with a real password hash.
enum DeletionLines {
    /// bcrypt (cost 4) of "correct horse battery staple", as the demo accounts carry it.
    static let passwordHash = "$2b$04$Wd0dEsiS6/8yONvHwEEae.LfGSs/AKzG3YawF6CS.ukfXvr/45rre"
    static let password = "correct horse battery staple"
    /// Long past: an account imported with it is due for purge at once.
    static let past = "2020-01-01T00:00:00Z"

    /// One JSONL line: `entries` journal entries with one photo each, as many meditation sessions, a profile photo.
    static func account(id: String, entries: Int = 1, pendingSince purgeAfter: String? = nil) -> String {
        var object: [String: Any] = [
            "id": id, "email": "\(id)@example.com", "password_hash": passwordHash, "first_name": "Ada", "last_name": "Lovelace",
            "bio": "Runs at dawn", "timezone": "Europe/London", "created_at": "2025-01-02T03:04:05Z",
            "preferences": ["theme": "dark"], "profile_photo": "photos/tiny.jpg",
            "entries": (0..<entries).map { index in
                ["id": "\(id)-e\(index)", "created_at": "2025-03-01T08:00:00Z", "text": "entry \(index)",
                 "photos": [["id": "\(id)-p\(index)", "file": "photos/tiny.jpg"]]] as [String: Any]
            },
            "meditation_sessions": (0..<entries).map { ["id": "\(id)-m\($0)", "started_at": "2025-03-02T06:00:00Z", "duration_seconds": 600] },
            "sessions": [["id": "\(id)-t1", "created_at": "2025-03-01T00:00:00Z"]],
        ]
        if let purgeAfter {
            object["state"] = "pendingDeletion"
            object["purge_after"] = purgeAfter
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// Imports the lines into the workspace, with a tiny JPEG as every photo.
    static func importAccounts(_ lines: [String], into workspace: Workspace) async throws {
        let fixture = try ImportFixture(lines: lines)
        try Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0xFF, 0xD9]).write(to: URL(fileURLWithPath: fixture.directory + "/photos/tiny.jpg"))
        let result = try await workspace.run(["accounts", "import", fixture.path])
        guard result.status == 0 else { throw CLITestFailure("import failed (\(result.status)): \(result.stderr)") }
    }

    /// A copy of the shipped Jobs/ folder whose `deletion:` section is replaced by `lines` (`key: value`).
    static func jobsDirectory(deletion lines: [String]) throws -> String {
        let shipped = repositoryRoot + "/Jobs"
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: shipped + "/policies", toPath: copy + "/policies")
        try FileManager.default.copyItem(atPath: shipped + "/account-data.yaml", toPath: copy + "/account-data.yaml")
        let policy = try String(contentsOfFile: copy + "/policies/deletion.yaml", encoding: .utf8)
        let jobSection = policy.components(separatedBy: "\ndeletion:")[0]
        try (jobSection + "\ndeletion:\n" + lines.map { "  " + $0 }.joined(separator: "\n") + "\n")
            .write(toFile: copy + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
        return copy
    }
}

struct CLITestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Workspace {
    func sql<T>(_ body: (Database) throws -> T) throws -> T {
        try store().writeSync { tx in try body(tx.db) }
    }

    /// What the reference app shows of the account's deletion (its `accounts.state`).
    func state(of id: String) async throws -> String? {
        try await string("SELECT state FROM accounts WHERE id = ?", [.text(id)])
    }

    /// Lifecycle's record of the account's deletion: its state (nil: none, active) and purge date.
    func deletionRecord(of id: String) async throws -> (state: String?, purgeAfter: Date?) {
        let subjects = ownTable("subjects")
        return (try await string("SELECT state FROM \(subjects) WHERE subject_key = ?", [.text(id)]),
                try await date("SELECT purge_after FROM \(subjects) WHERE subject_key = ?", [.text(id)]))
    }

    /// Rows of the account in every table the shipped data map lists.
    func rowCount(of id: String) async throws -> Int {
        var total = 0
        for (table, owner) in try Self.ownedTables() {
            total += try await int("SELECT COUNT(*) FROM \(table) WHERE \(owner) = ?", [.text(id)])
        }
        return total
    }

    /// The shipped map's tables and the column naming the account in each.
    static func ownedTables() throws -> [(table: String, owner: String)] {
        try DataMap(jobsDirectory: repositoryRoot + "/Jobs").tables.compactMap { table in
            guard case .column(let owner) = table.ownership else { return nil }
            return (table.name.name, owner)
        }
    }

    /// The same count in one statement through `integerNow`, for a poll from the kill
    /// watcher's own thread. `id` is a test's own constant, written into the SQL.
    func rowCountNow(of id: String) throws -> Int {
        try integerNow("SELECT " + Self.ownedTables().map { "(SELECT COUNT(*) FROM \($0.table) WHERE \($0.owner) = '\(id)')" }
            .joined(separator: " + "))
    }

    /// Files under the account's blob prefix.
    func blobFiles(of id: String) -> [String] {
        let directory = blobs + "/accounts/" + id
        let all = FileManager.default.enumerator(atPath: directory)?.allObjects.compactMap { $0 as? String } ?? []
        return all.filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: directory + "/" + path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }.sorted()
    }
}

/// "purge: 3 purged, 1 skipped, 0 failed" → (3, 1, 0).
func purgeCounts(_ stdout: String) -> (purged: Int, skipped: Int, failed: Int)? {
    guard let line = stdout.split(separator: "\n").first(where: { $0.hasPrefix("purge: ") }) else { return nil }
    let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
    guard numbers.count >= 3 else { return nil }
    return (numbers[0], numbers[1], numbers[2])
}

/// Polls `condition` every 20 ms on a thread of its own and sends `signal` (SIGKILL unless
/// told) to the child from that thread the moment it holds; false if it never did within
/// `timeout`, or the child ended first. Neither the polling nor the signal waits for the
/// test's cooperative threads, which parallel suites keep busy: a state that lasts a second
/// in the child is not missed. The child must still run when it is signalled: an ended
/// child's pid is soon another process's (pids wrap at 32768, and the suite starts thousands).
func killProcess(
    _ process: Process, signal: Int32 = SIGKILL, when condition: @escaping @Sendable () throws -> Bool, timeout: TimeInterval = 60
) async -> Bool {
    await onThreadOfItsOwn {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, process.isRunning {
            if (try? condition()) == true, process.isRunning {
                kill(process.processIdentifier, signal)
                return true
            }
            usleep(20_000)
        }
        return false
    }
}
