import Archiving
import Crypto
import Dispatch
import Foundation

/// Copies local files into archive entries using both cores: while libarchive
/// computes a chunk's CRC-32 and writes it on the calling thread, a second thread
/// computes its SHA-256 for the manifest. Two buffers alternate, so reading the next
/// chunk never overwrites one still being hashed. Memory: two 256 KiB buffers.
///
/// One copy at a time; `copy` blocks, so callers run it through `BlockingWork`.
final class ArchiveFileCopier: @unchecked Sendable {
    private let buffers: [UnsafeMutableRawBufferPointer]
    private let free = [DispatchSemaphore(value: 1), DispatchSemaphore(value: 1)]
    private let hashing = DispatchQueue(label: "export.sha256")
    private var throttle: WriteThrottle
    private let flush: BackgroundFlush

    init(archivePath: String, throttleMBPerSecond: Int) {
        buffers = (0..<2).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: ArchiveWriter.chunkSize, alignment: 16) }
        throttle = WriteThrottle(megabytesPerSecond: throttleMBPerSecond)
        flush = BackgroundFlush(path: archivePath)
    }

    deinit {
        // Hashing still queued reads these buffers: let it finish first.
        for semaphore in free {
            semaphore.wait()
            semaphore.signal()  // libdispatch refuses to free a semaphore below its initial value
        }
        flush.finish()
        for buffer in buffers { buffer.deallocate() }
    }

    private final class HashState: @unchecked Sendable {
        var hasher = SHA256()
    }

    private struct Chunk: @unchecked Sendable {
        let bytes: UnsafeRawBufferPointer
    }

    /// Streams the file at `path` into the writer's open entry; returns the bytes copied
    /// and their SHA-256. Stops reading past `expectedBytes`: a file that grew shows as a
    /// size mismatch to the caller, not as a failed archive.
    func copy(path: String, into writer: ArchiveWriter, expectedBytes: Int64) throws -> (bytes: Int64, sha256: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw LifecycleError(code == ENOENT ? .inputMissing : .unavailable, "cannot open \(path): \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        let state = HashState()
        var copied: Int64 = 0
        var index = 0
        // Whatever ends the loop, every chunk handed to the hashing thread is done with.
        defer { hashing.sync {} }
        while true {
            free[index].wait()
            let buffer = buffers[index]
            var n = read(fd, buffer.baseAddress, buffer.count)
            while n < 0 && errno == EINTR { n = read(fd, buffer.baseAddress, buffer.count) }
            guard n > 0, copied + Int64(n) <= expectedBytes else {
                let code = errno
                free[index].signal()
                if n < 0 { throw LifecycleError(.unavailable, "cannot read \(path): \(String(cString: strerror(code)))") }
                if n == 0 { break }
                return (copied + Int64(n), "")
            }
            let chunk = Chunk(bytes: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            let released = free[index]
            hashing.async {
                state.hasher.update(bufferPointer: chunk.bytes)
                released.signal()
            }
            try writer.write(chunk.bytes)
            copied += Int64(n)
            flush.wrote(n)
            throttle.pace(n)
            index ^= 1
        }
        let digest = hashing.sync { FileDigest.hex(state.hasher.finalize()) }
        return (copied, digest)
    }

    /// For bytes that arrive another way (a remote blob store's chunks).
    func wrote(_ count: Int) {
        flush.wrote(count)
        throttle.pace(count)
    }
}

/// Flushes the archive to disk in the background while it is still being written,
/// so the fsync that completes it waits for the last few megabytes rather than the
/// whole archive at the end. (Measured here: faster than `sync_file_range` every few
/// megabytes, which stalls the copy when the disk queue is full.)
final class BackgroundFlush: @unchecked Sendable {
    private let fd: Int32
    private let queue = DispatchQueue(label: "export.flush")
    private let lock = NSLock()
    private var running = false
    private var unflushed: Int64 = 0
    static let interval: Int64 = 64 << 20

    init(path: String) {
        fd = open(path, O_RDONLY | O_CLOEXEC)
    }

    func wrote(_ count: Int) {
        unflushed += Int64(count)
        guard unflushed >= Self.interval, fd >= 0 else { return }
        let start = lock.withLock {
            if running { return false }
            running = true
            return true
        }
        guard start else { return }
        unflushed = 0
        queue.async {
            _ = fdatasync(self.fd)
            self.lock.withLock { self.running = false }
        }
    }

    func finish() {
        queue.sync {}
        if fd >= 0 { close(fd) }
    }
}

/// Paces archive writes to `throttle_mb_per_second` by sleeping between chunks.
struct WriteThrottle {
    let bytesPerSecond: Double
    private var written: Int64 = 0
    private var started: ContinuousClock.Instant?

    init(megabytesPerSecond: Int) {
        bytesPerSecond = Double(megabytesPerSecond) * 1_000_000
    }

    mutating func pace(_ bytes: Int) {
        guard bytesPerSecond > 0 else { return }
        let clock = ContinuousClock()
        let start = started ?? clock.now
        started = start
        written += Int64(bytes)
        let ahead = Double(written) / bytesPerSecond - (clock.now - start).seconds
        if ahead > 0 { usleep(UInt32(min(ahead, 10) * 1_000_000)) }
    }
}

extension Duration {
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}

/// Hands a value that is used by one thread at a time across a `Sendable` boundary.
struct OneThreadAtATime<Value>: @unchecked Sendable {
    let value: Value
}
