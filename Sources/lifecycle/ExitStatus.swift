import ArgumentParser
import Foundation
import LifecycleRuntime

/// sysexits(3) codes, as documented in docs/operations.md.
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
        if let failure = error as? CLIFailure { return failure }
        let error = LifecycleError(classifying: error)
        return CLIFailure(ExitStatus(error.category), error.message)
    }
}

extension ExitStatus {
    init(_ category: LifecycleError.Category) {
        self = switch category {
        case .badConfiguration: .usage
        case .badInput: .dataError
        case .inputMissing: .noInput
        case .noSuchAccount: .noSuchAccount
        case .unavailable: .unavailable
        case .cannotCreate: .cannotCreate
        case .tryLater: .tryLater
        case .permissionDenied: .permissionDenied
        case .internalError: .software
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
            Terminal.release(failed: true)
            Terminal.error(failure.message)
            throw ExitCode(failure.status.rawValue)
        }
        Terminal.release(failed: status != .ok)
        if status != .ok { throw ExitCode(status.rawValue) }
    }
}
