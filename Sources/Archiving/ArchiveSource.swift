import CArchive
import Dispatch

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
///
/// Read with direct I/O where the file system allows it, in aligned 1 MiB blocks handed
/// to libarchive without a copy, the next ones read ahead on other threads while
/// libarchive works through the current one. Why: an export is read back once, right
/// after it was written past the page cache (see `DirectFileSink`); reading it through
/// the cache would cost the memory, and the time, that writing it that way saved.
/// (Measured on a 2 GB archive here: one direct read at a time ran at about 1 GB/s.)
///
/// `.headers`: 64 KiB blocks, none read ahead, for a pass over a ZIP's headers that skips
/// most entries' data (libarchive then seeks from one local header to the next, and each
/// costs one small read instead of two megabytes).
final class RawFileSource: ArchiveSource {
    private let blockSize: Int
    private let depth: Int
    /// Direct reads start at a multiple of the device's logical block; a page covers every device.
    private static let alignment: Int64 = 4096
    private let fd: Int32
    private let blocks: [UnsafeMutableRawPointer]
    /// Per block, set by its read: bytes read, or -1 with the errno in `errors`.
    private let counts: UnsafeMutableBufferPointer<Int>
    private let errors: UnsafeMutableBufferPointer<Int32>
    private let readers = DispatchQueue(label: "archive.read-ahead", attributes: .concurrent)
    /// Reads in flight or done, in file order.
    private var ahead: [(block: Int, offset: Int64, done: DispatchSemaphore)] = []
    private var idle: [Int]
    /// The block libarchive is working through: it may use it until the next callback.
    private var lent: (block: Int, offset: Int64, count: Int)?
    private var nextOffset: Int64 = 0
    private var position: Int64 = 0
    private var size: Int64 = 0
    private(set) var failure: String?

    init(fd: Int32, pattern: ArchiveReadPattern) {
        self.fd = fd
        (blockSize, depth) = pattern == .whole ? (1 << 20, 2) : (64 << 10, 1)
        let blockSize = self.blockSize
        blocks = (0..<depth).map { _ in .allocate(byteCount: blockSize, alignment: Int(Self.alignment)) }
        counts = .allocate(capacity: depth)
        counts.initialize(repeating: 0)
        errors = .allocate(capacity: depth)
        errors.initialize(repeating: 0)
        idle = Array(0..<depth)
        var info = stat()
        if fstat(fd, &info) == 0 {
            size = Int64(info.st_size)
            // Refused by file systems without direct I/O: the reads are then the usual ones.
            if (UInt32(info.st_mode) & FileType.mask) == FileType.regular {
                FileDescriptor.setDirectIO(fd, true)
            }
        }
    }

    deinit {
        // A read still in flight writes into its block.
        for read in ahead { read.done.wait() }
        for block in blocks { block.deallocate() }
        counts.deallocate()
        errors.deallocate()
    }

    func open(_ archive: OpaquePointer) -> Int32 {
        archive_read_set_callback_data(archive, Unmanaged.passUnretained(self).toOpaque())
        archive_read_set_read_callback(archive) { _, context, result in
            (source(context) as RawFileSource).read(into: result!)
        }
        archive_read_set_skip_callback(archive) { _, context, request in
            (source(context) as RawFileSource).skip(request)
        }
        archive_read_set_seek_callback(archive) { _, context, offset, whence in
            (source(context) as RawFileSource).seek(offset, whence: whence)
        }
        return archive_read_open1(archive)
    }

    private func fail(_ message: String) -> Int {
        if failure == nil { failure = message }
        return Int(ARCHIVE_FATAL)
    }

    private func read(into result: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        // A seek back into the block just read (ZIP: the next entry's header, right after
        // the end of the last entry's data) is served from it again.
        if let current = lent, position >= current.offset, position < current.offset + Int64(current.count) {
            return hand(current, into: result)
        }
        if let current = lent {
            idle.append(current.block)
            lent = nil
        }
        let start = position - position % Self.alignment
        if ahead.first?.offset != start {
            for read in ahead {
                read.done.wait()
                idle.append(read.block)
            }
            ahead = []
            nextOffset = start
        }
        while let block = idle.popLast() {
            guard nextOffset < size else {
                idle.append(block)
                break
            }
            readAhead(into: block, at: nextOffset)
            nextOffset += Int64(blockSize)
        }
        guard !ahead.isEmpty else {
            result.pointee = UnsafeRawPointer(blocks[0])
            return 0
        }
        let next = ahead.removeFirst()
        next.done.wait()
        guard counts[next.block] >= 0 else {
            idle.append(next.block)
            return fail("cannot read the archive: \(FileDescriptor.describe(errors[next.block]))")
        }
        let current = (block: next.block, offset: next.offset, count: counts[next.block])
        lent = current
        guard position < current.offset + Int64(current.count) else {
            result.pointee = UnsafeRawPointer(blocks[current.block])
            return 0
        }
        return hand(current, into: result)
    }

    private func hand(_ current: (block: Int, offset: Int64, count: Int), into result: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        let skipped = Int(position - current.offset)
        result.pointee = UnsafeRawPointer(blocks[current.block] + skipped)
        position = current.offset + Int64(current.count)
        return current.count - skipped
    }

    private func readAhead(into block: Int, at offset: Int64) {
        let done = DispatchSemaphore(value: 0)
        ahead.append((block, offset, done))
        let fd = self.fd
        let target = OneReader(memory: blocks[block], count: counts.baseAddress! + block, error: errors.baseAddress! + block)
        let length = blockSize
        readers.async {
            target.read(fd: fd, offset: offset, length: length)
            done.signal()
        }
    }

    /// Returns how far it moved, as libarchive's skip callback must.
    private func skip(_ request: Int64) -> Int64 {
        position += request
        return request
    }

    /// Returns the new position, as libarchive's seek callback must.
    private func seek(_ offset: Int64, whence: Int32) -> Int64 {
        let target: Int64
        switch whence {
        case SEEK_SET: target = offset
        case SEEK_CUR: target = position + offset
        case SEEK_END: target = size + offset
        default: return Int64(fail("cannot seek in the archive: unknown whence \(whence)"))
        }
        guard target >= 0 else { return Int64(fail("cannot seek in the archive: before its start")) }
        position = target
        return target
    }
}

/// One block's read, run on a read-ahead thread: the block's memory and result slots
/// belong to that thread until its semaphore is signalled.
// Unchecked: raw pointers into the source's buffers, owned by one thread at a time by semaphore.
private struct OneReader: @unchecked Sendable {
    let memory: UnsafeMutableRawPointer
    let count: UnsafeMutablePointer<Int>
    let error: UnsafeMutablePointer<Int32>

    func read(fd: Int32, offset: Int64, length: Int) {
        var retriedWithoutDirectIO = false
        var done = 0
        while done < length {
            let n = pread(fd, memory + done, length - done, off_t(offset) + off_t(done))
            if n == 0 { break }
            if n > 0 {
                done += n
                continue
            }
            if errno == EINTR { continue }
            // A file system that took the flag but refuses the read: read the usual way.
            if errno == EINVAL && !retriedWithoutDirectIO {
                retriedWithoutDirectIO = true
                if FileDescriptor.setDirectIO(fd, false) { continue }
            }
            error.pointee = errno
            count.pointee = -1
            return
        }
        count.pointee = done
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
