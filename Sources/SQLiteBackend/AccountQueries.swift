import Foundation
import GRDB
import Lifecycle

extension Account {
    /// The columns `init(row:)` reads, in its order: by position, because GRDB's lookup by
    /// name compares lowercased names column by column, and the purge reads each account.
    static let sqliteColumns = """
        id, email, password_hash, first_name, last_name, display_name, bio, profile_photo_id, primary_sport, \
        morning_reminder_time, timezone, subscription_status, integration_whoop, integration_strava, \
        integration_apple_health, integration_fitness, state, deletion_requested_at, purge_after, purged_at, created_at, updated_at
        """

    static let sqliteColumnNames = sqliteColumns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }

    init(row: Row) throws {
        let r = CheckedRow(row, table: "accounts", key: "id", columns: Self.sqliteColumnNames)
        self.init(
            id: try r(0), email: try r(1), passwordHash: try r(2), firstName: try r(3),
            lastName: try r(4), displayName: try r(5), bio: try r(6),
            profilePhotoID: try r(7), primarySport: try r(8),
            morningReminderTime: try r(9), timezone: try r(10),
            subscriptionStatus: try r(11),
            integrations: Integrations(
                whoop: try r(12), strava: try r(13),
                appleHealth: try r(14), fitness: try r(15)),
            state: try r.oneOf(16), deletionRequestedAt: try r(17),
            purgeAfter: try r(18), purgedAt: try r(19), createdAt: try r(20), updatedAt: try r(21))
    }
}

extension PhotoRecord {
    init(row: Row) throws {
        let r = CheckedRow(row, table: "photos", key: "id")
        self.init(
            id: try r("id"), accountID: try r("account_id"), entryID: try r("entry_id"),
            role: try r.oneOf("role"), blobKey: try r("blob_key"), contentType: try r("content_type"),
            byteSize: try r("byte_size"), sha256: try r("sha256"), takenAt: try r("taken_at"), createdAt: try r("created_at"),
            normalizationState: try r.optionalOneOf("normalization_state"),
            normalizationReason: try r("normalization_reason"), recipeVersion: try r("recipe_version"))
    }
}

/// The tables that hang off an account, children before parents: the order rows must be deleted in.

extension SQLiteTransaction: AccountTransaction {
    public func account(id: String) throws -> Account? {
        try Row.fetchOne(db.cachedStatement(sql: Self.accountByIDSQL), arguments: [id]).map(Account.init(row:))
    }

    private static let accountByIDSQL = "SELECT \(Account.sqliteColumns) FROM accounts WHERE id = ?"

    public func accountState(id: String) throws -> AccountState? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT id, state FROM accounts WHERE id = ?"), arguments: [id]).map { row in
            try CheckedRow(row, table: "accounts", key: "id").oneOf("state")
        }
    }

    public func account(email: String) throws -> Account? {
        try Row.fetchOne(db, sql: "SELECT \(Account.sqliteColumns) FROM accounts WHERE email = ?", arguments: [email]).map(Account.init(row:))
    }

    public func preferences(accountID: String) throws -> Preferences? {
        try Row.fetchOne(db, sql: "SELECT * FROM preferences WHERE account_id = ?", arguments: [accountID]).map { row in
            let r = CheckedRow(row, table: "preferences", key: "account_id")
            return Preferences(
                theme: try r.oneOf("theme"), fontSizeOffset: try r("font_size_offset"),
                notificationsEnabled: try r("notifications_enabled"), dailyReminderTime: try r("daily_reminder_time"))
        }
    }

    /// Inserts unless a row with the id exists; reports who owns an existing id.
    private func insertIfAbsent(table: String, id: String, accountID: String, ownerColumn: String = "account_id", _ insert: () throws -> Void) throws -> InsertOutcome {
        if let owner = try String.fetchOne(db, sql: "SELECT \(ownerColumn) FROM \(table) WHERE id = ?", arguments: [id]) {
            return owner == accountID ? .alreadyPresent : .belongsToAnotherAccount(owner)
        }
        try insert()
        return .inserted
    }

    public func insertAccount(_ account: Account, preferences: Preferences?) throws -> InsertOutcome {
        try insertIfAbsent(table: "accounts", id: account.id, accountID: account.id, ownerColumn: "id") {
            try db.execute(
                sql: """
                    INSERT INTO accounts (id, email, password_hash, first_name, last_name, display_name, bio, profile_photo_id,
                      primary_sport, morning_reminder_time, timezone, subscription_status, integration_whoop, integration_strava,
                      integration_apple_health, integration_fitness, state, deletion_requested_at, purge_after, purged_at,
                      created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    account.id, account.email, account.passwordHash, account.firstName, account.lastName, account.displayName,
                    account.bio, account.profilePhotoID, account.primarySport, account.morningReminderTime, account.timezone,
                    account.subscriptionStatus, account.integrations.whoop, account.integrations.strava,
                    account.integrations.appleHealth, account.integrations.fitness, account.state.rawValue,
                    account.deletionRequestedAt, account.purgeAfter, account.purgedAt, account.createdAt, account.updatedAt,
                ])
            if let preferences {
                try db.execute(
                    sql: "INSERT INTO preferences (account_id, theme, font_size_offset, notifications_enabled, daily_reminder_time) VALUES (?, ?, ?, ?, ?)",
                    arguments: [account.id, preferences.theme.rawValue, preferences.fontSizeOffset,
                                preferences.notificationsEnabled, preferences.dailyReminderTime])
            }
        }
    }

    public func insertEntry(_ entry: JournalEntry) throws -> InsertOutcome {
        try insertIfAbsent(table: "journal_entries", id: entry.id, accountID: entry.accountID) {
            try db.execute(
                sql: "INSERT INTO journal_entries (id, account_id, created_at, text) VALUES (?, ?, ?, ?)",
                arguments: [entry.id, entry.accountID, entry.createdAt, entry.text])
        }
    }

    public func insertPhoto(_ photo: PhotoRecord) throws -> InsertOutcome {
        try insertIfAbsent(table: "photos", id: photo.id, accountID: photo.accountID) {
            try db.execute(
                sql: """
                    INSERT INTO photos (id, account_id, entry_id, role, blob_key, content_type, byte_size, sha256, taken_at,
                      created_at, normalization_state, normalization_reason, recipe_version)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    photo.id, photo.accountID, photo.entryID, photo.role.rawValue, photo.blobKey, photo.contentType,
                    photo.byteSize, photo.sha256, photo.takenAt, photo.createdAt, photo.normalizationState?.rawValue,
                    photo.normalizationReason, photo.recipeVersion,
                ])
        }
    }

    public func insertMesocycle(_ mesocycle: Mesocycle) throws -> InsertOutcome {
        try insertIfAbsent(table: "mesocycles", id: mesocycle.id, accountID: mesocycle.accountID) {
            try db.execute(
                sql: "INSERT INTO mesocycles (id, account_id, status, started_at, completed_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [mesocycle.id, mesocycle.accountID, mesocycle.status, mesocycle.startedAt, mesocycle.completedAt])
        }
    }

    public func insertMeditationSession(_ session: MeditationSession) throws -> InsertOutcome {
        try insertIfAbsent(table: "meditation_sessions", id: session.id, accountID: session.accountID) {
            try db.execute(
                sql: "INSERT INTO meditation_sessions (id, account_id, started_at, duration_seconds) VALUES (?, ?, ?, ?)",
                arguments: [session.id, session.accountID, session.startedAt, session.durationSeconds])
        }
    }

    public func insertSession(_ session: SignInSession) throws -> InsertOutcome {
        try insertIfAbsent(table: "sessions", id: session.id, accountID: session.accountID) {
            try db.execute(
                sql: "INSERT INTO sessions (id, account_id, created_at, revoked_at) VALUES (?, ?, ?, ?)",
                arguments: [session.id, session.accountID, session.createdAt, session.revokedAt])
        }
    }

    public func setProfilePhoto(accountID: String, photoID: String?, now: Date) throws {
        try db.execute(
            sql: "UPDATE accounts SET profile_photo_id = ?, updated_at = ? WHERE id = ?", arguments: [photoID, now, accountID])
    }

    public func photo(id: String) throws -> PhotoRecord? {
        try Row.fetchOne(db, sql: "SELECT * FROM photos WHERE id = ?", arguments: [id]).map(PhotoRecord.init(row:))
    }

    public func photos(accountID: String) throws -> [PhotoRecord] {
        try Row.fetchAll(db, sql: "SELECT * FROM photos WHERE account_id = ? ORDER BY id", arguments: [accountID])
            .map(PhotoRecord.init(row:))
    }

    public func sessions(accountID: String) throws -> [SignInSession] {
        try Row.fetchAll(db, sql: "SELECT * FROM sessions WHERE account_id = ? ORDER BY id", arguments: [accountID]).map {
            let r = CheckedRow($0, table: "sessions", key: "id")
            return SignInSession(id: try r("id"), accountID: try r("account_id"), createdAt: try r("created_at"), revokedAt: try r("revoked_at"))
        }
    }

    public func recordAudit(_ event: AuditEvent) throws {
        try db.cachedStatement(sql: "INSERT INTO lifecycle_audit_events (at, actor, action, account_id, outcome, detail) VALUES (?, ?, ?, ?, ?, ?)")
            .execute(arguments: [event.at.stored, event.actor, event.action, event.accountID, event.outcome, event.detail])
    }

    public func auditEvents(accountID: String) throws -> [AuditEvent] {
        try Row.fetchAll(db, sql: "SELECT * FROM lifecycle_audit_events WHERE account_id = ? ORDER BY id", arguments: [accountID])
            .map(AuditEvent.init(row:))
    }
}
