import ArgumentParser
import Foundation
import GRDB
import JobRunner
import Lifecycle
import PostgresBackend
import SQLiteBackend

/// sysexits(3) codes, as documented in the README.
enum ExitStatus: Int32 {
    case ok = 0
    case usage = 64
    case dataError = 65
    case noInput = 66
    case noSuchAccount = 67
    case unavailable = 69
    case software = 70
    case cannotCreate = 73
    case tryLater = 75
    case permissionDenied = 77
}

/// A message for the person at the prompt plus the exit code that goes with it.
struct CLIFailure: Error, CustomStringConvertible {
    let status: ExitStatus
    let message: String

    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    var description: String { message }

    static func from(_ error: any Error) -> CLIFailure {
        switch error {
        case let failure as CLIFailure:
            return failure
        case let error as LifecycleError:
            let status: ExitStatus = switch error.category {
            case .badInput: .dataError
            case .inputMissing: .noInput
            case .noSuchAccount: .noSuchAccount
            case .unavailable: .unavailable
            case .cannotCreate: .cannotCreate
            case .tryLater: .tryLater
            case .permissionDenied: .permissionDenied
            case .internalError: .software
            }
            return CLIFailure(status, error.message)
        case let error as JobRunnerError:
            if error.isNoSuchJob { return CLIFailure(.dataError, error.message) }
            return CLIFailure(.dataError, error.message)
        case let error as ValidationFailure:
            return CLIFailure(.dataError, error.description)
        case let error as SQLiteStoreError:
            if error.isOutOfSpace { return CLIFailure(.tryLater, error.message) }
            if error.isDamaged { return CLIFailure(.unavailable, error.message) }
            return CLIFailure(.unavailable, "\(error.message)\nCheck the --database path (or LIFECYCLE_DATABASE) and its permissions.")
        case let error as DatabaseError:
            // Reached only when the store's path was not at hand to name (see GlobalOptions.withServices).
            if let classified = SQLiteStoreError.classify(error, path: "in use") { return from(classified) }
            return CLIFailure(.software, "internal error: \(error)\nThis is a bug; please report it with the command you ran.")
        case let error as PostgresStoreError:
            if error.isBadLocation { return CLIFailure(.usage, "--database (or LIFECYCLE_DATABASE): \(error.message)") }
            if error.isOutOfSpace {
                return CLIFailure(.tryLater, "\(error.message)\nThe PostgreSQL server is out of disk space: free space there and run the same command again.")
            }
            if error.isDamaged {
                return CLIFailure(.unavailable, "\(error.message)\nThe PostgreSQL server reports damaged data: stop the workers and restore or repair the database before running again.")
            }
            if error.isUnavailable {
                return CLIFailure(.unavailable, "\(error.message)\nCheck that the PostgreSQL server is running and reachable and that the --database URL (or LIFECYCLE_DATABASE) is right.")
            }
            return CLIFailure(.software, "internal error: \(error.message)\nThis is a bug; please report it with the command you ran.")
        case let error as BlobStoreError:
            if error.isOutOfSpace { return CLIFailure(.tryLater, "blob store: \(error.message)\nFree space and run the same command again.") }
            if error.isNotWritable {
                return CLIFailure(.cannotCreate, "blob store: \(error.message)\nMake the blob directory (--blobs, or LIFECYCLE_BLOBS) writable by the user that runs lifecycle.")
            }
            return CLIFailure(.unavailable, "blob store: \(error.message)")
        default:
            return CLIFailure(.software, "internal error: \(error)\nThis is a bug; please report it with the command you ran.")
        }
    }
}

extension AsyncParsableCommand {
    /// Runs a command body, turning every failure into a message on stderr and a
    /// documented exit code: a user mistake never ends in a stack trace.
    func guarded(_ body: () async throws -> ExitStatus) async throws {
        let status: ExitStatus
        do {
            status = try await body()
        } catch let error as CleanExit {
            throw error
        } catch let error as ExitCode {
            throw error
        } catch {
            let failure = CLIFailure.from(error)
            Terminal.error(failure.message)
            throw ExitCode(failure.status.rawValue)
        }
        if status != .ok { throw ExitCode(status.rawValue) }
    }
}
