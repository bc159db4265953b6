import Crypto
import Foundation
import Lifecycle

/// AWS Signature Version 4, in S3's flavour: the path is URI-encoded once and never
/// normalised (`a//b` and `a/./b` are different keys), and the payload is either its
/// SHA-256 or `UNSIGNED-PAYLOAD`. Checked against AWS's published test suite and the
/// S3 documentation's examples (see ObjectStorageTests/SigV4Tests.swift).
public struct SigV4Signer: Sendable {
    public let credentials: AWSCredentials
    public let region: String
    public let service: String

    public static let algorithm = "AWS4-HMAC-SHA256"
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// S3 refuses presigned URLs that claim to last longer than seven days.
    public static let maximumPresignedLifetime = 604_800

    public init(credentials: AWSCredentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// What gets signed. `path` is the raw (not yet encoded) path, starting with `/`;
    /// `query` holds raw names and values; `headers` must include `host`.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [(name: String, value: String)]
        public var headers: [(name: String, value: String)]
        public var payloadHash: String

        public init(method: String, path: String, query: [(name: String, value: String)] = [],
                    headers: [(name: String, value: String)], payloadHash: String) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    /// The intermediate texts, exposed so tests can compare each against published values.
    public struct Signature: Sendable {
        public var canonicalRequest: String
        public var stringToSign: String
        public var signedHeaders: String
        public var signature: String
        /// Headers to send in addition to the request's own (date, token, payload hash, authorization).
        public var addedHeaders: [(name: String, value: String)]

        public var authorization: String { addedHeaders.first { $0.name == "Authorization" }?.value ?? "" }
    }

    /// Header signing. Adds `x-amz-date`, `x-amz-security-token` for temporary
    /// credentials and, for S3, `x-amz-content-sha256`, all of them signed.
    public func sign(_ request: Request, at date: Date) -> Signature {
        let stamp = AmzDate(date)
        var added: [(name: String, value: String)] = [("x-amz-date", stamp.full)]
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        if service == "s3" { added.append(("x-amz-content-sha256", request.payloadHash)) }
        let headers = request.headers + added
        let (canonicalHeaders, signedHeaders) = Self.canonicalHeaders(headers)
        let canonicalRequest = [
            request.method.uppercased(), Self.canonicalURI(request.path), Self.canonicalQuery(request.query),
            canonicalHeaders, signedHeaders, request.payloadHash,
        ].joined(separator: "\n")
        let (stringToSign, signature) = finish(canonicalRequest, stamp)
        let authorization = "\(Self.algorithm) Credential=\(credentials.accessKeyID)/\(scope(stamp)), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signature(
            canonicalRequest: canonicalRequest, stringToSign: stringToSign, signedHeaders: signedHeaders, signature: signature,
            addedHeaders: added + [("Authorization", authorization)])
    }

    /// A presigned URL's query (S3 style: only `host` signed, `UNSIGNED-PAYLOAD`), with
    /// `X-Amz-Signature` last. The caller joins it to `scheme://host` + the encoded path.
    public func presign(
        method: String, host: String, path: String, query: [(name: String, value: String)] = [], expiresIn seconds: Int, at date: Date
    ) -> (query: String, signature: Signature) {
        let stamp = AmzDate(date)
        var parameters = query
        parameters.append(("X-Amz-Algorithm", Self.algorithm))
        parameters.append(("X-Amz-Credential", "\(credentials.accessKeyID)/\(scope(stamp))"))
        parameters.append(("X-Amz-Date", stamp.full))
        parameters.append(("X-Amz-Expires", String(seconds)))
        if let token = credentials.sessionToken { parameters.append(("X-Amz-Security-Token", token)) }
        parameters.append(("X-Amz-SignedHeaders", "host"))
        let canonicalQuery = Self.canonicalQuery(parameters)
        let (canonicalHeaders, signedHeaders) = Self.canonicalHeaders([("host", host)])
        let canonicalRequest = [
            method.uppercased(), Self.canonicalURI(path), canonicalQuery, canonicalHeaders, signedHeaders, Self.unsignedPayload,
        ].joined(separator: "\n")
        let (stringToSign, signature) = finish(canonicalRequest, stamp)
        return (canonicalQuery + "&X-Amz-Signature=" + signature, Signature(
            canonicalRequest: canonicalRequest, stringToSign: stringToSign, signedHeaders: signedHeaders, signature: signature,
            addedHeaders: []))
    }

    private func scope(_ stamp: AmzDate) -> String { "\(stamp.day)/\(region)/\(service)/aws4_request" }

    private func finish(_ canonicalRequest: String, _ stamp: AmzDate) -> (stringToSign: String, signature: String) {
        let stringToSign = [
            Self.algorithm, stamp.full, scope(stamp), FileDigest.hex(SHA256.hash(data: Data(canonicalRequest.utf8))),
        ].joined(separator: "\n")
        var key = SymmetricKey(data: Data("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [stamp.day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        let signature = FileDigest.hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key))
        return (stringToSign, signature)
    }

    /// Each segment encoded, '/' kept. A segment of dots only is sent as `%2E`: HTTP
    /// clients and URL parsers may remove `.` and `..` segments from a path before
    /// sending it, which would address another key. S3 signs the path it receives, as sent.
    public static func canonicalURI(_ path: String) -> String {
        guard !path.isEmpty else { return "/" }
        return path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            if !segment.isEmpty, segment.utf8.allSatisfy({ $0 == UInt8(ascii: ".") }) {
                return String(repeating: "%2E", count: segment.utf8.count)
            }
            return URIEncoding.encode(String(segment), keepingSlashes: false)
        }.joined(separator: "/")
    }

    /// Names and values encoded, then sorted by name and value; a name without value keeps its `=`.
    public static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        let encoded: [(name: String, value: String)] = query.map { item in
            (URIEncoding.encode(item.name, keepingSlashes: false), URIEncoding.encode(item.value, keepingSlashes: false))
        }
        let sorted = encoded.sorted { left, right in left.name == right.name ? left.value < right.value : left.name < right.name }
        return sorted.map { item in item.name + "=" + item.value }.joined(separator: "&")
    }

    /// Lower-case names, values trimmed with inner runs of spaces collapsed, repeated
    /// names joined with commas, sorted by name.
    static func canonicalHeaders(_ headers: [(name: String, value: String)]) -> (canonical: String, signed: String) {
        var merged: [String: [String]] = [:]
        for (name, value) in headers {
            let collapsed = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
            merged[name.lowercased(), default: []].append(collapsed)
        }
        let names = merged.keys.sorted()
        let canonical = names.map { "\($0):\(merged[$0]!.joined(separator: ","))\n" }.joined()
        return (canonical, names.joined(separator: ";"))
    }

    public static func sha256Hex(_ data: some DataProtocol) -> String { FileDigest.hex(SHA256.hash(data: data)) }
}

/// `20150830T123600Z` and `20150830`, in UTC whatever the process's time zone.
struct AmzDate {
    let full: String
    let day: String

    init(_ date: Date) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        day = String(format: "%04d%02d%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday))
        full = day + String(format: "T%02d%02d%02dZ", Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}

/// RFC 3986 percent-encoding as SigV4 wants it: only unreserved characters stay as they are.
public enum URIEncoding {
    /// A key from a listing asked for with `encoding-type=url`. S3 writes a space as `+`
    /// there (and a `+` as `%2B`), as a form would; moto writes `%20`. Both decode here.
    /// nil when the text is not percent-encoded UTF-8.
    public static func decodeListedKey(_ text: String) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    public static func encode(_ text: String, keepingSlashes: Bool) -> String {
        let hexDigits = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepingSlashes:
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
