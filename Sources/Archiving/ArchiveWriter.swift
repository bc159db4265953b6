import CArchive
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Streams entries into a ZIP or tar.gz file with constant memory, whatever the
/// size of the entries.
///
/// One entry is open at a time: ``beginEntry(name:size:modified:compression:)``,
/// any number of ``write(_:)-(UnsafeRawBufferPointer)`` calls, then ``finishEntry()``.
/// ``close()`` completes the archive and flushes it to disk; only a closed writer
/// has produced a valid archive. The caller writes to a temporary name and renames
/// it after `close()` returns.
///
/// Any failure after the first byte of an entry (libarchive, disk, size mismatch)
/// leaves the writer failed: later calls throw the same error, and the file must be
/// discarded. A writer released without `close()` leaves an incomplete file behind
/// (never a truncated but valid-looking one).
///
/// Entries are regular files with mode 0644 and whole-second modification times;
/// directories are implicit in the names.
///
/// Memory: one 256 KiB buffer plus libarchive's per-entry central-directory record
/// (about 100 bytes + the name for ZIP), so only the entry count, not their size,
/// makes it grow.
///
/// Not `Sendable`: use one writer from one task at a time.
public final class ArchiveWriter {
    public let path: String
    public let format: ArchiveFormat
    /// Entries finished so far.
    public private(set) var entryCount = 0

    /// Size of the chunks ``addFile(name:contentsOf:modified:compression:chunk:)`` reads and reports.
    public static let chunkSize = 256 * 1024

    private var archive: OpaquePointer?
    private var fd: Int32
    /// Set when the archive's blocks are written past the page cache.
    private let directSink: DirectFileSink?
    private let buffer: UnsafeMutableRawBufferPointer
    private var entry: OpenEntry?
    private var failure: ArchiveError?

    private struct OpenEntry {
        let name: String
        let declaredSize: Int64?
        let modified: Date
        let compression: EntryCompression
        var written: Int64 = 0
        /// Unlinked temporary file holding the data of an entry whose size was not
        /// known up front but must be written before its data (tar headers, stored ZIP entries).
        var spool: Int32?
    }

    /// zlib's own default, used when no level is given.
    public static let defaultCompressionLevel = 6
    public static let compressionLevels = 1...9

    /// Creates (or truncates) the file at `path` with mode 0600, since exports hold personal data.
    ///
    /// `compressionLevel` (1 fastest … 9 smallest) applies to every `.deflate` ZIP entry and
    /// to the gzip stream of a tar.gz; stored entries are never compressed whatever it says.
    ///
    /// `bypassPageCache` asks for direct I/O (see ``bypassesPageCache``), which a file system
    /// may not offer; the archive's bytes are the same either way. `readBack` has each
    /// direct block read back from the disk and compared as the archive is written (see
    /// ``bytesReadBack``).
    public init(
        path: String, format: ArchiveFormat, compressionLevel: Int = ArchiveWriter.defaultCompressionLevel,
        bypassPageCache: Bool = true, readBack: Bool = false
    ) throws {
        _ = processLocaleIsUTF8
        guard Self.compressionLevels.contains(compressionLevel) else {
            throw ArchiveError(
                code: .misuse, message: "compression level \(compressionLevel) is not within 1...9", archivePath: path)
        }
        self.path = path
        self.format = format
        (archive, fd, directSink) = try Self.openArchive(
            path: path, format: format, compressionLevel: compressionLevel, bypassPageCache: bypassPageCache,
            readBack: readBack)
        buffer = .allocate(byteCount: Self.chunkSize, alignment: 16)
    }

    /// True when the archive is written with direct I/O (see `DirectFileSink`): it then
    /// reaches the disk as it is written, and flushing it early gains nothing.
    public var bypassesPageCache: Bool { directSink != nil }

    /// After ``close()``: how many of the file's bytes were read back from the disk and
    /// found to be exactly what was written (every byte of it, when asked for with
    /// `readBack`, the archive was written direct and the file system took direct reads);
    /// nil when none were.
    public var bytesReadBack: Int64? {
        guard let directSink, archive == nil, fd == -1, failure == nil else { return nil }
        let bytes = directSink.bytesReadBack
        return bytes > 0 ? bytes : nil
    }

    deinit {
        releaseWithoutFinishing()
        buffer.deallocate()
    }

    // MARK: Entries

    /// Starts an entry. `size` nil means unknown: ZIP entries compressed with
    /// `.deflate` then stream with ZIP64 sizes after the data; everything else is
    /// first spooled to an unlinked temporary file beside the archive.
    public func beginEntry(name: String, size: Int64?, modified: Date, compression: EntryCompression) throws {
        try requireUsable(entryName: name)
        if let open = entry {
            throw misuse("entry \(String(reflecting: open.name)) is still open", entryName: name)
        }
        guard Self.isSafeEntryName(name) else {
            throw ArchiveError(
                code: .unsafeEntryName, message: "unsafe entry name \(String(reflecting: name))",
                archivePath: path, entryName: name)
        }
        if let size, size < 0 {
            throw misuse("negative entry size \(size)", entryName: name)
        }
        guard processLocaleIsUTF8 || name.utf8.allSatisfy({ $0 < 0x80 }) else {
            throw ArchiveError(
                code: .writeFailed, message: "non-ASCII entry names need a UTF-8 LC_CTYPE locale",
                archivePath: path, entryName: name)
        }

        var open = OpenEntry(name: name, declaredSize: size, modified: modified, compression: compression)
        if size == nil && (format == .tarGzip || compression == .store) {
            open.spool = try makeSpool(entryName: name)
        } else {
            try writeHeader(for: open, size: size)
        }
        entry = open
    }

    /// Appends bytes to the open entry.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        try requireUsable(entryName: entry?.name)
        guard var open = entry else {
            throw misuse("write with no entry open", entryName: nil)
        }
        if let declared = open.declaredSize, open.written + Int64(bytes.count) > declared {
            throw fail(ArchiveError(
                code: .sizeMismatch,
                message: "more than the declared \(declared) bytes (\(open.written + Int64(bytes.count)))",
                archivePath: path, entryName: open.name))
        }
        if let spool = open.spool {
            if let code = FileDescriptor.writeAll(spool, bytes) {
                throw fail(fileSystemError("cannot write spool file", code: code, entryName: open.name))
            }
        } else {
            try writeToArchive(bytes, entryName: open.name)
        }
        open.written += Int64(bytes.count)
        entry = open
    }

    public func write(_ data: Data) throws {
        try data.withUnsafeBytes { try write($0) }
    }

    /// Completes the open entry; throws `.sizeMismatch` if fewer bytes than declared were written.
    public func finishEntry() throws {
        try requireUsable(entryName: entry?.name)
        guard let open = entry else {
            throw misuse("finishEntry with no entry open", entryName: nil)
        }
        if let declared = open.declaredSize, open.written != declared {
            throw fail(ArchiveError(
                code: .sizeMismatch, message: "declared \(declared) bytes, got \(open.written)",
                archivePath: path, entryName: open.name))
        }
        if let spool = open.spool {
            try copySpool(spool, of: open)
            FileDescriptor.closeReportingError(spool)
            entry?.spool = nil
        }
        guard archive_write_finish_entry(archive) == ARCHIVE_OK else {
            throw fail(archiveError(.writeFailed, "cannot finish entry", entryName: open.name))
        }
        entry = nil
        entryCount += 1
    }

    /// Adds a whole entry from memory; meant for small generated files (README, manifest, JSON).
    public func addData(name: String, data: Data, modified: Date, compression: EntryCompression = .deflate) throws {
        try beginEntry(name: name, size: Int64(data.count), modified: modified, compression: compression)
        try write(data)
        try finishEntry()
    }

    /// Streams the file at `sourcePath` into a new entry in chunks of ``chunkSize``,
    /// passing each chunk to `chunk` before it is archived (to hash it, count it, or
    /// check for cancellation by throwing). `modified` nil uses the file's own time.
    /// Returns the number of bytes archived.
    @discardableResult
    public func addFile(
        name: String,
        contentsOf sourcePath: String,
        modified: Date? = nil,
        compression: EntryCompression,
        chunk: (UnsafeRawBufferPointer) throws -> Void = { _ in }
    ) throws -> Int64 {
        try requireUsable(entryName: name)
        let source = open(sourcePath, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else {
            throw fileSystemError("cannot open \(sourcePath)", code: errno, entryName: name)
        }
        defer { FileDescriptor.closeReportingError(source) }
        var info = stat()
        guard fstat(source, &info) == 0 else {
            throw fileSystemError("cannot stat \(sourcePath)", code: errno, entryName: name)
        }
        guard (UInt32(info.st_mode) & FileType.mask) == FileType.regular else {
            throw fileSystemError("\(sourcePath) is not a regular file", code: EINVAL, entryName: name)
        }
        #if canImport(Darwin)
        let fileTime = Date(timeIntervalSince1970: TimeInterval(info.st_mtimespec.tv_sec))
        #else
        let fileTime = Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec))
        #endif
        try beginEntry(
            name: name, size: Int64(info.st_size), modified: modified ?? fileTime, compression: compression)

        while true {
            let n = FileDescriptor.readSome(source, into: buffer)
            if n == 0 { break }
            if n < 0 {
                throw fail(fileSystemError("cannot read \(sourcePath)", code: errno, entryName: name))
            }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            do {
                try chunk(bytes)
            } catch {
                // The entry is half written; nothing can resume it.
                _ = fail(ArchiveError(
                    code: .writeFailed, message: "entry left incomplete: the chunk observer threw \(error)",
                    archivePath: path, entryName: name))
                throw error
            }
            try write(bytes)
        }
        // A file that shrank while being read fails here; one that grew fails in write().
        try finishEntry()
        return Int64(info.st_size)
    }

    // MARK: Completion

    /// Writes the archive's trailer (the ZIP central directory), flushes the file to
    /// disk with fsync and closes it. The file is complete only when this returns.
    public func close() throws {
        if let failure {
            releaseWithoutFinishing()
            throw failure
        }
        guard let archive else {
            throw misuse("the archive is already closed", entryName: nil)
        }
        if let open = entry {
            throw misuse("entry \(String(reflecting: open.name)) is still open", entryName: open.name)
        }
        guard archive_write_close(archive) == ARCHIVE_OK else {
            let error = fail(archiveError(.writeFailed, "cannot complete the archive", entryName: nil))
            releaseWithoutFinishing()
            throw error
        }
        archive_write_free(archive)
        self.archive = nil
        if let code = directSink?.finish() {
            let error = fail(fileSystemError("cannot write the archive", code: code, entryName: nil))
            releaseWithoutFinishing()
            throw error
        }
        // The caller renames the file into place next; without fsync a crash right
        // after the rename can leave an empty or partial file under the final name.
        // EINVAL: a pipe or device (e.g. /dev/stdout), which has nothing to sync.
        let syncError: Int32? = fsync(fd) == 0 || errno == EINVAL ? nil : errno
        let closeError = FileDescriptor.closeReportingError(fd)
        fd = -1
        if let code = syncError ?? closeError {
            throw fail(fileSystemError("cannot flush the archive to disk", code: code, entryName: nil))
        }
    }

    // MARK: Internals

    private static func openArchive(
        path: String, format: ArchiveFormat, compressionLevel: Int, bypassPageCache: Bool, readBack: Bool
    ) throws -> (OpaquePointer, Int32, DirectFileSink?) {
        let directSink = bypassPageCache ? DirectFileSink.open(path: path, mode: 0o600, readBack: readBack) : nil
        let fd = directSink?.fd ?? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw ArchiveError(
                code: .fileSystem, message: "cannot create archive: \(FileDescriptor.describe(code))",
                archivePath: path, errno: code)
        }
        guard let archive = archive_write_new() else {
            FileDescriptor.closeReportingError(fd)
            throw ArchiveError(code: .writeFailed, message: "archive_write_new failed", archivePath: path)
        }
        func check(_ status: Int32, _ what: String) throws {
            guard status == ARCHIVE_OK else {
                let detail = archive_error_string(archive).map { String(cString: $0) } ?? "unknown error"
                archive_write_free(archive)
                FileDescriptor.closeReportingError(fd)
                throw ArchiveError(code: .writeFailed, message: "\(what): \(detail)", archivePath: path)
            }
        }
        switch format {
        case .zip:
            try check(archive_write_set_format_zip(archive), "cannot select ZIP")
            // Without this libarchive sets the UTF-8 name flag only when the locale is UTF-8.
            try check(archive_write_set_format_option(archive, "zip", "hdrcharset", "UTF-8"), "cannot select UTF-8 names")
            try check(
                archive_write_set_format_option(archive, "zip", "compression-level", String(compressionLevel)),
                "cannot set the compression level")
        case .tarGzip:
            // Restricted pax: plain ustar headers, pax records only where ustar cannot hold
            // the name or size, so old tar readers still cope.
            try check(archive_write_set_format_pax_restricted(archive), "cannot select pax")
            try check(archive_write_add_filter_gzip(archive), "cannot select gzip")
            try check(
                archive_write_set_filter_option(archive, "gzip", "compression-level", String(compressionLevel)),
                "cannot set the compression level")
        }
        // No blocking: libarchive's default cuts every write into 10 KiB blocks, one
        // syscall each, which for gigabytes of stored photos costs more than the copying
        // itself. Unblocked, a stored entry's chunk goes to write(2) as it is, and the
        // bytes in the file are the same (the last block is not padded either way).
        try check(archive_write_set_bytes_per_block(archive, 0), "cannot set block size")
        try check(archive_write_set_bytes_in_last_block(archive, 1), "cannot set block size")
        if let directSink {
            // The writer keeps the sink alive for as long as libarchive may call back.
            let client = Unmanaged.passUnretained(directSink).toOpaque()
            try check(archive_write_open2(archive, client, nil, directSinkWriteCallback, nil, nil), "cannot open archive")
        } else {
            try check(archive_write_open_fd(archive, fd), "cannot open archive")
        }
        return (archive, fd, directSink)
    }

    private func writeHeader(for open: OpenEntry, size: Int64?) throws {
        if format == .zip {
            let status = open.compression == .store
                ? archive_write_zip_set_compression_store(archive)
                : archive_write_zip_set_compression_deflate(archive)
            guard status == ARCHIVE_OK else {
                throw fail(archiveError(.writeFailed, "cannot select entry compression", entryName: open.name))
            }
        }
        guard let header = archive_entry_new2(archive) else {
            throw fail(archiveError(.writeFailed, "cannot allocate entry", entryName: open.name))
        }
        defer { archive_entry_free(header) }
        archive_entry_set_pathname_utf8(header, open.name)
        archive_entry_set_filetype(header, FileType.regular)
        archive_entry_set_perm(header, 0o644)
        // ZIP keeps whole seconds only; truncating everywhere makes both formats agree.
        archive_entry_set_mtime(header, time_t(open.modified.timeIntervalSince1970.rounded(.down)), 0)
        if let size {
            archive_entry_set_size(header, size)
        } else {
            archive_entry_unset_size(header)
        }
        // A warning here means the name could not be converted: treat it as failure
        // rather than ship an archive with a mangled name.
        guard archive_write_header(archive, header) == ARCHIVE_OK else {
            throw fail(archiveError(.writeFailed, "cannot write entry header", entryName: open.name))
        }
    }

    private func writeToArchive(_ bytes: UnsafeRawBufferPointer, entryName: String) throws {
        var offset = 0
        while offset < bytes.count {
            let n = archive_write_data(archive, bytes.baseAddress! + offset, bytes.count - offset)
            guard n > 0 else {
                throw fail(archiveError(.writeFailed, "cannot write entry data", entryName: entryName))
            }
            offset += n
        }
    }

    private func makeSpool(entryName: String) throws -> Int32 {
        var template = Array("\(path).spool-XXXXXX".utf8CString)
        let spool = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard spool >= 0 else {
            throw fileSystemError("cannot create spool file", code: errno, entryName: entryName)
        }
        _ = fcntl(spool, F_SETFD, FD_CLOEXEC)
        // Unlinked at once so that a crash leaves nothing behind.
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return spool
    }

    private func copySpool(_ spool: Int32, of open: OpenEntry) throws {
        try writeHeader(for: open, size: open.written)
        guard lseek(spool, 0, SEEK_SET) == 0 else {
            throw fail(fileSystemError("cannot rewind spool file", code: errno, entryName: open.name))
        }
        var copied: Int64 = 0
        while true {
            let n = FileDescriptor.readSome(spool, into: buffer)
            if n == 0 { break }
            if n < 0 {
                throw fail(fileSystemError("cannot read spool file", code: errno, entryName: open.name))
            }
            try writeToArchive(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), entryName: open.name)
            copied += Int64(n)
        }
        guard copied == open.written else {
            throw fail(ArchiveError(
                code: .sizeMismatch, message: "spool file holds \(copied) bytes, expected \(open.written)",
                archivePath: path, entryName: open.name))
        }
    }

    private func requireUsable(entryName: String?) throws {
        if let failure { throw failure }
        guard archive != nil else {
            throw misuse("the archive is already closed", entryName: entryName)
        }
    }

    /// Records the first failure and drops the open entry's spool file.
    private func fail(_ error: ArchiveError) -> ArchiveError {
        if failure == nil { failure = error }
        if let spool = entry?.spool {
            FileDescriptor.closeReportingError(spool)
            entry?.spool = nil
        }
        return error
    }

    /// Frees libarchive without writing a trailer, so an abandoned archive cannot pass
    /// for a complete one.
    private func releaseWithoutFinishing() {
        if let spool = entry?.spool {
            FileDescriptor.closeReportingError(spool)
            entry?.spool = nil
        }
        if let archive {
            archive_write_fail(archive)
            archive_write_free(archive)
            self.archive = nil
        }
        // No block may still be on its way to the descriptor when it is closed (and its number reused).
        directSink?.waitForWrites()
        if fd >= 0 {
            FileDescriptor.closeReportingError(fd)
            fd = -1
        }
    }

    private func archiveError(_ code: ArchiveError.Code, _ what: String, entryName: String?) -> ArchiveError {
        // A failed direct write reaches libarchive only as -1; the errno is the sink's.
        if let written = directSink?.writeError {
            return fileSystemError("\(what): cannot write the archive", code: written, entryName: entryName)
        }
        let detail = archive_error_string(archive).map { String(cString: $0) } ?? "unknown libarchive error"
        // libarchive also uses negative pseudo-errnos (ARCHIVE_ERRNO_MISC); keep real ones only.
        let number = archive_errno(archive)
        return ArchiveError(
            code: code, message: "\(what): \(detail)", archivePath: path, entryName: entryName,
            errno: number > 0 ? number : nil)
    }

    private func fileSystemError(_ what: String, code: Int32, entryName: String?) -> ArchiveError {
        if let offset = directSink?.mismatchOffset {
            return ArchiveError(
                code: .fileSystem,
                message: "\(what): reading it back from the disk did not return what was written, in the block at offset \(offset)",
                archivePath: path, entryName: entryName, errno: code)
        }
        return ArchiveError(
            code: .fileSystem, message: "\(what): \(FileDescriptor.describe(code))",
            archivePath: path, entryName: entryName, errno: code)
    }

    private func misuse(_ message: String, entryName: String?) -> ArchiveError {
        ArchiveError(code: .misuse, message: message, archivePath: path, entryName: entryName)
    }
}

@available(*, unavailable)
extension ArchiveWriter: Sendable {}
