import ArgumentParser
import Foundation
import LifecycleRuntime

/// `lifecycle copy-store`: moves an embedded installation (SQLite file + blob directory)
/// up to PostgreSQL and, optionally, S3-compatible storage.
struct CopyStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy-store",
        abstract: "Copy a SQLite installation (accounts, jobs with their state, blobs) to PostgreSQL and another blob store, verified.",
        discussion: """
            The source is --database (a SQLite file) and --blobs (a directory). Every table is copied in one \
            PostgreSQL transaction, which commits only once each table's row count and checksum match the source: \
            an interrupted copy leaves nothing, and running the command again copies everything. Blobs are then \
            copied key by key, skipping those already there with the same SHA-256, and each is read back and checked. \
            Export archives kept apart from the blobs (beside the SQLite file) stay where they are: the output names the \
            folder, for the new installation's --exports. \
            Stop the workers and cron first: the SQLite write lock is held while rows are copied, and jobs still \
            leased to a live worker are refused.
            Exit 0 when everything was copied and verified, 64 for a bad source or destination, 65 when the destination \
            already holds different data, 66 when the SQLite file is missing, 69 when a store cannot be reached, 75 while jobs are still running.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(name: .customLong("to-database"), help: ArgumentHelp("The PostgreSQL database to copy into.", valueName: "postgres-url"))
    var toDatabase: String
    @Option(name: .customLong("to-blobs"), help: ArgumentHelp(
        "The blob store to copy the blobs into (a directory or s3://…); without it the blobs stay where they are.", valueName: "dir|s3-url"))
    var toBlobs: String?

    func run() async throws {
        try await guarded {
            let json = options.json
            let report = try await StoreCopier.copy(from: try options.configuration(), toDatabase: toDatabase, toBlobs: toBlobs) { progress in
                guard !json else { return }
                switch progress {
                case .copyingTable(let table): Terminal.note("copying \(table)")
                case .blobsChecked(let count): Terminal.note("\(count) blob(s) checked")
                }
            }
            if json {
                try Terminal.printJSON(report)
            } else {
                Terminal.line("copied \(report.source) to \(report.destination):")
                for table in report.tables {
                    Terminal.line("  \(table.table.padding(toLength: 22, withPad: " ", startingAt: 0)) \(table.rows) row(s), checksum verified")
                }
                if let blobs = report.blobs {
                    Terminal.line("  blobs: \(blobs.blobs) (\(blobs.bytes) bytes), \(blobs.copied) copied, \(blobs.alreadyThere) already there, every SHA-256 verified")
                } else {
                    Terminal.line("  blobs: not copied (no --to-blobs); keep using \(options.blobDirectory)")
                }
                if let exports = report.exportsKeptIn {
                    Terminal.line("  export archives: not copied; run the new installation with --exports \(exports) (or \(LifecycleConfiguration.exportsVariable)), where they are")
                }
            }
            return .ok
        }
    }
}
