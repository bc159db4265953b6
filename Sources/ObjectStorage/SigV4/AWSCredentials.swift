import Foundation

/// An access key pair, with the session token that temporary credentials carry.
public struct AWSCredentials: Sendable, Equatable {
    public var accessKeyID: String
    public var secretAccessKey: String
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    public static let accessKeyVariable = "AWS_ACCESS_KEY_ID"
    public static let secretKeyVariable = "AWS_SECRET_ACCESS_KEY"
    public static let sessionTokenVariable = "AWS_SESSION_TOKEN"

    /// The standard variables every AWS tool reads, so an operator sets them once for all of them.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> AWSCredentials {
        let accessKey = environment[accessKeyVariable]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let secretKey = environment[secretKeyVariable]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let missing = [(accessKeyVariable, accessKey), (secretKeyVariable, secretKey)].filter { $0.1.isEmpty }.map(\.0)
        guard missing.isEmpty else {
            throw S3ConfigurationError("""
                the S3 blob store needs credentials: \(missing.joined(separator: " and ")) \(missing.count == 1 ? "is" : "are") not set; \
                export \(accessKeyVariable) and \(secretKeyVariable) (and \(sessionTokenVariable) for temporary credentials) \
                with a key allowed to read, write, list and delete in the bucket
                """)
        }
        let token = environment[sessionTokenVariable]?.trimmingCharacters(in: .whitespacesAndNewlines)
        return AWSCredentials(accessKeyID: accessKey, secretAccessKey: secretKey, sessionToken: token?.isEmpty == false ? token : nil)
    }
}

/// A mistake in how the S3 store is configured (location, region, credentials): the
/// operator fixes the command line or the environment, nothing is retried.
public struct S3ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
