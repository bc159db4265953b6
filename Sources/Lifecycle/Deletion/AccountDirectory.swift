import Foundation
import JobRunner

/// Where deletion finds an account and keeps its deletion state. Every app's accounts
/// (the reference app's too) are found, and their passwords and addresses read, through
/// its data map; the state is kept in lifecycle's namespace keyed by the user's key, and
/// what the app feels of it (sessions ended, a profile hidden) is what the map's
/// `on_deletion:` says. Deletion, restore and the purge sweep run the same rules for all.
public struct AccountDirectory<Store: LifecycleStore>: Sendable {
    /// What deletion needs to know of an account.
    public struct Entry: Sendable, Equatable {
        public var id: String
        public var state: AccountState
        public var purgeAfter: Date?
        public var purgedAt: Date?
    }

    /// The app's database as its data map describes it.
    public let data: AppData

    public init(data: AppData) {
        self.data = data
    }

    /// The account a reference names (see `AccountReference`), as the map's key and lookup
    /// columns name it.
    public func find(_ reference: AccountReference, in tx: Store.Transaction) throws -> String? {
        if let problem = AccountReference.controlCharacterProblem(reference.text) { throw LifecycleError(.badInput, problem) }
        if let key = try data.resolve(reference, in: tx) { return key }
        // Not found by a role that cannot see every user row is not "no account": the
        // row may be there, behind row level security or a missing privilege.
        let table = data.plan.catalog.qualified(data.plan.subject.table)
        if let access = try tx.tableAccess([table])[table], access.rowSecurity || !access.select {
            throw LifecycleError(.permissionDenied, """
                no account '\(reference.text)' that this database role can see: \(data.displayName(table)) \
                \(access.select ? "has row level security this role does not bypass" : "is not readable by this role"); \
                run lifecycle as a role that \(access.select ? "bypasses it (BYPASSRLS, or the table's owner)" : "has SELECT on it") \
                (`lifecycle map check` lists what the map needs)
                """)
        }
        return nil
    }

    /// The account's state. In a write transaction this takes the lock on lifecycle's record
    /// of the account, which deletion attempts of one account take turns on.
    public func entry(id: String, in tx: Store.Transaction, locking: Bool, now: Date) throws -> Entry? {
        guard try data.exists(key: id, in: tx) else {
            // The app deleted the row itself; lifecycle may still know it was purged.
            return try tx.subject(key: id).flatMap { $0.state == .purged ? Entry(record: $0) : nil }
        }
        let record = locking ? try tx.lockSubject(key: id, now: now) : try tx.subject(key: id)
        return record.map(Entry.init(record:)) ?? Entry(id: id, state: .active)
    }

    public func passwordHash(id: String, in tx: Store.Transaction) throws -> String? {
        try data.passwordHash(key: id, in: tx)
    }

    /// Where mail to the account goes: the map's `email:` column.
    public func email(id: String, in tx: Store.Transaction) throws -> String? {
        try data.email(key: id, in: tx)
    }

    public func markPendingDeletion(id: String, requestedAt: Date, purgeAfter: Date, in tx: Store.Transaction) throws -> Bool {
        try tx.markSubjectPending(key: id, requestedAt: requestedAt, purgeAfter: purgeAfter)
    }

    public func movePurgeDate(id: String, purgeAfter: Date, now: Date, in tx: Store.Transaction) throws -> Bool {
        try tx.moveSubjectPurgeDate(key: id, purgeAfter: purgeAfter)
    }

    /// Back to active, with what deletion set in the app's tables put back.
    public func restore(id: String, now: Date, in tx: Store.Transaction) throws -> Bool {
        guard try tx.restoreSubject(key: id, now: now) else { return false }
        try data.endGrace(key: id, in: tx)
        return true
    }

    /// Signs the account out everywhere, as the map's `on_deletion:` says (sessions and
    /// tokens removed, values set).
    public func revokeSessions(id: String, at: Date, in tx: Store.Transaction) throws -> SignedOut {
        try data.beginGrace(key: id, in: tx)
    }

    public func accountsDueForPurge(now: Date, after: String?, limit: Int, in tx: Store.Transaction) throws -> [DuePurge] {
        try tx.subjectsDueForPurge(now: now, after: after, limit: limit)
    }

    /// The columns `COLUMN:VALUE` may name.
    public var lookupColumns: [String] { data.plan.subject.lookup }

    public var lifecycleOwnsSchema: Bool { data.map.lifecycleOwnsSchema }
}

extension AccountDirectory.Entry {
    init(id: String, state: AccountState) {
        self.init(id: id, state: state, purgeAfter: nil, purgedAt: nil)
    }

    init(record: SubjectRecord) {
        self.init(id: record.key, state: record.state, purgeAfter: record.purgeAfter, purgedAt: record.purgedAt)
    }
}

extension LifecycleServices {
    /// The directory of the installation's data map (the reference app's when the map
    /// says `app: reference`); `cache` keeps the map's check against the catalog.
    public func directory(cache: AppDataCache = AppDataCache()) async throws -> AccountDirectory<Store> {
        AccountDirectory(data: try await cache.appData(self))
    }
}
