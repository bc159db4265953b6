import ArgumentParser
import Foundation
import LifecycleRuntime

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "A guided tour on demo accounts: import, the job runner, and each job the toolkit runs.",
        discussion: """
            Uses the photos shipped in <jobs-dir>/demo/photos. Safe to run again: imports are idempotent.
            With --json the tour's narrative goes to stderr and stdout gets what the demo left behind: the \
            installation's locations, the accounts with their states, and the jobs by kind and state.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await guarded {
            let services = try await options.embeddedServices()
            let tour = DemoTour(services: services, options: options)
            try await tour.run()
            if options.json { try Terminal.printJSON(try await tour.summary()) }
            return .ok
        }
    }
}

struct DemoTour {
    let services: LifecycleServices<EmbeddedStore>
    let options: GlobalOptions

    /// The tour's narrative: on stdout, or on stderr when stdout carries the JSON summary.
    func say(_ text: String) {
        if options.json { Terminal.note(text) } else { Terminal.line(text) }
    }

    func heading(_ text: String) {
        say("")
        say("── \(text) " + String(repeating: "─", count: max(0, 70 - text.count)))
    }

    struct Summary: Encodable {
        struct AccountState: Encodable {
            var account: String
            var state: String
        }

        var database: String
        var blobs: String
        var jobsDir: String
        var accounts: [AccountState]
        /// Kind → state → count.
        var jobs: [String: [String: Int]]

        enum CodingKeys: String, CodingKey { case database, blobs, jobsDir = "jobs_dir", accounts, jobs }
    }

    func summary() async throws -> Summary {
        var accounts: [Summary.AccountState] = []
        for id in DemoAccount.ids {
            if let account = try await services.account(id) { accounts.append(.init(account: id, state: account.state.rawValue)) }
        }
        var jobs: [String: [String: Int]] = [:]
        for (cell, count) in try await services.store.countByKindAndState() { jobs[cell.kind, default: [:]][cell.state.rawValue] = count }
        return Summary(
            database: services.store.path, blobs: options.blobDirectory, jobsDir: options.jobsDirectory, accounts: accounts, jobs: jobs)
    }

    func run() async throws {
        heading("Embedded installation")
        say("database: \(services.store.path)   blobs: \(options.blobDirectory)   policies: \(options.jobsDirectory)/policies")
        let input = try writeDemoInput()
        try await importAccounts(input)
        try await runnerTour()
        try await photosChapter()
        try await exportChapter()
        try await deletionChapter()
        heading("Next")
        say("lifecycle accounts show ada@example.com --database \(services.store.path) --blobs \(options.blobDirectory)")
        say("lifecycle jobs list --database \(services.store.path)")
    }

    /// The demo accounts as an operator would import them: JSONL plus photo files beside it.
    func writeDemoInput() throws -> String {
        let photos = (options.jobsDirectory as NSString).appendingPathComponent("demo/photos")
        guard FileManager.default.fileExists(atPath: photos + "/run.jpg") else {
            throw CLIFailure(.noInput, "demo photos not found in \(photos); run the demo from the repository root or pass --jobs-dir")
        }
        let folder = (PathText.parent(services.store.path) as NSString).appendingPathComponent("demo-input")
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: photos) {
            try FileManager.default.copyItem(atPath: photos + "/" + name, toPath: folder + "/photos/" + name)
        }
        let lines = [
            DemoAccount(id: "ada", first: "Ada", last: "Lovelace", zone: "Europe/London", profile: "portrait.heic", sport: "running"),
            DemoAccount(id: "grace", first: "Grace", last: "Hopper", zone: "America/New_York", profile: "avatar-alpha.png", sport: "rowing"),
            DemoAccount(id: "linus", first: "Linus", last: "Torvalds", zone: "America/Los_Angeles", profile: "trail.jpg", sport: "cycling"),
        ].map(\.jsonLine)
        let path = folder + "/accounts.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func importAccounts(_ path: String) async throws {
        heading("Import: lifecycle accounts import \(path)")
        let importer = try await AccountImporter(services: services)
        let report = try await importer.importFile(at: path)
        say("imported \(report.imported.count), already present \(report.unchanged.count), refused \(report.failures.count), photos stored \(report.photosStored)")
        let appData = AppDataCache()
        for id in report.imported + report.unchanged {
            let counts = try await services.rowCounts(accountID: id, cache: appData)
            say("  \(id): " + counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
        }
    }

    func runnerTour() async throws {
        heading("Job runner: durable, resumable steps")
        let probe = try await services.enqueue(EnqueueRequest(
            kind: ProbeJobs.probeKind, payload: ProbeJobs.Payload(failAttempts: 1), uniqueKey: "demo:probe"))
        say("enqueued probe job #\(probe.job.id) (its middle step fails once, to show a retry)")
        let first = try await runWorker(services: services, once: true, concurrency: 2)
        say("worker --once: \(first.succeeded) succeeded, \(first.retrying) retrying → exit 75 tells cron to look")
        if let job = try await services.store.job(id: probe.job.id), job.state == .retrying {
            // Jump past the backoff as an operator would with `jobs retry`.
            _ = try await OperatorJobActions(services: services, operatorName: "demo").retry(job.id)
            let second = try await runWorker(services: services, once: true, concurrency: 2)
            say("jobs retry \(job.id); worker --once: \(second.succeeded) succeeded → exit 0")
        }
        let steps = try await services.store.steps(of: probe.job.id).map(\.step)
        let effects = try await services.store.probeEffectCount(jobID: probe.job.id)
        say("job #\(probe.job.id) steps done: \(steps.joined(separator: " → ")); database-only effects recorded: \(effects) (one per database step, none repeated)")
    }
}

struct DemoAccount {
    var id, first, last, zone, profile, sport: String

    static let ids = ["ada", "grace", "linus"]

    var jsonLine: String {
        let object: [String: Any] = [
            "id": id, "email": "\(id)@example.com",
            // A bcrypt hash of "correct horse battery staple" (cost 4, demo only).
            "password_hash": "$2b$04$Wd0dEsiS6/8yONvHwEEae.LfGSs/AKzG3YawF6CS.ukfXvr/45rre",
            "first_name": first, "last_name": last, "display_name": first, "bio": "Demo account for the tour.",
            "primary_sport": sport, "morning_reminder_time": "07:30:00", "timezone": zone, "created_at": "2025-01-02T03:04:05Z",
            "preferences": ["theme": "dark", "font_size_offset": 2, "notifications_enabled": true, "daily_reminder_time": "20:00:00"],
            "subscription": ["status": "premium"],
            "integrations": ["whoop": false, "strava": true, "apple_health": true, "fitness": false],
            "profile_photo": "photos/\(profile)",
            "entries": [
                ["id": "\(id)-e1", "created_at": "2025-03-01T08:00:00Z", "text": "Tempo run before work 🏃 — café after, =SUM(A1) stays text",
                 "photos": [["id": "\(id)-p1", "file": "photos/run.jpg", "taken_at": "2025-03-01T07:55:00Z"]]],
                ["id": "\(id)-e2", "created_at": "2025-03-08T18:30:00Z", "text": "Long trail day, 東京 next month",
                 "photos": [["id": "\(id)-p2", "file": "photos/trail.jpg", "taken_at": "2025-03-08T23:30:00Z"]]],
            ],
            "mesocycles": [
                ["id": "\(id)-m1", "status": "completed", "started_at": "2025-01-01T00:00:00Z", "completed_at": "2025-02-01T00:00:00Z"],
                ["id": "\(id)-m2", "status": "active", "started_at": "2025-02-02T00:00:00Z"],
            ],
            "meditation_sessions": [
                ["id": "\(id)-s1", "started_at": "2025-03-02T06:00:00Z", "duration_seconds": 600],
                ["id": "\(id)-s2", "started_at": "2025-03-03T06:00:00Z", "duration_seconds": 900],
            ],
            "sessions": [["id": "\(id)-t1", "created_at": "2025-03-01T00:00:00Z"]],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
