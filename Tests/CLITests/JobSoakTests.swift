import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import PostgresTesting
import Testing

/// Every job kind on the same few accounts at once, the processes running them SIGKILLed at
/// random moments, then one clean drain: jobs on one account never break each other
/// (Jobs/README.md, "Jobs on one account"). Fixed seeds in the suite; `SOAK_SEED` and
/// `SOAK_ROUNDS` run it with other seeds and longer.
@Suite(.serialized)
struct JobSoakTests {
    static let environment = ProcessInfo.processInfo.environment
    static let rounds = environment["SOAK_ROUNDS"].flatMap(Int.init) ?? 16
    static let seed = environment["SOAK_SEED"].flatMap(UInt64.init) ?? 20_261_125
    /// `SOAK_BACKENDS=sqlite` (or postgres) runs one backend, so that long runs of both can go side by side.
    static let backends = environment["SOAK_BACKENDS"].map { $0.split(separator: ",").compactMap { Backend(rawValue: String($0)) } } ?? Backend.allCases

    @Test(arguments: backends)
    func everyKindOnTheSameAccountsThroughRandomKillsLosesNothing(_ backend: Backend) async throws {
        let soak = try await Soak(backend: backend, seed: Self.seed &+ UInt64(backend == .sqlite ? 0 : 1))
        try await soak.importAccounts(count: 6)
        for round in 0..<Self.rounds {
            try await soak.replacePurgedAccounts()
            try await soak.enqueueSome(round: round)
            try await soak.runAndKill()
        }
        let figures = "\(backend.rawValue) seed \(soak.seed): \(Self.rounds) rounds, \(soak.kills) kills, \(soak.killsMidWork) mid-work, "
            + "\(soak.requests) requests on \(soak.everyAccount.count) accounts (\(soak.exportsAsked.count) exports asked for)"
        // Printed before the checks, so a long run's figures survive a failed one.
        print("soak: " + figures)
        try await soak.drain()
        try await soak.checkInvariants()
        // Most kills must land while the process held a job, or the soak proves little.
        #expect(soak.kills >= Self.rounds / 2, "\(figures)")
        #expect(soak.killsMidWork * 3 >= soak.kills * 2, "\(figures)")
    }
}

/// One soak's installation, its random source and what it asked for.
final class Soak {
    let workspace: Workspace
    let seed: UInt64
    private var random: SplitMix64
    /// The accounts requests go to: none of them purged (yet).
    private(set) var accounts: [String] = []
    /// Every account the soak created, for the checks at the end.
    private(set) var everyAccount: [String] = []
    private(set) var exportsAsked: Set<Int64> = []
    private(set) var requests = 0
    private(set) var kills = 0
    private(set) var killsMidWork = 0
    /// Export links need a key; every process gets it.
    let environment = ExportCLI.key

    init(backend: Backend, seed: UInt64) async throws {
        self.seed = seed
        random = SplitMix64(seed: seed)
        workspace = try await Workspace.make(backend, jobsDirectory: try Self.jobsDirectory())
    }

    /// The shipped policies with leases and backoff of seconds, so a killed process's jobs
    /// come back within the soak, and no export rate limit (the soak asks for many). A kill
    /// costs the job it holds an attempt (as River's and Oban's rescuers count it), and the
    /// soak kills far more often than any deployment crashes: the longest job (a HEIC
    /// rendering, a second or more on a loaded machine) can be held by most of the rounds'
    /// victims, so attempts are raised to what the rounds can take.
    static func jobsDirectory() throws -> String {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("soak-jobs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/policies", toPath: copy + "/policies")
        try FileManager.default.copyItem(atPath: repositoryRoot + "/Jobs/account-data.yaml", toPath: copy + "/account-data.yaml")
        for file in try FileManager.default.contentsOfDirectory(atPath: copy + "/policies") {
            let path = copy + "/policies/" + file
            var text = try String(contentsOfFile: path, encoding: .utf8)
            for (key, value) in [
                ("lease_seconds", "5"), ("backoff_base_seconds", "1"), ("backoff_cap_seconds", "4"), ("rate_limit_count", "1000"),
                ("max_attempts", "\(min(1_000, max(50, JobSoakTests.rounds * 2)))"),
            ] {
                text = text.replacingOccurrences(of: "\(key): [0-9]+", with: "\(key): \(value)", options: .regularExpression)
            }
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        return copy
    }

    func importAccounts(count: Int) async throws {
        try await importAccounts((0..<count).map { "soak-\($0)" })
    }

    private func importAccounts(_ ids: [String]) async throws {
        let fixture = try ImportFixture(lines: ids.map { ImportFixture.account(id: $0) })
        let result = try await workspace.run(["accounts", "import", fixture.path])
        guard result.status == 0 else { throw CLITestFailure("import failed (\(result.status)): \(result.stderr)") }
        accounts += ids
        everyAccount += ids
    }

    /// A purged account is done with: a new one takes its place, so that a long soak keeps
    /// every kind busy instead of killing idle workers once the first accounts are gone.
    func replacePurgedAccounts() async throws {
        let purged = Set(try await workspace.query("SELECT id FROM accounts WHERE state = 'purged'").compactMap { $0[0] })
        let gone = accounts.filter(purged.contains)
        guard !gone.isEmpty else { return }
        accounts.removeAll(where: purged.contains)
        let next = everyAccount.count
        try await importAccounts(gone.indices.map { "soak-\(next + $0)" })
    }

    private func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }

    /// Two to four requests, as users and operators make them: exports (most), photo
    /// normalisations, deletions (immediate, so their purge is due at once) and restores.
    func enqueueSome(round: Int) async throws {
        for _ in 0..<(2 + Int(random.next() % 3)) {
            let account = pick(accounts)
            requests += 1
            switch random.next() % 8 {
            case 0, 1, 2:
                let result = try await workspace.run(["export", account, "--json"], environment: environment)
                if result.status == 0, let report = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                   let job = report["job_id"] as? Int64 ?? (report["job_id"] as? Int).map(Int64.init) {
                    exportsAsked.insert(job)
                }
            case 3, 4:
                _ = try await workspace.run(["photos", "normalize", "--account", account, "--queue-only"], environment: environment)
            case 5:
                _ = try await workspace.run(
                    ["delete", account, "--operator", "soak", "--reason", "round \(round)", "--immediately"], environment: environment)
            default:
                _ = try await workspace.run(["restore", account], environment: environment)
            }
        }
    }

    /// A worker (or, one time in six, the purge command) is SIGKILLed at a random moment
    /// among those at which it holds a job: polling every 20 ms, the kill lands at a randomly
    /// drawn one of the polls that find it holding one (or after 6 s, if it never does).
    func runAndKill() async throws {
        let command = random.next() % 6 == 0 ? ["purge"] : ["worker", "--concurrency", "4"]
        let (process, _, _) = try workspace.process(command, environment: environment)
        let pid = process.processIdentifier
        let polls = PollCount(killAt: 1 + Int(random.next() % 6))
        let started = Date()
        let workspace = self.workspace
        let held = "SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE state = 'running' AND lease_owner LIKE '%:\(pid):%'"
        // PostgreSQL through one psql session for the whole round: a psql started per poll
        // answers tens of milliseconds late, by when a short job may be over.
        let session = try workspace.postgresURL.map { try PsqlSession(url: $0) }
        let killed = await killProcess(process, when: {
            let holding = try session.map { try $0.integer(held) } ?? workspace.integerNow(held)
            if holding > 0, polls.holding() { return true }
            // Idle for longer than a lease: what an earlier victim held has come back by then.
            return Date().timeIntervalSince(started) > 6
        }, timeout: 30)
        await session?.close()
        await process.exited()
        guard killed, process.terminationReason == .uncaughtSignal else { return }  // The purge command finished first.
        kills += 1
        // Its leases outlive it: what it held is still `running` in its name.
        if try await workspace.int(held) > 0 { killsMidWork += 1 }
    }

    /// Runs everything due until nothing is left, each pass an hour later than the last,
    /// so that every lease of a killed process has expired and every retry is due.
    func drain() async throws {
        for hour in 1...8 {
            let now = ISO8601.format(Date().addingTimeInterval(Double(hour) * 3_600))
            let result = try await workspace.run(["worker", "--once", "--concurrency", "4"], environment: environment.merging(["LIFECYCLE_NOW": now]) { $1 })
            #expect(result.status == 0, "\(result.stderr.suffix(2_000))")
            if try await liveJobs() == 0 { return }
        }
        Issue.record("jobs still live after the drain: \(try await workspace.query("SELECT id, kind, state, last_error FROM \(workspace.ownTable("jobs")) WHERE state IN ('queued', 'running', 'retrying')"))")
    }

    /// Jobs not finished, apart from the scheduled kinds' next slots.
    private func liveJobs() async throws -> Int {
        try await workspace.int("""
            SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE state IN ('queued', 'running', 'retrying')
            AND kind NOT IN ('\(ExportJobs.expiryKind)', '\(DeletionJobs.sweepKind)')
            """)
    }

    func checkInvariants() async throws {
        let jobs = workspace.ownTable("jobs")
        // No job dead.
        let dead = try await workspace.query("SELECT id, kind, last_error FROM \(jobs) WHERE state = 'dead'")
        #expect(dead.isEmpty, "dead jobs: \(dead)")

        // Every export asked for was built exactly once and is there, or was cancelled by the
        // account's deletion or purge with an audit record naming it.
        let audits = try await workspace.query("SELECT action, actor, account_id, detail FROM \(workspace.ownTable("audit_events")) WHERE action = 'export.cancel'")
        for job in exportsAsked.sorted() {
            let state = try await workspace.string("SELECT state FROM \(jobs) WHERE id = ?", [.integer(Int(job))])
            // The request's audit record names the job in its detail ({"job": N, …}) and the account.
            let requests = try await workspace.query(
                "SELECT account_id, detail FROM \(workspace.ownTable("audit_events")) WHERE action = 'export.request'")
            let account = try #require(requests.first { row in
                guard let detail = row[1], case .object(let fields) = JSONValue.parsing(detail), case .number(let id)? = fields["job"] else { return false }
                return Int64(id) == job
            }?[0] ?? nil, "export job \(job) has no export.request audit record")
            let accountState = try await workspace.string("SELECT state FROM accounts WHERE id = ?", [.text(account)])
            switch state {
            case "succeeded":
                let rows = try await workspace.query(
                    "SELECT state, blob_key, byte_size FROM \(workspace.ownTable("exports")) WHERE job_id = ?", [.integer(Int(job))])
                if accountState == "purged" {
                    #expect(rows.isEmpty, "export job \(job): a purged account keeps no export")
                    continue
                }
                #expect(rows.count == 1, "export job \(job): \(rows.count) export rows")
                guard let row = rows.first, let key = row[1] else { continue }
                #expect(row[0] == "ready", "export job \(job) is \(row[0] ?? "-")")
                let path = workspace.exportArchives + "/" + key
                let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
                #expect(size > 0 && String(size) == row[2], "export job \(job): archive \(key) has \(size) bytes, the row says \(row[2] ?? "-")")
                if size > 0 { _ = try await ExportCLI.checkWithPython(path, format: "zip") }
            case "cancelled":
                #expect(audits.contains { $0[2] == account && $0[3]?.contains("\"export_job\":\(job)") == true },
                        "export job \(job) was cancelled with no audit record naming it")
            default:
                Issue.record("export job \(job) ended \(state ?? "missing")")
            }
        }

        // No account both restored and purged: before each purge receipt, the last word on
        // the account's deletion was a request, not a restore.
        for account in everyAccount {
            let trail = try await workspace.query(
                "SELECT action, outcome FROM \(workspace.ownTable("audit_events")) WHERE account_id = ? ORDER BY id", [.text(account)])
            var last: String?
            for event in trail {
                switch (event[0], event[1]) {
                case (DeletionAudit.request, "requested"), (DeletionAudit.operatorRequest, "requested"): last = "request"
                case (DeletionAudit.restore, "restored"): last = "restore"
                case (DeletionAudit.purge, "purged"): #expect(last == "request", "\(account) was purged after a restore")
                default: break
                }
            }
        }

        // No orphan file: every file under the accounts' folders is a photo or a ready export
        // of a row that names it (a photo row, her profile photo column, an export); purged
        // accounts have none. No temporary file anywhere.
        let named = Set(try await workspace.query("SELECT blob_key FROM photos").compactMap { $0[0] })
            .union(try await workspace.query("SELECT profile_photo_key FROM accounts").compactMap { $0[0] })
            .union(try await workspace.query("SELECT blob_key FROM \(workspace.ownTable("exports")) WHERE state = 'ready'").compactMap { $0[0] })
        let files = (FileManager.default.enumerator(atPath: workspace.blobs)?.allObjects as? [String] ?? []).filter { relative in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: workspace.blobs + "/" + relative, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        let orphans = files.filter { $0.hasPrefix("accounts/") && !named.contains($0) }
        #expect(orphans.isEmpty, "files no row names: \(orphans.sorted())")
        let temporary = files.filter { !$0.hasPrefix("accounts/") }
        #expect(temporary.isEmpty, "temporary files left: \(temporary.sorted())")
    }
}

/// One psql process answering one query per line: a poll costs a round trip, not a
/// process start. Used only from the kill watcher's thread.
private final class PsqlSession: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = Data()

    init(url: String) throws {
        // The URL's `pool` parameter is the toolkit's own; psql would refuse it.
        let connection = String(url[..<(url.range(of: "&pool=")?.lowerBound ?? url.endIndex)])
        process.executableURL = URL(fileURLWithPath: ThrowawayPostgres.binDirectory + "/psql")
        process.arguments = ["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", connection]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func integer(_ sql: String) throws -> Int {
        input.fileHandleForWriting.write(Data((sql + ";\n").utf8))
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                guard let value = Int(line.trimmingCharacters(in: .whitespaces)) else { throw CLITestFailure("psql answered '\(line)' to: \(sql)") }
                return value
            }
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw CLITestFailure("psql ended before answering: \(sql)") }
            buffer.append(chunk)
        }
    }

    func close() async {
        try? input.fileHandleForWriting.close()
        await process.exited()
    }
}

/// Polls that found the victim holding a job; only the kill watcher's thread counts them.
private final class PollCount: @unchecked Sendable {
    private let killAt: Int
    private var seen = 0
    init(killAt: Int) { self.killAt = killAt }
    /// Another poll found it holding a job: true at the drawn one.
    func holding() -> Bool {
        seen += 1
        return seen >= killAt
    }
}

/// A small seeded generator, so a failing soak can be replayed from its seed.
private struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
