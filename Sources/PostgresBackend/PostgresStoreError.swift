import Foundation
import PostgresNIO

/// What went wrong talking to PostgreSQL, in words an operator can act on.
public struct PostgresStoreError: Error, CustomStringConvertible, Sendable {
    private enum Code: Sendable, Equatable {
        case badLocation, unavailable, query, migration
    }

    private let code: Code
    public let message: String
    /// SQLSTATE of a server error (`23505` unique violation, `40P01` deadlock…), when there is one.
    public let sqlState: String?

    private init(_ code: Code, _ message: String, sqlState: String? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
    }

    public var description: String { message }

    /// The URL given to `--database` cannot be used as it is.
    public static func badLocation(_ message: String) -> Self { .init(.badLocation, message) }
    /// The server cannot be reached or dropped the connection: worth trying again later.
    public static func unavailable(_ message: String) -> Self { .init(.unavailable, message) }
    public static func query(_ message: String, sqlState: String?) -> Self { .init(.query, message, sqlState: sqlState) }
    public static func migration(_ message: String) -> Self { .init(.migration, message) }

    public var isBadLocation: Bool { code == .badLocation }
    public var isUnavailable: Bool { code == .unavailable }
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// 53100 disk_full: temporary for the caller, who runs the same command again once
    /// the server has space (every step is safe to repeat).
    public var isOutOfSpace: Bool { sqlState == "53100" }
    /// XX001 data_corrupted, XX002 index_corrupted: the server's files need an operator.
    public var isDamaged: Bool { sqlState == "XX001" || sqlState == "XX002" }
    /// 42501 insufficient_privilege: the role lacks a grant; no retry mends it.
    public var isInsufficientPrivilege: Bool { sqlState == "42501" }

    /// PSQLError's own description hides everything on purpose; this keeps the
    /// server's message and SQLSTATE, which carry no bound values.
    static func from(_ error: any Error, location: String, doing what: String) -> Self {
        if let error = error as? PostgresStoreError { return error }
        guard let error = error as? PSQLError else {
            return .unavailable("\(location): \(what) failed: \(error)")
        }
        switch error.code {
        case .server:
            let message = error.serverInfo?[.message] ?? "unknown server error"
            let state = error.serverInfo?[.sqlState]
            let detail = error.serverInfo?[.detail].map { " (\($0))" } ?? ""
            // 57P01-57P03: the server is shutting down or starting up; 53300: too many connections.
            if let state, state.hasPrefix("57P") || state == "53300" || state.hasPrefix("08") {
                return .unavailable("\(location): \(message)\(detail) [SQLSTATE \(state)]")
            }
            if let state, ["28P01", "28000", "3D000"].contains(state) {
                return .unavailable("\(location): \(message) [SQLSTATE \(state)]; check the user, password and database in the URL")
            }
            return .query("\(location): \(what) failed: \(message)\(detail) [SQLSTATE \(state ?? "?")]", sqlState: state)
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed:
            let cause = error.underlying.map { ": \($0)" } ?? ""
            return .unavailable("\(location): cannot reach the server (\(error.code))\(cause)")
        default:
            return .unavailable("\(location): \(what) failed (\(error.code))")
        }
    }
}
