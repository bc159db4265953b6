import Foundation
import Lifecycle

/// Where the blobs live: `s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1`.
///
/// Without `endpoint` the bucket is AWS's, addressed as `https://bucket.s3.<region>.amazonaws.com`.
/// With one (MinIO, Ceph, moto, R2…) requests use path-style addresses,
/// `<endpoint>/<bucket>/<key>`, which every S3-compatible server understands.
public struct S3Location: Sendable, Equatable {
    public var bucket: String
    /// Key prefix inside the bucket, without leading or trailing `/`; empty for the whole bucket.
    public var prefix: String
    public var region: String
    /// `scheme://host[:port]`, nil for AWS itself.
    public var endpoint: URL?

    public static let scheme = "s3"
    /// `s3://*?endpoint=…`: every first folder of a key is a bucket of its own, the rest of
    /// the key the object's (Supabase Storage's S3 protocol: one bucket per Storage bucket).
    public static let bucketPerFolder = "*"
    static let parameters: Set<String> = ["endpoint", "region"]

    public init(bucket: String, prefix: String = "", region: String = "us-east-1", endpoint: URL? = nil) {
        self.bucket = bucket
        self.prefix = prefix
        self.region = region
        self.endpoint = endpoint
    }

    /// True for text meant as an S3 location rather than a directory.
    public static func looksLikeLocation(_ text: String) -> Bool {
        text.lowercased().hasPrefix("\(scheme)://")
    }

    /// `AWS_REGION` / `AWS_DEFAULT_REGION` give the region when the location names none.
    public init(parsing text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let example = "s3://my-bucket/lifecycle?endpoint=http://127.0.0.1:9000&region=us-east-1"
        guard let components = URLComponents(string: text), components.scheme?.lowercased() == Self.scheme else {
            throw S3ConfigurationError("blob location '\(text)' is not an S3 URL: write it as \(example)")
        }
        guard let bucket = components.host, !bucket.isEmpty else {
            throw S3ConfigurationError("blob location '\(text)' names no bucket: write it as \(example)")
        }
        guard Self.isValidBucketName(bucket) || bucket == Self.bucketPerFolder else {
            throw S3ConfigurationError("'\(bucket)' in '\(text)' is not a valid S3 bucket name: use 3–63 lower-case letters, digits, '-' or '.', starting and ending with a letter or digit")
        }
        if components.user != nil || components.password != nil {
            throw S3ConfigurationError("blob location '\(text)' carries credentials: remove them and set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead")
        }
        if components.port != nil {
            throw S3ConfigurationError("blob location '\(text)' has a port after the bucket name: the server goes in ?endpoint=http://host:port")
        }
        let path = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        if bucket == Self.bucketPerFolder, !path.isEmpty {
            throw S3ConfigurationError("blob location '\(text)': with one bucket per folder (s3://*) the key's first folder is the bucket, so there is no prefix: write s3://*?endpoint=URL")
        }
        if !path.isEmpty, !BlobKey.isSafe(path) {
            throw S3ConfigurationError("the key prefix '\(path)' in '\(text)' is not allowed: use segments of letters, digits, '.', '_' or '-' separated by '/'")
        }
        var values: [String: String] = [:]
        for item in components.queryItems ?? [] {
            guard Self.parameters.contains(item.name) else {
                throw S3ConfigurationError("unknown parameter '\(item.name)' in blob location '\(text)': only endpoint and region are understood")
            }
            guard values[item.name] == nil else {
                throw S3ConfigurationError("parameter '\(item.name)' appears twice in blob location '\(text)'")
            }
            values[item.name] = item.value ?? ""
        }
        let region = values["region"] ?? environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"] ?? "us-east-1"
        guard !region.isEmpty, region.unicodeScalars.allSatisfy({ CharacterSet.lowercaseLetters.contains($0) || CharacterSet.decimalDigits.contains($0) || $0 == "-" }),
              region.unicodeScalars.allSatisfy(\.isASCII) else {
            throw S3ConfigurationError("region '\(region)' in blob location '\(text)' is not a region name like us-east-1")
        }
        var endpoint: URL?
        if let raw = values["endpoint"] {
            // A path is where the server answers S3 (Supabase Storage: /storage/v1/s3); it
            // begins every request's path, and is signed with it.
            let endpointPath = URLComponents(string: raw)?.path.trimmingCharacters(in: CharacterSet(charactersIn: "/")) ?? ""
            guard let parsed = URLComponents(string: raw), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  let host = parsed.host, !host.isEmpty, parsed.query == nil, parsed.fragment == nil,
                  endpointPath.isEmpty || BlobKey.isSafe(endpointPath), (parsed.port ?? 1) >= 1, (parsed.port ?? 1) <= 65_535 else {
                throw S3ConfigurationError("endpoint '\(raw)' in blob location '\(text)' must be http:// or https:// with a host, an optional port (1 to 65535) and an optional path of letters, digits, '.', '_' or '-', like http://127.0.0.1:9000 or https://ref.supabase.co/storage/v1/s3")
            }
            endpoint = URL(string: "\(scheme)://\(parsed.percentEncodedHost ?? host)\(parsed.port.map { ":\($0)" } ?? "")\(endpointPath.isEmpty ? "" : "/" + endpointPath)")
        }
        self.init(bucket: bucket, prefix: path, region: region, endpoint: endpoint)
    }

    /// S3's naming rules for new buckets; addressing stays safe because the name goes into a host name or a path.
    public static func isValidBucketName(_ name: String) -> Bool {
        guard (3...63).contains(name.count), let first = name.unicodeScalars.first, let last = name.unicodeScalars.last else { return false }
        func alphanumeric(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) }
        return alphanumeric(first) && alphanumeric(last) && !name.contains("..")
            && name.unicodeScalars.allSatisfy { alphanumeric($0) || $0 == "-" || $0 == "." }
    }

    /// The location as it is written on a command line, for messages.
    public var description: String {
        var text = "s3://\(bucket)" + (prefix.isEmpty ? "" : "/\(prefix)")
        var parameters: [String] = []
        if let endpoint { parameters.append("endpoint=\(endpoint.absoluteString)") }
        parameters.append("region=\(region)")
        text += "?" + parameters.joined(separator: "&")
        return text
    }
}
