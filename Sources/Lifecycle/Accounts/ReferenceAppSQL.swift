import Foundation

/// The reference app's tables (the schema `lifecycle demo` and `init` create), read and
/// written once for both backends. In a write transaction `account(id:)` and
/// `account(email:)` keep the row locked against other writers until commit (SQLite's
/// single writer does so by itself): the deletion checks rely on it to take turns per account.
extension OwnStateTransaction {
    public func account(id: String) throws -> Account? {
        try selectAccounts("SELECT \(columns: accountColumns) FROM \(table: .accounts) WHERE id = \(id)\(rowLock: ())").first
    }

    public func account(email: String) throws -> Account? {
        try selectAccounts("SELECT \(columns: accountColumns) FROM \(table: .accounts) WHERE \(column: "email", caseless: email)\(rowLock: ())").first
    }

    public func preferences(accountID: String) throws -> Preferences? {
        try select("""
            SELECT theme, font_size_offset, notifications_enabled, daily_reminder_time FROM \(table: .preferences) WHERE account_id = \(accountID)
            """, from: .preferences, .text, .integer, .boolean, .text
        ).first.map { row in
            Preferences(
                theme: try row.one(0), fontSizeOffset: Int(try row.integer(1)), notificationsEnabled: try row.boolean(2),
                dailyReminderTime: try row.optionalText(3))
        }
    }

    /// Inserts unless a row with the id exists, and says who owns an existing id. ON
    /// CONFLICT DO NOTHING rather than look-then-insert: two importers on two machines may
    /// race on the same id.
    private func insertIfAbsent(_ insert: OwnSQL, table: OwnTable, id: String, owner: String = "account_id", accountID: String) throws -> InsertOutcome {
        if try change(insert) == 1 { return .inserted }
        guard let existing = try select("SELECT \(generated: OwnSQL(stringLiteral: owner)) FROM \(table: table) WHERE id = \(id)", from: table, .text).first else {
            return .alreadyPresent
        }
        let holder = try existing.text(0)
        return holder == accountID ? .alreadyPresent : .belongsToAnotherAccount(holder)
    }

    public func insertAccount(_ account: Account, preferences: Preferences?) throws -> InsertOutcome {
        let outcome = try insertIfAbsent("""
            INSERT INTO \(table: .accounts) (\(columns: accountColumns))
            VALUES (\(account.id), \(account.email), \(account.passwordHash), \(account.firstName), \(account.lastName),
              \(account.displayName), \(account.bio), \(account.profilePhotoKey), \(account.primarySport),
              \(account.morningReminderTime), \(account.timezone), \(account.subscriptionStatus), \(.boolean(account.integrations.whoop)),
              \(.boolean(account.integrations.strava)), \(.boolean(account.integrations.appleHealth)), \(.boolean(account.integrations.fitness)),
              \(account.state.rawValue), \(account.createdAt), \(account.updatedAt))
            ON CONFLICT (id) DO NOTHING
            """, table: .accounts, id: account.id, owner: "id", accountID: account.id)
        if outcome == .inserted, let preferences {
            try change("""
                INSERT INTO \(table: .preferences) (account_id, theme, font_size_offset, notifications_enabled, daily_reminder_time)
                VALUES (\(account.id), \(preferences.theme.rawValue), \(preferences.fontSizeOffset),
                  \(.boolean(preferences.notificationsEnabled)), \(preferences.dailyReminderTime))
                """)
        }
        return outcome
    }

    public func insertEntry(_ entry: JournalEntry) throws -> InsertOutcome {
        try insertIfAbsent("""
            INSERT INTO \(table: .journalEntries) (id, account_id, created_at, text) VALUES (\(entry.id), \(entry.accountID), \(entry.createdAt), \(entry.text))
            ON CONFLICT (id) DO NOTHING
            """, table: .journalEntries, id: entry.id, accountID: entry.accountID)
    }

    public func insertPhoto(_ photo: PhotoRecord) throws -> InsertOutcome {
        try insertIfAbsent("""
            INSERT INTO \(table: .photos) (\(columns: photoColumns))
            VALUES (\(photo.id), \(photo.accountID), \(photo.entryID), \(photo.role.rawValue), \(photo.blobKey), \(photo.contentType),
              \(photo.byteSize), \(photo.sha256), \(photo.takenAt), \(photo.createdAt))
            ON CONFLICT (id) DO NOTHING
            """, table: .photos, id: photo.id, accountID: photo.accountID)
    }

    public func insertMesocycle(_ mesocycle: Mesocycle) throws -> InsertOutcome {
        try insertIfAbsent("""
            INSERT INTO \(table: .mesocycles) (id, account_id, status, started_at, completed_at)
            VALUES (\(mesocycle.id), \(mesocycle.accountID), \(mesocycle.status), \(mesocycle.startedAt), \(mesocycle.completedAt))
            ON CONFLICT (id) DO NOTHING
            """, table: .mesocycles, id: mesocycle.id, accountID: mesocycle.accountID)
    }

    public func insertMeditationSession(_ session: MeditationSession) throws -> InsertOutcome {
        try insertIfAbsent("""
            INSERT INTO \(table: .meditationSessions) (id, account_id, started_at, duration_seconds)
            VALUES (\(session.id), \(session.accountID), \(session.startedAt), \(session.durationSeconds))
            ON CONFLICT (id) DO NOTHING
            """, table: .meditationSessions, id: session.id, accountID: session.accountID)
    }

    public func insertSession(_ session: SignInSession) throws -> InsertOutcome {
        try insertIfAbsent("""
            INSERT INTO \(table: .sessions) (id, account_id, created_at, revoked_at)
            VALUES (\(session.id), \(session.accountID), \(session.createdAt), \(session.revokedAt))
            ON CONFLICT (id) DO NOTHING
            """, table: .sessions, id: session.id, accountID: session.accountID)
    }

    public func photo(id: String) throws -> PhotoRecord? {
        try selectPhotos("SELECT \(columns: photoColumns) FROM \(table: .photos) WHERE id = \(id)").first
    }

    public func photos(accountID: String) throws -> [PhotoRecord] {
        try selectPhotos("SELECT \(columns: photoColumns) FROM \(table: .photos) WHERE account_id = \(accountID) ORDER BY id")
    }

    public func sessions(accountID: String) throws -> [SignInSession] {
        try select("""
            SELECT id, account_id, created_at, revoked_at FROM \(table: .sessions) WHERE account_id = \(accountID) ORDER BY id
            """, from: .sessions, .text, .text, .timestamp, .timestamp
        ).map { SignInSession(id: try $0.text(0), accountID: try $0.text(1), createdAt: try $0.date(2), revokedAt: try $0.optionalDate(3)) }
    }

    private func selectAccounts(_ sql: OwnSQL) throws -> [Account] {
        try select(sql, from: .accounts, reading: accountColumns).map { r in
            Account(
                id: try r.text(0), email: try r.optionalText(1), passwordHash: try r.optionalText(2), firstName: try r.optionalText(3),
                lastName: try r.optionalText(4), displayName: try r.optionalText(5), bio: try r.optionalText(6),
                profilePhotoKey: try r.optionalText(7), primarySport: try r.optionalText(8), morningReminderTime: try r.optionalText(9),
                timezone: try r.optionalText(10), subscriptionStatus: try r.optionalText(11),
                integrations: Integrations(whoop: try r.boolean(12), strava: try r.boolean(13), appleHealth: try r.boolean(14), fitness: try r.boolean(15)),
                state: try r.state(16), createdAt: try r.date(17), updatedAt: try r.date(18))
        }
    }

    private func selectPhotos(_ sql: OwnSQL) throws -> [PhotoRecord] {
        try select(sql, from: .photos, reading: photoColumns).map { r in
            PhotoRecord(
                id: try r.text(0), accountID: try r.text(1), entryID: try r.optionalText(2), role: try r.one(3), blobKey: try r.text(4),
                contentType: try r.text(5), byteSize: try r.integer(6), sha256: try r.text(7), takenAt: try r.optionalDate(8),
                createdAt: try r.date(9))
        }
    }
}

private let accountColumns = OwnColumns([
    "id": .text, "email": .text, "password_hash": .text, "first_name": .text, "last_name": .text, "display_name": .text, "bio": .text,
    "profile_photo_key": .text, "primary_sport": .text, "morning_reminder_time": .text, "timezone": .text, "subscription_status": .text,
    "integration_whoop": .boolean, "integration_strava": .boolean, "integration_apple_health": .boolean, "integration_fitness": .boolean,
    "state": .text, "created_at": .timestamp, "updated_at": .timestamp,
])

private let photoColumns = OwnColumns([
    "id": .text, "account_id": .text, "entry_id": .text, "role": .text, "blob_key": .text, "content_type": .text, "byte_size": .integer,
    "sha256": .text, "taken_at": .timestamp, "created_at": .timestamp,
])
