import ArgumentParser
import Foundation

@main
enum Entry {
    static func main() async {
        // libarchive needs a UTF-8 locale for non-ASCII entry names (a Swift process starts in "C").
        setlocale(LC_CTYPE, "C.UTF-8")
        await LifecycleCommand.main()
    }
}

struct LifecycleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lifecycle",
        abstract: "Account lifecycle jobs: data export, password-confirmed deletion, purge, photo normalisation.",
        discussion: """
            Exit codes: 0 ok, 64 usage, 65 bad input data, 66 input file missing, 67 no such account,
            69 a service unavailable, 70 internal error, 75 try again later, 77 permission denied.
            LIFECYCLE_NOW=<ISO-8601> starts the clock at another instant (it keeps ticking from there).
            """,
        subcommands: [
            DemoCommand.self, MigrateCommand.self, AccountsCommand.self, WorkerCommand.self, JobsCommand.self,
            ExportCommand.self, ExportsCommand.self, DeleteCommand.self, RestoreCommand.self, PurgeCommand.self,
            PhotosCommand.self,
        ]
    )
}

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate", abstract: "Create or upgrade the database schema (every command also does this on start).")

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await guarded {
            let services = try await options.services()
            let applied = try services.store.appliedMigrations
            if options.json {
                try Terminal.printJSON(["database": services.store.path, "migrations": applied.joined(separator: ",")])
            } else {
                Terminal.line("\(services.store.location) is at the current schema: \(applied.joined(separator: ", "))")
            }
            return .ok
        }
    }
}
