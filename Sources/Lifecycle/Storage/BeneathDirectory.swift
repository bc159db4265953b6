import CLinux
import Foundation

/// A directory held open, with relative paths resolved beneath it by the kernel: a path's
/// text is never trusted to say where it leads. Both the import folder (another system's
/// files) and the blob store (a media folder whose subfolders may be links someone made)
/// open files through one of these.
final class BeneathDirectory: Sendable {
    enum Resolution: Sendable {
        /// `openat2(RESOLVE_BENEATH …)`: the kernel refuses any step out of the directory.
        case kernel
        /// One `openat(O_NOFOLLOW)` per component, for kernels without `openat2` (before 5.6,
        /// or a seccomp filter that refuses it): symbolic links are not followed at all.
        case componentWalk
    }

    /// What the kernel may follow on the way.
    enum Links: Sendable {
        /// Symbolic links that stay inside the directory (the import folder: a user's
        /// folder of photos may link one photo to another).
        case insideOnly
        /// None, anywhere in the path (the blob store: a file is deleted or handed out
        /// only by its own name, so one folder linked to another user's is no way in).
        case none
    }

    let path: String
    let descriptor: Int32
    let resolution: Resolution
    let links: Links

    /// The errno opening the directory gave, for the caller to describe.
    struct OpenFailure: Error {
        let code: Int32
    }

    init(path: String, links: Links, resolution: Resolution? = nil) throws(OpenFailure) {
        let fd = Glibc.open(path, accountlifecycle_o_path | accountlifecycle_o_directory | O_CLOEXEC)
        guard fd >= 0 else { throw OpenFailure(code: errno) }
        self.path = path
        self.descriptor = fd
        self.links = links
        self.resolution = resolution ?? Self.kernelResolution(probing: fd)
    }

    deinit { close(descriptor) }

    /// openat2 exists since Linux 5.6; a container's seccomp filter may still refuse it.
    private static func kernelResolution(probing fd: Int32) -> Resolution {
        let probe = accountlifecycle_openat2(fd, ".", accountlifecycle_o_path | O_CLOEXEC, UInt64(RESOLVE_BENEATH))
        if probe >= 0 {
            close(probe)
            return .kernel
        }
        return errno == ENOSYS || errno == EPERM ? .componentWalk : .kernel
    }

    /// Opens `relative` beneath the directory (`""` is the directory itself); -1 with errno
    /// set on failure. A symbolic link the resolution may not follow fails with ELOOP, a
    /// step outside with EXDEV (kernel) or ELOOP (component walk).
    func open(_ relative: String, flags: Int32) -> Int32 {
        let target = relative.isEmpty ? "." : relative
        switch resolution {
        case .kernel:
            var resolve = UInt64(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
            if links == .none { resolve |= UInt64(RESOLVE_NO_SYMLINKS) }
            // The kernel gives up a RESOLVE_BENEATH walk through ".." with EAGAIN when any
            // rename or mount happens anywhere meanwhile, and openat2(2) says to retry.
            var fd: Int32 = -1
            var attempts = 0
            repeat {
                fd = accountlifecycle_openat2(descriptor, target, flags | O_CLOEXEC, resolve)
                attempts += 1
            } while fd < 0 && (errno == EAGAIN || errno == EINTR) && attempts < 100
            return fd
        case .componentWalk:
            return Self.walk(from: descriptor, target, flags: flags | O_CLOEXEC)
        }
    }

    private static func walk(from root: Int32, _ relative: String, flags: Int32) -> Int32 {
        let components = relative.split(separator: "/").map(String.init)
        var directory = root
        defer { if directory != root { close(directory) } }
        for (index, component) in components.enumerated() {
            if component == ".." {
                errno = ELOOP
                return -1
            }
            let last = index == components.count - 1
            let next = last
                ? openat(directory, component, flags | accountlifecycle_o_nofollow)
                : openat(directory, component, accountlifecycle_o_path | accountlifecycle_o_directory | accountlifecycle_o_nofollow | O_CLOEXEC)
            guard next >= 0 else {
                // O_PATH | O_NOFOLLOW | O_DIRECTORY on a link fails as "not a directory".
                let code = errno
                var status = stat()
                errno = code == ENOTDIR && fstatat(directory, component, &status, AT_SYMLINK_NOFOLLOW) == 0
                    && (status.st_mode & S_IFMT) == S_IFLNK ? ELOOP : code
                return -1
            }
            if last {
                // O_PATH | O_NOFOLLOW opens a final link itself rather than failing.
                var status = stat()
                if fstat(next, &status) == 0, (status.st_mode & S_IFMT) == S_IFLNK {
                    close(next)
                    errno = ELOOP
                    return -1
                }
                return next
            }
            if directory != root { close(directory) }
            directory = next
        }
        return openat(directory, ".", flags)
    }

    /// The first component of `relative` that is a symbolic link (`avatars/ada` of
    /// `avatars/ada/me.png`), for a message naming what to fix; nil if none is.
    func firstLink(in relative: String) -> String? {
        var directory = dup(descriptor)
        guard directory >= 0 else { return nil }
        defer { close(directory) }
        var walked: [Substring] = []
        for component in relative.split(separator: "/") {
            walked.append(component)
            var status = stat()
            guard fstatat(directory, String(component), &status, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
            if (status.st_mode & S_IFMT) == S_IFLNK { return walked.joined(separator: "/") }
            guard (status.st_mode & S_IFMT) == S_IFDIR else { return nil }
            let next = openat(directory, String(component), accountlifecycle_o_path | accountlifecycle_o_directory | accountlifecycle_o_nofollow | O_CLOEXEC)
            guard next >= 0 else { return nil }
            close(directory)
            directory = next
        }
        return nil
    }
}
