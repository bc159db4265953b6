import CLinux
import Foundation
import Crypto

/// The embedded default: one file per blob under a root directory (`./blobs`).
/// Writes go to `<root>/.incoming/` first and are renamed into place, so a reader
/// or a crash never sees half a blob. Blobs are people's photos and archives: files
/// are created 0600 and folders 0700 whatever the umask, so only the owner reads them.
///
/// Every read, stat, listing, rename and delete resolves its key beneath the root's open
/// descriptor with no symbolic link followed anywhere in the path (BeneathDirectory). An
/// app's media folder may hold links (`alice/out -> /elsewhere`, `alice/dir -> ../bob`):
/// through one, a purge would delete a file outside the store, or another user's that his
/// row still names under its other spelling. A key that crosses a link throws
/// `BlobStoreError.unsafePath`. Without links, two keys of one file are hard links, and
/// deleting one name never removes what the other still names.
public struct FileSystemBlobStore: BlobStore {
    public let root: String
    private let directory: BeneathDirectory
    /// The folder below the root where writes wait for their rename; no key may begin with it.
    public static let incomingFolder = ".incoming"
    private var incoming: String { root + "/" + Self.incomingFolder }

    public init(root: String) throws {
        try self.init(root: root, resolution: nil)
    }

    /// `resolution`: how keys are resolved beneath the root; by default the kernel's, when it has it.
    init(root: String, resolution: BeneathDirectory.Resolution?) throws {
        self.root = (root as NSString).standardizingPath
        try Self.makeDirectories(self.root, storeRoot: self.root)
        try Self.makeDirectories(self.root + "/" + Self.incomingFolder, storeRoot: self.root)
        do {
            directory = try BeneathDirectory(path: self.root, links: .none, resolution: resolution)
        } catch {
            throw BlobStoreError.fileSystem(error.code, "blob directory \(self.root): cannot open it")
        }
        removeAbandonedWrites()
    }

    /// A process killed while writing a blob leaves its temporary file behind. Each one is
    /// named after the process writing it (`<pid>-<uuid>`), so whoever opens the store next
    /// removes those of processes that no longer run. (Folders, such as the exports'
    /// scratch folders, are not writes in flight and stay.)
    private func removeAbandonedWrites() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: incoming) else { return }
        for name in names {
            guard let dash = name.firstIndex(of: "-"), let pid = pid_t(name[..<dash]), pid > 0, pid != getpid() else { continue }
            guard kill(pid, 0) != 0, errno == ESRCH else { continue }
            let path = (incoming as NSString).appendingPathComponent(name)
            var status = stat()
            if lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG { unlink(path) }
        }
    }

    /// `mkdir -p` with mode 0700 for each folder it creates; existing ones stay as they are.
    private static func makeDirectories(_ path: String, storeRoot: String) throws {
        var status = stat()
        if stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR { return }
        let parent = PathText.parent(path)
        if !parent.isEmpty, parent != path { try makeDirectories(parent, storeRoot: storeRoot) }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw BlobStoreError.fileSystem(errno, "blob directory \(storeRoot): cannot create \(path)")
        }
    }

    public func keyProblem(_ key: String) -> String? { BlobKey.fileSystemProblem(key) }

    /// Joined as text: NSString's path methods tidy what they join ('//' merged, a
    /// trailing '/' dropped), and a key must map to its path byte for byte.
    private func joinedPath(_ key: String) throws -> String {
        if let problem = BlobKey.fileSystemProblem(key) { throw BlobStoreError.invalidKey(key, problem) }
        return root + "/" + key
    }

    /// The file's path, for code that hands a path on (a download, a verifier): only once
    /// the key resolves beneath the root without a link, and the path reaches that same
    /// file. A key with no file yet gets its path.
    public func path(for key: String) throws -> String {
        let path = try joinedPath(key)
        let fd = try resolve(key, flags: accountlifecycle_o_path)
        guard fd >= 0 else { return path }
        defer { close(fd) }
        var resolved = stat(), named = stat()
        guard fstat(fd, &resolved) == 0, stat(path, &named) == 0, resolved.st_dev == named.st_dev, resolved.st_ino == named.st_ino else {
            throw BlobStoreError.unsafePath(key, link: directory.firstLink(in: key))
        }
        return path
    }

    /// Opens `key` beneath the root: -1 (errno ENOENT or ENOTDIR) when there is nothing
    /// there; throws when the path crosses a link or cannot be opened.
    private func resolve(_ key: String, flags: Int32) throws -> Int32 {
        if let problem = BlobKey.fileSystemProblem(key) { throw BlobStoreError.invalidKey(key, problem) }
        let fd = directory.open(key, flags: flags)
        guard fd < 0 else { return fd }
        let code = errno
        switch code {
        case ENOENT, ENOTDIR:
            errno = code
            return -1
        case ELOOP, EXDEV: throw BlobStoreError.unsafePath(key, link: directory.firstLink(in: key))
        default: throw BlobStoreError.fileSystem(code, "blob directory \(root): cannot open blob '\(key)'")
        }
    }

    /// A folder of keys (`""` is the root) for the *at calls, created (0700) if `create`;
    /// nil when it is not there.
    private func openFolder(_ folder: String, create: Bool = false) throws -> Int32? {
        let flags = accountlifecycle_o_path | accountlifecycle_o_directory
        if folder.isEmpty { return directory.open("", flags: flags) }
        let fd = try resolve(folder, flags: flags)
        if fd >= 0 { return fd }
        guard create else { return nil }
        var current = directory.open("", flags: flags)
        var walked = ""
        for component in folder.split(separator: "/").map(String.init) {
            walked += walked.isEmpty ? component : "/" + component
            if mkdirat(current, component, 0o700) != 0 && errno != EEXIST {
                let code = errno
                close(current)
                throw BlobStoreError.fileSystem(code, "blob directory \(root): cannot create \(walked)")
            }
            let next = Glibc.openat(current, component, flags | accountlifecycle_o_nofollow | O_CLOEXEC)
            close(current)
            guard next >= 0 else {
                let code = errno
                guard let link = directory.firstLink(in: walked) else { throw BlobStoreError.fileSystem(code, "blob directory \(root): cannot open \(walked)") }
                throw BlobStoreError.unsafePath(walked, link: link)
            }
            current = next
        }
        return current
    }

    private func temporaryPath() -> String {
        (incoming as NSString).appendingPathComponent("\(getpid())-\(UUID().uuidString)")
    }

    private func install(_ temporary: String, at key: String) throws -> BlobInfo {
        let folder: Int32
        do {
            folder = try openFolder(Self.folder(of: key), create: true) ?? -1
        } catch {
            unlink(temporary)
            throw error
        }
        defer { close(folder) }
        let name = Self.name(of: key)
        guard renameat(AT_FDCWD, temporary, folder, name) == 0 else {
            let error = BlobStoreError.fileSystem(errno, "blob directory \(root): cannot store blob '\(key)'")
            unlink(temporary)
            throw error
        }
        var status = stat()
        return BlobInfo(key: key, size: fstatat(folder, name, &status, AT_SYMLINK_NOFOLLOW) == 0 ? Int64(status.st_size) : 0)
    }

    /// The key's folder part (`a/b` of `a/b/c.jpg`, `""` of `c.jpg`) and its last part.
    private static func folder(of key: String) -> String {
        key.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(decoding: key.utf8[..<$0], as: UTF8.self) } ?? ""
    }
    private static func name(of key: String) -> String {
        key.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(decoding: key.utf8[key.utf8.index(after: $0)...], as: UTF8.self) } ?? key
    }

    public func put(key: String, fromFile source: String, moving: Bool) async throws -> BlobInfo {
        _ = try joinedPath(key)
        let temporary = temporaryPath()
        // A file moved in keeps the mode it was made with; the store's own are 0600.
        if moving, rename(source, temporary) == 0 {
            guard chmod(temporary, 0o600) == 0 else {
                let error = BlobStoreError.fileSystem(errno, "blob directory \(root): cannot restrict blob '\(key)' to its owner")
                unlink(temporary)
                throw error
            }
            return try install(temporary, at: key)
        }
        try copyDurably(from: source, to: temporary)
        return try install(temporary, at: key)
    }

    public func put(key: String, data: Data) async throws -> BlobInfo {
        _ = try joinedPath(key)
        let temporary = temporaryPath()
        try data.withUnsafeBytes { bytes in
            try writeDurably(to: temporary) { output in try Self.writeAll(bytes, to: output, path: temporary) }
        }
        return try install(temporary, at: key)
    }

    /// Creates `destination` (0600, never an existing file), lets `body` fill it and
    /// flushes it to disk; on any failure nothing is left at `destination`.
    private func writeDurably(to destination: String, _ body: (Int32) throws -> Void) throws {
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw BlobStoreError.fileSystem(errno, "blob directory \(root): cannot create \(destination)") }
        var done = false
        defer {
            close(output)
            if !done { unlink(destination) }
        }
        try body(output)
        guard fsync(output) == 0 else { throw BlobStoreError.fileSystem(errno, "blob directory \(root): cannot flush \(destination)") }
        done = true
    }

    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to output: Int32, path: String) throws {
        var offset = 0
        while offset < bytes.count {
            let written = write(output, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw BlobStoreError.fileSystem(errno, "cannot write \(path)")
            }
            offset += written
        }
    }

    private func copyDurably(from source: String, to destination: String) throws {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw BlobStoreError.fileSystem(errno, "cannot read '\(source)'") }
        defer { close(input) }
        try writeDurably(to: destination) { output in
            try Self.readChunks(of: input, size: 1 << 20, failure: "cannot read '\(source)'") { chunk in
                try Self.writeAll(chunk, to: output, path: destination)
            }
        }
    }

    /// Reads `descriptor` to its end by read(2) into one buffer of `size` bytes, handing
    /// each chunk to `body`: FileHandle would read a regular file 4 KB per system call and
    /// copy each chunk into a fresh Data.
    private static func readChunks(
        of descriptor: Int32, size: Int, failure: @autoclosure () -> String, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: max(size, 1), alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let count = Glibc.read(descriptor, chunk.baseAddress, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw BlobStoreError.fileSystem(errno, failure())
            }
            if count == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: chunk[0..<count]))
        }
    }

    public func info(key: String) async throws -> BlobInfo? {
        // fstat, not FileManager's attributes, which also look up the owner's and group's
        // names: a purge asks twice about every file it deletes.
        let fd = try resolve(key, flags: accountlifecycle_o_path)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return BlobInfo(key: key, size: Int64(status.st_size))
    }

    /// The blob opened for reading (the caller closes it), never through a link.
    public func openForReading(key: String) throws -> Int32 {
        let fd = try resolve(key, flags: O_RDONLY)
        guard fd >= 0 else { throw BlobStoreError.notFound(key) }
        return fd
    }

    public func read(key: String, chunkSize: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) async throws {
        let input = try openForReading(key: key)
        defer { close(input) }
        try Self.readChunks(of: input, size: chunkSize, failure: "cannot read blob '\(key)'", body)
    }

    public func list(prefix: String, after: String?, limit: Int) async throws -> [BlobInfo] {
        // Walk only the directory the prefix names, so listing one account stays cheap.
        // Bytes throughout, as S3 compares keys: a prefix may end inside a character.
        let directoryPart = Self.folder(of: prefix)
        if !directoryPart.isEmpty, let problem = BlobKey.fileSystemProblem(directoryPart) { throw BlobStoreError.invalidKey(prefix, problem) }
        let start = try directoryPart.isEmpty ? directory.open("", flags: O_RDONLY | accountlifecycle_o_directory) : resolve(directoryPart, flags: O_RDONLY | accountlifecycle_o_directory)
        guard start >= 0 else { return [] }
        let floor = after.map(ExactText.init)
        var found: [(key: ExactText, size: Int64)] = []
        try collectKeys(in: start, named: directoryPart, keyPrefix: directoryPart.isEmpty ? "" : directoryPart + "/", into: &found) { key in
            key.text.hasExactPrefix(prefix) && floor.map { key > $0 } ?? true
        }
        found.sort { $0.key < $1.key }
        return found.prefix(limit).map { BlobInfo(key: $0.key.text, size: $0.size) }
    }

    /// The regular files below the open `folder` (closed here) as keys, with their sizes;
    /// readdir's entry types spare a stat for every file not wanted. A link is neither
    /// listed nor walked into: what it leads to is not the store's.
    private func collectKeys(
        in folder: Int32, named: String, keyPrefix: String, into found: inout [(key: ExactText, size: Int64)], where wanted: (ExactText) -> Bool
    ) throws {
        guard let stream = fdopendir(folder) else {
            let code = errno
            close(folder)
            throw BlobStoreError("cannot list blobs in \(root)/\(named): \(String(cString: strerror(code)))")
        }
        defer { closedir(stream) }
        let descriptor = dirfd(stream)
        var subdirectories: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." || (keyPrefix.isEmpty && name == Self.incomingFolder) { continue }
            let type = Int32(entry.pointee.d_type)
            if type == Int32(DT_DIR) {
                subdirectories.append(name)
                continue
            }
            // Links, sockets and the like are no blobs; a file system that gives no type is asked.
            guard type == Int32(DT_REG) || type == Int32(DT_UNKNOWN) else { continue }
            let key = ExactText(keyPrefix + name)
            if type == Int32(DT_REG) && !wanted(key) { continue }
            var status = stat()
            guard fstatat(descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { continue }  // Deleted since readdir saw it.
            if (status.st_mode & S_IFMT) == S_IFDIR {
                subdirectories.append(name)
            } else if (status.st_mode & S_IFMT) == S_IFREG, wanted(key) {
                found.append((key, Int64(status.st_size)))
            }
        }
        for name in subdirectories {
            let child = openat(descriptor, name, O_RDONLY | accountlifecycle_o_directory | accountlifecycle_o_nofollow | O_CLOEXEC)
            guard child >= 0 else {
                if errno == ENOENT || errno == ENOTDIR || errno == ELOOP { continue }  // Gone, or swapped for a link, since.
                throw BlobStoreError.fileSystem(errno, "cannot list blobs in \(root)/\(keyPrefix)\(name)")
            }
            try collectKeys(in: child, named: keyPrefix + name, keyPrefix: keyPrefix + name + "/", into: &found, where: wanted)
        }
    }

    public func delete(keys: [String]) async throws {
        var folders: [String: Int32] = [:]
        defer { for fd in folders.values where fd >= 0 { close(fd) } }
        for key in keys {
            _ = try joinedPath(key)
            let folderPart = Self.folder(of: key)
            if folders[folderPart] == nil { folders[folderPart] = try openFolder(folderPart) ?? -1 }
            guard let folder = folders[folderPart], folder >= 0 else { continue }  // Its folder is gone: so is it.
            if unlinkat(folder, Self.name(of: key), 0) != 0 && errno != ENOENT {
                throw BlobStoreError.fileSystem(errno, "blob directory \(root): cannot delete blob '\(key)'")
            }
        }
        // Deepest first, once per directory rather than once per file.
        for folder in folders.keys.sorted(by: { $0.utf8.count > $1.utf8.count }) { removeEmptyDirectories(from: folder) }
    }

    public func move(from: String, to: String) async throws {
        _ = try joinedPath(to)
        guard let source = try openFolder(Self.folder(of: from)) else {
            if try await info(key: to) != nil { return }  // Already moved by an earlier run of the same step.
            throw BlobStoreError.notFound(from)
        }
        defer { close(source) }
        guard let destination = try openFolder(Self.folder(of: to), create: true) else { throw BlobStoreError.notFound(to) }
        defer { close(destination) }
        guard renameat(source, Self.name(of: from), destination, Self.name(of: to)) == 0 else {
            let code = errno
            var status = stat()
            if code == ENOENT, fstatat(destination, Self.name(of: to), &status, AT_SYMLINK_NOFOLLOW) == 0 { return }
            throw BlobStoreError.fileSystem(code, "blob directory \(root): cannot move blob '\(from)' to '\(to)'")
        }
        removeEmptyDirectories(from: Self.folder(of: from))
    }

    /// A purged account should leave no empty directories that still carry its id. Each is
    /// removed from its parent's descriptor: a link in its place is not a directory to remove.
    private func removeEmptyDirectories(from start: String) {
        var folder = start
        while !folder.isEmpty {
            let parentPart = Self.folder(of: folder)
            guard let parent = try? openFolder(parentPart), parent >= 0 else { return }
            let removed = unlinkat(parent, Self.name(of: folder), AT_REMOVEDIR) == 0
            close(parent)
            if !removed { return }
            folder = parentPart
        }
    }
}

public enum FileDigest {
    /// A SHA-256 as lowercase hex: 64 of 0-9a-f.
    public static func isHexSHA256(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// SHA-256 (hex) and size of a file, read in 256 KiB chunks into one buffer: the
    /// floor `make bench` holds the export's archive writing against runs exactly this.
    public static func sha256(ofFile path: String) throws -> (hex: String, size: Int64) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw BlobStoreError("cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var hasher = SHA256()
        var size: Int64 = 0
        while true {
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw BlobStoreError("cannot read '\(path)': \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            size += Int64(n)
        }
        return (hex(hasher.finalize()), size)
    }

    /// Lowercase hex. By table rather than `String(format:)`, which goes through
    /// CoreFoundation's format parser once per byte: the purge hashes every account's
    /// lookup values and blob keys with it.
    public static func hex(_ digest: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(digest.underestimatedCount * 2)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
