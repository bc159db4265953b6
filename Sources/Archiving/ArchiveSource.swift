import CArchive

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Bytes fed to libarchive through its client callbacks, from a descriptor the reader
/// owns. libarchive cannot be given a message from a callback (its setter is C
/// varargs), so a source keeps its own failure for the reader to report.
protocol ArchiveSource: AnyObject {
    var failure: String? { get }
    /// Hands libarchive this source's callbacks and opens the archive.
    func open(_ archive: OpaquePointer) -> Int32
}

/// The object behind libarchive's client-data pointer.
private func source<S: ArchiveSource>(_ context: UnsafeMutableRawPointer?) -> S {
    Unmanaged<S>.fromOpaque(context!).takeUnretainedValue()
}

/// The file as it is: ZIP (read through its central directory, hence seek) or plain tar.
final class RawFileSource: ArchiveSource {
    private let fd: Int32
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var failure: String?

    init(fd: Int32) {
        self.fd = fd
        buffer = .allocate(byteCount: ArchiveWriter.chunkSize, alignment: 16)
    }

    deinit {
        buffer.deallocate()
    }

    func open(_ archive: OpaquePointer) -> Int32 {
        archive_read_set_callback_data(archive, Unmanaged.passUnretained(self).toOpaque())
        archive_read_set_read_callback(archive) { _, context, result in
            (source(context) as RawFileSource).read(into: result!)
        }
        archive_read_set_skip_callback(archive) { _, context, request in
            (source(context) as RawFileSource).seek(request, whence: SEEK_CUR, relative: true)
        }
        archive_read_set_seek_callback(archive) { _, context, offset, whence in
            (source(context) as RawFileSource).seek(offset, whence: whence, relative: false)
        }
        return archive_read_open1(archive)
    }

    private func fail(_ message: String) -> Int {
        if failure == nil { failure = message }
        return Int(ARCHIVE_FATAL)
    }

    private func read(into result: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        result.pointee = UnsafeRawPointer(buffer.baseAddress)
        let n = FileDescriptor.readSome(fd, into: buffer)
        return n >= 0 ? n : fail("cannot read the archive: \(FileDescriptor.describe(errno))")
    }

    /// Skip returns how far it moved; seek returns the new position.
    private func seek(_ offset: Int64, whence: Int32, relative: Bool) -> Int64 {
        let before = relative ? lseek(fd, 0, SEEK_CUR) : 0
        let after = before < 0 ? before : lseek(fd, off_t(offset), whence)
        guard after >= 0 else {
            return Int64(fail("cannot seek in the archive: \(FileDescriptor.describe(errno))"))
        }
        return Int64(after - before)
    }
}

/// A gzip file, decompressed with zlib so that the CRC-32 and length in each member's
/// trailer are checked (libarchive's own gzip reader skips them). libarchive sees
/// the tar stream inside. Concatenated members are read as one stream, as gzip does.
final class GzipSource: ArchiveSource {
    private let fd: Int32
    private var stream = z_stream()
    private let streamReady: Bool
    private let input: UnsafeMutableRawBufferPointer
    private let output: UnsafeMutableRawBufferPointer
    private var betweenMembers = false
    private var finished = false
    private(set) var failure: String?

    init(fd: Int32) {
        self.fd = fd
        input = .allocate(byteCount: ArchiveWriter.chunkSize, alignment: 16)
        output = .allocate(byteCount: ArchiveWriter.chunkSize, alignment: 16)
        // 16 + 15: a gzip wrapper around a deflate stream with the largest window.
        streamReady = inflateInit2_(&stream, 16 + MAX_WBITS, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK
    }

    deinit {
        if streamReady { inflateEnd(&stream) }
        input.deallocate()
        output.deallocate()
    }

    func open(_ archive: OpaquePointer) -> Int32 {
        guard streamReady else { return Int32(fail("cannot initialise zlib")) }
        archive_read_set_callback_data(archive, Unmanaged.passUnretained(self).toOpaque())
        archive_read_set_read_callback(archive) { _, context, result in
            (source(context) as GzipSource).read(into: result!)
        }
        return archive_read_open1(archive)
    }

    private func fail(_ message: String) -> Int {
        if failure == nil { failure = message }
        return Int(ARCHIVE_FATAL)
    }

    /// Decompresses what libarchive left unread after the tar end marker, so that
    /// the last trailer is checked too. Returns false (with `failure` set) on error.
    func readToEnd() -> Bool {
        while true {
            let n = inflateNext()
            if n == 0 { return true }
            if n < 0 { return false }
        }
    }

    private func read(into result: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        result.pointee = UnsafeRawPointer(output.baseAddress)
        return inflateNext()
    }

    /// Fills `output`: the byte count, 0 at the end of the last member, or ARCHIVE_FATAL.
    private func inflateNext() -> Int {
        if finished { return 0 }
        stream.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.avail_out = uInt(output.count)
        while stream.avail_out > 0 {
            if stream.avail_in == 0 {
                let n = FileDescriptor.readSome(fd, into: input)
                if n < 0 { return fail("cannot read the archive: \(FileDescriptor.describe(errno))") }
                if n == 0 {
                    guard betweenMembers else { return fail("gzip data is truncated") }
                    finished = true
                    break
                }
                stream.next_in = input.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_in = uInt(n)
            }
            let startsMember = betweenMembers
            if betweenMembers {
                // More input after a complete member: it must be another member.
                inflateReset(&stream)
                betweenMembers = false
            }
            switch inflate(&stream, Z_NO_FLUSH) {
            case Z_STREAM_END:
                betweenMembers = true
            case Z_OK, Z_BUF_ERROR:
                continue
            case Z_DATA_ERROR where startsMember:
                return fail("data after the end of the gzip stream")
            default:
                let reason = stream.msg.map { String(cString: $0) } ?? "unknown zlib error"
                return fail("gzip data is corrupt: \(reason)")
            }
        }
        return output.count - Int(stream.avail_out)
    }
}
