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
}

public struct ImportError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}

/// Loads accounts from JSONL, one account per line. Each line is all-or-nothing:
/// it is validated whole, its photos are stored under deterministic keys, and its
/// rows are inserted in one transaction; a bad line is reported and skipped.
/// Rows are keyed by id, so importing the same file again changes nothing.
public struct AccountImporter<Store: LifecycleStore>: Sendable {
    public let store: Store
    public let blobs: any BlobStore
    public let clock: any TimeSource
    public let logger: Logger
    /// Read for the photo normalisation job's runner settings (attempts).
    public let policies: PolicyBook

    public init(
        store: Store, blobs: any BlobStore, clock: any TimeSource, logger: Logger = Logger(label: "lifecycle.import"),
        policies: PolicyBook = PolicyBook()
    ) {
        self.store = store
        self.blobs = blobs
        self.clock = clock
        self.logger = logger
        self.policies = policies
    }

    public func importFile(
        at path: String, progress: @Sendable (_ line: Int, _ report: ImportReport) -> Void = { _, _ in }
    ) async throws -> ImportReport {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ImportError(message: "\(path): no such file")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ImportError(message: "\(path): cannot be read (check permissions)")
        }
        defer { try? handle.close() }
        let baseDirectory = (path as NSString).deletingLastPathComponent
        var report = ImportReport()
        var lineNumber = 0
        var reader = LineReader(handle: handle)
        while let line = try reader.next() {
            lineNumber += 1
            if line.allSatisfy(\.isWhitespace) { continue }
            do {
                let outcome = try await importLine(line, baseDirectory: baseDirectory.isEmpty ? "." : baseDirectory)
                if outcome.created { report.imported.append(outcome.accountID) } else { report.unchanged.append(outcome.accountID) }
                report.photosStored += outcome.photosStored
            } catch let failure as ValidationFailure {
                report.failures.append(.init(line: lineNumber, reason: failure.description))
                logger.warning("import line refused", metadata: ["line": "\(lineNumber)", "reason": "\(failure)"])
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

    struct PendingPhoto {
        var record: PhotoRecord
        var sourcePath: String
    }

    func importLine(_ line: String, baseDirectory: String) async throws -> LineOutcome {
        let parsed: JSONValue
        do {
            parsed = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8))
        } catch {
            throw ValidationFailure("line", "is not valid JSON")
        }
        let now = clock.now()
        let fields = try JSONFields(parsed, path: "")
        try fields.requireOnly(ImportFields.account)

        let accountID = try ProfileRules.identifier(try fields.string("id"), field: "id")

        var account = Account(
            id: accountID, email: try ProfileRules.email(try fields.string("email")),
            passwordHash: try fields.string("password_hash"),
            firstName: try fields.optionalString("first_name").map { (v) throws(ValidationFailure) in try ProfileRules.name(v, field: "first_name") },
            lastName: try fields.optionalString("last_name").map { (v) throws(ValidationFailure) in try ProfileRules.name(v, field: "last_name") },
            displayName: try fields.optionalString("display_name").map { (v) throws(ValidationFailure) in try ProfileRules.displayName(v) },
            bio: try fields.optionalString("bio").map { (v) throws(ValidationFailure) in try ProfileRules.bio(v) },
            profilePhotoID: nil, primarySport: try fields.optionalString("primary_sport"),
            morningReminderTime: try fields.optionalString("morning_reminder_time").map { (v) throws(ValidationFailure) in
                try ProfileRules.timeOfDay(v, field: "morning_reminder_time")
            },
            timezone: try fields.optionalString("timezone").map { (v) throws(ValidationFailure) in try ProfileRules.timezone(v) },
            subscriptionStatus: nil, integrations: Integrations(), state: .active, deletionRequestedAt: nil, purgeAfter: nil,
            purgedAt: nil, createdAt: try fields.optionalDate("created_at") ?? now, updatedAt: now)
        guard !(account.passwordHash ?? "").isEmpty else { throw ValidationFailure("password_hash", "must not be empty") }
        if let sport = account.primarySport, sport.count > 50 {
            throw ValidationFailure("primary_sport", "must be at most 50 characters")
        }
        // Accounts moved from another system may arrive already scheduled for deletion.
        if let stateText = try fields.optionalString("state") {
            guard let state = AccountState(rawValue: stateText), state == .active || state == .pendingDeletion else {
                throw ValidationFailure("state", "must be active or pendingDeletion (got \(ProfileRules.quoted(stateText)))")
            }
            account.state = state
            if state == .pendingDeletion {
                account.deletionRequestedAt = try fields.optionalDate("deletion_requested_at") ?? now
                guard let purgeAfter = try fields.optionalDate("purge_after") else {
                    throw ValidationFailure("purge_after", "is required when state is pendingDeletion")
                }
                account.purgeAfter = purgeAfter
            }
        }

        if let subscription = try fields.object("subscription") {
            try subscription.requireOnly(["status"])
            if let status = try subscription.optionalString("status") {
                guard (1...32).contains(status.count), status.allSatisfy({ $0.isLetter || $0 == "_" }) else {
                    throw ValidationFailure("subscription.status", "must be a word like free or premium (got \(ProfileRules.quoted(status)))")
                }
                account.subscriptionStatus = status
            }
        }
        if let integrations = try fields.object("integrations") {
            try integrations.requireOnly(["whoop", "strava", "apple_health", "fitness"])
            account.integrations = Integrations(
                whoop: try integrations.optionalBool("whoop") ?? false, strava: try integrations.optionalBool("strava") ?? false,
                appleHealth: try integrations.optionalBool("apple_health") ?? false,
                fitness: try integrations.optionalBool("fitness") ?? false)
        }
        var preferences: Preferences?
        if let prefs = try fields.object("preferences") {
            try prefs.requireOnly(["theme", "font_size_offset", "notifications_enabled", "daily_reminder_time"])
            var value = Preferences()
            if let theme = try prefs.optionalString("theme") {
                guard let parsed = Theme(rawValue: theme) else {
                    throw ValidationFailure("preferences.theme", "must be system, light or dark (got \(ProfileRules.quoted(theme)))")
                }
                value.theme = parsed
            }
            if let offset = try prefs.optionalInt("font_size_offset") {
                guard Preferences.fontSizeOffsets.contains(offset) else {
                    throw ValidationFailure("preferences.font_size_offset", "must be one of -2, 0, 2, 4 (got \(offset))")
                }
                value.fontSizeOffset = offset
            }
            value.notificationsEnabled = try prefs.optionalBool("notifications_enabled") ?? true
            value.dailyReminderTime = try prefs.optionalString("daily_reminder_time").map { (v) throws(ValidationFailure) in
                try ProfileRules.timeOfDay(v, field: "preferences.daily_reminder_time")
            }
            preferences = value
        }

        var photos: [PendingPhoto] = []
        func photo(file: String, field: String, id: String, entryID: String?, role: PhotoRole, takenAt: Date?) throws -> PendingPhoto {
            let source = (file as NSString).isAbsolutePath ? file : (baseDirectory as NSString).appendingPathComponent(file)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory), !isDirectory.boolValue else {
                throw ValidationFailure(field, "photo file \(ProfileRules.quoted(file)) does not exist (paths are relative to the JSONL file)")
            }
            let digest: (hex: String, size: Int64)
            do {
                digest = try FileDigest.sha256(ofFile: source)
            } catch {
                throw ValidationFailure(field, "photo file \(ProfileRules.quoted(file)) cannot be read: \(error)")
            }
            let contentType = ContentSniffer.contentType(ofFile: source)
            return PendingPhoto(
                record: PhotoRecord(
                    id: id, accountID: accountID, entryID: entryID, role: role,
                    blobKey: BlobKey.photo(accountID: accountID, photoID: id), contentType: contentType,
                    byteSize: digest.size, sha256: digest.hex, takenAt: takenAt, createdAt: now,
                    normalizationState: role == .profile ? .pending : nil),
                sourcePath: source)
        }

        if let profileFile = try fields.optionalString("profile_photo") {
            let profile = try photo(file: profileFile, field: "profile_photo", id: "\(accountID).profile", entryID: nil, role: .profile, takenAt: nil)
            photos.append(profile)
            account.profilePhotoID = profile.record.id
        }

        var entries: [JournalEntry] = []
        for entry in try fields.array("entries") {
            try entry.requireOnly(["id", "created_at", "text", "photos"])
            let entryID = try ProfileRules.identifier(try entry.string("id"), field: entry.name("id"))
            entries.append(JournalEntry(id: entryID, accountID: accountID, createdAt: try entry.date("created_at"), text: try entry.optionalString("text") ?? ""))
            for item in try entry.array("photos") {
                try item.requireOnly(["id", "file", "taken_at"])
                let photoID = try ProfileRules.identifier(try item.string("id"), field: item.name("id"))
                photos.append(try photo(
                    file: try item.string("file"), field: item.name("file"), id: photoID, entryID: entryID, role: .entry,
                    takenAt: try item.optionalDate("taken_at")))
            }
        }
        var mesocycles: [Mesocycle] = []
        for item in try fields.array("mesocycles") {
            try item.requireOnly(["id", "status", "started_at", "completed_at"])
            let status = try item.string("status")
            guard Mesocycle.statuses.contains(status) else {
                throw ValidationFailure(item.name("status"), "must be one of \(Mesocycle.statuses.sorted().joined(separator: ", ")) (got \(ProfileRules.quoted(status)))")
            }
            mesocycles.append(Mesocycle(
                id: try ProfileRules.identifier(try item.string("id"), field: item.name("id")), accountID: accountID,
                status: status, startedAt: try item.optionalDate("started_at"), completedAt: try item.optionalDate("completed_at")))
        }
        var meditations: [MeditationSession] = []
        for item in try fields.array("meditation_sessions") {
            try item.requireOnly(["id", "started_at", "duration_seconds"])
            guard let duration = try item.optionalInt("duration_seconds"), duration >= 0 else {
                throw ValidationFailure(item.name("duration_seconds"), "is required and must be a whole number ≥ 0")
            }
            meditations.append(MeditationSession(
                id: try ProfileRules.identifier(try item.string("id"), field: item.name("id")), accountID: accountID,
                startedAt: try item.date("started_at"), durationSeconds: duration))
        }
        var sessions: [SignInSession] = []
        for item in try fields.array("sessions") {
            try item.requireOnly(["id", "created_at"])
            sessions.append(SignInSession(
                id: try ProfileRules.identifier(try item.string("id"), field: item.name("id")), accountID: accountID,
                createdAt: try item.date("created_at")))
        }
        let duplicate = Dictionary(grouping: photos.map(\.record.id), by: { $0 }).first { $0.value.count > 1 }
        if let duplicate { throw ValidationFailure("photos", "photo id '\(duplicate.key)' appears twice in this line") }

        // Refuse before touching blobs when the account may not be (re-)imported.
        let existing = try await store.read { tx in try tx.account(id: accountID) }
        if let existing, existing.state == .purged || existing.state == .purging {
            throw ValidationFailure("id", "account \(accountID) was deleted (\(existing.state.rawValue)); a deleted account is never re-imported")
        }

        // Blobs first, under keys derived from the ids: running this again rewrites the
        // same keys. Only blobs this line created are removed if its rows are refused.
        // A photo row that points elsewhere was normalised and its upload deleted on
        // purpose: storing the upload again would bring back what normalisation removed.
        let photoIDs = photos.map(\.record.id)
        let storedKeys = try await store.read { tx in try photoIDs.map { try tx.photo(id: $0)?.blobKey } }
        var written: [String] = []
        for (pending, storedKey) in zip(photos, storedKeys)
        where (storedKey ?? pending.record.blobKey) == pending.record.blobKey {
            guard try await blobs.info(key: pending.record.blobKey) == nil else { continue }
            do {
                _ = try await blobs.put(key: pending.record.blobKey, fromFile: pending.sourcePath, moving: false)
            } catch {
                try? await blobs.delete(keys: written)
                throw ValidationFailure("photos", "could not store photo \(pending.record.id): \(error)")
            }
            written.append(pending.record.blobKey)
        }

        let finalAccount = account
        let finalPreferences = preferences
        let records = photos.map(\.record)
        let entryRows = entries
        let mesocycleRows = mesocycles
        let meditationRows = meditations
        let sessionRows = sessions
        let photoJobPolicy = policies.policy(for: PhotoJobs.normalizeKind)
        do {
            let created: Bool = try await store.write { tx in
                if let other = try tx.account(email: finalAccount.email ?? ""), other.id != finalAccount.id {
                    throw ValidationFailure("email", "\(finalAccount.email ?? "") already belongs to account \(other.id)")
                }
                let accountOutcome = try tx.insertAccount(finalAccount, preferences: finalPreferences)
                func check(_ outcome: InsertOutcome, _ what: String) throws {
                    if case .belongsToAnotherAccount(let owner) = outcome {
                        throw ValidationFailure(what, "id already belongs to account \(owner)")
                    }
                }
                for row in entryRows { try check(try tx.insertEntry(row), "entries(\(row.id))") }
                for row in records {
                    let outcome = try tx.insertPhoto(row)
                    try check(outcome, "photos(\(row.id))")
                    // Queued with the rows, so a profile photo is never stored without its job.
                    if outcome == .inserted, row.role == .profile {
                        _ = try store.enqueue(try PhotoJobs.normalizeRequest(photoID: row.id), policy: photoJobPolicy, now: now, in: tx)
                    }
                }
                for row in mesocycleRows { try check(try tx.insertMesocycle(row), "mesocycles(\(row.id))") }
                for row in meditationRows { try check(try tx.insertMeditationSession(row), "meditation_sessions(\(row.id))") }
                for row in sessionRows { try check(try tx.insertSession(row), "sessions(\(row.id))") }
                try tx.recordAudit(AuditEvent(
                    at: finalAccount.updatedAt, actor: "import", action: "account.import", accountID: finalAccount.id,
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

enum ImportFields {
    static let account: Set<String> = [
        "id", "email", "password_hash", "first_name", "last_name", "display_name", "bio", "primary_sport",
        "morning_reminder_time", "timezone", "created_at", "preferences", "subscription", "integrations", "profile_photo",
        "entries", "mesocycles", "meditation_sessions", "sessions", "state", "deletion_requested_at", "purge_after",
    ]
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

    public static func contentType(ofFile path: String) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "application/octet-stream" }
        defer { try? handle.close() }
        return contentType(of: (try? handle.read(upToCount: 32)) ?? Data())
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
