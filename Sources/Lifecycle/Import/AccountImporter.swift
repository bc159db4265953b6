import Foundation
import JobRunner
import Logging

/// What one `accounts import` run did. Lines are numbered from 1 as editors show them.
public struct ImportReport: Sendable, Codable {
    public struct LineFailure: Sendable, Codable, Equatable {
        public var line: Int
        public var reason: String
    }

    public var imported: [String] = []
    public var unchanged: [String] = []
    public var failures: [LineFailure] = []
    public var photosStored = 0

    public init() {}

    enum CodingKeys: String, CodingKey {
        case imported, unchanged, failures, photosStored = "photos_stored"
    }
}

/// An import stopped before the end of its file by something that is not the file's
/// fault (a full disk, an unwritable blob directory, the database). The lines before
/// `line` are imported and stay so; running the same import again carries on.
public struct ImportInterrupted: Error, CustomStringConvertible, Sendable {
    public let line: Int
    public let report: ImportReport
    public let underlying: any Error

    public var description: String { "import stopped at line \(line): \(underlying)" }
}

/// Loads accounts from JSONL, one account per line. Each line is all-or-nothing:
/// it is validated whole, its photos are copied out of the import folder and stored
/// under deterministic keys, and its rows are inserted in one transaction; a bad line
/// is reported and skipped. Rows are keyed by id, so importing the same file again
/// changes nothing.
public struct AccountImporter<Store: LifecycleStore>: Sendable {
    public let store: Store
    public let blobs: any BlobStore
    public let clock: any TimeSource
    public let logger: Logger
    /// Read for the photo normalisation job's runner settings (attempts) and the import limits.
    public let policies: PolicyBook
    /// Where an account imported as pending deletion gets its deletion recorded, as a
    /// deletion request would (the map's `on_deletion:`).
    let directory: AccountDirectory<Store>
    /// How photo paths are resolved beneath their folder; tests pin the fallback.
    let photoResolution: PhotoFolder.Resolution?
    /// The name an imported profile photo's upload gets in her folder of the map's photo
    /// prefix: one per account, so a rerun finds it.
    static func profileUpload(contentType: String) -> String { ColumnProfilePhotos<Store>.uploadName("import", contentType: contentType) }

    /// Imports into the reference app's tables of `services`' database; fails unless its
    /// data map (`app: reference`) checks against them.
    public init(services: LifecycleServices<Store>) async throws {
        try await self.init(services: services, photoResolution: nil)
    }

    init(services: LifecycleServices<Store>, photoResolution: PhotoFolder.Resolution?) async throws {
        let directory = try await services.directory()
        guard directory.lifecycleOwnsSchema else {
            throw LifecycleError(.badInput, "`accounts import` loads the reference app's accounts; this installation's data map describes the app's own database (leave out `app:` only for your own schema)")
        }
        store = services.store
        blobs = services.blobs
        clock = services.clock
        logger = services.logger
        policies = services.policies
        self.directory = directory
        self.photoResolution = photoResolution
    }

    /// Imports every line of the JSONL file at `path`. Photo paths are resolved beneath
    /// `photosRoot`, by default the file's own folder. A refused line is reported and the
    /// others go on; anything else (disk, database, blob store) stops the import with
    /// `ImportInterrupted`.
    public func importFile(
        at path: String, photosRoot: String? = nil,
        progress: @Sendable (_ line: Int, _ report: ImportReport) -> Void = { _, _ in }
    ) async throws -> ImportReport {
        let settings = try ImportSettings(policies: policies)
        let input = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard input >= 0 else {
            let code = errno
            if code == ENOENT { throw LifecycleError(.inputMissing, "\(path): no such file") }
            throw LifecycleError(.badInput, "\(path): cannot be read: \(String(cString: strerror(code)))")
        }
        var status = stat()
        guard fstat(input, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG || (status.st_mode & S_IFMT) == S_IFIFO else {
            close(input)
            throw LifecycleError(.badInput, "\(path): not a regular file; pass the JSONL file itself")
        }
        _ = fcntl(input, F_SETFL, O_RDONLY)
        let handle = FileHandle(fileDescriptor: input, closeOnDealloc: true)
        let folder = try PhotoFolder(
            path: photosRoot ?? { let directory = PathText.parent(path); return directory.isEmpty ? "." : directory }(),
            maxFileBytes: settings.maxPhotoBytes, resolution: photoResolution)
        let staging = try PhotoStaging()
        var report = ImportReport()
        var lineNumber = 0
        var reader = LineReader(handle: handle, maxLineBytes: settings.maxLineBytes)
        while true {
            let next: LineReader.Line?
            do {
                next = try reader.nextLine()
            } catch {
                throw ImportInterrupted(line: lineNumber + 1, report: report, underlying: LifecycleError(.unavailable, "reading \(path): \(error)"))
            }
            guard let next else { break }
            lineNumber += 1
            do {
                switch next {
                case .tooLong(let count):
                    throw ValidationFailure("line", "is \(count) bytes, longer than the \(settings.maxLineBytes) allowed (import.max_line_bytes)")
                case .notUTF8(let offset):
                    throw ValidationFailure("line", "is not valid UTF-8 (byte \(offset + 1) of the line)")
                case .text(let line):
                    if line.allSatisfy(\.isWhitespace) { continue }
                    let outcome = try await importLine(line, folder: folder, staging: staging)
                    if outcome.created { report.imported.append(outcome.accountID) } else { report.unchanged.append(outcome.accountID) }
                    report.photosStored += outcome.photosStored
                }
            } catch let failure as ValidationFailure {
                report.failures.append(.init(line: lineNumber, reason: failure.description))
                logger.warning("import line refused", metadata: ["line": .stringConvertible(lineNumber), "reason": "\(failure)"])
            } catch {
                throw ImportInterrupted(line: lineNumber, report: report, underlying: error)
            }
            progress(lineNumber, report)
        }
        return report
    }

    struct LineOutcome {
        var accountID: String
        var created: Bool
        var photosStored: Int
    }

    func importLine(_ line: String, folder: PhotoFolder, staging: PhotoStaging) async throws -> LineOutcome {
        let now = clock.now()
        let parsed = try ImportedAccount.parse(line: line, now: now)
        let accountID = parsed.account.id

        // Refuse before touching blobs when the account may not be (re-)imported.
        let existing = try await store.read { tx in try tx.subject(key: accountID)?.state }
        if let existing, existing == .purged || existing == .purging {
            throw ValidationFailure("id", "account \(accountID) was deleted (\(existing.rawValue)); a deleted account is never re-imported")
        }

        // Her profile photo goes where the map keeps it (`profile_photo:`), as an upload through
        // the app API would; only for an account this import creates: an existing one's
        // photo is the app's (normalisation deleted the upload on purpose, and storing it
        // again would bring back what it removed).
        let isNew = try await store.read { tx in try tx.account(id: accountID) == nil }
        // Her folder under the map's photo prefix, for an account this import creates.
        let profileFolder: String?
        if parsed.photos.contains(where: { $0.role == .profile }) {
            guard let place = directory.data.plan.profilePhoto else {
                throw ValidationFailure("profile_photo", "the data map says nowhere where a profile photo lives (`profile_photo:`), so it cannot be imported")
            }
            profileFolder = isNew ? place.prefix + BlobKey.segment(forID: accountID) + "/" : nil
        } else {
            profileFolder = nil
        }

        var staged: [(key: String, record: PhotoRecord?, path: String, bytes: Int64, contentType: String)] = []
        defer { for photo in staged { unlink(photo.path) } }
        for reference in parsed.photos {
            let copy: PhotoStaging.StagedPhoto
            do {
                let file = try folder.open(reference.file)
                copy = try staging.stage(file, name: reference.file)
            } catch let refusal as PhotoFolder.Refusal {
                throw ValidationFailure(reference.field, "photo file \(ProfileRules.quoted(reference.file)) \(refusal.reason)")
            }
            guard reference.role == .entry else {
                if let folder = profileFolder {
                    staged.append((folder + Self.profileUpload(contentType: copy.contentType), nil, copy.path, copy.size, copy.contentType))
                } else {
                    unlink(copy.path)
                }
                continue
            }
            let key = BlobKey.photo(accountID: accountID, photoID: reference.id)
            staged.append((key, PhotoRecord(
                id: reference.id, accountID: accountID, entryID: reference.entryID, role: .entry, blobKey: key, contentType: copy.contentType,
                byteSize: copy.size, sha256: copy.sha256, takenAt: reference.takenAt, createdAt: now), copy.path, copy.size, copy.contentType))
        }

        // Blobs first, under keys derived from the ids: running this again rewrites the
        // same keys. Only blobs this line created are removed if its rows are refused.
        // A photo row that points elsewhere was changed by the app on purpose.
        let photoIDs = staged.compactMap { $0.record?.id }
        let storedKeys = try await store.read { tx in try Dictionary(uniqueKeysWithValues: photoIDs.map { ($0, try tx.photo(id: $0)?.blobKey) }) }
        var written: [String] = []
        do {
            for photo in staged where (photo.record.flatMap { storedKeys[$0.id] ?? nil } ?? photo.key) == photo.key {
                guard try await blobs.info(key: photo.key) == nil else { continue }
                _ = try await blobs.put(key: photo.key, fromFile: photo.path, moving: true)
                written.append(photo.key)
            }
        } catch {
            try? await blobs.delete(keys: written)
            throw error
        }

        let photoJobPolicy = try policies.policy(for: PhotoJobs.normalizeColumnKind)
        let records = staged.compactMap(\.record)
        let profile = staged.first { $0.record == nil }
        do {
            let created: Bool = try await store.write { tx in
                var account = parsed.account
                account.profilePhotoKey = profile?.key
                if let other = try tx.account(email: account.email ?? ""), other.id != account.id {
                    throw ValidationFailure("email", "\(account.email ?? "") already belongs to account \(other.id)")
                }
                let accountOutcome = try tx.insertAccount(account, preferences: parsed.preferences)
                func check(_ outcome: InsertOutcome, _ what: String) throws {
                    if case .belongsToAnotherAccount(let owner) = outcome {
                        throw ValidationFailure(what, "id already belongs to account \(owner)")
                    }
                }
                // Queued with the row, so a profile photo is never stored without its job; the
                // trail records it as the app API's upload does, for the state the API reports.
                if accountOutcome == .inserted, let profile {
                    let job = try store.enqueue(
                        try PhotoJobs.normalizeRequest(account: account.id, upload: profile.key, replaces: nil), policy: photoJobPolicy, now: now, in: tx).job
                    try tx.recordAudit(AuditEvent(
                        at: now, actor: "import", action: "photo.upload", accountID: account.id, outcome: "queued",
                        detail: [
                            "photo": .string(Self.profileUpload(contentType: profile.contentType)), "key": .string(profile.key), "bytes": .int(Int(profile.bytes)),
                            "content_type": .string(profile.contentType), "job": .int(job.id),
                        ]))
                }
                for row in parsed.entries { try check(try tx.insertEntry(row), "entries(\(row.id))") }
                for row in records { try check(try tx.insertPhoto(row), "photos(\(row.id))") }
                for row in parsed.mesocycles { try check(try tx.insertMesocycle(row), "mesocycles(\(row.id))") }
                for row in parsed.meditationSessions { try check(try tx.insertMeditationSession(row), "meditation_sessions(\(row.id))") }
                for row in parsed.sessions { try check(try tx.insertSession(row), "sessions(\(row.id))") }
                // As if asked for here: the app feels the grace period from the start.
                if accountOutcome == .inserted, let pending = parsed.pendingDeletion {
                    if try directory.markPendingDeletion(id: account.id, requestedAt: pending.requestedAt, purgeAfter: pending.purgeAfter, in: tx) {
                        _ = try directory.revokeSessions(id: account.id, at: pending.requestedAt, in: tx)
                    }
                }
                try tx.recordAudit(AuditEvent(
                    at: account.updatedAt, actor: "import", action: "account.import", accountID: account.id,
                    outcome: accountOutcome == .inserted ? "created" : "unchanged"))
                return accountOutcome == .inserted
            }
            return LineOutcome(accountID: accountID, created: created, photosStored: written.count)
        } catch {
            try? await blobs.delete(keys: written)
            throw error
        }
    }
}

/// Content type by magic bytes, never by file name.
public enum ContentSniffer {
    public static func contentType(of header: some Collection<UInt8>) -> String {
        let bytes = Array(header.prefix(32))
        func starts(_ prefix: [UInt8]) -> Bool { bytes.count >= prefix.count && Array(bytes.prefix(prefix.count)) == prefix }
        if starts([0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if starts(Array("GIF8".utf8)) { return "image/gif" }
        if starts(Array("RIFF".utf8)), bytes.count >= 12, Array(bytes[8..<12]) == Array("WEBP".utf8) { return "image/webp" }
        if bytes.count >= 12, Array(bytes[4..<8]) == Array("ftyp".utf8) {
            let brand = String(decoding: bytes[8..<12], as: UTF8.self)
            if ["heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1"].contains(brand) { return "image/heic" }
            if brand == "avif" { return "image/avif" }
        }
        return "application/octet-stream"
    }

    public static func fileExtension(for contentType: String) -> String {
        switch contentType {
        case "image/jpeg": "jpg"
        case "image/png": "png"
        case "image/gif": "gif"
        case "image/webp": "webp"
        case "image/heic": "heic"
        case "image/avif": "avif"
        default: "bin"
        }
    }
}
