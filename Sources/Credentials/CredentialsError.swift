/// Why a stored hash could not be checked, or a new one could not be made.
///
/// Codes are static members over a private enum so new codes do not break
/// callers that switch on them. Two errors are equal when their codes are:
/// `detail` is for logs and people, never part of the contract. No message
/// ever contains the stored hash, its salt or the password.
public struct CredentialsError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable {
        case unknownFormat
        case malformedHash
        case hashingFailed
        case unsupportedPassword
    }

    private let code: Code
    /// What exactly was wrong, e.g. "bcrypt hash has 45 characters, expected 60".
    public let detail: String

    private init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// The stored hash is in no format this library recognises (plain text,
    /// an empty column, a scheme from another system).
    public static let unknownFormat = CredentialsError(.unknownFormat, "")
    /// The format was recognised but the hash is truncated, corrupted, or its
    /// parameters are outside what this library agrees to compute.
    public static let malformedHash = CredentialsError(.malformedHash, "")
    /// The underlying library could not compute a hash (out of memory,
    /// thread creation failed, invalid hashing parameters).
    public static let hashingFailed = CredentialsError(.hashingFailed, "")
    /// `hashNewPassword` was given a password no stored hash may hold:
    /// longer than 4096 bytes, or containing NUL.
    public static let unsupportedPassword = CredentialsError(.unsupportedPassword, "")

    static func unknownFormat(_ detail: String) -> CredentialsError {
        CredentialsError(.unknownFormat, detail)
    }

    static func malformed(_ format: PasswordHashFormat, _ detail: String) -> CredentialsError {
        CredentialsError(.malformedHash, "\(format.name) hash: \(detail)")
    }

    static func hashingFailed(_ detail: String) -> CredentialsError {
        CredentialsError(.hashingFailed, detail)
    }

    static func unsupportedPassword(_ detail: String) -> CredentialsError {
        CredentialsError(.unsupportedPassword, detail)
    }

    public static func == (lhs: CredentialsError, rhs: CredentialsError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String {
        detail.isEmpty ? "CredentialsError.\(code.rawValue)" : "CredentialsError.\(code.rawValue): \(detail)"
    }
}
