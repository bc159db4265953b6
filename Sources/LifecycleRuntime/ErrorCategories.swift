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
            } else if error.isInsufficientPrivilege {
                // A grant the role lacks is the installation's setup, not a bug nor a retry.
                self.init(.permissionDenied, "\(error.message)\nThe role lifecycle connects as lacks a privilege: grant it, or connect as a role that has it.")
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

    /// Whether `error`, met while serving an app's request, is the installation's trouble
    /// rather than a refusal of the request: the app can neither act on the operator's
    /// message (a file, a table, a command) nor wait for a known time, so it is told only that
    /// the server cannot serve it now. Besides the server's own categories: a policy file or
    /// schedule it cannot use, a row edited by hand into something it cannot read (`.badInput`
    /// for the operator who fixes the row), and a disk that is full or failing (`.tryLater`
    /// for the operator's run again; every `.tryLater` an app may wait out says when).
    public static func isTheServersTrouble(_ error: any Error) -> Bool {
        switch error {
        case let error as JobRunnerError where error.isInvalidSetting: return true
        case is UnreadableRow, is UnreadableJobRow: return true
        default: break
        }
        let classified = LifecycleError(classifying: error)
        guard classified.forApp == nil else { return false }
        switch classified.category {
        case .badConfiguration, .inputMissing, .cannotCreate, .unavailable: return true
        case .tryLater: return classified.retryAt == nil
        case .badInput, .noSuchAccount, .permissionDenied, .internalError: return false
        }
    }

    private static func bug(_ detail: String) -> LifecycleError {
        LifecycleError(.internalError, "internal error: \(detail)\nThis is a bug; please report it with the command you ran.")
    }
}
