/// A failure while writing or reading an archive.
///
/// `message` is libarchive's own text when libarchive reported the failure.
public struct ArchiveError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String {
            case unsafeEntryName
            case sizeMismatch
            case misuse
            case fileSystem
            case writeFailed
            case readFailed
            case entryTooLarge
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The entry name failed ``ArchiveWriter/isSafeEntryName(_:)``. Nothing was written for it.
        public static var unsafeEntryName: Code { Code(.unsafeEntryName) }
        /// An entry received more or fewer bytes than its declared size, or a source file
        /// changed size while it was being archived.
        public static var sizeMismatch: Code { Code(.sizeMismatch) }
        /// Calls out of order (data with no entry open, closing with an entry open, use after close).
        public static var misuse: Code { Code(.misuse) }
        /// Opening, reading, writing or syncing a file failed; `errno` says why.
        public static var fileSystem: Code { Code(.fileSystem) }
        /// libarchive refused to write.
        public static var writeFailed: Code { Code(.writeFailed) }
        /// libarchive could not read the archive: unknown format, corrupt or truncated data.
        public static var readFailed: Code { Code(.readFailed) }
        /// An entry is larger than the limit the caller gave for reading it into memory.
        public static var entryTooLarge: Code { Code(.entryTooLarge) }

        public var description: String { value.rawValue }
    }

    public let code: Code
    public let message: String
    /// The archive file involved.
    public let archivePath: String
    /// The entry being written or read, if any.
    public let entryName: String?
    /// The operating-system error number, if one was reported.
    public let errno: Int32?

    public init(code: Code, message: String, archivePath: String, entryName: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.archivePath = archivePath
        self.entryName = entryName
        self.errno = errno
    }

    public var description: String {
        var text = "ArchiveError.\(code): \(message)"
        if let entryName { text += " [entry: \(entryName)]" }
        text += " [archive: \(archivePath)]"
        if let errno, errno != 0 { text += " [errno: \(errno)]" }
        return text
    }
}
