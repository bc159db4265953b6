import Foundation

/// A domain refusal or failure with a category callers can act on; the CLI maps
/// each category to one documented exit code.
public struct LifecycleError: Error, CustomStringConvertible, Sendable {
    public enum Category: Sendable, Equatable {
        /// The input data is wrong (65).
        case badInput
        /// An input file is missing (66).
        case inputMissing
        /// No such account, or it is gone (67).
        case noSuchAccount
        /// A service (database, blob store, mailer) is unavailable (69).
        case unavailable
        /// Allowed later, not now: rate limit, lockout, jobs still retrying (75).
        case tryLater
        /// The credentials or link do not grant this (77).
        case permissionDenied
        /// A bug or an unexpected state (70).
        case internalError
    }

    public let category: Category
    public let message: String

    public init(_ category: Category, _ message: String) {
        self.category = category
        self.message = message
    }

    public var description: String { message }

    public static func noSuchAccount(_ reference: String) -> Self {
        .init(.noSuchAccount, "no account with id or email '\(reference)'")
    }
}
