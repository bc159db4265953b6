/// The container an export is delivered in.
public enum ArchiveFormat: String, Sendable, CaseIterable {
    /// ZIP with UTF-8 names; ZIP64 records appear only when sizes or counts need them.
    case zip
    /// POSIX pax tar, gzip-compressed.
    case tarGzip = "tar.gz"

    /// File name extension without the leading dot: `zip` or `tar.gz`.
    public var fileExtension: String { rawValue }
}

/// How one entry's bytes are stored.
public enum EntryCompression: Sendable {
    /// Compressed; for text such as JSON and CSV.
    case deflate
    /// Copied byte for byte; for content that is already compressed, such as photos.
    /// tar.gz compresses the whole stream, so there this is the same as `deflate`.
    case store
}
