import Archiving
import Foundation

/// The archive does not hold what its manifest promises.
struct ExportVerificationFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { "archive failed verification: \(message)" }
}

/// Reads a finished archive back the way a user's unzip would, entry by entry, and
/// checks it against its own manifest: every listed file present once with its size,
/// nothing unlisted, every name safe and under the archive root, and every entry's
/// bytes matching the checksum the archive carries for them.
///
/// It does not compute SHA-256 a second time. The manifest's SHA-256 of each file was
/// taken from the very buffers handed to the archive writer (for photos and copied files
/// also checked against the digest their row records), and the writer computed each ZIP
/// entry's CRC-32 from those same buffers (a tar.gz: zlib the CRC-32 of its whole stream).
/// What can still go wrong is what happens to the bytes after that: a torn or truncated
/// file, a block the disk or the blob store returns changed, a copy cut short. Reading
/// back recomputes those CRC-32s and fails on a mismatch (libarchive per ZIP entry, zlib
/// over a tar.gz's stream once it has been read to its end); CRC-32 catches every error
/// burst of up to 32 bits and any other random change but for one in 2^32, which is the
/// whole class a read-back can find. Someone able to rewrite the archive could rewrite its
/// manifest as well, so a second SHA-256 pass proves nothing more about the stored bytes,
/// and on a CPU without SHA instructions it cost as much as writing the archive.
///
/// What it no longer does is check that the manifest's SHA-256 values were recorded for
/// the right files: that rests on how the export writes them, which its tests check by
/// reading real archives with Python's zipfile and tarfile and hashing every file.
enum ExportArchiveVerifier {
    struct Summary: Sendable, Codable {
        var entries: Int
        var bytes: Int64
    }

    static let manifestLimit = 512 << 20

    static func verify(path: String, root: String, exportID: String) throws -> Summary {
        var manifest: [String: ExportManifest.File]?
        var unchecked: [(name: String, bytes: Int64)] = []
        var seen = Set<String>()
        var entries = 0
        var total: Int64 = 0

        func check(_ name: String, bytes: Int64, against files: [String: ExportManifest.File]) throws {
            guard let listed = files[name] else { throw ExportVerificationFailure(message: "\(name) is not listed in manifest.json") }
            guard listed.bytes == bytes else {
                throw ExportVerificationFailure(message: "\(name) has \(bytes) bytes; manifest.json says \(listed.bytes)")
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
                    for earlier in unchecked { try check(earlier.name, bytes: earlier.bytes, against: files) }
                    unchecked = []
                    manifest = files
                    total += Int64(data.count)
                    return
                }
                let bytes = try content.readToEnd()
                total += bytes
                if let files = manifest {
                    try check(name, bytes: bytes, against: files)
                } else {
                    unchecked.append((name, bytes))
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
