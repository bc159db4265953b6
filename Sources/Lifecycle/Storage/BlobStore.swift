import Crypto
import Foundation

public struct BlobInfo: Sendable, Equatable {
    public var key: String
    public var size: Int64

    public init(key: String, size: Int64) {
        self.key = key
        self.size = size
    }
}

public struct BlobStoreError: Error, CustomStringConvertible, Sendable {
    private enum Reason: Sendable { case failed, outOfSpace, notWritable, notFound, invalidKey, unsafePath }

    public let message: String
    private let reason: Reason
    /// For `isUnsafePath`: the part of the key that is a symbolic link, when it was found.
    public let link: String?

    public init(_ message: String) {
        self.init(message, reason: .failed)
    }

    private init(_ message: String, reason: Reason, link: String? = nil) {
        self.message = message
        self.reason = reason
        self.link = link
    }

    public var description: String { message }

    /// The disk is full or failing: temporary, worth running again once space is freed.
    public var isOutOfSpace: Bool { reason == .outOfSpace }
    /// The store's location refuses writes (read-only, wrong owner): the operator must fix it.
    public var isNotWritable: Bool { reason == .notWritable }
    /// The blob is not there (deleted, or never stored).
    public var isNotFound: Bool { reason == .notFound }
    /// The key is not one this store can hold (see `BlobStore.keyProblem`).
    public var isInvalidKey: Bool { reason == .invalidKey }
    /// The key's path crosses a symbolic link in a file-system store: the file may be
    /// outside the store or another user's, so it is neither read nor deleted.
    public var isUnsafePath: Bool { reason == .unsafePath }

    /// A failed file-system call on a local store, classified by its errno.
    public static func fileSystem(_ code: Int32, _ message: String) -> Self {
        let text = "\(message): \(String(cString: strerror(code)))"
        switch code {
        case ENOSPC, EDQUOT, EFBIG, EIO: return .init(text, reason: .outOfSpace)
        case EACCES, EPERM, EROFS: return .init(text, reason: .notWritable)
        default: return .init(text, reason: .failed)
        }
    }

    /// A key the store cannot hold, and why. The key is shown with control characters
    /// escaped, so the message itself cannot move an operator's cursor.
    public static func invalidKey(_ key: String, _ problem: String) -> Self {
        .init("blob key \(BlobKey.quoted(key)) is not allowed: \(problem)", reason: .invalidKey)
    }
    public static func notFound(_ key: String) -> Self { .init("blob '\(key)' does not exist", reason: .notFound) }
    /// `link`: the part of the key that is a symbolic link, when it could be found.
    public static func unsafePath(_ key: String, link: String?) -> Self {
        let through = link.map { "\(BlobKey.quoted($0)) is a symbolic link" } ?? "it passes through a symbolic link"
        return .init(
            "blob key \(BlobKey.quoted(key)) is not a safe path: \(through), and the blob store follows none, "
                + "so a file it reaches may be outside the store or another user's; replace the link with the folder itself (or a bind mount)",
            reason: .unsafePath, link: link)
    }
}

/// Photos and export archives. Keys look like `accounts/<id>/photos/<photo-id>`;
/// everything of one account lives under `accounts/<id>/`, so purge can list
/// that prefix and require it empty.
public protocol BlobStore: Sendable {
    /// Stores a local file under `key`, complete or not at all (temp + rename on disk,
    /// a single or multipart upload remotely). `moving` lets a local store rename instead of copy.
    func put(key: String, fromFile path: String, moving: Bool) async throws -> BlobInfo
    func put(key: String, data: Data) async throws -> BlobInfo
    func info(key: String) async throws -> BlobInfo?
    /// Streams the blob in chunks; memory stays bounded whatever its size.
    func read(key: String, chunkSize: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) async throws
    /// Keys in lexical order, starting after `after`, at most `limit` of them.
    func list(prefix: String, after: String?, limit: Int) async throws -> [BlobInfo]
    /// Deleting a key that does not exist is not an error: purge may run twice.
    func delete(keys: [String]) async throws
    /// Makes the blob at `from` available at `to` and removes `from` (an archive's publish step).
    /// Run again after it succeeded (source gone, destination there), it does nothing.
    func move(from: String, to: String) async throws
    /// How long a download URL the store signs itself may last; nil when it signs none
    /// (the filesystem), and export links are then the app's own HMAC links.
    var downloadURLLifetimeLimit: TimeInterval? { get }
    /// A URL that downloads the blob without further credentials until `expiresAt`, signed
    /// by the store; nil when the store signs none. The same key and expiry give the same URL,
    /// so a rerun of an export's link step sends the user the link it sent before.
    func downloadURL(key: String, expiresAt: Date, now: Date) throws -> String?
    /// Why this store cannot hold `key`, or nil when it can. Every operation refuses such
    /// a key with `BlobStoreError.invalidKey`; callers holding keys an app wrote ask first
    /// to report them rather than fail.
    func keyProblem(_ key: String) -> String?
}

extension BlobStore {
    public var downloadURLLifetimeLimit: TimeInterval? { nil }
    public func downloadURL(key: String, expiresAt: Date, now: Date) throws -> String? { nil }
    public func keyProblem(_ key: String) -> String? { BlobKey.problem(key) }

    public func readAll(key: String) async throws -> Data {
        var data = Data()
        try await read(key: key, chunkSize: 1 << 20) { chunk in data.append(contentsOf: chunk) }
        return data
    }
}

public enum BlobKey {
    /// S3's limit, and so every store's: a key is at most this many bytes of UTF-8.
    public static let maximumBytes = 1_024
    /// NAME_MAX: the longest file name (one segment of a key) a file system stores.
    public static let maximumSegmentBytes = 255

    /// Ids that become key segments and archive names must be this safe: imported data
    /// comes from other systems, and a `..` in an id must never become a path.
    public static func isSafeSegment(_ segment: some StringProtocol) -> Bool {
        guard !segment.isEmpty, segment.count <= 128, segment != ".", segment != ".." else { return false }
        return segment.unicodeScalars.allSatisfy { scalar in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": return true
            default: return false
            }
        }
    }

    /// A key of the kind lifecycle makes itself: safe segments only. Keys an app's rows
    /// name need only be `isValid`.
    public static func isSafe(_ key: String) -> Bool {
        guard !key.isEmpty, key.utf8.count <= maximumBytes else { return false }
        return key.split(separator: "/", omittingEmptySubsequences: false).allSatisfy(isSafeSegment)
    }

    /// Whether every store can be asked about `key` (see `problem`).
    public static func isValid(_ key: String) -> Bool { problem(key) == nil }

    /// What S3 allows is the rule: 1 to 1,024 bytes of UTF-8, any characters (Supabase
    /// Storage names objects with spaces and accents). A store may refuse more
    /// (`BlobStore.keyProblem`).
    public static func problem(_ key: String) -> String? {
        if key.isEmpty { return "it is empty" }
        let bytes = key.utf8.count
        if bytes > maximumBytes { return "it is \(bytes) bytes of UTF-8, more than the \(maximumBytes) a storage key may have" }
        return nil
    }

    /// Why `key` cannot name a file below a folder, or nil. Anything else maps to a path
    /// byte for byte (Linux file names are bytes: NFC and NFD spellings stay two files).
    public static func fileSystemProblem(_ key: String) -> String? {
        if let problem = problem(key) { return problem }
        if key.utf8.first == UInt8(ascii: "/") { return "it starts with '/', an absolute path" }
        if let control = key.unicodeScalars.first(where: isControl) {
            return "it contains the control character U+\(String(control.value, radix: 16, uppercase: true).leftPadded(to: 4))"
        }
        let segments = key.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            let text = String(decoding: segment, as: UTF8.self)
            switch text.utf8.count {
            // `a//b`, `a/./b` and `a/` name the same file as `a/b` and `a`: two keys would
            // share one blob, and deleting one would delete the other.
            case 0: return "it has an empty segment ('//' or a '/' at the end), which a file system reads as another path"
            case 1 where segment.first == UInt8(ascii: "."):
                return "it has a '.' segment, which a file system reads as another path"
            case 2 where segment.allSatisfy({ $0 == UInt8(ascii: ".") }):
                return "it has a '..' segment, which would leave the store's folder"
            case (maximumSegmentBytes + 1)...:
                return "its segment '\(text.prefix(40))…' is \(text.utf8.count) bytes, more than the \(maximumSegmentBytes) a file name may have"
            default:
                if index == 0, text == FileSystemBlobStore.incomingFolder {
                    return "'\(FileSystemBlobStore.incomingFolder)/' is where the store keeps writes in flight"
                }
            }
        }
        return nil
    }

    /// C0, DEL and C1.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.isControlCharacter }

    /// The key in double quotes, control characters and quotes escaped, for messages.
    public static func quoted(_ key: String) -> String { key.quotedExactly }

    /// The key segment for an id: the id itself when it is a safe segment that does not
    /// begin with `sha256-`, else `sha256-` and 40 hex digits of its digest, the same on
    /// every run. A derived id (a profile photo's `<account>.profile`) can be longer than a
    /// segment may be, an app's key can be an email. Safe ids that begin with `sha256-`
    /// are hashed too: left as they are, an id that is literally another id's digest would
    /// share its folder (`accounts/<segment>/`, where export archives live).
    public static func segment(forID id: String) -> String {
        if isSafeSegment(id), !id.hasPrefix(hashedPrefix) { return id }
        return hashedPrefix + FileDigest.hex(SHA256.hash(data: Data(id.utf8))).prefix(40)
    }

    static let hashedPrefix = "sha256-"

    public static func accountPrefix(_ accountID: String) -> String { "accounts/\(accountID)/" }
    public static func photo(accountID: String, photoID: String) -> String {
        "accounts/\(accountID)/photos/\(segment(forID: photoID))"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
