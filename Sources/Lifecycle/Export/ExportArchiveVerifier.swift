import Archiving
import Crypto
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
                var hasher = SHA256()
                let bytes = try content.forEachChunk { hasher.update(bufferPointer: $0) }
                total += bytes
                let digest = FileDigest.hex(hasher.finalize())
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
