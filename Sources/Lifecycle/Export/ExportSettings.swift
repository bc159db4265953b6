import Archiving
import Foundation
import JobRunner

/// The `export:` section of `Jobs/policies/export.yaml`, with documented defaults.
public struct ExportSettings: Sendable, Equatable {
    /// Completed exports allowed per account within `rateLimitHours` (default 1).
    public var rateLimitCount = 1
    /// The rate-limit window (default 24 h).
    public var rateLimitHours = 24
    /// How long the download link works after the archive is written (default 7 days).
    public var linkLifetimeDays = 7
    /// Used when `export` is run without `--format` (default zip).
    public var defaultFormat: ArchiveFormat = .zip
    /// Where download links point; the app's download endpoint verifies them.
    public var linkBaseURL = "https://example.invalid/exports"
    /// A sendmail-compatible command (message on stdin, `-t` reads the recipient from it);
    /// empty leaves notifications in the outbox for the app to deliver.
    public var sendmailCommand: [String] = []
    /// The HMAC key file when `LIFECYCLE_SIGNING_KEY` / `LIFECYCLE_SIGNING_KEY_FILE` are unset;
    /// relative paths are relative to the Jobs directory.
    public var signingKeyFile: String?
    /// Rows read per database round trip while streaming a table (default 2,000).
    public var batchRows = 5_000
    /// Caps how fast an export writes its archive, in MB/s, so a large export does not
    /// starve the database's disk; 0 (default) is no cap.
    public var throttleMBPerSecond = 0
    /// zlib level for the deflated entries (JSON, CSV, README, manifest) and for tar.gz:
    /// 1 is fastest, 9 smallest. Photos are stored as they are whatever it says. Default 2:
    /// on journal-style text about 2.5× faster than zlib's usual 6 for a file about 20 % larger.
    public var compressionLevel = 2

    public static let sectionName = "export"
    static let keys: Set<String> = [
        "rate_limit_count", "rate_limit_hours", "link_lifetime_days", "default_format", "link_base_url",
        "sendmail_command", "signing_key_file", "batch_rows", "throttle_mb_per_second", "compression_level",
    ]

    public init() {}

    public init(policies: PolicyBook) throws {
        let section = try policies.section(Self.sectionName)
        do {
            try section.requireOnly(Self.keys)
            rateLimitCount = try section.int("rate_limit_count", default: rateLimitCount, in: 1...1_000)
            rateLimitHours = try section.int("rate_limit_hours", default: rateLimitHours, in: 0...8_760)
            linkLifetimeDays = try section.int("link_lifetime_days", default: linkLifetimeDays, in: 1...365)
            let format = try section.string("default_format", default: defaultFormat.rawValue) ?? defaultFormat.rawValue
            guard let parsed = ArchiveFormat(rawValue: format) else {
                throw JobRunnerError.invalidPolicy("\(section.file): export.default_format must be zip or tar.gz (got '\(format)')")
            }
            defaultFormat = parsed
            linkBaseURL = try section.string("link_base_url", default: linkBaseURL) ?? linkBaseURL
            while linkBaseURL.hasSuffix("/") { linkBaseURL.removeLast() }
            guard let scheme = URLComponents(string: linkBaseURL)?.scheme, !scheme.isEmpty, !linkBaseURL.contains("?") else {
                throw JobRunnerError.invalidPolicy("\(section.file): export.link_base_url must be an absolute URL without a query, like https://example.com/exports")
            }
            sendmailCommand = (try section.string("sendmail_command", default: "") ?? "")
                .split(whereSeparator: \.isWhitespace).map(String.init)
            signingKeyFile = try section.string("signing_key_file", default: nil).flatMap { $0.isEmpty ? nil : $0 }
            batchRows = try section.int("batch_rows", default: batchRows, in: 1...100_000)
            throttleMBPerSecond = try section.int("throttle_mb_per_second", default: throttleMBPerSecond, in: 0...100_000)
            compressionLevel = try section.int(
                "compression_level", default: compressionLevel,
                in: ArchiveWriter.compressionLevels.lowerBound...ArchiveWriter.compressionLevels.upperBound)
        } catch let error as JobRunnerError {
            throw LifecycleError(.badInput, error.message)
        }
    }

    /// `zip` or `tar.gz`, as `--format` takes them.
    public static func format(named text: String) throws -> ArchiveFormat {
        guard let format = ArchiveFormat(rawValue: text.lowercased()) else {
            throw LifecycleError(.badInput, "unknown archive format '\(text)': use zip or tar.gz")
        }
        return format
    }

    public var linkLifetime: TimeInterval { TimeInterval(linkLifetimeDays) * 86_400 }
    public var rateLimitWindow: TimeInterval { TimeInterval(rateLimitHours) * 3_600 }
}

/// Where the download-link key comes from, first match wins:
/// `LIFECYCLE_SIGNING_KEY` (the key itself), `LIFECYCLE_SIGNING_KEY_FILE`, then
/// `export.signing_key_file` in the policy. A key is at least 32 bytes; a file holding
/// it must not be readable by group or others.
public enum SigningKeySource {
    public static let environmentKey = "LIFECYCLE_SIGNING_KEY"
    public static let environmentFile = "LIFECYCLE_SIGNING_KEY_FILE"
    public static var minimumBytes: Int { SecretStrength.minimumBytes }

    /// `fileOption`: how the command at hand spells a key-file option (`--signing-key-file`),
    /// nil when it has none, so the advice names only what that command accepts.
    public static func load(
        settings: ExportSettings, jobsDirectory: String, fileOption: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> LinkSigner {
        if let key = environment[environmentKey], !key.isEmpty {
            return try signer(Data(key.utf8), from: "\(environmentKey)")
        }
        let file: String
        if let path = environment[environmentFile], !path.isEmpty {
            file = path
        } else if let path = settings.signingKeyFile {
            file = (path as NSString).isAbsolutePath ? path : (jobsDirectory as NSString).appendingPathComponent(path)
        } else {
            throw LifecycleError(.unavailable, """
                no signing key for download links: set \(environmentKey) (at least \(minimumBytes) characters, \
                e.g. from `openssl rand -hex 32`), or \(environmentFile)\(fileOption.map { " / \($0)" } ?? "") / \
                export.signing_key_file in policies/export.yaml to a file holding one (mode 0600)
                """)
        }
        var info = stat()
        guard stat(file, &info) == 0 else {
            throw LifecycleError(.unavailable, "signing key file \(file): \(String(cString: strerror(errno))); create it with `openssl rand -hex 32 > \(file) && chmod 600 \(file)`")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw LifecycleError(.unavailable, "signing key file \(file) is readable by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(file)`")
        }
        if let problem = SecretStrength.ownerProblem(info) { throw LifecycleError(.unavailable, "signing key file \(file): \(problem)") }
        guard let contents = FileManager.default.contents(atPath: file) else {
            throw LifecycleError(.unavailable, "signing key file \(file) cannot be read")
        }
        // Trailing newlines from `echo` or `openssl rand -hex` are not part of the key.
        var key = contents
        while let last = key.last, last == 0x0A || last == 0x0D || last == 0x20 { key.removeLast() }
        return try signer(key, from: file)
    }

    private static func signer(_ key: Data, from source: String) throws -> LinkSigner {
        if let problem = SecretStrength.problem(key) {
            throw LifecycleError(.unavailable, "the signing key in \(source) is too weak to sign links: \(problem); \(SecretStrength.advice)")
        }
        return LinkSigner(key: key)
    }
}
