import Archiving
import Foundation
import JobRunner
import Logging

/// A complete archive on local disk, before it goes to the blob store.
struct BuiltArchive: Sendable {
    var path: String
    var workDirectory: String
    var bytes: Int64
    var entries: Int
    var rowCounts: [String: Int]
    /// Files the manifest lists as left out (missing, corrupt, or never handed out).
    var omittedFiles: Int
    var photos: Int
    var photoBytes: Int64
    /// Wall-clock seconds spent streaming the tables into the archive (JSON) and a file
    /// (CSV), and writing the whole archive, tables included, from opening it to its fsync
    /// (for `jobs show`, and what the benchmark compares).
    var tablesSeconds: Double
    var archiveSeconds: Double
    /// CPU time (user + system, all threads) the process spent while the archive was
    /// written, and the wall time of its last step, the fsync that makes it durable.
    var archiveCPUSeconds: Double
    var finalSyncSeconds: Double
    /// The archive file, when every byte of it was read back from the disk and compared as it was written.
    var comparedFile: StoredFileIdentity?
}

/// User + system CPU time of the whole process, every thread included.
enum ProcessCPUTime {
    static func seconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        let who = RUSAGE_SELF.rawValue
        #else
        let who = RUSAGE_SELF
        #endif
        guard getrusage(who, &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}

/// Local scratch space for exports. Beside the blobs when they are files, so handing
/// the finished archive to the blob store is a rename, not a 2 GB copy.
enum ExportScratch {
    static func directory(for blobs: any BlobStore) -> String {
        if let files = blobs as? FileSystemBlobStore {
            return (files.root as NSString).appendingPathComponent(".incoming/exports")
        }
        return (NSTemporaryDirectory() as NSString).appendingPathComponent("lifecycle-exports")
    }

    /// One folder per export, so a rerun after a crash overwrites what the killed run left.
    static func workDirectory(for blobs: any BlobStore, exportID: String) -> String {
        (directory(for: blobs) as NSString).appendingPathComponent(exportID)
    }
}

/// Writes the export archive of one account of an app's own database, from its data map:
/// README.txt, one JSON and one CSV file per `export_file` (the user row, every table
/// the user's rows are in, both sides of rows naming two users), every file a `blobs:`
/// column of those rows names under `files/<table>/`, and manifest.json last, since the
/// files' checksums are known only once they are copied.
///
/// Memory stays bounded by the page size: rows come page by page, and the file lists go
/// through files in the work directory; only the set of names already used is held.
struct ExportArchiveBuilder<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let settings: ExportSettings
    let appData: AppData
    let exportID: String
    let subjectKey: String
    let format: ArchiveFormat
    let cutoff: Date
    let expiresAt: Date
    let skipMissingFiles: Bool
    let logger: Logger
    let progress: @Sendable (String) -> Void

    var root: String { ExportNames.rootFolder(accountID: subjectKey, cutoff: cutoff) }

    /// A file that changes under the export (the app replaced it, or deleted it) ends
    /// the archive: it is planned and written again from the start once; a second change
    /// fails the attempt, and the job retries later.
    ///
    /// Files whose size or SHA-256 is not what their rows record are planned and copied
    /// again first, all together (a row may have moved on to a new file meanwhile); those
    /// that differ again are corrupt: the export fails naming them, or, with
    /// `skipMissingFiles`, the archive is written once more without them (a partly written
    /// entry cannot be taken back) and the manifest lists them among the omitted files.
    /// However many files are corrupt, that is at most three archives.
    func build() async throws -> BuiltArchive {
        var corrupt: [String: String] = [:]
        var suspected = Set<RecordedFile>()
        var changed = 0
        var rounds = 0
        while true {
            rounds += 1
            guard rounds <= 6 else {
                throw LifecycleError(.tryLater, "the files of account \(subjectKey) kept changing during its export; the export tries again later")
            }
            do {
                return try await buildOnce(corrupt: corrupt)
            } catch let problem as BlobProblem {
                changed += 1
                guard changed < 2 else {
                    throw LifecycleError(.tryLater, "\(problem.reason) (a file of account \(subjectKey) changed twice during its export; the export tries again later)")
                }
                logger.notice("a file changed during the export; writing the archive again", metadata: ["blob_key": "\(problem.key)"])
            } catch let mismatches as RecordedMismatches {
                let fresh = mismatches.files.filter { suspected.insert($0.file).inserted }
                if !fresh.isEmpty {
                    logger.notice("files differ from what their rows record; planning the archive again", metadata: ["files": "\(fresh.count)"])
                    continue
                }
                guard skipMissingFiles else {
                    let shown = mismatches.files.prefix(10).map(\.reason).joined(separator: "; ")
                    let more = mismatches.files.count > 10 ? " (and \(mismatches.files.count - 10) more)" : ""
                    throw PermanentJobFailure(
                        "\(mismatches.files.count) file(s) cannot be exported: \(shown)\(more). Restore them, or run the export again with --skip-missing-photos to leave them out (each is then listed in manifest.json)")
                }
                logger.warning("files left out of the export; writing the archive again without them", metadata: ["files": "\(mismatches.files.count)"])
                for mismatch in mismatches.files { corrupt[mismatch.file.key] = mismatch.reason }
            }
        }
    }

    /// A file as a row records it: its key and the digest and size the row gives.
    struct RecordedFile: Hashable {
        var key: String
        var sha256: String?
        var bytes: Int64?
    }

    /// Files whose size or SHA-256 is not what their rows record, found planning or copying.
    struct RecordedMismatches: Error {
        var files: [(file: RecordedFile, reason: String)]
    }

    struct PlannedFile: Codable {
        var name: String
        var key: String
        var bytes: Int64
        var modified: Date
        var source: String
        /// The SHA-256 the row records, lowercased; nil when the map names no column for it
        /// or the row holds no digest.
        var sha256: String?
        var recordedBytes: Int64?
    }

    struct CopiedFile: Codable {
        var name: String
        var key: String
        var bytes: Int64
        var sha256: String
        var source: String
    }

    struct Omitted: Codable {
        var key: String
        var source: String
        var reason: String
    }

    private func buildOnce(corrupt: [String: String]) async throws -> BuiltArchive {
        let work = try ExportEntries.freshWorkDirectory(blobs: services.exports, exportID: exportID)
        let appData = self.appData
        let key = subjectKey
        // Row level security this role does not bypass would hand out part of the account.
        try await AppErasure.requireAccess(appData, store: services.store, exportOnly: true)
        guard let timeZone = try await services.store.read({ tx in try appData.exists(key: key, in: tx) ? try appData.timeZone(key: key, in: tx) : nil }) else {
            throw PermanentJobFailure("account \(key) no longer exists in \(appData.displayName(appData.plan.subject.table))")
        }
        let tables = appData.sql.exportedTables()
        let plan = try await planFiles(tables, planPath: work + "/files.plan", timeZone: timeZone, corrupt: corrupt)
        guard plan.mismatched.isEmpty else { throw RecordedMismatches(files: plan.mismatched) }

        let clock = ContinuousClock()
        let entries = try ExportEntries(root: root, cutoff: cutoff, work: work, format: format, settings: settings, blobs: services.blobs)

        let stems = tables.compactMap { table in
            stem(of: table).map { (stem: $0, text: table.fileDescription ?? "your rows of \(appData.displayName(table.name))") }
        }
        let readme = try entries.addText(
            ExportDocuments.appReadme(
                accountID: subjectKey, generatedAt: cutoff, expiresAt: expiresAt, tableFiles: stems, timeZone: timeZone,
                rateLimitHours: settings.rateLimitHours),
            name: "README.txt")

        let tablesStarted = clock.now
        progress("writing tables")
        var rowCounts: [(String, Int)] = []
        var written = [readme]
        for table in tables {
            guard let stem = stem(of: table) else { continue }
            let (files, count) = try await writeTable(table, stem: stem, entries: entries)
            written += files
            rowCounts.append((stem, count))
        }
        let tablesSeconds = (clock.now - tablesStarted).seconds

        progress("writing files: \(plan.count) file(s), \(plan.bytes) bytes")
        let copiedPath = work + "/files.copied"
        let copiedList = try HashingFileOutput(path: copiedPath)
        let encoder = JSONEncoder()
        var copiedCount = 0
        var mismatched: [(file: RecordedFile, reason: String)] = []
        try await JSONLines.forEach(PlannedFile.self, at: plan.path) { file in
            let copied = try await entries.addBlob(
                key: file.key, name: file.name, bytes: file.bytes, recorded: "it had when the export listed it", modified: file.modified)
            if let recorded = file.sha256, copied.sha256 != recorded {
                mismatched.append((
                    RecordedFile(key: file.key, sha256: recorded, bytes: file.recordedBytes),
                    "\(file.source) names \(file.key), whose SHA-256 is \(copied.sha256) but the row records \(recorded) (corrupted)"))
            }
            try JSONLines.append(CopiedFile(name: file.name, key: file.key, bytes: copied.bytes, sha256: copied.sha256, source: file.source), to: copiedList, with: encoder)
            copiedCount += 1
            if copiedCount % 100 == 0 { progress("files \(copiedCount)/\(plan.count)") }
        }
        _ = try copiedList.finish(archivePath: "")
        guard mismatched.isEmpty else { throw RecordedMismatches(files: mismatched) }

        let manifest = try await writeManifest(to: work + "/manifest.json", files: written, copiedPath: copiedPath, rowCounts: rowCounts, omitted: plan.omitted)
        try await entries.addLocalFile(manifest, from: work + "/manifest.json")

        let closed = try entries.close()
        return BuiltArchive(
            path: entries.archivePath, workDirectory: work, bytes: closed.bytes, entries: closed.entries,
            rowCounts: Dictionary(rowCounts, uniquingKeysWith: +),
            omittedFiles: plan.omitted.count, photos: plan.count, photoBytes: plan.bytes,
            tablesSeconds: tablesSeconds, archiveSeconds: closed.seconds, archiveCPUSeconds: closed.cpuSeconds,
            finalSyncSeconds: closed.finalSyncSeconds, comparedFile: closed.comparedFile)
    }

    private func stem(of table: ExportedTable) -> String? {
        table.owner == nil ? (table.exportFile ?? ExportNames.appSubjectFile) : table.exportFile
    }

    // MARK: Tables

    private func writeTable(_ table: ExportedTable, stem: String, entries: ExportEntries) async throws -> ([WrittenFile], Int) {
        guard stem.lowercased() != "manifest" else {
            throw PermanentJobFailure("\(appData.map.source): export_file 'manifest' would replace the archive's own manifest.json; choose another name")
        }
        return try await entries.writeMappedTable(
            table, stem: stem, appData: appData, store: services.store, key: subjectKey, limit: settings.batchRows)
    }

    // MARK: Files

    struct FilePlan {
        var path: String
        var count = 0
        var bytes: Int64 = 0
        var omitted: [Omitted] = []
        /// Files whose size is not what their rows record.
        var mismatched: [(file: RecordedFile, reason: String)] = []
    }

    /// Lists every file the user's rows name, each once, and checks each is there before
    /// anything is archived, so missing files are reported together and up front.
    /// `corrupt`: files found to differ from their row's digest, left out with the reason.
    private func planFiles(_ tables: [ExportedTable], planPath: String, timeZone: TimeZone, corrupt: [String: String]) async throws -> FilePlan {
        var plan = FilePlan(path: planPath)
        var problems: [Omitted] = []
        // Keys as bytes: an NFC and an NFD spelling are two files of the store.
        var seenKeys = Set<ExactText>()
        var lifecycleOwn: [Omitted] = []
        var refused: [Omitted] = []
        var usedNames = Set<String>()
        let output = try HashingFileOutput(path: planPath)
        let encoder = JSONEncoder()
        let store = services.store
        let sql = appData.sql
        let limit = settings.batchRows
        let key = subjectKey
        for table in tables {
            let folder = "files/" + ExportNames.segment(appData.displayName(table.name), fallback: "table")
            // A file catalog's rows are her files (Storage's objects): those the store holds go
            // in, as the purge deletes them; a row whose file this store does not hold (laid
            // out otherwise) names none here.
            if let catalog = sql.plan.plan(for: table.name), !catalog.table.fileKey.isEmpty {
                let source = "\(appData.displayName(table.name)).\(catalog.table.fileKey.joined(separator: "/"))"
                var after: String?
                while true {
                    let from = after
                    let page = try await store.read { tx in try tx.rows(sql.catalogFileKeys(catalog, key: key, after: from, limit: limit)) }
                    for row in page {
                        guard let blobKey = row.first?.text, seenKeys.insert(ExactText(blobKey)).inserted else { continue }
                        guard !BlobKey.isLifecycleOwn(blobKey) else {
                            lifecycleOwn.append(Omitted(key: blobKey, source: source, reason: "\(source) names \(blobKey), one of lifecycle's own files, which no export hands out"))
                            continue
                        }
                        guard services.blobs.keyProblem(blobKey) == nil else { continue }
                        guard case .found(let info) = try await lookUp(blobKey, source: source, refused: &refused) else { continue }
                        let name = uniqueName(folder: folder, key: blobKey, date: nil, timeZone: timeZone, contentType: nil, used: &usedNames)
                        try JSONLines.append(PlannedFile(name: name, key: blobKey, bytes: info.size, modified: cutoff, source: source), to: output, with: encoder)
                        plan.count += 1
                        plan.bytes += info.size
                    }
                    guard page.count == limit, let last = page.last?.first?.text else { break }
                    after = last
                }
            }
            for column in table.blobs {
                let source = "\(appData.displayName(table.name)).\(column)"
                var after: String?
                while true {
                    let from = after
                    let page = try await store.read { tx in try tx.rows(sql.exportFiles(table, column: column, key: key, after: from, limit: limit)) }
                    for row in page {
                        guard let blobKey = row.first?.text, seenKeys.insert(ExactText(blobKey)).inserted else { continue }
                        // Never one of lifecycle's own files (another account's archive), whatever a row says.
                        guard !BlobKey.isLifecycleOwn(blobKey) else {
                            lifecycleOwn.append(Omitted(key: blobKey, source: source, reason: "\(source) names \(blobKey), one of lifecycle's own files, which no export hands out"))
                            continue
                        }
                        if let problem = services.blobs.keyProblem(blobKey) {
                            problems.append(Omitted(
                                key: blobKey, source: source, reason: "\(source) names \(BlobKey.quoted(blobKey)), which this blob store cannot hold: \(problem)"))
                            continue
                        }
                        let looked = try await lookUp(blobKey, source: source, refused: &refused)
                        if looked == .refused { continue }
                        guard case .found(let info) = looked else {
                            problems.append(Omitted(key: blobKey, source: source, reason: "\(source) names \(blobKey), which is not in the blob store"))
                            continue
                        }
                        if let reason = corrupt[blobKey] {
                            problems.append(Omitted(key: blobKey, source: source, reason: reason))
                            continue
                        }
                        var recordedSize: Int64?
                        if case .integer(let size) = row[3] { recordedSize = size }
                        // A digest the row cannot mean (empty, not hex) checks nothing.
                        let recordedDigest = row[2].text.map { $0.lowercased() }.flatMap { FileDigest.isHexSHA256($0) ? $0 : nil }
                        if let recordedSize, recordedSize != info.size {
                            plan.mismatched.append((
                                RecordedFile(key: blobKey, sha256: recordedDigest, bytes: recordedSize),
                                "\(source) names \(blobKey), which has \(info.size) bytes but the row records \(recordedSize) (corrupted)"))
                            continue
                        }
                        var date: Date?
                        if case .timestamp(let value) = row[1] { date = value }
                        if case .text(let text) = row[1] { date = ISO8601.parse(text) }
                        let name = uniqueName(folder: folder, key: blobKey, date: date, timeZone: timeZone, contentType: row[4].text, used: &usedNames)
                        try JSONLines.append(
                            PlannedFile(
                                name: name, key: blobKey, bytes: info.size, modified: date ?? cutoff, source: source, sha256: recordedDigest,
                                recordedBytes: recordedSize),
                            to: output, with: encoder)
                        plan.count += 1
                        plan.bytes += info.size
                    }
                    guard page.count == limit, let last = page.last?.first?.text else { break }
                    after = last
                }
            }
        }
        _ = try output.finish(archivePath: "")
        // Never handed out, never a reason to fail the export: named in the manifest instead.
        plan.omitted = lifecycleOwn + refused
        if !problems.isEmpty {
            guard skipMissingFiles else {
                let shown = problems.prefix(10).map(\.reason).joined(separator: "; ")
                let more = problems.count > 10 ? " (and \(problems.count - 10) more)" : ""
                throw PermanentJobFailure(
                    "\(problems.count) file(s) cannot be exported: \(shown)\(more). Restore them, or run the export again with --skip-missing-photos to leave them out (each is then listed in manifest.json)")
            }
            plan.omitted += problems
        }
        return plan
    }

    private enum LookedUp: Equatable {
        case found(BlobInfo)
        case absent
        /// Its path crosses a symbolic link: left out, named in `refused`.
        case refused
    }

    /// A file a row names, as the store has it; one reached only through a symbolic link
    /// is never handed out, and is named with the reason in the manifest's omitted files.
    private func lookUp(_ blobKey: String, source: String, refused: inout [Omitted]) async throws -> LookedUp {
        do {
            return try await services.blobs.info(key: blobKey).map(LookedUp.found) ?? .absent
        } catch let error as BlobStoreError where error.isUnsafePath {
            refused.append(Omitted(key: blobKey, source: source, reason: "\(source) names \(BlobKey.quoted(blobKey)), which is not a safe path: \(error)"))
            return .refused
        }
    }

    /// `files/<table>/YYYY/MM/DD/<last part of the key>` (the date from the row's first
    /// timestamp that is set, in her time zone), the recorded media type's extension added
    /// to a key without one, a number added when two keys end alike. Alike as `String`
    /// compares, case and Unicode normalisation aside: an NFC and an NFD name would be one
    /// file once unpacked on a Mac, so the second gets a number.
    private func uniqueName(folder: String, key: String, date: Date?, timeZone: TimeZone, contentType: String?, used: inout Set<String>) -> String {
        var directory = folder
        if let date {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = timeZone
            let day = calendar.dateComponents([.year, .month, .day], from: date)
            directory += String(format: "/%04d/%02d/%02d", day.year ?? 1970, day.month ?? 1, day.day ?? 1)
        }
        let lastSegment = key.utf8.split(separator: UInt8(ascii: "/")).last.map { String(decoding: $0, as: UTF8.self) } ?? key
        var last = ExportNames.segment(lastSegment, fallback: "file")
        // `zoe.profile` is an id with a dot, not a file type: the recorded type decides.
        if let ext = contentType.flatMap(ExportNames.fileExtension(contentType:)),
           !ExportNames.extensions(meaning: ext).contains((last as NSString).pathExtension.lowercased()) {
            last += "." + ext
        }
        var name = directory + "/" + last
        var number = 2
        while !used.insert(name.lowercased()).inserted {
            let stem = (last as NSString).deletingPathExtension
            let ext = (last as NSString).pathExtension
            name = directory + "/" + stem + "-\(number)" + (ext.isEmpty ? "" : "." + ext)
            number += 1
        }
        return name
    }

    // MARK: Manifest

    private func writeManifest(
        to path: String, files: [WrittenFile], copiedPath: String, rowCounts: [(String, Int)], omitted: [Omitted]
    ) async throws -> WrittenFile {
        let header = ManifestOutput.header(
            exportID: exportID, accountID: subjectKey, root: root, cutoff: cutoff, expiresAt: expiresAt, rowCounts: rowCounts)
        let omittedJSON = OrderedJSON.array(omitted.map {
            .object([("blob_key", .string($0.key)), ("source", .string($0.source)), ("reason", .string($0.reason))])
        })
        return try await ManifestOutput.write(to: path, header: header, files: files, more: { line in
            try await JSONLines.forEach(CopiedFile.self, at: copiedPath) { file in
                try line(.object([
                    ("path", .string(file.name)), ("bytes", .integer(file.bytes)), ("sha256", .string(file.sha256)),
                    ("source", .string(file.source)), ("blob_key", .string(file.key)),
                ]))
            }
        }, closing: ("omitted_files", omittedJSON))
    }
}

extension ExportValue {
    /// A value read from an app's table; text in a column the map lists under
    /// `timestamps:` becomes a timestamp when it is one (else it stays as stored).
    public init(_ value: SQLValue, timestamp: Bool) {
        switch value {
        case .null: self = .null
        case .integer(let number): self = .integer(number)
        case .real(let number): self = .real(number)
        case .boolean(let flag): self = .boolean(flag)
        case .timestamp(let date): self = .timestamp(date)
        case .bytes(let data): self = .bytes(data)
        case .text(let text): self = timestamp ? ISO8601.parse(text).map(ExportValue.timestamp) ?? .text(text) : .text(text)
        }
    }
}

/// Lists too long to hold, one JSON object per line in a file of the export's work directory.
enum JSONLines {
    /// One encoder serves a whole list: a plan may hold a line per photo of the account.
    static func append(_ value: some Encodable, to output: HashingFileOutput, with encoder: JSONEncoder) throws {
        output.append(Array(try encoder.encode(value)))
        output.append(0x0A)
        try output.flushIfFull()
    }

    static func forEach<T: Decodable>(_ type: T.Type, at path: String, _ body: (T) async throws -> Void) async throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw LifecycleError(.unavailable, "cannot read the list \(path)")
        }
        defer { try? handle.close() }
        var reader = LineReader(handle: handle)
        let decoder = JSONDecoder()
        while let line = try reader.next() {
            guard !line.isEmpty else { continue }
            try await body(try decoder.decode(T.self, from: Data(line.utf8)))
        }
    }
}
