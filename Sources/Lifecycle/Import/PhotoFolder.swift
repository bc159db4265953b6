import CLinux
import Crypto
import Foundation

/// The folder an import's photo paths are resolved beneath.
///
/// An import file comes from another system and is hostile until checked: a photo path
/// of `../../etc/shadow`, or a symbolic link in the folder pointing at
/// `/proc/self/environ`, would otherwise be copied into the blob store and shipped in
/// that user's export. Paths are resolved by the kernel beneath the folder's descriptor
/// (`openat2` with `RESOLVE_BENEATH`): a symbolic link may point elsewhere inside the
/// folder, never out of it, whatever the path's text says. Only regular files on a real
/// file system are read, and no more bytes than their size, checked on the open
/// descriptor, promised.
final class PhotoFolder: Sendable {
    typealias Resolution = BeneathDirectory.Resolution

    /// Why one photo of a line cannot be used: the line is refused with this reason.
    struct Refusal: Error {
        let reason: String
    }

    let path: String
    let maxFileBytes: Int64
    private let directory: BeneathDirectory

    init(path: String, maxFileBytes: Int64, resolution: Resolution? = nil) throws {
        self.path = path
        self.maxFileBytes = maxFileBytes
        do {
            directory = try BeneathDirectory(path: path, links: .insideOnly, resolution: resolution)
        } catch {
            throw LifecycleError(
                error.code == ENOENT || error.code == ENOTDIR ? .inputMissing : .unavailable,
                "photo folder \(path): \(String(cString: strerror(error.code)))")
        }
    }

    /// A regular file opened for reading, with the size `fstat` gave for it.
    struct OpenedFile: ~Copyable {
        let descriptor: Int32
        let size: Int64
        deinit { close(descriptor) }
    }

    /// Opens `relative` (already checked by `PhotoPath.check`) beneath the folder.
    /// Throws `Refusal` for anything wrong with the file itself.
    func open(_ relative: String) throws(Refusal) -> OpenedFile {
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        let fd = directory.open(relative, flags: O_RDONLY | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { throw Refusal(reason: Self.describeOpenFailure(errno, resolution: directory.resolution)) }
        var handedOver = false
        defer { if !handedOver { close(fd) } }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw Refusal(reason: "cannot be examined: \(String(cString: strerror(errno)))") }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw Refusal(reason: "is \(Self.describeType(status.st_mode)), not a regular file")
        }
        var system = statfs()
        if fstatfs(fd, &system) == 0,
           [accountlifecycle_proc_magic, accountlifecycle_sysfs_magic, accountlifecycle_debugfs_magic].contains(Int(system.f_type)) {
            throw Refusal(reason: "is a kernel-generated file (/proc, /sys), not a photo")
        }
        guard status.st_size > 0 else { throw Refusal(reason: "is empty") }
        guard Int64(status.st_size) <= maxFileBytes else {
            throw Refusal(reason: "is \(status.st_size) bytes, more than the \(maxFileBytes) an import accepts (import.max_photo_bytes)")
        }
        // Regular files never block; reads should wait for the disk as usual.
        _ = fcntl(fd, F_SETFL, O_RDONLY)
        handedOver = true
        return OpenedFile(descriptor: fd, size: Int64(status.st_size))
    }

    private static func describeOpenFailure(_ code: Int32, resolution: Resolution) -> String {
        switch code {
        case ENOENT: "does not exist (paths are relative to the import folder)"
        case EXDEV: "leads outside the import folder (through a symbolic link or a mount point)"
        case ELOOP:
            resolution == .kernel
                ? "leads outside the import folder, or through too many symbolic links"
                : "is or passes through a symbolic link, which this system's import does not follow"
        case ENOTDIR: "passes through something that is not a folder"
        case EACCES, EPERM: "cannot be read (permission denied)"
        default: "cannot be opened: \(String(cString: strerror(code)))"
        }
    }

    private static func describeType(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a folder"
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        default: "not a regular file"
        }
    }
}

/// Photos of one import run, copied out of the import folder before they reach the blob
/// store: the blob store is handed a file of ours, never a path an attacker could swap
/// for a symbolic link after it was checked. The folder is private (0700) and removed
/// when the import ends.
final class PhotoStaging: Sendable {
    struct StagedPhoto {
        var path: String
        var sha256: String
        var size: Int64
        var contentType: String
    }

    let directory: String

    init() throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/lifecycle-import-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw LifecycleError.fileSystem(errno, "creating a staging folder for photos in", FileManager.default.temporaryDirectory.path)
        }
        directory = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// Copies the opened file into the staging folder, hashing it on the way. Reads at
    /// most one byte more than `fstat` said, so a file that grows while it is read (or
    /// one whose size lies) is refused rather than read without end.
    func stage(_ file: borrowing PhotoFolder.OpenedFile, name: String) throws -> StagedPhoto {
        let destination = directory + "/" + UUID().uuidString
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw LifecycleError.fileSystem(errno, "creating", destination) }
        var completed = false
        defer {
            close(output)
            if !completed { unlink(destination) }
        }
        var hasher = SHA256()
        var header: [UInt8] = []
        var total: Int64 = 0
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        while total <= file.size {
            let wanted = Int(min(Int64(chunk.count), file.size + 1 - total))
            let count = read(file.descriptor, chunk.baseAddress, wanted)
            if count < 0 {
                if errno == EINTR { continue }
                throw LifecycleError.fileSystem(errno, "reading photo", name)
            }
            if count == 0 { break }
            let bytes = UnsafeRawBufferPointer(rebasing: chunk[0..<count])
            hasher.update(bufferPointer: bytes)
            if header.count < 32 { header.append(contentsOf: bytes.prefix(32 - header.count)) }
            var offset = 0
            while offset < count {
                let written = write(output, bytes.baseAddress! + offset, count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw LifecycleError.fileSystem(errno, "writing", destination)
                }
                offset += written
            }
            total += Int64(count)
        }
        guard total == file.size else {
            throw PhotoFolder.Refusal(reason: "changed while it was read (\(total > file.size ? "more" : "fewer") bytes than its size, \(file.size))")
        }
        completed = true
        return StagedPhoto(
            path: destination, sha256: FileDigest.hex(hasher.finalize()), size: total,
            contentType: ContentSniffer.contentType(of: header))
    }
}
