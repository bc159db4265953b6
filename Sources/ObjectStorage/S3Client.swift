import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Lifecycle

/// How often a request is tried again after a network error, a 5xx or `SlowDown`, and
/// how long to wait in between (exponential, with full jitter so many workers retrying
/// together do not hit the server in step).
public struct S3RetryPolicy: Sendable, Equatable {
    public var attempts: Int
    public var initialDelay: TimeInterval
    public var maximumDelay: TimeInterval

    public init(attempts: Int = 5, initialDelay: TimeInterval = 0.2, maximumDelay: TimeInterval = 5) {
        self.attempts = max(1, attempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    func delay(afterAttempt attempt: Int) -> TimeInterval {
        let ceiling = min(maximumDelay, initialDelay * pow(2, Double(attempt - 1)))
        return Double.random(in: ceiling / 2...ceiling)
    }
}

/// The HTTP half of the store: addresses, signs and sends one S3 request, and retries
/// it while that is safe. Every request the store makes is idempotent (fixed keys,
/// fixed upload ids), so retrying after a lost answer changes nothing.
final class S3Client: Sendable {
    struct Response: Sendable {
        var status: Int
        /// Lower-case names.
        var headers: [String: String]
        var body: Data

        var isSuccess: Bool { (200..<300).contains(status) }
        var errorCode: String? { XMLElement.parse(body).flatMap { $0.name == "Error" ? $0.value("Code") : nil } }
        var errorMessage: String? { XMLElement.parse(body).flatMap { $0.name == "Error" ? $0.value("Message") : nil } }
    }

    let location: S3Location
    let signer: SigV4Signer
    let retry: S3RetryPolicy
    private let session: URLSession
    /// `scheme://host[:port]` every request goes to.
    let origin: String
    /// The Host header as the HTTP client sends it, which is what gets signed.
    let host: String
    /// Path-style (`/bucket/key`) with a custom endpoint, virtual-hosted (`/key` on the bucket's own host) on AWS.
    let pathStyle: Bool

    init(location: S3Location, credentials: AWSCredentials, retry: S3RetryPolicy, requestTimeout: TimeInterval) {
        self.location = location
        self.signer = SigV4Signer(credentials: credentials, region: location.region)
        self.retry = retry
        if let endpoint = location.endpoint, let components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false),
           let scheme = components.scheme, let hostName = components.percentEncodedHost {
            let defaultPort = scheme == "https" ? 443 : 80
            let port = components.port.flatMap { $0 == defaultPort ? nil : $0 }
            host = hostName + (port.map { ":\($0)" } ?? "")
            origin = "\(scheme)://\(host)"
            pathStyle = true
        } else if location.bucket.contains(".") {
            // A dotted bucket name does not match the wildcard certificate of the virtual host.
            host = "s3.\(location.region).amazonaws.com"
            origin = "https://\(host)"
            pathStyle = true
        } else {
            host = "\(location.bucket).s3.\(location.region).amazonaws.com"
            origin = "https://\(host)"
            pathStyle = false
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = requestTimeout
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        session = URLSession(configuration: configuration)
    }

    deinit { session.finishTasksAndInvalidate() }

    /// The raw (unencoded) request path for a full object key, or the bucket itself for nil.
    func path(for key: String?) -> String {
        let bucketPart = pathStyle ? "/\(location.bucket)" : ""
        guard let key else { return bucketPart.isEmpty ? "/" : bucketPart }
        return bucketPart + "/" + key
    }

    /// Where a reader of the bucket finds `key`: for messages and the `archive:` line.
    func describe(key: String) -> String { "s3://\(location.bucket)/\(key)" }

    func presignedGET(key: String, expiresIn seconds: Int, signedAt date: Date) -> String {
        let path = path(for: key)
        let (query, _) = signer.presign(method: "GET", host: host, path: path, expiresIn: seconds, at: date)
        return origin + SigV4Signer.canonicalURI(path) + "?" + query
    }

    /// Sends one request, retrying network errors, 5xx and `SlowDown` up to the policy's
    /// attempts. Other answers, 4xx included, are returned for the caller to judge.
    func send(
        _ method: String, key: String?, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)] = [],
        body: Data? = nil, operation: String, attempts: Int? = nil
    ) async throws -> Response {
        let payloadHash = body.map { SigV4Signer.sha256Hex($0) } ?? SigV4Signer.emptyPayloadHash
        let path = path(for: key)
        let encodedQuery = SigV4Signer.canonicalQuery(query)
        guard let url = URL(string: origin + SigV4Signer.canonicalURI(path) + (encodedQuery.isEmpty ? "" : "?" + encodedQuery)) else {
            throw BlobStoreError("S3 \(operation): cannot form a URL for '\(key ?? location.bucket)'")
        }
        let limit = attempts ?? retry.attempts
        var attempt = 0
        while true {
            attempt += 1
            try Task.checkCancellation()
            // The wall clock, not the app's TimeSource: S3 refuses signatures more than 15 minutes
            // off its own time, and LIFECYCLE_NOW may shift the app's clock by years.
            let signature = signer.sign(
                SigV4Signer.Request(method: method, path: path, query: query, headers: [("host", host)] + headers, payloadHash: payloadHash),
                at: Date())
            var request = URLRequest(url: url)
            request.httpMethod = method
            for (name, value) in headers + signature.addedHeaders { request.setValue(value, forHTTPHeaderField: name) }
            if let body {
                request.httpBody = body
                if !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
                    request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
                }
            }
            let failure: String
            do {
                let (data, urlResponse) = try await session.data(for: request)
                guard let http = urlResponse as? HTTPURLResponse else {
                    throw BlobStoreError("S3 \(operation): the answer from \(origin) was not HTTP")
                }
                var headers: [String: String] = [:]
                for (name, value) in http.allHeaderFields {
                    if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
                }
                let response = Response(status: http.statusCode, headers: headers, body: data)
                let code = response.isSuccess ? nil : response.errorCode
                guard http.statusCode >= 500 || code == "SlowDown" || code == "RequestTimeout" else { return response }
                failure = "HTTP \(http.statusCode)\(code.map { " \($0)" } ?? "")"
            } catch let error as URLError {
                if error.code == .cancelled { throw CancellationError() }
                failure = Self.describe(error)
            }
            guard attempt < limit else {
                throw BlobStoreError("S3 \(operation) of '\(key ?? location.bucket)' at \(origin) failed after \(attempt) attempt(s): \(failure)")
            }
            try await Task.sleep(nanoseconds: UInt64(retry.delay(afterAttempt: attempt) * 1_000_000_000))
        }
    }

    private static func describe(_ error: URLError) -> String {
        switch error.code {
        case .cannotConnectToHost: "connection refused (is the S3 server running, and is ?endpoint= right?)"
        case .cannotFindHost, .dnsLookupFailed: "host name not found (check ?endpoint= and the bucket's region)"
        case .timedOut: "timed out"
        case .networkConnectionLost: "connection lost"
        case .notConnectedToInternet: "no network"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid:
            "TLS handshake failed: \(error.localizedDescription)"
        default: error.localizedDescription
        }
    }

    /// A readable error for a 4xx/5xx answer, with what to do about the usual ones.
    func failure(_ response: Response, operation: String, key: String?) -> BlobStoreError {
        let code = response.errorCode
        let what = "S3 \(operation) of '\(key ?? location.bucket)' failed: HTTP \(response.status)\(code.map { " \($0)" } ?? "")"
            + (response.errorMessage.map { ": \($0)" } ?? "")
        let hint: String = switch (response.status, code) {
        case (_, "NoSuchBucket"): "; bucket '\(location.bucket)' does not exist at \(origin): create it, or fix the bucket in --blobs / LIFECYCLE_BLOBS"
        case (_, "InvalidAccessKeyId"), (_, "SignatureDoesNotMatch"): "; check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        case (_, "AuthorizationHeaderMalformed"): "; check the region in --blobs (…?region=)"
        case (403, _): "; the credentials are not allowed to do this: check the key's policy for bucket '\(location.bucket)'"
        default: ""
        }
        return BlobStoreError(what + hint)
    }
}
