import Foundation
import Crypto

/// The embedded default: one file per blob under a root directory (`./blobs`).
/// Writes go to `<root>/.incoming/` first and are renamed into place, so a reader
/// or a crash never sees half a blob. Blobs are people's photos and archives: files
/// are created 0600 and folders 0700 whatever the umask, so only the owner reads them.
public struct FileSystemBlobStore: BlobStore {
    public let root: String
    /// The folder below the root where writes wait for their rename; no key may begin with it.
    public static let incomingFolder = ".incoming"
    private var incoming: String { root + "/" + Self.incomingFolder }

    public init(root: String) throws {
        self.root = (root as NSString).standardizingPath
        try Self.makeDirectories(self.root, storeRoot: self.root)
        try Self.makeDirectories(self.root + "/" + Self.incomingFolder, storeRoot: self.root)
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
    public func path(for key: String) throws -> String {
        if let problem = BlobKey.fileSystemProblem(key) { throw BlobStoreError.invalidKey(key, problem) }
        return root + "/" + key
    }

    private func temporaryPath() -> String {
        (incoming as NSString).appendingPathComponent("\(getpid())-\(UUID().uuidString)")
    }

    private func install(_ temporary: String, at key: String) throws -> BlobInfo {
        let destination = try path(for: key)
        do {
            try Self.makeDirectories(PathText.parent(destination), storeRoot: root)
        } catch {
            unlink(temporary)
            throw error
        }
        guard rename(temporary, destination) == 0 else {
            let error = BlobStoreError.fileSystem(errno, "blob directory \(root): cannot store blob '\(key)'")
            unlink(temporary)
            throw error
        }
        var status = stat()
        return BlobInfo(key: key, size: stat(destination, &status) == 0 ? Int64(status.st_size) : 0)
    }

    public func put(key: String, fromFile source: String, moving: Bool) async throws -> BlobInfo {
        _ = try path(for: key)
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
        _ = try path(for: key)
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
        let file = try path(for: key)
        // stat, not FileManager's attributes, which also look up the owner's and group's
        // names: a purge asks twice about every file it deletes.
        var status = stat()
        guard lstat(file, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return BlobInfo(key: key, size: Int64(status.st_size))
    }

    public func read(key: String, chunkSize: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) async throws {
        let file = try path(for: key)
        let input = open(file, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { throw BlobStoreError.notFound(key) }
            throw BlobStoreError.fileSystem(errno, "cannot read blob '\(key)'")
        }
        defer { close(input) }
        try Self.readChunks(of: input, size: chunkSize, failure: "cannot read blob '\(key)'", body)
    }

    public func list(prefix: String, after: String?, limit: Int) async throws -> [BlobInfo] {
        // Walk only the directory the prefix names, so listing one account stays cheap.
        // Bytes throughout, as S3 compares keys: a prefix may end inside a character.
        let directoryPart = prefix.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(decoding: prefix.utf8[..<$0], as: UTF8.self) } ?? ""
        // The folder walked is joined to the root as text: `..` or a leading '/' would walk
        // outside it.
        if !directoryPart.isEmpty, let problem = BlobKey.fileSystemProblem(directoryPart) { throw BlobStoreError.invalidKey(prefix, problem) }
        let start = directoryPart.isEmpty ? root : root + "/" + directoryPart
        let floor = after.map(ExactText.init)
        var keys: [ExactText] = []
        try collectKeys(in: start, keyPrefix: directoryPart.isEmpty ? "" : directoryPart + "/", into: &keys) { key in
            key.text.hasExactPrefix(prefix) && floor.map { key > $0 } ?? true
        }
        keys.sort()
        return try keys.prefix(limit).map(\.text).map { key in
            var status = stat()
            guard stat(root + "/" + key, &status) == 0 else {
                if errno == ENOENT { return nil }  // Deleted since the walk saw it.
                throw BlobStoreError("cannot read blob '\(key)': \(String(cString: strerror(errno)))")
            }
            return BlobInfo(key: key, size: Int64(status.st_size))
        }.compactMap { $0 }
    }

    /// The regular files below `directory` as keys. readdir's entry types spare a stat
    /// per file: a nightly purge lists every due account's prefix.
    private func collectKeys(
        in directory: String, keyPrefix: String, into keys: inout [ExactText], where wanted: (ExactText) -> Bool
    ) throws {
        guard let stream = opendir(directory) else {
            if errno == ENOENT || errno == ENOTDIR { return }
            throw BlobStoreError("cannot list blobs in \(directory): \(String(cString: strerror(errno)))")
        }
        defer { closedir(stream) }
        var subdirectories: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." || (keyPrefix.isEmpty && name == Self.incomingFolder) { continue }
            var type = Int32(entry.pointee.d_type)
            if type == Int32(DT_UNKNOWN) {
                var status = stat()
                guard lstat(directory + "/" + name, &status) == 0 else { continue }
                type = (status.st_mode & S_IFMT) == S_IFDIR ? Int32(DT_DIR) : (status.st_mode & S_IFMT) == S_IFREG ? Int32(DT_REG) : 0
            }
            if type == Int32(DT_DIR) {
                subdirectories.append(name)
            } else if type == Int32(DT_REG), case let key = ExactText(keyPrefix + name), wanted(key) {
                keys.append(key)
            }
        }
        for name in subdirectories {
            try collectKeys(in: directory + "/" + name, keyPrefix: keyPrefix + name + "/", into: &keys, where: wanted)
        }
    }

    public func delete(keys: [String]) async throws {
        var parents: Set<ExactText> = []
        for key in keys {
            let file = try path(for: key)
            if unlink(file) != 0 && errno != ENOENT {
                throw BlobStoreError.fileSystem(errno, "blob directory \(root): cannot delete blob '\(key)'")
            }
            parents.insert(ExactText(PathText.parent(file)))
        }
        // Deepest first, once per directory rather than once per file.
        for directory in parents.sorted(by: { $0.text.utf8.count > $1.text.utf8.count }) { removeEmptyDirectories(from: directory.text) }
    }

    public func move(from: String, to: String) async throws {
        let source = try path(for: from)
        let destination = try path(for: to)
        try Self.makeDirectories(PathText.parent(destination), storeRoot: root)
        guard rename(source, destination) == 0 else {
            // Already moved by an earlier run of the same step.
            var status = stat()
            if errno == ENOENT, lstat(destination, &status) == 0 { return }
            throw BlobStoreError.fileSystem(errno, "blob directory \(root): cannot move blob '\(from)' to '\(to)'")
        }
        removeEmptyDirectories(from: PathText.parent(source))
    }

    /// A purged account should leave no empty directories that still carry its id.
    private func removeEmptyDirectories(from start: String) {
        var directory = start
        while directory.utf8.count > root.utf8.count, directory.hasExactPrefix(root + "/") {
            if rmdir(directory) != 0 { return }
            directory = PathText.parent(directory)
        }
    }
}

public enum FileDigest {
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
