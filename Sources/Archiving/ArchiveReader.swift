import CArchive
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What an entry's header says.
public struct ArchiveEntryInfo: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case file, directory, symbolicLink, other
    }

    public let name: String
    /// The size recorded in the header, if any.
    public let size: Int64?
    public let modified: Date?
    public let kind: Kind
    /// Permission bits (for example 0o644).
    public let permissions: UInt32
}

/// The data of the entry currently being visited, read in chunks straight from the
/// archive. It can only be used inside the visiting closure and read once; data the
/// closure does not read is skipped.
public struct ArchiveEntryContent: ~Copyable {
    fileprivate let archive: OpaquePointer
    fileprivate let source: any ArchiveSource
    fileprivate let buffer: UnsafeMutableRawBufferPointer
    fileprivate let archivePath: String
    fileprivate let entryName: String

    /// Passes the entry's data to `body` chunk by chunk (at most 256 KiB each) and
    /// returns the number of bytes read. Throws `.readFailed` on corrupt or truncated
    /// data, including a checksum mismatch.
    @discardableResult
    public func forEachChunk(_ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int64 {
        var total: Int64 = 0
        while true {
            let n = archive_read_data(archive, buffer.baseAddress, buffer.count)
            if n == 0 { return total }
            guard n > 0 else {
                throw ArchiveReader.failure(
                    archive, source, "cannot read entry data", archivePath: archivePath, entryName: entryName)
            }
            total += Int64(n)
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
    }

    /// Reads the entry's next bytes into `destination`: the count, or 0 at the end of the
    /// entry. For callers that keep more than one buffer in flight (hashing one on another
    /// thread while the next is read), which the shared buffer of ``forEachChunk(_:)`` cannot.
    public func read(into destination: UnsafeMutableRawBufferPointer) throws -> Int {
        let n = archive_read_data(archive, destination.baseAddress, destination.count)
        guard n >= 0 else {
            throw ArchiveReader.failure(
                archive, source, "cannot read entry data", archivePath: archivePath, entryName: entryName)
        }
        return n
    }

    /// Reads the rest of the entry only to have it checked, and returns its byte count.
    /// libarchive lends its own buffers, so nothing is copied. A ZIP entry's CRC-32 is
    /// checked as its end is read; a tar.gz has no per-entry checksum, and its stream's
    /// CRC-32 is checked only once ``ArchiveReader/forEachEntry(_:)`` has read it to the end.
    public func readToEnd() throws -> Int64 {
        var total: Int64 = 0
        var block: UnsafeRawPointer?
        var size = 0
        var offset: la_int64_t = 0
        while true {
            let status = archive_read_data_block(archive, &block, &size, &offset)
            if status == ARCHIVE_EOF { return total }
            // A CRC mismatch is ARCHIVE_WARN or ARCHIVE_FAILED depending on the libarchive
            // release: anything short of OK fails.
            guard status == ARCHIVE_OK else {
                throw ArchiveReader.failure(
                    archive, source, "cannot read entry data", archivePath: archivePath, entryName: entryName)
            }
            // Export entries are never sparse: a hole is damage.
            guard offset == total else {
                throw ArchiveError(
                    code: .readFailed, message: "entry data has a hole at byte \(total)", archivePath: archivePath,
                    entryName: entryName)
            }
            total += Int64(size)
        }
    }

    /// Reads the whole entry into memory; throws `.entryTooLarge` beyond `maxBytes`.
    /// For small entries such as a manifest.
    public func readData(maxBytes: Int) throws -> Data {
        var data = Data()
        try forEachChunk { chunk in
            guard data.count + chunk.count <= maxBytes else {
                throw ArchiveError(
                    code: .entryTooLarge, message: "entry is larger than \(maxBytes) bytes",
                    archivePath: archivePath, entryName: entryName)
            }
            data.append(contentsOf: chunk)
        }
        return data
    }
}

/// How a reader reads the file (a tar.gz is always read whole, in order).
public enum ArchiveReadPattern: Sendable {
    /// Every entry's data is read: large blocks, read ahead.
    case whole
    /// Most entries' data is skipped: small blocks, read as they are needed.
    case headers
}

/// Streams through a ZIP, tar or tar.gz file (format detected from the content),
/// one entry at a time with constant memory. Used to verify an export after it is written.
public struct ArchiveReader: Sendable {
    public let path: String
    public let pattern: ArchiveReadPattern

    public init(path: String, pattern: ArchiveReadPattern = .whole) {
        self.path = path
        self.pattern = pattern
    }

    /// Calls `body` for every entry in archive order. Corrupt, truncated or
    /// unrecognised archives throw `.readFailed`; errors thrown by `body` stop the
    /// iteration and propagate.
    public func forEachEntry(_ body: (ArchiveEntryInfo, borrowing ArchiveEntryContent) throws -> Void) throws {
        _ = processLocaleIsUTF8
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw fileSystemError("cannot open archive", code: errno) }
        defer { FileDescriptor.closeReportingError(fd) }
        var magic: [UInt8] = [0, 0]
        let magicCount = pread(fd, &magic, 2, 0)
        guard magicCount >= 0 else { throw fileSystemError("cannot read archive", code: errno) }

        // Only what the export writes: a smaller attack surface than support_format_all.
        // gzip is decompressed by GzipSource (trailer checks); ZIP is read through its
        // central directory only, so a ZIP cut short before it is refused instead of
        // read as far as it goes.
        let gzip: GzipSource?
        let source: any ArchiveSource
        if magicCount == 2 && magic == [0x1F, 0x8B] {
            gzip = GzipSource(fd: fd)
            source = gzip!
        } else {
            gzip = nil
            source = RawFileSource(fd: fd, pattern: pattern)
        }
        guard let archive = archive_read_new() else {
            throw ArchiveError(code: .readFailed, message: "archive_read_new failed", archivePath: path)
        }
        // Freed inside the source's lifetime: libarchive holds a pointer to it.
        try withExtendedLifetime(source) {
            defer { archive_read_free(archive) }
            archive_read_support_format_tar(archive)
            if gzip == nil {
                archive_read_support_format_zip_seekable(archive)
            }
            guard source.open(archive) == ARCHIVE_OK else {
                throw Self.failure(archive, source, "cannot read the start of the archive", archivePath: path, entryName: nil)
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ArchiveWriter.chunkSize, alignment: 16)
            defer { buffer.deallocate() }
            var previousName: String?
            while true {
                var header: OpaquePointer?
                let status = archive_read_next_header(archive, &header)
                if status == ARCHIVE_EOF { break }
                guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let header else {
                    let after = previousName.map { " after entry \(String(reflecting: $0))" } ?? ""
                    throw Self.failure(
                        archive, source, "cannot read entry header\(after)", archivePath: path, entryName: nil)
                }
                let info = Self.info(of: header)
                previousName = info.name
                let content = ArchiveEntryContent(
                    archive: archive, source: source, buffer: buffer, archivePath: path, entryName: info.name)
                try body(info, content)
            }
            // libarchive stops at the tar end marker; the gzip trailer after it still needs checking.
            if let gzip, !gzip.readToEnd() {
                throw Self.failure(
                    archive, source, "cannot read the end of the archive", archivePath: path, entryName: previousName)
            }
        }
    }

    public static func forEachEntry(
        path: String, pattern: ArchiveReadPattern = .whole, _ body: (ArchiveEntryInfo, borrowing ArchiveEntryContent) throws -> Void
    ) throws {
        try ArchiveReader(path: path, pattern: pattern).forEachEntry(body)
    }

    private static func info(of header: OpaquePointer) -> ArchiveEntryInfo {
        let name = (archive_entry_pathname_utf8(header) ?? archive_entry_pathname(header))
            .map { String(cString: $0) } ?? ""
        let kind: ArchiveEntryInfo.Kind
        switch archive_entry_filetype(header) & FileType.mask {
        case FileType.regular: kind = .file
        case FileType.directory: kind = .directory
        case FileType.symbolicLink: kind = .symbolicLink
        default: kind = .other
        }
        let modified = archive_entry_mtime_is_set(header) != 0
            ? Date(timeIntervalSince1970: TimeInterval(archive_entry_mtime(header))
                + TimeInterval(archive_entry_mtime_nsec(header)) / 1e9)
            : nil
        return ArchiveEntryInfo(
            name: name,
            size: archive_entry_size_is_set(header) != 0 ? archive_entry_size(header) : nil,
            modified: modified,
            kind: kind,
            permissions: UInt32(archive_entry_perm(header)) & 0o7777)
    }

    /// The source's own message wins: when a callback failed, libarchive only knows that it did.
    fileprivate static func failure(
        _ archive: OpaquePointer, _ source: any ArchiveSource, _ what: String, archivePath: String,
        entryName: String?
    ) -> ArchiveError {
        let detail = source.failure
            ?? archive_error_string(archive).map { String(cString: $0) }
            ?? "unknown libarchive error"
        // libarchive also uses negative pseudo-errnos (ARCHIVE_ERRNO_MISC); keep real ones only.
        let number = source.failure == nil ? archive_errno(archive) : 0
        return ArchiveError(
            code: .readFailed, message: "\(what): \(detail)", archivePath: archivePath,
            entryName: entryName, errno: number > 0 ? number : nil)
    }

    private func fileSystemError(_ what: String, code: Int32) -> ArchiveError {
        ArchiveError(
            code: .fileSystem, message: "\(what): \(FileDescriptor.describe(code))", archivePath: path, errno: code)
    }
}
