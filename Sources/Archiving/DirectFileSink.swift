import CArchive
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where libarchive's output goes when the archive is a regular file on a file system
/// that takes direct I/O: gathered into aligned blocks that other threads write with
/// `O_DIRECT`, past the page cache, two at a time.
///
/// Why: an export of gigabytes of photos is written once and read back once, so caching
/// it only pushes the database's pages out of memory; and copying it into the page
/// cache was the largest single cost of writing it (measured on the 2 GB benchmark:
/// 41 % of the time in the kernel's page-cache copy, and 0.5 GB/s when the kernel had
/// to find fresh memory for it, against 1.5–2 GB/s direct). The archive's bytes are
/// the same either way.
///
/// Two writes at once, into space allocated ahead of them: the virtual disk here wrote
/// 2 GB in 1 MiB direct writes in 1.9 s one at a time, 1.3–1.4 s two at a time into
/// allocated space, and no faster with three. The allocation matters because ext4 lets
/// direct writes run side by side only inside the file's size on allocated blocks; one
/// that extends the file holds the inode's lock alone. What was allocated past the last
/// byte is cut off when the archive is finished.
///
/// With `readBack`, every block is read back from the disk (direct, so not from the page
/// cache) as soon as its write returns, and compared byte for byte with what was written,
/// while later blocks are still being written: the disk reads while the writer is waiting
/// on hashing, instead of the whole archive being read again afterwards.
///
/// The last, partial block is written through the page cache after `O_DIRECT` is
/// dropped, since direct writes must be whole blocks (its direct read-back flushes it
/// first). A file system that refuses a direct write (EINVAL) gets that block and the
/// rest through the page cache too.
///
/// Memory: `depth` blocks of `blockSize` bytes, and one more for reading back.
// Unchecked: the block memory, and the filling state only libarchive's thread touches, pass
// between threads by the `free` semaphores and the queues, which the compiler cannot see.
final class DirectFileSink: @unchecked Sendable {
    static let blockSize = 1 << 20
    private static let writesAtOnce = 2
    /// One block being filled, `writesAtOnce` being written, the rest read back or waiting to be.
    private static let depth = 5
    /// How far ahead space is allocated: a call per 64 writes.
    static let allocationStep: Int64 = 64 << 20
    /// Direct I/O wants the memory aligned to the device's logical block; a page covers every device.
    private static let alignment = 4096

    let fd: Int32
    /// The same file opened for direct reads, or -1 when nothing is read back.
    private let readFD: Int32
    private let readBuffer: UnsafeMutableRawPointer
    private let blocks: [UnsafeMutableRawPointer]
    private let free: [DispatchSemaphore]
    private let writers = (0..<DirectFileSink.writesAtOnce).map { DispatchQueue(label: "archive.direct-write.\($0)") }
    private let reader = DispatchQueue(label: "archive.read-back")
    private var current = 0
    private var filled = 0
    private var offset: Int64 = 0
    private var submitted = 0
    /// Where the space allocated ahead ends; nil once the file system has refused an allocation.
    private var allocatedEnd: Int64? = 0
    private let outcome = Mutex(Outcome())

    private struct Outcome {
        /// The first failure of a writing or reading thread, reported by the next `append` or by `finish`.
        var failure: Failure?
        var comparedBytes: Int64 = 0
    }

    struct Failure: Sendable {
        var errno: Int32
        /// Set when the disk returned other bytes than were written: the first block that differed.
        var mismatchAt: Int64?
    }

    /// Opens `path` (create or truncate, mode `mode`) for direct writes; nil when the file
    /// system or the file's type does not allow them, so the caller writes the usual way.
    static func open(path: String, mode: mode_t, readBack: Bool) -> DirectFileSink? {
        #if os(Linux)
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | accountlifecycle_o_direct, mode)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (UInt32(info.st_mode) & FileType.mask) == FileType.regular else {
            close(fd)
            return nil
        }
        var readFD: Int32 = -1
        if readBack {
            readFD = Glibc.open(path, O_RDONLY | O_CLOEXEC | accountlifecycle_o_direct)
            guard readFD >= 0 else {
                close(fd)
                return nil
            }
        }
        return DirectFileSink(fd: fd, readFD: readFD)
        #else
        return nil
        #endif
    }

    private init(fd: Int32, readFD: Int32) {
        self.fd = fd
        self.readFD = readFD
        blocks = (0..<Self.depth).map { _ in
            UnsafeMutableRawPointer.allocate(byteCount: Self.blockSize, alignment: Self.alignment)
        }
        readBuffer = readFD >= 0
            ? UnsafeMutableRawPointer.allocate(byteCount: Self.blockSize, alignment: Self.alignment)
            : UnsafeMutableRawPointer.allocate(byteCount: 0, alignment: Self.alignment)
        // Created at 0 and then released: libdispatch traps when a semaphore is freed
        // below its initial value, which an archive abandoned half-way can leave behind.
        free = (0..<Self.depth).map { _ in DispatchSemaphore(value: 0) }
        for semaphore in free.dropFirst() { semaphore.signal() }
    }

    deinit {
        // Blocks still queued read their memory: let them finish first.
        waitForWrites()
        if readFD >= 0 { close(readFD) }
        readBuffer.deallocate()
        for block in blocks { block.deallocate() }
    }

    /// Waits until no block is being written or read back.
    func waitForWrites() {
        // Each write queues its block's read-back before it ends, so once the writers are
        // idle every read-back is queued.
        for writer in writers { writer.sync {} }
        reader.sync {}
    }

    var writeError: Int32? {
        outcome.withLock { $0.failure?.errno }
    }

    /// Set when a block read back differed from what was written: where that block starts.
    var mismatchOffset: Int64? {
        outcome.withLock { $0.failure?.mismatchAt }
    }

    /// Bytes read back and found equal to what was written: after `finish`, every byte of
    /// the file when the sink was opened with `readBack`.
    var bytesReadBack: Int64 {
        outcome.withLock { $0.comparedBytes }
    }

    /// Takes `length` bytes from libarchive; returns errno once a write has failed.
    func append(_ bytes: UnsafeRawPointer, _ length: Int) -> Int32? {
        var source = bytes
        var remaining = length
        while remaining > 0 {
            let n = min(remaining, Self.blockSize - filled)
            (blocks[current] + filled).copyMemory(from: source, byteCount: n)
            filled += n
            source += n
            remaining -= n
            if filled == Self.blockSize { submitFullBlock() }
        }
        return writeError
    }

    /// Writes what is still buffered, waits for every write and read-back, and cuts off
    /// the space allocated past the end; returns errno on failure. The caller then syncs
    /// and closes `fd`.
    func finish() -> Int32? {
        waitForWrites()
        if let error = writeError { return error }
        // Also after a refused allocation, which may have moved the size before it failed.
        if ftruncate(fd, off_t(offset + Int64(filled))) != 0 { return errno }
        guard filled > 0 else { return nil }
        FileDescriptor.setDirectIO(fd, false)
        if let error = FileDescriptor.writeAll(fd, UnsafeRawBufferPointer(start: blocks[current], count: filled), at: offset) {
            return error
        }
        if readFD >= 0, let failure = readBack(blocks[current], count: filled, at: offset) {
            record(failure)
            return failure.errno
        }
        return nil
    }

    private func submitFullBlock() {
        let index = current
        let at = offset
        let released = free[index]
        allocate(through: at + Int64(Self.blockSize))
        writers[submitted % writers.count].async { [self] in
            // The block is free again once written and, when asked for, read back.
            var readingBack = false
            defer { if !readingBack { released.signal() } }
            guard writeError == nil else { return }
            if let error = writeBlock(blocks[index], at: at) {
                record(Failure(errno: error))
                return
            }
            guard readFD >= 0 else { return }
            readingBack = true
            reader.async { [self] in
                if writeError == nil, let failure = readBack(blocks[index], count: Self.blockSize, at: at) {
                    record(failure)
                }
                released.signal()
            }
        }
        submitted += 1
        offset += Int64(Self.blockSize)
        current = (current + 1) % Self.depth
        free[current].wait()
        filled = 0
    }

    /// Allocates the next stretch once the writes are about to pass the end of the last.
    /// A file system without fallocate (EOPNOTSUPP), or one that is full, gets writes that
    /// extend the file as they go; a full disk then fails the write that does not fit.
    private func allocate(through end: Int64) {
        guard let allocated = allocatedEnd, end > allocated else { return }
        let length = max(Self.allocationStep, end - allocated)
        allocatedEnd = accountlifecycle_fallocate(fd, off_t(allocated), off_t(length)) == 0 ? allocated + length : nil
    }

    private func record(_ failure: Failure) {
        outcome.withLock { if $0.failure == nil { $0.failure = failure } }
    }

    private func writeBlock(_ block: UnsafeMutableRawPointer, at offset: Int64) -> Int32? {
        let bytes = UnsafeRawBufferPointer(start: block, count: Self.blockSize)
        guard let error = FileDescriptor.writeAll(fd, bytes, at: offset) else { return nil }
        guard error == EINVAL else { return error }
        // The other writer may have turned direct I/O off already: retry either way.
        FileDescriptor.setDirectIO(fd, false)
        return FileDescriptor.writeAll(fd, bytes, at: offset)
    }

    /// Reads `count` bytes at `offset` back from the disk and compares them with `block`.
    /// The read asks for whole pages, as direct reads must; at the end of the file the
    /// kernel returns only what is there.
    private func readBack(_ block: UnsafeMutableRawPointer, count: Int, at offset: Int64) -> Failure? {
        let request = (count + Self.alignment - 1) / Self.alignment * Self.alignment
        var done = 0
        while done < count {
            let n = pread(readFD, readBuffer + done, request - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                // A file system that refuses direct reads: a read through the page cache
                // would only return what was just written, so this block, and the file,
                // go unread, and the verification reads the archive whole instead.
                if errno == EINVAL { return nil }
                return Failure(errno: errno)
            }
            // Shorter than what was written: the file lost its end.
            if n == 0 { return Failure(errno: EIO, mismatchAt: offset) }
            done += n
        }
        guard memcmp(readBuffer, block, count) == 0 else { return Failure(errno: EIO, mismatchAt: offset) }
        outcome.withLock { $0.comparedBytes += Int64(count) }
        return nil
    }
}

/// libarchive's write callback: `client` is the `DirectFileSink`, retained by the writer.
let directSinkWriteCallback: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UnsafeRawPointer?, Int) -> Int = {
    _, client, buffer, length in
    guard let client else { return -1 }
    guard length > 0, let buffer else { return 0 }
    let sink = Unmanaged<DirectFileSink>.fromOpaque(client).takeUnretainedValue()
    return sink.append(buffer, length) == nil ? length : -1
}
