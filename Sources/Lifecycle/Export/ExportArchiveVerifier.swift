import Archiving
import Dispatch
import Foundation
import Synchronization

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
/// A ZIP whose every byte was already read back from the disk while it was written, and
/// found equal to what the writer produced (`comparedWhenWritten`, see
/// ``ArchiveWriter/bytesReadBack``), is not read a second time: a byte-for-byte comparison
/// finds every changed byte, where a CRC-32 misses one change in 2^32, so what is left to
/// check is the structure, through the central directory, each entry's local header and
/// manifest.json: names, sizes, nothing missing or unlisted. Reading 2 GB back once more
/// took as long as writing it (the disk here reads at about 1 GB/s, whatever the number
/// of readers), where the comparison runs while the writer waits on hashing. The export
/// relies on it only for the very file compared, unchanged since and within the same boot
/// (``StoredFileIdentity``): the comparison ran before the archive's fsync, so a disk that
/// acknowledged writes from a volatile cache and then lost power could still lose blocks
/// it had returned, and after a restart the archive is read whole.
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

    /// `readers`: how many read a ZIP's entries at once, each its own share (see
    /// ``EntryShare``; a tar.gz's one compressed stream can only be read in order). Inflating
    /// the tables is most of a photo-less export's verification, and one reader leaves the
    /// other cores idle while the export waits for it (100,000 journal entries: about 55 ms
    /// with one reader, 40 ms with two).
    static func verify(
        path: String, root: String, exportID: String, format: ArchiveFormat, readers: Int = 2, comparedWhenWritten: Bool = false
    ) throws -> Summary {
        if format == .zip, comparedWhenWritten {
            return try verify(path: path, root: root, exportID: exportID, share: .all, readsData: false)
        }
        guard format == .zip, readers > 1 else {
            return try verify(path: path, root: root, exportID: exportID, share: .all)
        }
        let helpers = (1..<readers).map { HelperReader(path: path, root: root, share: EntryShare(reader: $0, of: readers)) }
        var started = 0
        while started < helpers.count, helpers[started].start() { started += 1 }
        guard started == helpers.count else {
            // No thread to be had: one reader reads it all, as it would on one core.
            helpers[..<started].forEach { $0.stop(after: -1) }
            helpers[..<started].forEach { _ = $0.result() }
            return try verify(path: path, root: root, exportID: exportID, share: .all)
        }
        return try verify(path: path, root: root, exportID: exportID, share: EntryShare(reader: 0, of: readers), helpers: helpers)
    }

    /// Which entries of a ZIP one reader reads. Shared out: the files at the archive root
    /// (documents and tables), which are deflated, so reading them back is inflating, CPU
    /// work that gains from another core. Kept with the first reader: manifest.json, and
    /// the files in folders (photos, an app's files), stored as they are, so reading them
    /// back is reading the disk, which delivers one stream fastest (measured here: 1 GB of
    /// stored photos read back in 1.0 s by one reader, 1.08 s by two). Each shared entry
    /// goes to the reader with the fewest bytes so far (by the sizes the central directory
    /// records), which every reader works out alike from the same headers, so no entry is
    /// read twice or left out.
    struct EntryShare {
        var reader: Int
        var of: Int
        private var loads: [Int64]

        init(reader: Int, of readers: Int) {
            self.reader = reader
            self.of = readers
            loads = Array(repeating: 0, count: readers)
        }

        static var all: EntryShare { EntryShare(reader: 0, of: 1) }

        /// The reader that reads the next file entry, named relative to the archive root.
        mutating func owner(ofFile name: Substring, size: Int64?) -> Int {
            guard of > 1 else { return 0 }
            let shared = name != "manifest.json" && !name.contains("/") && size != nil
            let owner = shared ? loads.indices.min { loads[$0] < loads[$1] }! : 0
            loads[owner] += max(size ?? 0, 0)
            return owner
        }
    }

    /// Reads its share of a ZIP's entries to their end, which checks each one's CRC-32, and
    /// keeps each one's byte count by entry index for the first reader to check against the manifest.
    final class HelperReader: Sendable {
        let path: String
        let root: String
        private let share: EntryShare
        private let state = Mutex<(counts: [Int: Int64], failure: (index: Int, error: any Error)?, stopAfter: Int)>(([:], nil, .max))
        private let finished = DispatchSemaphore(value: 0)

        init(path: String, root: String, share: EntryShare) {
            self.path = path
            self.root = root
            self.share = share
        }

        struct Stopped: Error {}

        /// On a thread of its own: a reader blocks while its read-ahead runs on Dispatch's
        /// shared threads, and with every one of those blocked, libdispatch on Linux adds
        /// another only after about half a second (measured: verification took 0.5 s longer).
        /// pthread_create, not Foundation's Thread, which on Linux does not say when no
        /// thread could be made (and `result()` would then wait forever). False: none was.
        func start() -> Bool {
            let retained = Unmanaged.passRetained(self)
            var thread = pthread_t()
            let status = pthread_create(&thread, nil, { context in
                Unmanaged<HelperReader>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, retained.toOpaque())
            guard status == 0 else {
                retained.release()
                return false
            }
            pthread_detach(thread)
            return true
        }

        /// Reads no entry after `index` (what the first reader failed on): a failure of this
        /// reader's before it still counts, so the reported one is the first in the archive
        /// however the entries were shared.
        func stop(after index: Int) { state.withLock { $0.stopAfter = index } }

        private func run() {
            var share = self.share
            var index = -1
            do {
                try ArchiveReader.forEachEntry(path: path) { info, content in
                    index += 1
                    if state.withLock({ index > $0.stopAfter }) { throw Stopped() }
                    let name = info.name.hasPrefix(root + "/") ? info.name.dropFirst(root.count + 1) : Substring(info.name)
                    guard info.kind == .file, share.owner(ofFile: name, size: info.size) == share.reader else { return }
                    let bytes = try content.readToEnd()
                    state.withLock { $0.counts[index] = bytes }
                }
            } catch is Stopped {
            } catch {
                state.withLock { $0.failure = (index, error) }
            }
            finished.signal()
        }

        /// Waits for the reader to finish; its byte counts, or what it failed on and at which entry.
        func result() -> (counts: [Int: Int64], failure: (index: Int, error: any Error)?) {
            finished.wait()
            finished.signal()
            return state.withLock { ($0.counts, $0.failure) }
        }
    }

    /// What a reader's failure says to the export.
    private static func verificationFailure(_ error: any Error) -> any Error {
        switch error {
        case let error as ArchiveError: ExportVerificationFailure(message: error.description)
        case let error as DecodingError: ExportVerificationFailure(message: "manifest.json cannot be read: \(error)")
        default: error
        }
    }

    /// `readsData` false: entries other than manifest.json are taken at the size their
    /// header records, unread (the caller knows their bytes are right).
    private static func verify(
        path: String, root: String, exportID: String, share: EntryShare, helpers: [HelperReader] = [], readsData: Bool = true
    ) throws -> Summary {
        var share = share
        var manifest: [String: ExportManifest.File]?
        var unchecked: [(name: String, bytes: Int64)] = []
        /// Entries another reader reads, by index: checked once it has.
        var elsewhere: [(index: Int, name: String, reader: Int)] = []
        var seen = Set<String>()
        var entries = 0
        var total: Int64 = 0

        func check(_ name: String, bytes: Int64, against files: [String: ExportManifest.File]) throws {
            guard let listed = files[name] else { throw ExportVerificationFailure(message: "\(name) is not listed in manifest.json") }
            guard listed.bytes == bytes else {
                throw ExportVerificationFailure(message: "\(name) has \(bytes) bytes; manifest.json says \(listed.bytes)")
            }
        }

        // The entry being checked, and whether the failure came while it was (not while
        // the reader looked for the next one).
        var current = -1
        var inside = false
        var failure: (index: Int, error: any Error)?
        do {
            try ArchiveReader.forEachEntry(path: path, pattern: readsData ? .whole : .headers) { info, content in
                current += 1
                inside = true
                defer { inside = false }
                guard info.kind == .file, ArchiveWriter.isSafeEntryName(info.name), info.name.hasPrefix(root + "/") else {
                    throw ExportVerificationFailure(message: "entry \(String(reflecting: info.name)) is not a file under \(root)/")
                }
                let name = String(info.name.dropFirst(root.count + 1))
                guard seen.insert(name).inserted else { throw ExportVerificationFailure(message: "\(name) appears twice") }
                let index = entries
                entries += 1
                let owner = share.owner(ofFile: Substring(name), size: info.size)
                if owner != share.reader {
                    elsewhere.append((index, name, owner))
                    return
                }
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
                let bytes: Int64
                if !readsData, let recorded = info.size {
                    bytes = recorded
                } else {
                    bytes = try content.readToEnd()
                }
                total += bytes
                if let files = manifest {
                    try check(name, bytes: bytes, against: files)
                } else {
                    unchecked.append((name, bytes))
                }
            }
        } catch {
            failure = (inside ? current : current + 1, error)
            helpers.forEach { $0.stop(after: current) }
        }
        // What every reader found, in archive order: the first failure is the one reported,
        // the same whichever reader read the entry.
        let results = helpers.map { $0.result() }
        if let first = ([failure].compactMap { $0 } + results.compactMap(\.failure)).min(by: { $0.index < $1.index }) {
            throw verificationFailure(first.error)
        }
        guard let files = manifest else { throw ExportVerificationFailure(message: "manifest.json is missing") }
        for entry in elsewhere {
            guard let bytes = results[entry.reader - 1].counts[entry.index] else {
                throw ExportVerificationFailure(message: "\(entry.name) was not read back")
            }
            try check(entry.name, bytes: bytes, against: files)
            total += bytes
        }
        let missing = Set(files.keys).subtracting(seen).sorted()
        guard missing.isEmpty else {
            throw ExportVerificationFailure(message: "listed in manifest.json but missing: \(missing.prefix(5).joined(separator: ", "))")
        }
        return Summary(entries: entries, bytes: total)
    }
}

/// Which file a path names, and in what state. The same device and inode mean the same
/// file (a rename keeps them, a copy does not); the same size and change time (ctime,
/// which every write and every change of the file's metadata moves, and which no program
/// can set back, unlike the modification time that `cp -p` or a restore sets) mean it has
/// not been written since; the same boot means no restart came between, after which blocks
/// a disk had acknowledged from its volatile cache may never have reached it.
struct StoredFileIdentity: Codable, Sendable, Equatable {
    var device: UInt64
    var inode: UInt64
    var bytes: Int64
    var changedNanoseconds: Int64
    var bootID: String

    /// nil when the path cannot be examined.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        bytes = Int64(info.st_size)
        #if canImport(Darwin)
        changedNanoseconds = Int64(info.st_ctimespec.tv_sec) * 1_000_000_000 + Int64(info.st_ctimespec.tv_nsec)
        #else
        changedNanoseconds = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
        #endif
        bootID = Self.currentBootID
    }

    /// Whether `other` names the same file, whatever has happened to it since: renamed, not copied.
    func isSameFile(as other: StoredFileIdentity) -> Bool {
        device == other.device && inode == other.inode
    }

    /// Linux gives every boot a random id; elsewhere nothing is read back as it is written.
    private static let currentBootID: String = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return "" }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }()
}
