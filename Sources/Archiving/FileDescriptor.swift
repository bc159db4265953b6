import CArchive
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// POSIX helpers kept outside the archive types, whose own `close()` would shadow `close(2)`.
enum FileDescriptor {
    /// Writes all of `bytes`, retrying short writes and EINTR. Returns errno on failure.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return nil
    }

    /// Writes all of `bytes` at `offset` (pwrite), retrying short writes and EINTR. Returns errno on failure.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int32? {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += n
        }
        return nil
    }

    /// Turns direct I/O (`O_DIRECT`) on or off for an open descriptor; returns whether the
    /// flag changed. Refused (false) by file systems without it, and off Linux.
    @discardableResult
    static func setDirectIO(_ fd: Int32, _ on: Bool) -> Bool {
        #if os(Linux)
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, (flags & accountlifecycle_o_direct != 0) != on else { return false }
        return fcntl(fd, F_SETFL, on ? flags | accountlifecycle_o_direct : flags & ~accountlifecycle_o_direct) == 0
        #else
        return false
        #endif
    }

    /// Reads up to `buffer.count` bytes, retrying EINTR: the count, 0 at end of file, or -1 with errno set.
    static func readSome(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n < 0 && errno == EINTR { continue }
            return n
        }
    }

    /// Closes `fd`; returns errno if the kernel reported a deferred write error.
    @discardableResult
    static func closeReportingError(_ fd: Int32) -> Int32? {
        close(fd) == 0 ? nil : errno
    }

    static func describe(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

/// File-type bits. `AE_IFREG` and friends are cast macros Swift does not import, and
/// a bare `S_IFREG` is ambiguous between the libarchive headers and the C library module.
enum FileType {
    #if canImport(Glibc)
    static let mask = UInt32(Glibc.S_IFMT)
    static let regular = UInt32(Glibc.S_IFREG)
    static let directory = UInt32(Glibc.S_IFDIR)
    static let symbolicLink = UInt32(Glibc.S_IFLNK)
    #elseif canImport(Darwin)
    static let mask = UInt32(Darwin.S_IFMT)
    static let regular = UInt32(Darwin.S_IFREG)
    static let directory = UInt32(Darwin.S_IFDIR)
    static let symbolicLink = UInt32(Darwin.S_IFLNK)
    #endif
}
