import Foundation
import GRDB
import JobRunner
import Lifecycle
import PostgresBackend
import PostgresNIO
import PostgresTesting
import SQLiteBackend
import Testing

/// The backends every command behaviour is checked against: the same commands, the same
/// expectations, a SQLite file or a PostgreSQL database of the test's own.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres

    var testDescription: String { rawValue }

    /// Lifecycle's own table `name` as the backend names it (`lifecycle_jobs` in SQLite,
    /// `lifecycle.jobs` in PostgreSQL), for the tests' own SQL. The app's tables keep their names.
    func ownTable(_ name: String) -> String {
        switch self {
        case .sqlite: SQLDialect.sqlite.ownTable(name)
        case .postgres: SQLDialect.postgres.ownTable(name)
        }
    }
}

/// A value bound into the tests' own SQL (which both backends understand, with `?` placeholders).
enum SQLValue: Sendable {
    case text(String)
    case integer(Int)
    case date(Date)
}

extension Workspace {
    /// An empty installation on the backend: for PostgreSQL, a fresh database on the test
    /// process's throwaway cluster (the blob directory stays a directory).
    static func make(_ backend: Backend, jobsDirectory: String = repositoryRoot + "/Jobs") async throws -> Workspace {
        var workspace = try Workspace(jobsDirectory: jobsDirectory)
        if backend == .postgres {
            let cluster = try await ThrowawayPostgres.shared()
            workspace.postgresURL = cluster.url(database: try await cluster.createDatabase(), pool: 2)
        }
        return workspace
    }

    var backend: Backend { postgresURL == nil ? .sqlite : .postgres }

    /// Lifecycle's own table `name` in this installation's database: `backend.ownTable(name)`.
    func ownTable(_ name: String) -> String { backend.ownTable(name) }

    /// One connection pool per database for the whole test process: polls call this often.
    func postgres() async throws -> PostgresStore {
        guard let postgresURL else { throw CLITestFailure("not a PostgreSQL workspace") }
        if let open = PostgresStores.shared.store(for: postgresURL) { return open }
        let store = try await PostgresStore(url: postgresURL, referenceSchema: servesReferenceApp)
        PostgresStores.shared.keep(store, for: postgresURL)
        return store
    }

    /// The runner's view of the installation, whichever the backend.
    func jobStore() async throws -> any JobStore {
        switch backend {
        case .sqlite: try store()
        case .postgres: try await postgres()
        }
    }

    func account(id: String) async throws -> Account? {
        switch backend {
        case .sqlite: try await store().read { tx in try tx.account(id: id) }
        case .postgres: try await postgres().read { tx in try tx.account(id: id) }
        }
    }

    func auditRows(of id: String) async throws -> [AuditEvent] {
        switch backend {
        case .sqlite: try await store().read { tx in try tx.auditEvents(accountID: id) }
        case .postgres: try await postgres().read { tx in try tx.auditEvents(accountID: id) }
        }
    }

    func photos(of id: String) async throws -> [PhotoRecord] {
        switch backend {
        case .sqlite: try await store().read { tx in try tx.photos(accountID: id) }
        case .postgres: try await postgres().read { tx in try tx.photos(accountID: id) }
        }
    }

    /// The account's rows in each table of the reference app's schema, counted by the test's own SQL.
    func rowCounts(of id: String) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for table in ["photos", "journal_entries", "mesocycles", "meditation_sessions", "sessions", "preferences"] {
            counts[table] = try await int("SELECT COUNT(*) FROM \(table) WHERE account_id = ?", [.text(id)])
        }
        return counts
    }

    /// Runs the tests' own SQL; every column comes back as text (NULL as nil), dates as ISO-8601.
    func query(_ sql: String, _ arguments: [SQLValue] = []) async throws -> [[String?]] {
        switch backend {
        case .sqlite:
            return try await store().write { tx in
                let values: [(any DatabaseValueConvertible)?] = arguments.map { value in
                    switch value {
                    case .text(let text): text
                    case .integer(let number): number
                    case .date(let date): date
                    }
                }
                return try Row.fetchAll(tx.db, sql: sql, arguments: StatementArguments(values)).map { row in
                    row.databaseValues.map { value -> String? in
                        switch value.storage {
                        case .null: nil
                        case .int64(let number): String(number)
                        case .double(let number): String(number)
                        case .string(let text): Date.fromDatabaseValue(value).map(ISO8601.format) ?? text
                        case .blob(let data): data.base64EncodedString()
                        }
                    }
                }
            }
        case .postgres:
            var numbered = ""
            var index = 0
            for character in sql {
                if character == "?" {
                    index += 1
                    numbered += "$\(index)"
                } else {
                    numbered.append(character)
                }
            }
            var binds = PostgresBindings()
            for value in arguments {
                switch value {
                case .text(let text): binds.append(text)
                case .integer(let number): binds.append(Int64(number))
                case .date(let date): binds.append(date)
                }
            }
            let query = PostgresQuery(unsafeSQL: numbered, binds: binds)
            return try await postgres().write { tx in
                try tx.query(query).map { row in
                    try row.map { cell -> String? in
                        guard cell.bytes != nil else { return nil }
                        switch cell.dataType {
                        case .int2: return String(try cell.decode(Int16.self))
                        case .int4: return String(try cell.decode(Int32.self))
                        case .int8: return String(try cell.decode(Int64.self))
                        case .bool: return String(try cell.decode(Bool.self))
                        case .timestamptz, .timestamp: return ISO8601.format(try cell.decode(Date.self))
                        default: return try cell.decode(String.self)
                        }
                    }
                }
            }
        }
    }

    func execute(_ sql: String, _ arguments: [SQLValue] = []) async throws {
        _ = try await query(sql, arguments)
    }

    func int(_ sql: String, _ arguments: [SQLValue] = []) async throws -> Int {
        guard let text = try await query(sql, arguments).first?.first ?? nil, let number = Int(text) else {
            throw CLITestFailure("no number from: \(sql)")
        }
        return number
    }

    func string(_ sql: String, _ arguments: [SQLValue] = []) async throws -> String? {
        try await query(sql, arguments).first?.first ?? nil
    }

    func strings(_ sql: String, _ arguments: [SQLValue] = []) async throws -> [String] {
        try await query(sql, arguments).compactMap { $0.first ?? nil }
    }

    func date(_ sql: String, _ arguments: [SQLValue] = []) async throws -> Date? {
        try await string(sql, arguments).flatMap(ISO8601.parse)
    }
}

private final class PostgresStores: @unchecked Sendable {
    static let shared = PostgresStores()
    private let lock = NSLock()
    private var stores: [String: PostgresStore] = [:]

    func store(for url: String) -> PostgresStore? { lock.withLock { stores[url] } }
    func keep(_ store: PostgresStore, for url: String) { lock.withLock { stores[url] = stores[url] ?? store } }
}

extension Workspace {
    /// One integer, read without waiting for this process's cooperative threads (which
    /// the suites running alongside keep busy): for a poll from the kill watcher's own
    /// thread, where a state lasting a second in the child must not pass unseen.
    /// SQLite is read through a read-only connection of the poll's own, PostgreSQL through psql.
    func integerNow(_ sql: String) throws -> Int {
        let value: Int?
        switch backend {
        case .sqlite:
            var configuration = Configuration()
            configuration.readonly = true
            // The process under test commits back to back; a read may meet a moment when the
            // file is locked (its log being checkpointed or recovered), and must wait, as the
            // toolkit's own connections do, rather than fail the test.
            configuration.busyMode = .timeout(30)
            value = try DatabaseQueue(path: database, configuration: configuration).read { db in try Int.fetchOne(db, sql: sql) }
        case .postgres:
            value = Int(try psqlQuery(database, sql))
        }
        guard let value else { throw CLITestFailure("no integer from: \(sql)") }
        return value
    }
}

/// One query through psql (unaligned, tuples only). The URL's `pool` parameter is the
/// toolkit's own and psql would refuse it, so it is dropped. Synchronous, for the kill
/// watchers' own threads; async code calls it through `onThreadOfItsOwn`.
func psqlQuery(_ url: String, _ sql: String) throws -> String {
    let connection = String(url[..<(url.range(of: "&pool=")?.lowerBound ?? url.endIndex)])
    let process = Process()
    process.executableURL = URL(fileURLWithPath: ThrowawayPostgres.binDirectory + "/psql")
    process.arguments = ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", connection, "-c", sql]
    let output = Pipe()
    process.standardOutput = output
    // A file, so that a long error never fills a pipe nobody reads while stdout is drained.
    let errors = FileManager.default.temporaryDirectory.appendingPathComponent("psql-\(UUID().uuidString).stderr")
    guard FileManager.default.createFile(atPath: errors.path, contents: nil) else { throw CLITestFailure("cannot create \(errors.path)") }
    defer { try? FileManager.default.removeItem(at: errors) }
    process.standardError = try FileHandle(forWritingTo: errors)
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        throw CLITestFailure("psql exited \(process.terminationStatus) (\(stderr.suffix(2000).trimmingCharacters(in: .whitespacesAndNewlines))) for: \(sql)")
    }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}
