import Archiving
import Crypto
import Dispatch
import Foundation
import Synchronization

/// Copies local files into archive entries using both cores: the calling thread reads
/// each chunk and hands it to libarchive, which computes its CRC-32 and writes it, while
/// a second thread computes the same chunk's SHA-256 for the manifest. SHA-256 is the
/// costlier half on every CPU (with SHA instructions 1.1 GB/s here, against 3.3 GB/s for
/// zlib's CRC-32; without them 340 MB/s), so the hashing thread does nothing else: with
/// the reads moved to the writing side, 2 GB of photos went into the archive 2–3 % faster
/// (measured against the build that read on the hashing side, in the same rounds).
/// Memory: three 256 KiB buffers, so neither side waits on a single slow chunk.
///
/// One copy at a time; `copy` blocks, so callers run it through `BlockingWork`.
// Unchecked: the buffers pass to the hashing thread by semaphore, and `throttle` belongs to the one copy at a time.
final class ArchiveFileCopier: @unchecked Sendable {
    private static let depth = 3
    private let buffers: [UnsafeMutableRawBufferPointer]
    private let hashing = DispatchQueue(label: "export.sha256")
    private var throttle: WriteThrottle
    private let flush: BackgroundFlush

    /// `flushesEarly`: whether the archive's writes sit in the page cache until flushed
    /// (not so for a writer that ``ArchiveWriter/bypassesPageCache``).
    init(archivePath: String, throttleMBPerSecond: Int, flushesEarly: Bool = true) {
        buffers = (0..<Self.depth).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: ArchiveWriter.chunkSize, alignment: 16) }
        throttle = WriteThrottle(megabytesPerSecond: throttleMBPerSecond)
        flush = BackgroundFlush(path: flushesEarly ? archivePath : nil)
    }

    deinit {
        // `copy` waits for its hasher before it returns, so no chunk is in flight here.
        hashing.sync {}
        flush.finish()
        for buffer in buffers { buffer.deallocate() }
    }

    /// What the writing thread and the hashing thread share for one file. Each buffer
    /// passes from `free` (hasher done with it) to `filled` (read, for the hasher) and back;
    /// the semaphores order every access to `counts` and the buffers.
    // Unchecked: those semaphores (and `hashing.sync` for `hasher`) are the ordering the compiler cannot see.
    private final class Handoff: @unchecked Sendable {
        let free: [DispatchSemaphore]
        let filled: [DispatchSemaphore]
        /// Bytes in each filled buffer: 0 at the end of the file.
        /// Plain memory rather than an Array: the two threads touch different slots at
        /// once, and an Array's copy-on-write check would make that a race on the whole array.
        let counts: UnsafeMutableBufferPointer<Int>
        var hasher = SHA256()
        let stopped = ManagedAtomicFlag()

        init(depth: Int) {
            // Created at 0 and then released: libdispatch traps when a semaphore is freed
            // below its initial value, which a copy stopped half-way can leave behind.
            free = (0..<depth).map { _ in DispatchSemaphore(value: 0) }
            for semaphore in free { semaphore.signal() }
            filled = (0..<depth).map { _ in DispatchSemaphore(value: 0) }
            counts = .allocate(capacity: depth)
            counts.initialize(repeating: 0)
        }

        deinit {
            counts.deallocate()
        }
    }

    // Unchecked: raw memory, used by one thread at a time as `Handoff`'s semaphores say.
    private struct Buffers: @unchecked Sendable {
        let all: [UnsafeMutableRawBufferPointer]
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
        return try copy(descriptor: fd, named: path, into: writer, expectedBytes: expectedBytes)
    }

    /// The same from a file already open (a blob the store resolved without links);
    /// `path` names it in errors. The caller closes it.
    func copy(descriptor fd: Int32, named path: String, into writer: ArchiveWriter, expectedBytes: Int64) throws -> (bytes: Int64, sha256: String) {
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        let handoff = Handoff(depth: Self.depth)
        let buffers = Buffers(all: self.buffers)
        let depth = Self.depth
        hashing.async {
            var index = 0
            while true {
                handoff.filled[index].wait()
                if handoff.stopped.isSet { return }
                let n = handoff.counts[index]
                if n <= 0 { return }
                handoff.hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffers.all[index][0..<n]))
                handoff.free[index].signal()
                index = (index + 1) % depth
            }
        }
        // Whatever ends the loop, the hasher stops and is done with the buffers before this
        // returns (after the end-of-file chunk it has already returned, and this is a no-op).
        defer {
            handoff.stopped.set()
            for semaphore in handoff.filled { semaphore.signal() }
            hashing.sync {}
        }
        var copied: Int64 = 0
        var index = 0
        while true {
            handoff.free[index].wait()
            let buffer = buffers.all[index]
            var n = read(fd, buffer.baseAddress, buffer.count)
            while n < 0 && errno == EINTR { n = read(fd, buffer.baseAddress, buffer.count) }
            if n < 0 {
                let code = errno
                throw LifecycleError(.unavailable, "cannot read \(path): \(String(cString: strerror(code)))")
            }
            guard copied + Int64(n) <= expectedBytes else { return (copied + Int64(n), "") }
            handoff.counts[index] = n
            handoff.filled[index].signal()
            if n == 0 { break }
            try writer.write(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            copied += Int64(n)
            flush.wrote(n)
            throttle.pace(n)
            index = (index + 1) % depth
        }
        // The hasher returned at the end-of-file chunk; its hash is complete.
        let digest = hashing.sync { FileDigest.hex(handoff.hasher.finalize()) }
        return (copied, digest)
    }

    /// For bytes that arrive another way (a remote blob store's chunks).
    func wrote(_ count: Int) {
        flush.wrote(count)
        throttle.pace(count)
    }
}

/// A flag one thread sets and another reads.
final class ManagedAtomicFlag: Sendable {
    private let value = Atomic(false)

    var isSet: Bool { value.load(ordering: .acquiring) }

    func set() {
        value.store(true, ordering: .releasing)
    }
}

/// Flushes the archive to disk in the background while it is still being written,
/// so the fsync that completes it waits for the last few megabytes rather than the
/// whole archive at the end. (Measured here: faster than `sync_file_range` every few
/// megabytes, which stalls the copy when the disk queue is full.)
final class BackgroundFlush: Sendable {
    private let fd: Int32
    private let queue = DispatchQueue(label: "export.flush")
    private let state = Mutex<(running: Bool, unflushed: Int64)>((false, 0))
    static let interval: Int64 = 64 << 20

    /// nil: nothing to flush.
    init(path: String?) {
        fd = path.map { open($0, O_RDONLY | O_CLOEXEC) } ?? -1
    }

    func wrote(_ count: Int) {
        guard fd >= 0 else { return }
        let start = state.withLock { state in
            state.unflushed += Int64(count)
            guard state.unflushed >= Self.interval, !state.running else { return false }
            state.running = true
            state.unflushed = 0
            return true
        }
        guard start else { return }
        queue.async {
            _ = fdatasync(self.fd)
            self.state.withLock { $0.running = false }
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
    public var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}

/// Hands a value that is used by one thread at a time across a `Sendable` boundary.
// Unchecked: "one at a time" is the caller's await on the other thread, which the compiler cannot see.
struct OneThreadAtATime<Value>: @unchecked Sendable {
    let value: Value
}
