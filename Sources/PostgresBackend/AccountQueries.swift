import Foundation
import Lifecycle
import PostgresNIO

/// Column access by name, with the integer widths PostgreSQL uses mapped to Swift's.
struct Columns {
    let row: PostgresRandomAccessRow
    init(_ row: PostgresRow) { self.row = row.makeRandomAccess() }

    func text(_ name: String) throws -> String { try row[name].decode(String.self) }
    func optionalText(_ name: String) throws -> String? { try row[name].decode(String?.self) }
    func date(_ name: String) throws -> Date { try row[name].decode(Date.self) }
    func optionalDate(_ name: String) throws -> Date? { try row[name].decode(Date?.self) }
    func bool(_ name: String) throws -> Bool { try row[name].decode(Bool.self) }
    func int(_ name: String) throws -> Int { Int(try row[name].decode(Int64.self)) }
    func optionalInt(_ name: String) throws -> Int? { try row[name].decode(Int64?.self).map(Int.init) }
    func int32(_ name: String) throws -> Int { Int(try row[name].decode(Int32.self)) }
    func optionalInt32(_ name: String) throws -> Int? { try row[name].decode(Int32?.self).map(Int.init) }
    func state(_ name: String) throws -> AccountState { try AccountState.stored(try text(name)) }
}

extension AccountState {
    /// A state as the database holds it. The schema's CHECK admits only known states, so
    /// anything else is a damaged row: never read as active, which would let it sign in.
    static func stored(_ raw: String) throws -> AccountState {
        guard let state = AccountState(rawValue: raw) else {
            throw PostgresStoreError.query("an account row holds the unknown state '\(raw)'; the database was changed outside lifecycle", sqlState: nil)
        }
        return state
    }
}

extension Account {
    init(row: PostgresRow) throws {
        let c = Columns(row)
        self.init(
            id: try c.text("id"), email: try c.optionalText("email"), passwordHash: try c.optionalText("password_hash"),
            firstName: try c.optionalText("first_name"), lastName: try c.optionalText("last_name"),
            displayName: try c.optionalText("display_name"), bio: try c.optionalText("bio"),
            profilePhotoID: try c.optionalText("profile_photo_id"), primarySport: try c.optionalText("primary_sport"),
            morningReminderTime: try c.optionalText("morning_reminder_time"), timezone: try c.optionalText("timezone"),
            subscriptionStatus: try c.optionalText("subscription_status"),
            integrations: Integrations(
                whoop: try c.bool("integration_whoop"), strava: try c.bool("integration_strava"),
                appleHealth: try c.bool("integration_apple_health"), fitness: try c.bool("integration_fitness")),
            state: try c.state("state"), deletionRequestedAt: try c.optionalDate("deletion_requested_at"),
            purgeAfter: try c.optionalDate("purge_after"), purgedAt: try c.optionalDate("purged_at"),
            createdAt: try c.date("created_at"), updatedAt: try c.date("updated_at"))
    }
}

extension PhotoRecord {
    init(row: PostgresRow) throws {
        let c = Columns(row)
        self.init(
            id: try c.text("id"), accountID: try c.text("account_id"), entryID: try c.optionalText("entry_id"),
            role: PhotoRole(rawValue: try c.text("role")) ?? .entry, blobKey: try c.text("blob_key"),
            contentType: try c.text("content_type"), byteSize: Int64(try c.int("byte_size")), sha256: try c.text("sha256"),
            takenAt: try c.optionalDate("taken_at"), createdAt: try c.date("created_at"),
            normalizationState: try c.optionalText("normalization_state").flatMap(NormalizationState.init(rawValue:)),
            normalizationReason: try c.optionalText("normalization_reason"), recipeVersion: try c.optionalInt32("recipe_version"))
    }
}

/// The tables that hang off an account, children before parents: the order rows must be deleted in.

extension PostgresTransaction: AccountTransaction {
    /// In a write transaction the account row is locked until commit: the state
    /// checks of deletion, restore and purge read it under that lock, as they do
    /// under SQLite's single writer.
    public func account(id: String) throws -> Account? {
        let rows = isReadOnly
            ? try query("SELECT * FROM accounts WHERE id = \(id)")
            : try query("SELECT * FROM accounts WHERE id = \(id) FOR UPDATE")
        return try rows.first.map(Account.init(row:))
    }

    public func accountState(id: String) throws -> AccountState? {
        let rows = isReadOnly
            ? try query("SELECT state FROM accounts WHERE id = \(id)")
            : try query("SELECT state FROM accounts WHERE id = \(id) FOR UPDATE")
        return try rows.first.map { try Columns($0).state("state") }
    }

    public func account(email: String) throws -> Account? {
        let rows = isReadOnly
            ? try query("SELECT * FROM accounts WHERE lower(email) = lower(\(email))")
            : try query("SELECT * FROM accounts WHERE lower(email) = lower(\(email)) FOR UPDATE")
        return try rows.first.map(Account.init(row:))
    }

    public func preferences(accountID: String) throws -> Preferences? {
        try query("SELECT * FROM preferences WHERE account_id = \(accountID)").first.map { row in
            let c = Columns(row)
            return Preferences(
                theme: Theme(rawValue: try c.text("theme")) ?? .system, fontSizeOffset: try c.int32("font_size_offset"),
                notificationsEnabled: try c.bool("notifications_enabled"), dailyReminderTime: try c.optionalText("daily_reminder_time"))
        }
    }

    /// Inserts unless a row with the id exists; reports who owns an existing id.
    /// ON CONFLICT DO NOTHING rather than look-then-insert: two importers on two
    /// machines may race on the same id.
    private func insertIfAbsent(_ insert: PostgresQuery, owner: PostgresQuery, accountID: String) throws -> InsertOutcome {
        if try execute(insert) == 1 { return .inserted }
        guard let existing = try query(owner).first?.decode(String.self) else {
            return .alreadyPresent
        }
        return existing == accountID ? .alreadyPresent : .belongsToAnotherAccount(existing)
    }

    public func insertAccount(_ account: Account, preferences: Preferences?) throws -> InsertOutcome {
        let outcome = try insertIfAbsent(
            """
            INSERT INTO accounts (id, email, password_hash, first_name, last_name, display_name, bio, profile_photo_id,
              primary_sport, morning_reminder_time, timezone, subscription_status, integration_whoop, integration_strava,
              integration_apple_health, integration_fitness, state, deletion_requested_at, purge_after, purged_at,
              created_at, updated_at)
            VALUES (\(account.id), \(account.email), \(account.passwordHash), \(account.firstName), \(account.lastName),
              \(account.displayName), \(account.bio), \(account.profilePhotoID), \(account.primarySport),
              \(account.morningReminderTime), \(account.timezone), \(account.subscriptionStatus), \(account.integrations.whoop),
              \(account.integrations.strava), \(account.integrations.appleHealth), \(account.integrations.fitness),
              \(account.state.rawValue), \(account.deletionRequestedAt), \(account.purgeAfter), \(account.purgedAt),
              \(account.createdAt), \(account.updatedAt))
            ON CONFLICT (id) DO NOTHING
            """,
            owner: "SELECT id FROM accounts WHERE id = \(account.id)", accountID: account.id)
        if outcome == .inserted, let preferences {
            try execute("""
                INSERT INTO preferences (account_id, theme, font_size_offset, notifications_enabled, daily_reminder_time)
                VALUES (\(account.id), \(preferences.theme.rawValue), \(Int32(preferences.fontSizeOffset)),
                  \(preferences.notificationsEnabled), \(preferences.dailyReminderTime))
                """)
        }
        return outcome
    }

    public func insertEntry(_ entry: JournalEntry) throws -> InsertOutcome {
        try insertIfAbsent(
            """
            INSERT INTO journal_entries (id, account_id, created_at, text) VALUES (\(entry.id), \(entry.accountID), \(entry.createdAt), \(entry.text))
            ON CONFLICT (id) DO NOTHING
            """,
            owner: "SELECT account_id FROM journal_entries WHERE id = \(entry.id)", accountID: entry.accountID)
    }

    public func insertPhoto(_ photo: PhotoRecord) throws -> InsertOutcome {
        try insertIfAbsent(
            """
            INSERT INTO photos (id, account_id, entry_id, role, blob_key, content_type, byte_size, sha256, taken_at,
              created_at, normalization_state, normalization_reason, recipe_version)
            VALUES (\(photo.id), \(photo.accountID), \(photo.entryID), \(photo.role.rawValue), \(photo.blobKey), \(photo.contentType),
              \(photo.byteSize), \(photo.sha256), \(photo.takenAt), \(photo.createdAt), \(photo.normalizationState?.rawValue),
              \(photo.normalizationReason), \(photo.recipeVersion.map(Int32.init)))
            ON CONFLICT (id) DO NOTHING
            """,
            owner: "SELECT account_id FROM photos WHERE id = \(photo.id)", accountID: photo.accountID)
    }

    public func insertMesocycle(_ mesocycle: Mesocycle) throws -> InsertOutcome {
        try insertIfAbsent(
            """
            INSERT INTO mesocycles (id, account_id, status, started_at, completed_at)
            VALUES (\(mesocycle.id), \(mesocycle.accountID), \(mesocycle.status), \(mesocycle.startedAt), \(mesocycle.completedAt))
            ON CONFLICT (id) DO NOTHING
            """,
            owner: "SELECT account_id FROM mesocycles WHERE id = \(mesocycle.id)", accountID: mesocycle.accountID)
    }

    public func insertMeditationSession(_ session: MeditationSession) throws -> InsertOutcome {
        try insertIfAbsent(
            """
            INSERT INTO meditation_sessions (id, account_id, started_at, duration_seconds)
            VALUES (\(session.id), \(session.accountID), \(session.startedAt), \(Int32(clamping: session.durationSeconds)))
            ON CONFLICT (id) DO NOTHING
            """,
            owner: "SELECT account_id FROM meditation_sessions WHERE id = \(session.id)", accountID: session.accountID)
    }

    public func insertSession(_ session: SignInSession) throws -> InsertOutcome {
        try insertIfAbsent(
            """
            INSERT INTO sessions (id, account_id, created_at, revoked_at)
            VALUES (\(session.id), \(session.accountID), \(session.createdAt), \(session.revokedAt))
            ON CONFLICT (id) DO NOTHING
            """,
            owner: "SELECT account_id FROM sessions WHERE id = \(session.id)", accountID: session.accountID)
    }

    public func setProfilePhoto(accountID: String, photoID: String?, now: Date) throws {
        try execute("UPDATE accounts SET profile_photo_id = \(photoID), updated_at = \(now) WHERE id = \(accountID)")
    }

    public func photo(id: String) throws -> PhotoRecord? {
        try query("SELECT * FROM photos WHERE id = \(id)").first.map(PhotoRecord.init(row:))
    }

    public func photos(accountID: String) throws -> [PhotoRecord] {
        try query("SELECT * FROM photos WHERE account_id = \(accountID) ORDER BY id").map(PhotoRecord.init(row:))
    }

    public func sessions(accountID: String) throws -> [SignInSession] {
        try query("SELECT * FROM sessions WHERE account_id = \(accountID) ORDER BY id").map { row in
            let c = Columns(row)
            return SignInSession(
                id: try c.text("id"), accountID: try c.text("account_id"), createdAt: try c.date("created_at"),
                revokedAt: try c.optionalDate("revoked_at"))
        }
    }

    public func recordAudit(_ event: AuditEvent) throws {
        try execute("""
            INSERT INTO lifecycle.audit_events (at, actor, action, account_id, outcome, detail)
            VALUES (\(event.at), \(event.actor), \(event.action), \(event.accountID), \(event.outcome), \(event.detail))
            """)
    }

    public func auditEvents(accountID: String) throws -> [AuditEvent] {
        try query("SELECT * FROM lifecycle.audit_events WHERE account_id = \(accountID) ORDER BY id").map { row in
            let c = Columns(row)
            return AuditEvent(
                id: Int64(try c.int("id")), at: try c.date("at"), actor: try c.text("actor"), action: try c.text("action"),
                accountID: try c.optionalText("account_id"), outcome: try c.text("outcome"), detail: try c.optionalText("detail"))
        }
    }
}

/// Bind parameters for statements whose SQL names tables or columns from the data map.
func binds(_ values: (any PostgresThrowingDynamicTypeEncodable)?...) throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: values.count)
    for value in values {
        if let value { try bindings.append(value) } else { bindings.appendNull() }
    }
    return bindings
}

/// A table or column name from the data map, quoted as an identifier. The data map
/// already refuses names that are not plain identifiers; quoting is the second guard.
func quoted(_ identifier: String) -> String {
    "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
