import ArgumentParser
import CLinux
import Foundation
import Lifecycle
import LifecycleRuntime
import PostgresBackend
import SQLiteBackend

@main
enum Entry {
    static func main() async {
        // libarchive needs a UTF-8 locale for non-ASCII entry names (a Swift process starts in "C").
        setlocale(LC_CTYPE, "C.UTF-8")
        // Everything this process writes holds personal data (the database, photos,
        // archives, their temporary files): readable by its owner only, whatever umask
        // it was started with. The stores set these modes themselves too.
        umask(0o077)
        // Past a file-size limit (ulimit -f) a write should fail with EFBIG and be
        // reported like a full disk (exit 75), not kill the process half-way.
        signal(SIGXFSZ, SIG_IGN)
        // A reader that goes away (`lifecycle map check | head -2`) should end this process's
        // output, not the process: with SIGPIPE ignored, write(2) returns EPIPE and Output
        // stops writing to that stream while the command finishes its work.
        signal(SIGPIPE, SIG_IGN)
        // Two malloc arenas per core instead of glibc's eight. With eight, libvips' threads
        // each took an arena of their own and grew it: two photo jobs at a time on two cores
        // peaked at 193 MB against 151 MB with two arenas (scripts/bench-photos.sh prints
        // both). Two in all was too few for the job runner, whose threads then queued on the
        // allocator's locks: a 20,000-job drain made 11,000 context switches instead of
        // 2,700 and cost 10-15 % more CPU; with four, photos peaked at 170 MB at the same
        // speed. MALLOC_ARENA_MAX in the environment wins.
        if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil {
            _ = mallopt(M_ARENA_MAX, Int32(max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)))
        }
        await LifecycleCommand.main()
    }
}

struct LifecycleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lifecycle",
        abstract: "Account lifecycle jobs: data export, password-confirmed deletion, purge, photo normalisation.",
        discussion: """
            Every command refuses a database that `lifecycle init` did not set up (exit 66) and creates nothing there.
            Exit codes: 0 ok, 64 usage, 65 bad input data, 66 input file missing, 67 no such account, \
            69 a service unavailable, 70 internal error, 73 cannot write the output (a read-only blob directory), \
            75 try again later (including a full disk), 77 permission denied.
            LIFECYCLE_NOW=<ISO-8601> starts the clock at another instant (it keeps ticking from there).
            """,
        version: LifecycleVersion.current,
        subcommands: [
            DemoCommand.self, InitCommand.self, MigrateCommand.self, AccountsCommand.self, WorkerCommand.self, JobsCommand.self,
            ExportCommand.self, ExportsCommand.self, DeleteCommand.self, RestoreCommand.self, PurgeCommand.self, AuditCommand.self,
            PhotosCommand.self, CopyStoreCommand.self, MapCommand.self, ServeCommand.self, SHA256Command.self,
        ]
    )
}

struct InitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create an installation: lifecycle's tables (and the reference app's, when the data map is the reference app's).",
        discussion: """
            Every other command refuses a database that `init` did not set up (exit 66) and creates nothing, so a \
            mistyped --database never starts an empty installation. On an app's own database the data map is checked \
            first (exit 65 when it does not hold) and only lifecycle's own tables are added. Running it on an \
            installation changes nothing but bringing its schema up to date (exit 0).
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await guarded {
            let configuration = try options.configuration()
            var report = try await configuration.initialize()
            // Before the first deletion request, which would otherwise decode the whole table in its transaction.
            if !report.referenceSchema { report.sessionRowsIndexed = try await configuration.withInstallation(IndexEncodedOwners()) }
            if options.json {
                try Terminal.printJSON(report)
            } else if report.created {
                Terminal.line("created a lifecycle installation in \(report.database)"
                    + (report.referenceSchema ? " with the reference app's tables" : " (lifecycle's own tables only)"))
            } else {
                Terminal.line("\(report.database) is a lifecycle installation already; its schema is up to date")
            }
            if !options.json, let indexed = report.sessionRowsIndexed, indexed > 0 {
                Terminal.line("\(indexed) session row(s) decoded into lifecycle's index: a deletion request reads the user's own sessions")
            }
            return .ok
        }
    }
}

struct MigrateCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Bring an installation's schema up to date (every command also does this when it opens the database).",
        discussion: """
            Only upgrades: a database that `lifecycle init` did not set up is refused (exit 66) and nothing is created \
            there, as by every command but init. Prints the migrations the database has (--json: their names).
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let (database, applied) = try await schema(of: services.store)
        if options.json {
            try Terminal.printJSON(MigrateReport(database: database, migrations: applied))
        } else {
            Terminal.line("\(services.store.location) is at the current schema: \(applied.joined(separator: ", "))")
        }
        return .ok
    }
}

struct MigrateReport: Encodable {
    var database: String
    var migrations: [String]
}

/// Where the database is and which migrations it has, for `migrate`.
private func schema(of store: some LifecycleStore) async throws -> (database: String, migrations: [String]) {
    switch store {
    case let sqlite as SQLiteStore: (sqlite.path, try sqlite.appliedMigrations)
    case let postgres as PostgresStore: (postgres.server.description, try await postgres.appliedMigrations)
    default: (store.location, [])
    }
}
