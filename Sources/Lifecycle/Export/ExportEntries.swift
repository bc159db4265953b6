import Archiving
import Crypto
import Foundation

/// A blob that cannot go into the archive as its rows describe it.
struct BlobProblem: Error, CustomStringConvertible {
    var key: String
    var reason: String
    var description: String { reason }
}

/// The entries both kinds of export write, into one archive under its root folder:
/// generated documents, files the export wrote first, tables streamed page by page, and
/// blobs copied in chunks while they are hashed.
struct ExportEntries {
    let root: String
    let cutoff: Date
    let work: String
    let archivePath: String
    let writer: ArchiveWriter
    let copier: ArchiveFileCopier
    let blobs: any BlobStore
    private let opened: ContinuousClock.Instant
    private let cpuAtOpen: Double

    /// The export's work directory, emptied: a rerun after a crash starts over in it.
    static func freshWorkDirectory(blobs: any BlobStore, exportID: String) throws -> String {
        let work = ExportScratch.workDirectory(for: blobs, exportID: exportID)
        try? FileManager.default.removeItem(atPath: work)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return work
    }

    /// Opens `archive.<ext>` in the work directory.
    init(root: String, cutoff: Date, work: String, format: ArchiveFormat, settings: ExportSettings, blobs: any BlobStore) throws {
        self.root = root
        self.cutoff = cutoff
        self.work = work
        self.blobs = blobs
        archivePath = work + "/archive.\(format.fileExtension)"
        opened = ContinuousClock.now
        cpuAtOpen = ProcessCPUTime.seconds()
        // A ZIP in the blob directory is read back as it is written, where the disk has
        // time while the writer waits on hashing (see `ExportArchiveVerifier`). Not a tar.gz,
        // whose verification must inflate its whole stream anyway, nor an archive bound for
        // another store, which is verified from a copy fetched back from there.
        writer = try ArchiveWriter(
            path: archivePath, format: format, compressionLevel: settings.compressionLevel,
            readBack: format == .zip && blobs is FileSystemBlobStore)
        copier = ArchiveFileCopier(
            archivePath: archivePath, throttleMBPerSecond: settings.throttleMBPerSecond, flushesEarly: !writer.bypassesPageCache)
    }

    struct Closed {
        var bytes: Int64
        var entries: Int
        /// From opening to the end of the closing fsync; CPU of the whole process meanwhile; the fsync alone.
        var seconds: Double
        var cpuSeconds: Double
        var finalSyncSeconds: Double
        /// The file, when every byte of it was read back from the disk and compared as it was written.
        var comparedFile: StoredFileIdentity?
    }

    /// Finishes the archive (its fsync included) and says what it took.
    func close() throws -> Closed {
        let closing = ContinuousClock.now
        try writer.close()
        let closed = ContinuousClock.now
        let bytes = (try FileManager.default.attributesOfItem(atPath: archivePath)[.size] as? NSNumber)?.int64Value ?? 0
        return Closed(
            bytes: bytes, entries: writer.entryCount, seconds: (closed - opened).seconds, cpuSeconds: ProcessCPUTime.seconds() - cpuAtOpen,
            finalSyncSeconds: (closed - closing).seconds, comparedFile: writer.bytesReadBack == bytes ? StoredFileIdentity(path: archivePath) : nil)
    }

    /// A generated document, whole, into its own entry.
    func addText(_ text: String, name: String) throws -> WrittenFile {
        let data = Data(text.utf8)
        try writer.addData(name: root + "/" + name, data: data, modified: cutoff, compression: .deflate)
        return WrittenFile(path: name, bytes: Int64(data.count), sha256: FileDigest.hex(SHA256.hash(data: data)))
    }

    /// A file this export wrote into its work directory, checked against the hash it had when written.
    func addLocalFile(_ file: WrittenFile, from path: String) async throws {
        try writer.beginEntry(name: root + "/" + file.path, size: file.bytes, modified: cutoff, compression: .deflate)
        let copied = try await copy(path: path, expectedBytes: file.bytes)
        guard copied.sha256 == file.sha256 else {
            throw LifecycleError(.internalError, "\(path) changed while it was archived")
        }
        try writer.finishEntry()
    }

    /// One table as `<stem>.json` and `<stem>.csv`. Each page is one short read, so the
    /// export never holds a table in memory nor one long transaction open; the next page is
    /// read while this one is written, so the database and the writers each get a core.
    /// The JSON goes straight into its archive entry, compressed as the rows come; the
    /// CSV, which cannot share the archive with it at the same time, goes to a file first.
    func writeTable<Cursor: Sendable>(
        stem: String, columns: [String],
        page: @escaping @Sendable (Cursor?) async throws -> (rows: ExportRowBatch, next: Cursor?)
    ) async throws -> (files: [WrittenFile], rows: Int) {
        let jsonName = root + "/" + stem + ".json"
        try writer.beginEntry(name: jsonName, size: nil, modified: cutoff, compression: .deflate)
        let csvPath = (work as NSString).appendingPathComponent(stem + ".csv")
        let tableWriter = TableFileWriter(
            json: HashingFileOutput(entryName: jsonName, in: writer), csv: try HashingFileOutput(path: csvPath), columns: columns,
            fileStem: stem)
        var pending: Task<(rows: ExportRowBatch, next: Cursor?), any Error>? = Task { try await page(nil) }
        while let current = pending {
            let (batch, next) = try await current.value
            pending = next.map { cursor in Task { try await page(cursor) } }
            for index in 0..<batch.rowCount { try tableWriter.write(batch.row(index)) }
        }
        let files = try tableWriter.finish()
        try writer.finishEntry()
        try await addLocalFile(files[1], from: csvPath)
        try? FileManager.default.removeItem(atPath: csvPath)
        return (files, tableWriter.rowCount)
    }

    /// A mapped table's rows of one account (`DataMapSQL.exportPage`), page by page, as
    /// `<stem>.json` and `<stem>.csv`: the same reader for the reference app and an app's own database.
    func writeMappedTable<Store: LifecycleStore>(
        _ table: ExportedTable, stem: String, appData: AppData, store: Store, key: String, limit: Int
    ) async throws -> (files: [WrittenFile], rows: Int) {
        let sql = appData.sql
        let columnCount = table.columns.count
        return try await writeTable(stem: stem, columns: table.columns) { (after: [SQLValue]?) in
            let page = try await store.read { tx in
                try tx.exportPage(sql.exportPage(table, key: key, after: after, limit: limit), columns: columnCount, limit: limit)
            }
            return (ExportRowBatch(columnCount: columnCount, values: page.values), page.last)
        }
    }

    /// Copies a blob into a stored (not recompressed) entry, hashing it on the way. A blob
    /// gone or of another size than planned throws a ``BlobProblem``; the caller decides
    /// what its rows make of it.
    /// `recorded` names where the expected size comes from, for the message.
    func addBlob(key: String, name: String, bytes expected: Int64, recorded: String, modified: Date) async throws -> (bytes: Int64, sha256: String) {
        try writer.beginEntry(name: root + "/" + name, size: expected, modified: modified, compression: .store)
        let copied: (bytes: Int64, sha256: String)
        if let files = blobs as? FileSystemBlobStore {
            let fd: Int32
            do {
                fd = try files.openForReading(key: key)
            } catch let error as BlobStoreError where error.isNotFound {
                throw BlobProblem(key: key, reason: "its blob \(key) disappeared during the export")
            }
            defer { Glibc.close(fd) }
            copied = try await copy(descriptor: fd, key: key, expectedBytes: expected)
        } else {
            var hasher = SHA256()
            var count: Int64 = 0
            let writer = self.writer
            let copier = self.copier
            do {
                try await blobs.read(key: key, chunkSize: ArchiveWriter.chunkSize) { chunk in
                    guard count + Int64(chunk.count) <= expected else {
                        throw BlobProblem(key: key, reason: "its blob \(key) is larger than the \(expected) bytes \(recorded)")
                    }
                    hasher.update(bufferPointer: chunk)
                    try writer.write(chunk)
                    count += Int64(chunk.count)
                    copier.wrote(chunk.count)
                }
            } catch let error as BlobStoreError where error.isNotFound {
                throw BlobProblem(key: key, reason: "its blob \(key) disappeared during the export")
            }
            copied = (count, FileDigest.hex(hasher.finalize()))
        }
        guard copied.bytes == expected else {
            throw BlobProblem(key: key, reason: "its blob \(key) has \(copied.bytes) bytes, not the \(expected) \(recorded)")
        }
        try writer.finishEntry()
        return copied
    }

    /// A local file into the open entry, on a thread of its own: a multi-gigabyte copy
    /// must not hold one of the few threads the lease heartbeat also needs.
    private func copy(path: String, expectedBytes: Int64) async throws -> (bytes: Int64, sha256: String) {
        let handle = OneThreadAtATime(value: writer)
        let copier = self.copier
        return try await BlockingWork.run { try copier.copy(path: path, into: handle.value, expectedBytes: expectedBytes) }
    }

    private func copy(descriptor: Int32, key: String, expectedBytes: Int64) async throws -> (bytes: Int64, sha256: String) {
        let handle = OneThreadAtATime(value: writer)
        let copier = self.copier
        return try await BlockingWork.run { try copier.copy(descriptor: descriptor, named: "blob \(key)", into: handle.value, expectedBytes: expectedBytes) }
    }
}
