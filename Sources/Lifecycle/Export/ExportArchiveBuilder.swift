import Archiving
import Crypto
import Foundation
import JobRunner
import Logging

/// A photo that cannot go into the archive as the photos row describes it.
struct PhotoProblem: Error, CustomStringConvertible {
    var photoID: String
    var reason: String
    /// The blob the plan named, when the problem came up copying it.
    var plannedKey: String?
    var description: String { "photo \(photoID): \(reason)" }
}

/// A complete archive on local disk, before it goes to the blob store.
struct BuiltArchive: Sendable {
    var path: String
    var workDirectory: String
    var bytes: Int64
    var entries: Int
    var rowCounts: [String: Int]
    var omittedPhotos: [ExportManifest.OmittedPhoto]
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

/// Writes one export archive: each exported table streamed from the database into
/// JSON and CSV files, account.json, README.txt, manifest.json, then the photos copied
/// in chunks. Memory stays bounded whatever the account's size: rows come in batches,
/// the photo list goes through a file, and every copy uses the same two 256 KiB buffers.
struct ExportArchiveBuilder<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let settings: ExportSettings
    let map: AccountDataMap
    /// The same map, checked against the catalog: the tables are read through its generated SQL.
    let appData: AppData
    let exportID: String
    let accountID: String
    let format: ArchiveFormat
    let cutoff: Date
    let expiresAt: Date
    let skipMissingPhotos: Bool
    let logger: Logger
    let progress: @Sendable (String) -> Void

    var root: String { ExportNames.rootFolder(accountID: accountID, cutoff: cutoff) }

    /// With `skipMissingPhotos`, a photo found corrupt half-way through is left out and
    /// the archive written again from the start: its partly written entry cannot be
    /// taken back. Without it, the first bad photo fails the export, naming the photo.
    ///
    /// A photo that another job replaced while it was being copied (normalisation renders
    /// the upload, switches the row to the rendered blob and deletes the upload) is not a
    /// bad photo: the archive is planned and written again with the newer version. A photo
    /// replaced again on the next pass fails the attempt as retryable (Jobs/README.md,
    /// "Jobs on one account").
    func build() async throws -> BuiltArchive {
        var corrupt: [String: String] = [:]
        var replaced = 0
        while true {
            do {
                return try await buildOnce(knownBad: corrupt)
            } catch let problem as PhotoProblem {
                if let plannedKey = problem.plannedKey, try await photo(problem.photoID, movedFrom: plannedKey) {
                    replaced += 1
                    guard replaced <= 2 else {
                        throw LifecycleError(.tryLater, "\(problem) (replaced again while the export copied it; the export tries again later)")
                    }
                    logger.notice("a photo was replaced during the export; writing the archive again", metadata: ["photo": "\(problem.photoID)"])
                    continue
                }
                guard skipMissingPhotos else {
                    throw PermanentJobFailure(
                        "\(problem); restore the photo's blob or run the export again with --skip-missing-photos to leave it out (it is then listed in manifest.json)")
                }
                logger.warning("photo left out of the export; writing the archive again without it", metadata: ["photo": "\(problem.photoID)", "reason": "\(problem.reason)"])
                corrupt[problem.photoID] = problem.reason
            }
        }
    }

    private func buildOnce(knownBad: [String: String]) async throws -> BuiltArchive {
        let work = try ExportEntries.freshWorkDirectory(blobs: services.exports, exportID: exportID)

        let (account, preferences, statistics) = try await services.store.read { [accountID] tx in
            (try tx.account(id: accountID), try tx.preferences(accountID: accountID), try tx.exportStatistics(accountID: accountID))
        }
        guard let account else { throw PermanentJobFailure("account \(accountID) no longer exists") }
        let timeZone = account.timezone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: "UTC")!

        // The photos are planned first: account.json names the profile photo's file.
        let plan = try await planPhotos(account: account, timeZone: timeZone, knownBad: knownBad, planPath: work + "/photos.plan")
        let clock = ContinuousClock()
        let entries = try ExportEntries(root: root, cutoff: cutoff, work: work, format: format, settings: settings, blobs: services.blobs)

        // Entry order: README.txt, account.json, the tables, manifest.json, the photos. The
        // manifest needs every table file's hash, so it follows them; it precedes the
        // photos (whose hashes the photos rows give), so a reader checking the archive
        // against it holds at most the few files before it, never a list of every photo.
        let readme = try entries.addText(
            ExportDocuments.readme(
                accountID: account.id, generatedAt: cutoff, expiresAt: expiresAt, tableFiles: map.exportedTables.compactMap(\.exportFile),
                timeZone: timeZone.identifier, rateLimitHours: settings.rateLimitHours),
            name: "README.txt")
        let accountFile = try entries.addText(
            ExportDocuments.accountJSON(
                account: account, preferences: preferences, statistics: statistics, profilePhotoPath: plan.profilePhotoPath,
                profilePhotoOmitted: plan.profilePhotoOmitted),
            name: "account.json")

        let tablesStarted = clock.now
        progress("writing tables")
        var rowCounts: [String: Int] = [:]
        var tableFiles: [WrittenFile] = []
        for table in map.exportedTables {
            let (files, count) = try await writeTable(table, entries: entries)
            tableFiles += files
            rowCounts[table.name] = count
        }
        let tablesSeconds = (clock.now - tablesStarted).seconds

        let manifestFile = try await writeManifest(
            to: work + "/manifest.json", files: [readme, accountFile] + tableFiles, planPath: plan.path, rowCounts: rowCounts,
            omitted: plan.omitted)
        try await entries.addLocalFile(manifestFile, from: work + "/manifest.json")

        progress("writing photos: \(plan.count) photo(s), \(plan.bytes) bytes")
        var photosWritten = 0
        try await JSONLines.forEach(PlannedPhoto.self, at: plan.path) { photo in
            try await addPhoto(photo, entries: entries)
            photosWritten += 1
            if photosWritten % 100 == 0 { progress("photos \(photosWritten)/\(plan.count)") }
        }
        let closed = try entries.close()
        return BuiltArchive(
            path: entries.archivePath, workDirectory: work, bytes: closed.bytes, entries: closed.entries, rowCounts: rowCounts,
            omittedPhotos: plan.omitted, photos: plan.count, photoBytes: plan.bytes, tablesSeconds: tablesSeconds,
            archiveSeconds: closed.seconds, archiveCPUSeconds: closed.cpuSeconds, finalSyncSeconds: closed.finalSyncSeconds,
            comparedFile: closed.comparedFile)
    }

    // MARK: Tables

    /// Keyset pages over (order_by, id), each read in its own short transaction.
    private func writeTable(_ table: AccountDataMap.Table, entries: ExportEntries) async throws -> ([WrittenFile], Int) {
        guard let mapped = appData.sql.exportedTables().first(where: { appData.displayName($0.name) == table.name }) else {
            throw PermanentJobFailure("\(map.source): table \(table.name) is not in the checked map")
        }
        guard let stem = table.exportFile else { return ([], 0) }
        guard !["account", "manifest"].contains(stem.lowercased()) else {
            throw PermanentJobFailure("\(map.source): table \(table.name) has export_file '\(stem)', which would replace the archive's own \(stem).json; choose another name")
        }
        return try await entries.writeMappedTable(
            mapped, stem: stem, appData: appData, store: services.store, key: accountID, limit: settings.batchRows)
    }

    // MARK: Photos

    struct PlannedPhoto: Codable {
        var name: String
        var key: String
        var bytes: Int64
        var sha256: String
        var photoID: String
        var modified: Date
    }

    struct PhotoPlan {
        var path: String
        var count = 0
        var bytes: Int64 = 0
        var omitted: [ExportManifest.OmittedPhoto] = []
        var profilePhotoPath: String?
        var profilePhotoOmitted = false
    }

    /// Checks every photo's blob before anything is archived (present, inside the
    /// account's storage, the recorded size), so missing photos are reported together
    /// and up front. The list goes to a file, one JSON line per photo.
    private func planPhotos(account: Account, timeZone: TimeZone, knownBad: [String: String], planPath: String) async throws -> PhotoPlan {
        var plan = PhotoPlan(path: planPath)
        var problems: [PhotoProblem] = []
        let output = try HashingFileOutput(path: planPath)
        let encoder = JSONEncoder()
        var after: String?
        let limit = settings.batchRows
        let accountID = self.accountID
        repeat {
            let from = after
            let batch = try await services.store.read { tx in try tx.exportPhotos(accountID: accountID, afterID: from, limit: limit) }
            for listed in batch {
                var photo = listed
                var reason = knownBad[photo.id]
                if reason == nil { reason = try await blobProblem(photo) }
                // Replaced between the listing and the check: plan the row as it is now (or
                // nothing, if the photo went). Another replacement meanwhile is left to the copy.
                if reason != nil, knownBad[photo.id] == nil {
                    let id = photo.id
                    guard let current = try await services.store.read({ tx in try tx.photo(id: id) }) else { continue }
                    if current.blobKey != photo.blobKey {
                        photo = current
                        reason = try await blobProblem(photo)
                    }
                }
                let name = ExportNames.photoPath(photo, timeZone: timeZone)
                if let reason {
                    if photo.id == account.profilePhotoID { plan.profilePhotoOmitted = true }
                    if skipMissingPhotos {
                        plan.omitted.append(.init(photoID: photo.id, reason: reason))
                    } else {
                        problems.append(PhotoProblem(photoID: photo.id, reason: reason))
                    }
                    continue
                }
                let planned = PlannedPhoto(
                    name: name, key: photo.blobKey, bytes: photo.byteSize, sha256: photo.sha256.lowercased(), photoID: photo.id,
                    modified: photo.takenAt ?? photo.createdAt)
                try JSONLines.append(planned, to: output, with: encoder)
                plan.count += 1
                plan.bytes += photo.byteSize
                if photo.id == account.profilePhotoID { plan.profilePhotoPath = name }
            }
            after = batch.last?.id
            if batch.count < limit { break }
        } while true
        _ = try output.finish(archivePath: "")
        if !problems.isEmpty {
            let shown = problems.prefix(10).map(\.description).joined(separator: "; ")
            let more = problems.count > 10 ? " (and \(problems.count - 10) more)" : ""
            throw PermanentJobFailure(
                "\(problems.count) photo(s) cannot be exported: \(shown)\(more). Restore the blobs, or run the export again with --skip-missing-photos to leave them out (each is then listed in manifest.json)")
        }
        return plan
    }

    /// Whether the photos row no longer names `key`: the photo was replaced (or deleted) since it was planned.
    private func photo(_ photoID: String, movedFrom key: String) async throws -> Bool {
        try await services.store.read { tx in try tx.photo(id: photoID)?.blobKey } != key
    }

    private func blobProblem(_ photo: PhotoRecord) async throws -> String? {
        // A key outside the account's prefix would copy someone else's file into this archive.
        guard BlobKey.isSafe(photo.blobKey), photo.blobKey.hasExactPrefix(BlobKey.accountPrefix(accountID)) else {
            return "its blob key '\(photo.blobKey)' is not inside this account's storage"
        }
        guard let info = try await services.blobs.info(key: photo.blobKey) else {
            return "its blob \(photo.blobKey) is missing"
        }
        guard info.size == photo.byteSize else {
            return "its blob \(photo.blobKey) has \(info.size) bytes but the photos row says \(photo.byteSize) (corrupted)"
        }
        return nil
    }

    /// Copies the blob, hashing it on the way: a blob whose bytes no longer match the
    /// photos row fails here, naming the photo.
    private func addPhoto(_ photo: PlannedPhoto, entries: ExportEntries) async throws {
        let copied: (bytes: Int64, sha256: String)
        do {
            copied = try await entries.addBlob(key: photo.key, name: photo.name, bytes: photo.bytes, recorded: "the photos row says", modified: photo.modified)
        } catch let problem as BlobProblem {
            throw PhotoProblem(photoID: photo.photoID, reason: problem.reason, plannedKey: photo.key)
        }
        guard copied.sha256 == photo.sha256 else {
            throw PhotoProblem(
                photoID: photo.photoID, reason: "its blob \(photo.key) has SHA-256 \(copied.sha256) but the photos row says \(photo.sha256) (corrupted)",
                plannedKey: photo.key)
        }
    }

    // MARK: Manifest

    /// Streamed to a file like the tables: one line per file, however many photos there are.
    private func writeManifest(
        to path: String, files: [WrittenFile], planPath: String, rowCounts: [String: Int], omitted: [ExportManifest.OmittedPhoto]
    ) async throws -> WrittenFile {
        let header = ManifestOutput.header(
            exportID: exportID, accountID: accountID, root: root, cutoff: cutoff, expiresAt: expiresAt,
            rowCounts: map.exportedTables.map { ($0.name, rowCounts[$0.name] ?? 0) })
        let omittedJSON = OrderedJSON.array(omitted.map { .object([("photo_id", .string($0.photoID)), ("reason", .string($0.reason))]) })
        return try await ManifestOutput.write(to: path, header: header, files: files, more: { line in
            try await JSONLines.forEach(PlannedPhoto.self, at: planPath) { photo in
                try line(.object([
                    ("path", .string(photo.name)), ("bytes", .integer(photo.bytes)), ("sha256", .string(photo.sha256)),
                    ("photo_id", .string(photo.photoID)),
                ]))
            }
        }, closing: ("omitted_photos", omittedJSON))
    }
}
