import CArchive
import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where libarchive's output goes when the archive is a regular file on a file system
/// that takes direct I/O: gathered into aligned blocks that a second thread writes
/// with `O_DIRECT`, past the page cache.
///
/// Why: an export of gigabytes of photos is written once and read back once, so caching
/// it only pushes the database's pages out of memory; and copying it into the page
/// cache was the largest single cost of writing it (measured on the 2 GB benchmark:
/// 41 % of the time in the kernel's page-cache copy, and 0.5 GB/s when the kernel had
/// to find fresh memory for it, against 1.5–2 GB/s direct). The archive's bytes are
/// the same either way.
///
/// The last, partial block is written through the page cache after `O_DIRECT` is
/// dropped, since direct writes must be whole blocks. A file system that refuses a
/// direct write (EINVAL) gets that block and the rest through the page cache too.
///
/// Memory: `depth` blocks of `blockSize` bytes.
final class DirectFileSink: @unchecked Sendable {
    static let blockSize = 1 << 20
    private static let depth = 3
    /// Direct I/O wants the memory aligned to the device's logical block; a page covers every device.
    private static let alignment = 4096

    let fd: Int32
    private let blocks: [UnsafeMutableRawPointer]
    private let free: [DispatchSemaphore]
    private let queue = DispatchQueue(label: "archive.direct-write")
    private var current = 0
    private var filled = 0
    private var offset: Int64 = 0
    private let lock = NSLock()
    /// The first write error of the writing thread (errno), reported by the next `append` or by `finish`.
    private var failure: Int32 = 0

    /// Opens `path` (create or truncate, mode `mode`) for direct writes; nil when the file
    /// system or the file's type does not allow them, so the caller writes the usual way.
    static func open(path: String, mode: mode_t) -> DirectFileSink? {
        #if os(Linux)
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | accountlifecycle_o_direct, mode)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (UInt32(info.st_mode) & FileType.mask) == FileType.regular else {
            close(fd)
            return nil
        }
        return DirectFileSink(fd: fd)
        #else
        return nil
        #endif
    }

    private init(fd: Int32) {
        self.fd = fd
        blocks = (0..<Self.depth).map { _ in
            UnsafeMutableRawPointer.allocate(byteCount: Self.blockSize, alignment: Self.alignment)
        }
        // Created at 0 and then released: libdispatch traps when a semaphore is freed
        // below its initial value, which an archive abandoned half-way can leave behind.
        free = (0..<Self.depth).map { _ in DispatchSemaphore(value: 0) }
        for semaphore in free.dropFirst() { semaphore.signal() }
    }

    deinit {
        // Blocks still queued read their memory: let them finish first.
        queue.sync {}
        for block in blocks { block.deallocate() }
    }

    func waitForWrites() {
        queue.sync {}
    }

    var writeError: Int32? {
        lock.withLock { failure == 0 ? nil : failure }
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

    /// Writes what is still buffered and waits for every write; returns errno on failure.
    /// The caller then syncs and closes `fd`.
    func finish() -> Int32? {
        queue.sync {}
        if let error = writeError { return error }
        guard filled > 0 else { return nil }
        FileDescriptor.setDirectIO(fd, false)
        return FileDescriptor.writeAll(fd, UnsafeRawBufferPointer(start: blocks[current], count: filled), at: offset)
    }

    private func submitFullBlock() {
        let index = current
        let at = offset
        let released = free[index]
        queue.async { [self] in
            if writeError == nil, let error = writeBlock(blocks[index], at: at) {
                lock.withLock { failure = error }
            }
            released.signal()
        }
        offset += Int64(Self.blockSize)
        current = (current + 1) % Self.depth
        free[current].wait()
        filled = 0
    }

    private func writeBlock(_ block: UnsafeMutableRawPointer, at offset: Int64) -> Int32? {
        let bytes = UnsafeRawBufferPointer(start: block, count: Self.blockSize)
        guard let error = FileDescriptor.writeAll(fd, bytes, at: offset) else { return nil }
        guard error == EINVAL, FileDescriptor.setDirectIO(fd, false) else { return error }
        return FileDescriptor.writeAll(fd, bytes, at: offset)
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
