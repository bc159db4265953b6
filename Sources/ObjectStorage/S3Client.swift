import AsyncHTTPClient
import Foundation
import Lifecycle
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

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
    /// AsyncHTTPClient rather than URLSession: FoundationNetworking brings libcurl and its
    /// three dozen shared libraries into every process of the binary, about 11 ms at each
    /// start (a cron run, a CLI command, one process per photo), S3 in use or not.
    private let http: HTTPClient
    /// `scheme://host[:port]` every request goes to.
    let origin: String
    /// The Host header as the HTTP client sends it, which is what gets signed.
    let host: String
    /// Path-style (`/bucket/key`) with a custom endpoint, virtual-hosted (`/key` on the bucket's own host) on AWS.
    let pathStyle: Bool
    /// The endpoint's own path (`/storage/v1/s3`), before the bucket in every request; "" for none.
    let basePath: String

    init(
        location: S3Location, credentials: AWSCredentials, retry: S3RetryPolicy, requestTimeout: TimeInterval,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
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
            let path = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            basePath = path.isEmpty ? "" : "/" + path
        } else if location.bucket.contains(".") {
            // A dotted bucket name does not match the wildcard certificate of the virtual host.
            host = "s3.\(location.region).amazonaws.com"
            origin = "https://\(host)"
            pathStyle = true
            basePath = ""
        } else {
            host = "\(location.bucket).s3.\(location.region).amazonaws.com"
            origin = "https://\(host)"
            pathStyle = false
            basePath = ""
        }
        var configuration = HTTPClient.Configuration()
        // As URLSession's request timeout was: the longest silence, connecting, sending or
        // waiting for the answer's next bytes. Not a deadline for the whole request, which a
        // 16 MiB part on a slow uplink would overrun however well it was going.
        let idle = TimeAmount.milliseconds(Int64(requestTimeout * 1000))
        configuration.timeout = .init(connect: idle, read: idle, write: idle)
        // A redirect would be signed for another host and path: its answer is returned as it is.
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        // `send` retries with its own backoff and reports each failure; the pool's own
        // retries would hide a refused connection until the connect timeout.
        configuration.connectionPool.retryConnectionEstablishment = false
        let scheme = origin.hasPrefix("https:") ? "https" : "http"
        configuration.proxy = try Self.proxy(scheme: scheme, host: URLComponents(string: origin)?.host ?? host, environment: environment)
        http = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }

    deinit { http.shutdown { _ in } }

    /// The HTTP proxy the environment names for `scheme` (`https_proxy`, `http_proxy`, then
    /// `all_proxy`; upper case too, except `HTTP_PROXY`, which a CGI request can set), unless
    /// `no_proxy` lists `host`: the variables libcurl, and so URLSession, honoured, which
    /// AsyncHTTPClient does not read itself. AsyncHTTPClient speaks plain HTTP to an HTTP
    /// proxy (CONNECT, for http and https alike) and SOCKS5 without a password, so a proxy
    /// reached over TLS, or one of another kind, is refused rather than bypassed.
    static func proxy(scheme: String, host: String, environment: [String: String]) throws -> HTTPClient.Configuration.Proxy? {
        func variable(_ name: String, upperCase: Bool = true) -> String? {
            let value = environment[name] ?? (upperCase ? environment[name.uppercased()] : nil)
            return value.flatMap { $0.isEmpty ? nil : $0 }
        }
        let named = scheme == "https" ? variable("https_proxy") : variable("http_proxy", upperCase: false)
        guard let setting = named ?? variable("all_proxy") else { return nil }
        if let exceptions = variable("no_proxy") {
            let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            for entry in exceptions.split(separator: ",") {
                let domain = String(entry.trimmingCharacters(in: .whitespaces).lowercased().drop { $0 == "." })
                if domain == "*" || host == domain || host.hasSuffix("." + domain) { return nil }
                if Self.address(host, isIn: domain) { return nil }
            }
        }
        let written = setting.contains("://") ? setting : "http://" + setting
        guard let url = URLComponents(string: written), let proxyHost = url.host, !proxyHost.isEmpty else {
            throw S3ConfigurationError("the proxy '\(setting)' in the environment is not a URL: set it as http://host:port")
        }
        // libcurl's default proxy port.
        let port = url.port ?? 1080
        switch url.scheme?.lowercased() {
        case "http": break
        case "socks5" where url.user == nil, "socks5h" where url.user == nil:
            return .socksServer(host: proxyHost, port: port)
        default:
            throw S3ConfigurationError(
                "the proxy '\(setting)' in the environment is not one the S3 store can use: an http:// proxy, or socks5:// without a password")
        }
        if let user = url.user {
            return .server(host: proxyHost, port: port, authorization: .basic(username: user, password: url.password ?? ""))
        }
        return .server(host: proxyHost, port: port)
    }

    /// The raw (unencoded) request path for a full object key, or the bucket itself for nil.
    func path(for key: String?) -> String {
        let bucketPart = basePath + (pathStyle ? "/\(location.bucket)" : "")
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
    /// attempts. Other answers, 4xx included, are returned for the caller to judge. At most
    /// `bodyLimit` bytes of an answer's body are read (reads stay bounded).
    func send(
        _ method: String, key: String?, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)] = [],
        body: Data? = nil, operation: String, attempts: Int? = nil, bodyLimit: Int = 16 << 20
    ) async throws -> Response {
        let payloadHash = body.map { SigV4Signer.sha256Hex($0) } ?? SigV4Signer.emptyPayloadHash
        let path = path(for: key)
        let encodedQuery = SigV4Signer.canonicalQuery(query)
        let url = origin + SigV4Signer.canonicalURI(path) + (encodedQuery.isEmpty ? "" : "?" + encodedQuery)
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
            var request = HTTPClientRequest(url: url)
            request.method = HTTPMethod(rawValue: method)
            for (name, value) in headers + signature.addedHeaders { request.headers.replaceOrAdd(name: name, value: value) }
            if let body {
                request.body = .bytes(body)
                if !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
                    request.headers.replaceOrAdd(name: "Content-Type", value: "application/octet-stream")
                }
            }
            let failure: String
            do {
                let answer = try await http.execute(request, deadline: .distantFuture)
                var headers: [String: String] = [:]
                for (name, value) in answer.headers { headers[name.lowercased()] = value }
                // An error's XML is kept whole whatever the part of an object asked for.
                let data = try await Self.collect(answer.body, upTo: max(bodyLimit, 1 << 20))
                let response = Response(status: Int(answer.status.code), headers: headers, body: data)
                let code = response.isSuccess ? nil : response.errorCode
                guard response.status >= 500 || code == "SlowDown" || code == "RequestTimeout" else { return response }
                failure = "HTTP \(response.status)\(code.map { " \($0)" } ?? "")"
            } catch let error as HTTPClientError where error == .cancelled {
                throw CancellationError()
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                failure = Self.describe(error)
            }
            guard attempt < limit else {
                throw BlobStoreError("S3 \(operation) of '\(key ?? location.bucket)' at \(origin) failed after \(attempt) attempt(s): \(failure)")
            }
            try await Task.sleep(nanoseconds: UInt64(retry.delay(afterAttempt: attempt) * 1_000_000_000))
        }
    }

    /// An answer's body, up to `limit` bytes; the rest is not read.
    private static func collect(_ body: HTTPClientResponse.Body, upTo limit: Int) async throws -> Data {
        var data = Data()
        for try await buffer in body {
            let room = limit - data.count
            data.append(contentsOf: buffer.readableBytesView.prefix(room))
            // Past the limit: the rest is not waited for (the connection is closed, not reused).
            if buffer.readableBytes > room { break }
        }
        return data
    }

    /// Whether the IP address `host` lies in `range`, a `no_proxy` entry written as an
    /// address with a prefix length (`10.0.0.0/8`, `fd00::/8`), as libcurl matches them.
    static func address(_ host: String, isIn range: String) -> Bool {
        let parts = range.split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let bits = Int(parts[1]), let network = ipBytes(String(parts[0])), let address = ipBytes(host),
              network.count == address.count, (0...(network.count * 8)).contains(bits)
        else { return false }
        for index in 0..<network.count {
            let mask: UInt8 = bits >= (index + 1) * 8 ? 0xFF : bits <= index * 8 ? 0 : ~(0xFF >> UInt8(bits - index * 8))
            if network[index] & mask != address[index] & mask { return false }
        }
        return true
    }

    /// An IPv4 or IPv6 address's bytes, or nil for anything else (a host name).
    private static func ipBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// What went wrong on the way to an answer, and what to check for the usual causes.
    private static func describe(_ error: any Error) -> String {
        switch error {
        case let error as HTTPClientError where error == .connectTimeout: return "timed out connecting"
        case let error as HTTPClientError where error == .readTimeout || error == .deadlineExceeded: return "timed out"
        case let error as HTTPClientError where error == .remoteConnectionClosed: return "connection lost"
        case let error as NIOConnectionError:
            if error.connectionErrors.isEmpty { return "host name not found (check ?endpoint= and the bucket's region)" }
            return error.connectionErrors.map { describe($0.error) }.first ?? "\(error)"
        case let error as IOError where error.errnoCode == ECONNREFUSED:
            return "connection refused (is the S3 server running, and is ?endpoint= right?)"
        case let error as IOError where error.errnoCode == ENETUNREACH || error.errnoCode == EHOSTUNREACH: return "no network"
        case is NIOSSLError, is NIOSSLExtraError, is BoringSSLError: return "TLS handshake failed: \(error)"
        case let error as HTTPClientError where error == .invalidProxyResponse || error == .socksHandshakeTimeout:
            return "the proxy named in the environment refused the tunnel (\(error)): check https_proxy / http_proxy / no_proxy"
        case ChannelError.connectTimeout: return "timed out connecting"
        default: return "\(error)"
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
