import Foundation
import JobRunner

/// One line of an import file, parsed and checked against the product's rules, with its
/// photos named but not yet read.
///
/// Parsing touches no file, database or blob store, so it is safe to run on any bytes
/// (the fuzz target `FuzzImportLine` does) and costs time linear in the line's length.
public struct ImportedAccount: Sendable, Equatable {
    /// A photo file the line names, relative to the import's photo folder.
    public struct PhotoReference: Sendable, Equatable {
        public var id: String
        /// Where the line names it, for messages: `profile_photo`, `entries[0].photos[1].file`.
        public var field: String
        /// The path as written: relative, no `.` or `..` component (checked here); whether it
        /// stays inside the folder through symbolic links is checked when it is opened.
        public var file: String
        public var entryID: String?
        public var role: PhotoRole
        public var takenAt: Date?
    }

    /// A deletion requested in the system the account comes from, still in its grace period.
    public struct PendingDeletion: Sendable, Equatable {
        public var requestedAt: Date
        public var purgeAfter: Date
    }

    public var account: Account
    public var preferences: Preferences?
    public var pendingDeletion: PendingDeletion?
    public var entries: [JournalEntry] = []
    public var mesocycles: [Mesocycle] = []
    public var meditationSessions: [MeditationSession] = []
    public var sessions: [SignInSession] = []
    public var photos: [PhotoReference] = []

    static let fields: Set<String> = [
        "id", "email", "password_hash", "first_name", "last_name", "display_name", "bio", "primary_sport",
        "morning_reminder_time", "timezone", "created_at", "preferences", "subscription", "integrations", "profile_photo",
        "entries", "mesocycles", "meditation_sessions", "sessions", "state", "deletion_requested_at", "purge_after",
    ]

    /// The id a profile photo gets: one per account, derived so a second import finds it.
    public static func profilePhotoID(accountID: String) -> String { "\(accountID).profile" }

    /// Parses and validates one line (without its line break). Every refusal names the
    /// field at fault (`entries[2].photos[0].file: …`).
    public static func parse(line: String, now: Date) throws(ValidationFailure) -> ImportedAccount {
        let parsed: JSONValue
        do {
            parsed = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8))
        } catch {
            throw ValidationFailure("line", "is not valid JSON")
        }
        let fields = try JSONFields(parsed, path: "")
        try fields.requireOnly(Self.fields)

        let accountID = try ProfileRules.identifier(try fields.string("id"), field: "id")
        var account = Account(
            id: accountID, email: try ProfileRules.email(try fields.string("email")),
            passwordHash: try fields.string("password_hash"),
            firstName: try fields.optionalString("first_name").map { (v) throws(ValidationFailure) in try ProfileRules.name(v, field: "first_name") },
            lastName: try fields.optionalString("last_name").map { (v) throws(ValidationFailure) in try ProfileRules.name(v, field: "last_name") },
            displayName: try fields.optionalString("display_name").map { (v) throws(ValidationFailure) in try ProfileRules.displayName(v) },
            bio: try fields.optionalText("bio").map { (v) throws(ValidationFailure) in try ProfileRules.bio(v) },
            profilePhotoKey: nil, primarySport: try fields.optionalString("primary_sport"),
            morningReminderTime: try fields.optionalString("morning_reminder_time").map { (v) throws(ValidationFailure) in
                try ProfileRules.timeOfDay(v, field: "morning_reminder_time")
            },
            timezone: try fields.optionalString("timezone").map { (v) throws(ValidationFailure) in try ProfileRules.timezone(v) },
            subscriptionStatus: nil, integrations: Integrations(), state: .active, createdAt: try fields.optionalDate("created_at") ?? now, updatedAt: now)
        guard !(account.passwordHash ?? "").isEmpty else { throw ValidationFailure("password_hash", "must not be empty") }
        if let sport = account.primarySport, sport.count > 50 {
            throw ValidationFailure("primary_sport", "must be at most 50 characters")
        }
        // Accounts moved from another system may arrive already scheduled for deletion.
        var pendingDeletion: PendingDeletion?
        if let stateText = try fields.optionalString("state") {
            guard let state = AccountState(rawValue: stateText), state == .active || state == .pendingDeletion else {
                throw ValidationFailure("state", "must be active or pendingDeletion (got \(ProfileRules.quoted(stateText)))")
            }
            if state == .pendingDeletion {
                let requestedAt = try fields.optionalDate("deletion_requested_at") ?? now
                guard let purgeAfter = try fields.optionalDate("purge_after") else {
                    throw ValidationFailure("purge_after", "is required when state is pendingDeletion")
                }
                pendingDeletion = PendingDeletion(requestedAt: requestedAt, purgeAfter: purgeAfter)
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
        var result = ImportedAccount(account: account, preferences: nil, pendingDeletion: pendingDeletion)
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
            result.preferences = value
        }

        if let profileFile = try fields.optionalString("profile_photo") {
            let id = profilePhotoID(accountID: accountID)
            result.photos.append(PhotoReference(
                id: id, field: "profile_photo", file: try PhotoPath.check(profileFile, field: "profile_photo"), entryID: nil,
                role: .profile, takenAt: nil))
        }
        for entry in try fields.array("entries") {
            try entry.requireOnly(["id", "created_at", "text", "photos"])
            let entryID = try ProfileRules.identifier(try entry.string("id"), field: entry.name("id"))
            result.entries.append(JournalEntry(
                id: entryID, accountID: accountID, createdAt: try entry.date("created_at"), text: try entry.optionalText("text") ?? ""))
            for item in try entry.array("photos") {
                try item.requireOnly(["id", "file", "taken_at"])
                result.photos.append(PhotoReference(
                    id: try ProfileRules.identifier(try item.string("id"), field: item.name("id")), field: item.name("file"),
                    file: try PhotoPath.check(try item.string("file"), field: item.name("file")), entryID: entryID, role: .entry,
                    takenAt: try item.optionalDate("taken_at")))
            }
        }
        for item in try fields.array("mesocycles") {
            try item.requireOnly(["id", "status", "started_at", "completed_at"])
            let status = try item.string("status")
            guard Mesocycle.statuses.contains(status) else {
                throw ValidationFailure(item.name("status"), "must be one of \(Mesocycle.statuses.sorted().joined(separator: ", ")) (got \(ProfileRules.quoted(status)))")
            }
            result.mesocycles.append(Mesocycle(
                id: try ProfileRules.identifier(try item.string("id"), field: item.name("id")), accountID: accountID,
                status: status, startedAt: try item.optionalDate("started_at"), completedAt: try item.optionalDate("completed_at")))
        }
        for item in try fields.array("meditation_sessions") {
            try item.requireOnly(["id", "started_at", "duration_seconds"])
            guard let duration = try item.optionalInt("duration_seconds"), duration >= 0 else {
                throw ValidationFailure(item.name("duration_seconds"), "is required and must be a whole number ≥ 0")
            }
            result.meditationSessions.append(MeditationSession(
                id: try ProfileRules.identifier(try item.string("id"), field: item.name("id")), accountID: accountID,
                startedAt: try item.date("started_at"), durationSeconds: duration))
        }
        for item in try fields.array("sessions") {
            try item.requireOnly(["id", "created_at"])
            result.sessions.append(SignInSession(
                id: try ProfileRules.identifier(try item.string("id"), field: item.name("id")), accountID: accountID,
                createdAt: try item.date("created_at")))
        }

        var keys: [String: String] = [:]
        for photo in result.photos {
            let key = BlobKey.photo(accountID: accountID, photoID: photo.id)
            if let other = keys.updateValue(photo.id, forKey: key) {
                throw ValidationFailure(
                    "photos", other == photo.id
                        ? "photo id \(ProfileRules.quoted(photo.id)) appears twice in this line"
                        : "photo ids \(ProfileRules.quoted(other)) and \(ProfileRules.quoted(photo.id)) would be stored under the same key \(key)")
            }
        }
        return result
    }
}

/// A photo path as an import line writes it, checked as text. Where it really leads (a
/// symbolic link out of the folder) is `PhotoFolder`'s check, made on the file system.
enum PhotoPath {
    static func check(_ path: String, field: String) throws(ValidationFailure) -> String {
        func refuse(_ why: String) -> ValidationFailure {
            ValidationFailure(field, "photo path \(ProfileRules.quoted(path)) \(why)")
        }
        guard !path.isEmpty else { throw refuse("is empty") }
        guard !path.hasPrefix("/") else {
            throw refuse("is absolute; photo paths are relative to the import folder (the JSONL file's folder, or --photos-root)")
        }
        guard path.utf8.count <= 4_095 else { throw refuse("is longer than 4,095 bytes") }
        for component in path.split(separator: "/", omittingEmptySubsequences: false) {
            if component.isEmpty { throw refuse("has an empty component ('//' or a trailing '/')") }
            if component == "." || component == ".." { throw refuse("has a '\(component)' component; photos must lie inside the import folder") }
            if component.utf8.count > 255 { throw refuse("has a component longer than 255 bytes") }
        }
        return path
    }
}
