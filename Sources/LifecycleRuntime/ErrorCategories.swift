import Foundation
import GRDB
import JobRunner
import Lifecycle
import PostgresBackend
import SQLiteBackend

extension LifecycleError {
    /// Any error from lifecycle or its backends, in the category that says what to do about
    /// it (the CLI's exit code) and with the message an operator acts on. An error no part
    /// of lifecycle describes is `.internalError`: a bug.
    public init(classifying error: any Error) {
        switch error {
        case let error as LifecycleError:
            self = error
        case let error as JobRunnerError:
            self.init(.badInput, error.message)
        case let error as ValidationFailure:
            self.init(.badInput, error.description)
        case let error as UnreadableJobRow:
            // Data lifecycle never writes, put there by hand: the message says which column
            // to correct, so it is not reported as a bug.
            self.init(.badInput, error.description)
        case let error as UnreadableRow:
            self.init(.badInput, error.description)
        case let error as SQLiteStoreError:
            if error.isOutOfSpace {
                self.init(.tryLater, error.message)
            } else if error.isDamaged {
                self.init(.unavailable, error.message)
            } else {
                self.init(.unavailable, "\(error.message)\nCheck the --database path (or LIFECYCLE_DATABASE) and its permissions.")
            }
        case let error as DatabaseError:
            // Reached only when the store's path was not at hand to name (see withInstallation).
            if let classified = SQLiteStoreError.classify(error, path: "in use") {
                self.init(classifying: classified)
            } else {
                self = .bug("\(error)")
            }
        case let error as PostgresStoreError:
            if error.isBadLocation {
                self.init(.badConfiguration, "--database (or LIFECYCLE_DATABASE): \(error.message)")
            } else if error.isOutOfSpace {
                self.init(.tryLater, "\(error.message)\nThe PostgreSQL server is out of disk space: free space there and run the same command again.")
            } else if error.isDamaged {
                self.init(.unavailable, "\(error.message)\nThe PostgreSQL server reports damaged data: stop the workers and restore or repair the database before running again.")
            } else if error.isUnavailable {
                self.init(.unavailable, "\(error.message)\nCheck that the PostgreSQL server is running and reachable and that the --database URL (or LIFECYCLE_DATABASE) is right.")
            } else {
                self = .bug(error.message)
            }
        case let error as BlobStoreError:
            if error.isOutOfSpace {
                self.init(.tryLater, "blob store: \(error.message)\nFree space and run the same command again.")
            } else if error.isNotWritable {
                self.init(.cannotCreate, "blob store: \(error.message)\nMake the blob directory (--blobs, or LIFECYCLE_BLOBS) writable by the user that runs lifecycle.")
            } else {
                self.init(.unavailable, "blob store: \(error.message)")
            }
        default:
            self = .bug("\(error)")
        }
    }

    private static func bug(_ detail: String) -> LifecycleError {
        LifecycleError(.internalError, "internal error: \(detail)\nThis is a bug; please report it with the command you ran.")
    }
}
