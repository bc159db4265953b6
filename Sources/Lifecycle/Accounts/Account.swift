import Foundation
import JobRunner

public enum AccountState: String, Sendable, Codable, CaseIterable {
    case active, pendingDeletion, purging, purged
}

public struct Integrations: Sendable, Codable, Equatable {
    public var whoop: Bool
    public var strava: Bool
    public var appleHealth: Bool
    public var fitness: Bool

    public init(whoop: Bool = false, strava: Bool = false, appleHealth: Bool = false, fitness: Bool = false) {
        self.whoop = whoop
        self.strava = strava
        self.appleHealth = appleHealth
        self.fitness = fitness
    }

    enum CodingKeys: String, CodingKey {
        case whoop, strava, appleHealth = "apple_health", fitness
    }
}

public struct Account: Sendable, Codable, Equatable {
    public var id: String
    public var email: String?
    public var passwordHash: String?
    public var firstName: String?
    public var lastName: String?
    public var displayName: String?
    public var bio: String?
    /// Her profile photo's blob key (the data map's `profile_photo:` column).
    public var profilePhotoKey: String?
    public var primarySport: String?
    public var morningReminderTime: String?
    public var timezone: String?
    public var subscriptionStatus: String?
    public var integrations: Integrations
    /// What the app shows of a deletion (the map's `on_deletion: set:` and the purge's
    /// mask write it): active, pendingDeletion during the grace period, then purged.
    /// Lifecycle's own record of the deletion (`AccountDirectory.Entry`) is the truth.
    public var state: AccountState
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        id: String, email: String?, passwordHash: String?, firstName: String?, lastName: String?, displayName: String?,
        bio: String?, profilePhotoKey: String?, primarySport: String?, morningReminderTime: String?, timezone: String?,
        subscriptionStatus: String?, integrations: Integrations, state: AccountState, createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.email = email
        self.passwordHash = passwordHash
        self.firstName = firstName
        self.lastName = lastName
        self.displayName = displayName
        self.bio = bio
        self.profilePhotoKey = profilePhotoKey
        self.primarySport = primarySport
        self.morningReminderTime = morningReminderTime
        self.timezone = timezone
        self.subscriptionStatus = subscriptionStatus
        self.integrations = integrations
        self.state = state
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case id, email, passwordHash = "password_hash", firstName = "first_name", lastName = "last_name", displayName = "display_name", bio, profilePhotoKey = "profile_photo_key", primarySport = "primary_sport", morningReminderTime = "morning_reminder_time", timezone, subscriptionStatus = "subscription_status", integrations, state, createdAt = "created_at", updatedAt = "updated_at"
    }
}

public enum Theme: String, Sendable, Codable, CaseIterable { case system, light, dark }

public struct Preferences: Sendable, Codable, Equatable {
    public static let fontSizeOffsets: Set<Int> = [-2, 0, 2, 4]

    public var theme: Theme
    public var fontSizeOffset: Int
    public var notificationsEnabled: Bool
    public var dailyReminderTime: String?

    public init(theme: Theme = .system, fontSizeOffset: Int = 0, notificationsEnabled: Bool = true, dailyReminderTime: String? = nil) {
        self.theme = theme
        self.fontSizeOffset = fontSizeOffset
        self.notificationsEnabled = notificationsEnabled
        self.dailyReminderTime = dailyReminderTime
    }

    enum CodingKeys: String, CodingKey {
        case theme, fontSizeOffset = "font_size_offset", notificationsEnabled = "notifications_enabled", dailyReminderTime = "daily_reminder_time"
    }
}

public enum PhotoRole: String, Sendable, Codable { case entry, profile }

/// Where a profile photo stands in normalisation (journal photos are kept as uploaded).
public enum NormalizationState: String, Sendable, Codable { case pending, normalized, rejected }

public struct PhotoRecord: Sendable, Codable, Equatable {
    public var id: String
    public var accountID: String
    public var entryID: String?
    public var role: PhotoRole
    public var blobKey: String
    public var contentType: String
    public var byteSize: Int64
    public var sha256: String
    public var takenAt: Date?
    public var createdAt: Date

    public init(
        id: String, accountID: String, entryID: String?, role: PhotoRole, blobKey: String, contentType: String,
        byteSize: Int64, sha256: String, takenAt: Date?, createdAt: Date
    ) {
        self.id = id
        self.accountID = accountID
        self.entryID = entryID
        self.role = role
        self.blobKey = blobKey
        self.contentType = contentType
        self.byteSize = byteSize
        self.sha256 = sha256
        self.takenAt = takenAt
        self.createdAt = createdAt
    }

    enum CodingKeys: String, CodingKey {
        case id, accountID = "account_id", entryID = "entry_id", role, blobKey = "blob_key", contentType = "content_type", byteSize = "byte_size", sha256, takenAt = "taken_at", createdAt = "created_at"
    }
}

public struct JournalEntry: Sendable, Codable, Equatable {
    public var id: String
    public var accountID: String
    public var createdAt: Date
    public var text: String

    public init(id: String, accountID: String, createdAt: Date, text: String) {
        self.id = id
        self.accountID = accountID
        self.createdAt = createdAt
        self.text = text
    }
}

public struct Mesocycle: Sendable, Codable, Equatable {
    public static let statuses: Set<String> = ["planned", "active", "completed", "abandoned"]

    public var id: String
    public var accountID: String
    public var status: String
    public var startedAt: Date?
    public var completedAt: Date?

    public init(id: String, accountID: String, status: String, startedAt: Date?, completedAt: Date?) {
        self.id = id
        self.accountID = accountID
        self.status = status
        self.startedAt = startedAt
        self.completedAt = completedAt
    }
}

public struct MeditationSession: Sendable, Codable, Equatable {
    public var id: String
    public var accountID: String
    public var startedAt: Date
    public var durationSeconds: Int

    public init(id: String, accountID: String, startedAt: Date, durationSeconds: Int) {
        self.id = id
        self.accountID = accountID
        self.startedAt = startedAt
        self.durationSeconds = durationSeconds
    }
}

/// A sign-in session. Revoking it signs the user out everywhere it was used.
public struct SignInSession: Sendable, Codable, Equatable {
    public var id: String
    public var accountID: String
    public var createdAt: Date
    public var revokedAt: Date?

    public init(id: String, accountID: String, createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.accountID = accountID
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// Who did what to which account, and how it ended. Never holds a password or hash.
public struct AuditEvent: Sendable, Codable, Equatable {
    public var id: Int64?
    public var at: Date
    public var actor: String
    public var action: String
    public var accountID: String?
    public var outcome: String
    public var detail: String?

    public init(id: Int64? = nil, at: Date, actor: String, action: String, accountID: String?, outcome: String, detail: String? = nil) {
        self.id = id
        self.at = at
        self.actor = actor
        self.action = action
        self.accountID = accountID
        self.outcome = outcome
        self.detail = detail
    }

    /// An event whose detail is written as one JSON object, numbers as numbers.
    public init(at: Date, actor: String, action: String, accountID: String?, outcome: String, detail: [String: JSONValue]) {
        self.init(at: at, actor: actor, action: action, accountID: accountID, outcome: outcome,
                  detail: detail.isEmpty ? nil : try? JobJSON.encode(detail))
    }

    /// The detail as stored (a JSON object written as text), as a nested value for output.
    public var detailValue: JSONValue? { detail.map(JSONValue.parsing) }

    /// As `lifecycle audit --json` and the API show it: the detail nested, not as text.
    public struct Output: Sendable, Encodable {
        public var id: Int64?
        public var at: Date
        public var actor: String
        public var action: String
        public var account: String?
        public var outcome: String
        public var detail: JSONValue?
    }

    public var output: Output {
        Output(id: id, at: at, actor: actor, action: action, account: accountID, outcome: outcome, detail: detailValue)
    }
}
