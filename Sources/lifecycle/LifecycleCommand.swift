import ArgumentParser
import Foundation
import LifecycleRuntime

@main
enum Entry {
    static func main() async {
        LifecycleProcess.prepare()
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
        let (database, applied) = try await LifecycleConfiguration.schema(of: services.store)
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

