import Archiving
import Crypto
import Dispatch
import Foundation

/// The archive does not hold what its manifest promises.
struct ExportVerificationFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { "archive failed verification: \(message)" }
}

/// Reads a finished archive back the way a user's unzip would, entry by entry, and
/// checks it against its own manifest: every listed file present once with its size
/// and SHA-256, nothing unlisted, every name safe and under the archive root.
enum ExportArchiveVerifier {
    struct Summary: Sendable, Codable {
        var entries: Int
        var bytes: Int64
    }

    static let manifestLimit = 512 << 20

    static func verify(path: String, root: String, exportID: String) throws -> Summary {
        var manifest: [String: ExportManifest.File]?
        var unchecked: [(name: String, bytes: Int64, sha256: String)] = []
        var seen = Set<String>()
        var entries = 0
        var total: Int64 = 0
        // libarchive inflates and checks each entry's CRC-32 on this thread while the
        // previous chunk's SHA-256 is computed on another: reading back a 2 GB export
        // then takes about as long as the slower of the two, not their sum.
        let hasher = PipelinedSHA256()

        func check(_ name: String, bytes: Int64, sha256: String, against files: [String: ExportManifest.File]) throws {
            guard let listed = files[name] else { throw ExportVerificationFailure(message: "\(name) is not listed in manifest.json") }
            guard listed.bytes == bytes, listed.sha256 == sha256 else {
                throw ExportVerificationFailure(message: "\(name) has \(bytes) bytes and SHA-256 \(sha256); manifest.json says \(listed.bytes) bytes and \(listed.sha256)")
            }
        }

        do {
            try ArchiveReader.forEachEntry(path: path) { info, content in
                guard info.kind == .file, ArchiveWriter.isSafeEntryName(info.name), info.name.hasPrefix(root + "/") else {
                    throw ExportVerificationFailure(message: "entry \(String(reflecting: info.name)) is not a file under \(root)/")
                }
                let name = String(info.name.dropFirst(root.count + 1))
                guard seen.insert(name).inserted else { throw ExportVerificationFailure(message: "\(name) appears twice") }
                entries += 1
                if name == "manifest.json" {
                    let data = try content.readData(maxBytes: manifestLimit)
                    let decoded = try JSONDecoder().decode(ExportManifest.self, from: data)
                    guard decoded.exportID == exportID, decoded.archiveRoot == root else {
                        throw ExportVerificationFailure(message: "manifest.json belongs to export \(decoded.exportID), not \(exportID)")
                    }
                    let files = Dictionary(decoded.files.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
                    guard files.count == decoded.files.count else { throw ExportVerificationFailure(message: "manifest.json lists a file twice") }
                    for earlier in unchecked { try check(earlier.name, bytes: earlier.bytes, sha256: earlier.sha256, against: files) }
                    unchecked = []
                    manifest = files
                    total += Int64(data.count)
                    return
                }
                var bytes: Int64 = 0
                while true {
                    let n = try hasher.next { try content.read(into: $0) }
                    if n == 0 { break }
                    bytes += Int64(n)
                }
                total += bytes
                let digest = hasher.finish()
                if let files = manifest {
                    try check(name, bytes: bytes, sha256: digest, against: files)
                } else {
                    unchecked.append((name, bytes, digest))
                }
            }
        } catch let error as ArchiveError {
            throw ExportVerificationFailure(message: error.description)
        } catch let error as DecodingError {
            throw ExportVerificationFailure(message: "manifest.json cannot be read: \(error)")
        }
        guard let files = manifest else { throw ExportVerificationFailure(message: "manifest.json is missing") }
        let missing = Set(files.keys).subtracting(seen).sorted()
        guard missing.isEmpty else {
            throw ExportVerificationFailure(message: "listed in manifest.json but missing: \(missing.prefix(5).joined(separator: ", "))")
        }
        return Summary(entries: entries, bytes: total)
    }
}

/// SHA-256 of a stream of chunks, computed on a second thread while the caller fills the
/// next chunk. Two buffers alternate, so a buffer is never refilled while still being
/// hashed. Memory: two ``ArchiveWriter/chunkSize`` buffers. One stream at a time, from
/// one thread.
final class PipelinedSHA256: @unchecked Sendable {
    private let buffers: [UnsafeMutableRawBufferPointer]
    private let free = [DispatchSemaphore(value: 1), DispatchSemaphore(value: 1)]
    private let queue = DispatchQueue(label: "export.verify.sha256")
    private var index = 0
    private var state = State()

    private final class State: @unchecked Sendable {
        var hasher = SHA256()
    }

    private struct Chunk: @unchecked Sendable {
        let bytes: UnsafeRawBufferPointer
    }

    init() {
        buffers = (0..<2).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: ArchiveWriter.chunkSize, alignment: 16) }
    }

    deinit {
        // A chunk still queued reads its buffer: let it finish before freeing them.
        queue.sync {}
        for buffer in buffers { buffer.deallocate() }
    }

    /// `fill` writes into the buffer it is given and returns the byte count; those bytes
    /// join the hash. Returns the count: 0 means `fill` reached the end of the stream.
    func next(_ fill: (UnsafeMutableRawBufferPointer) throws -> Int) throws -> Int {
        let released = free[index]
        released.wait()
        let n: Int
        do {
            n = try fill(buffers[index])
        } catch {
            released.signal()
            throw error
        }
        guard n > 0 else {
            released.signal()
            return 0
        }
        let chunk = Chunk(bytes: UnsafeRawBufferPointer(rebasing: buffers[index][0..<n]))
        let state = self.state
        queue.async {
            state.hasher.update(bufferPointer: chunk.bytes)
            released.signal()
        }
        index ^= 1
        return n
    }

    /// The digest (lowercase hex) of every chunk since the last call; starts a new stream.
    func finish() -> String {
        let state = self.state
        let digest = queue.sync { FileDigest.hex(state.hasher.finalize()) }
        self.state = State()
        return digest
    }
}
