import Foundation

/// A domain refusal or failure with a category callers can act on; the CLI maps
/// each category to one documented exit code.
public struct LifecycleError: Error, CustomStringConvertible, Sendable {
    public enum Category: Sendable, Equatable {
        /// A setting is wrong: where the database or blob store is, the clock, missing
        /// credentials. Nothing was done (64).
        case badConfiguration
        /// The input data is wrong (65).
        case badInput
        /// An input file is missing (66).
        case inputMissing
        /// No such account, or it is gone (67).
        case noSuchAccount
        /// A service (database, blob store, mailer) is unavailable (69).
        case unavailable
        /// An output folder or file cannot be created or written: read-only, wrong owner (73).
        case cannotCreate
        /// Allowed later, not now: rate limit, lockout, jobs still retrying (75).
        case tryLater
        /// The credentials or link do not grant this (77).
        case permissionDenied
        /// A bug or an unexpected state (70).
        case internalError
    }

    public let category: Category
    public let message: String
    /// For `.tryLater` refusals with a known end (a rate limit, a lockout): when to ask again.
    public let retryAt: Date?
    /// The refusal as an app hears it through the HTTP API or a web page, where `message`
    /// advises the operator at a prompt (a command, an option): an app can run neither.
    public let forApp: AppRefusal?

    /// What the app is told: a stable `code` it can branch on and a sentence without CLI advice.
    public struct AppRefusal: Sendable, Equatable {
        public let code: String
        public let message: String

        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    public init(_ category: Category, _ message: String, retryAt: Date? = nil, forApp: AppRefusal? = nil) {
        self.category = category
        self.message = message
        self.retryAt = retryAt
        self.forApp = forApp
    }

    public var description: String { message }

    public static func noSuchAccount(_ reference: String) -> Self {
        .init(.noSuchAccount, "no account with id or email '\(reference)'")
    }

    public static func noSuchAccount(_ reference: AccountReference) -> Self {
        guard reference.addressing == .app else { return noSuchAccount(reference.text) }
        // An app that sent a bare address or username learns how to name one.
        return .init(.noSuchAccount, "no account '\(reference.text)': an account is named by its key, or COLUMN:VALUE for one lookup column of the data map (email:ada@example.com)")
    }

    /// A failed file-system call, in the category its cause calls for: a full disk or a
    /// disk error is temporary (free space, run again: every step is safe to repeat), a
    /// read-only or foreign-owned location needs the operator, anything else is unavailable.
    public static func fileSystem(_ code: Int32, _ doing: String, _ path: String) -> Self {
        let reason = String(cString: strerror(code))
        switch code {
        case ENOSPC, EDQUOT, EFBIG:
            return .init(.tryLater, "\(doing) \(path): \(reason); free space (or raise the limit) and run the same command again")
        case EIO:
            return .init(.tryLater, "\(doing) \(path): \(reason) (the disk reported an error); check the disk, then run the same command again")
        case EACCES, EPERM, EROFS:
            return .init(.cannotCreate, "\(doing) \(path): \(reason); make it writable by the user that runs lifecycle")
        default:
            return .init(.unavailable, "\(doing) \(path): \(reason)")
        }
    }
}
