import Foundation
import JobRunner
import Synchronization

/// An app's own database as its data map describes it, checked against the live catalog:
/// what deletion, purge and export of the app's accounts run on. The app's tables are
/// only ever reached through statements generated here.
public struct AppData: Sendable {
    public let plan: DataMapPlan
    public let sql: DataMapSQL

    public init(plan: DataMapPlan, dialect: SQLDialect, recorded: RecordedRows? = nil) {
        self.plan = plan
        self.sql = DataMapSQL(plan: plan, dialect: dialect, recorded: recorded)
    }

    public var map: DataMap { plan.map }

    /// The account a reference names (see `AccountReference`). Two matches (one account's
    /// email is another's username, a lookup column that is not unique) are refused rather
    /// than guessed. Keys are told apart by their bytes, as the database tells them: an NFC
    /// and an NFD spelling are two accounts, not one found twice. The map's `ignore_case:`
    /// columns are compared whatever the case only when the exact bytes name nobody: a user
    /// whose address differs from another's only by case still finds her own by typing it
    /// as stored, and the common lookup keeps the column's ordinary index.
    public func resolve<T: GeneratedSQLTransaction>(_ reference: AccountReference, in tx: T) throws -> String? {
        let subject = plan.subject
        let (value, columns) = switch reference.target(lookupColumns: subject.lookup) {
        case .key(let key): (key, [subject.key])
        case .lookup(let column, let value): (value, [column])
        case .keyOrAnyLookup(let text): (text, [subject.key] + subject.lookup)
        }
        func matches(_ statement: SQLStatement) throws -> Set<ExactText> {
            Set(try tx.rows(statement).compactMap { ($0.first?.text).map(ExactText.init) })
        }
        var keys = try matches(sql.findSubject(value, columns: columns))
        let caseless = columns.filter(subject.ignoreCase.contains)
        if keys.isEmpty && !caseless.isEmpty { keys = try matches(sql.findSubject(value, columns: caseless, ignoringCase: true)) }
        guard keys.count <= 1 else {
            guard reference.disclosesMatches else {
                throw LifecycleError(.badInput, "'\(reference)' names more than one account; name the account by its key")
            }
            let listed = keys.sorted().map(\.text.quotedExactly).joined(separator: ", ")
            throw LifecycleError(.badInput, "'\(reference)' names more than one account (\(listed)); name it by its key")
        }
        return keys.first?.text
    }

    public func exists<T: GeneratedSQLTransaction>(key: String, in tx: T) throws -> Bool {
        try !tx.rows(sql.subjectExists(key: key)).isEmpty
    }

    /// The address the map's `email:` column holds for the account, if it names one.
    public func email<T: GeneratedSQLTransaction>(key: String, in tx: T) throws -> String? {
        guard let column = plan.subject.email else { return nil }
        return try tx.rows(sql.subjectValue(column: column, key: key)).first?.first?.text
    }

    /// The name the export-ready message greets her by: the first `greeting:` column that holds one.
    public func greetingName<T: GeneratedSQLTransaction>(key: String, in tx: T) throws -> String? {
        for column in plan.subject.greeting {
            if let name = try tx.rows(sql.subjectValue(column: column, key: key)).first?.first?.text,
               !name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                return name
            }
        }
        return nil
    }

    /// The zone her files are dated in (the map's `timezone:` column); UTC without one, or
    /// when the column holds no zone this machine knows.
    public func timeZone<T: GeneratedSQLTransaction>(key: String, in tx: T) throws -> TimeZone {
        let utc = TimeZone(identifier: "UTC")!
        guard let column = plan.subject.timeZone,
              let name = try tx.rows(sql.subjectValue(column: column, key: key)).first?.first?.text else { return utc }
        return TimeZone(identifier: name) ?? utc
    }

    public func passwordHash<T: GeneratedSQLTransaction>(key: String, in tx: T) throws -> String? {
        guard let statement = sql.passwordHash(key: key) else { return nil }
        return try tx.rows(statement).first?.first?.text
    }

    /// The subject's rows per mapped table, keyed by table name as the map writes it.
    public func rowCounts<T: GeneratedSQLTransaction>(key: String, in tx: T) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for table in plan.tables {
            let count = try tx.rows(sql.countOwned(table, key: key)).first?.first
            if case .integer(let number) = count { counts[displayName(table.table.name)] = Int(number) }
        }
        return counts
    }

    /// One column's worth of file names a purge of `key` removes: the user row's blob
    /// columns, those of the rows the purge deletes, and of other users' rows cascaded
    /// with them. Each is read a page of `batch` keys at a time, after the last key seen.
    public struct BlobQuery: Sendable {
        public var label: String
        public var page: @Sendable (_ after: String?) -> SQLStatement
    }

    public func blobQueries(key: String, batch: Int) -> [BlobQuery] {
        let sql = self.sql
        var queries: [BlobQuery] = []
        for column in plan.subject.blobs where plan.subject.erase.takesFiles(of: column) {
            queries.append(.init(label: "\(displayName(plan.subject.table)).\(column)") { after in
                sql.subjectBlobKeys(column: column, key: key, after: after, limit: batch)
            })
        }
        for table in plan.tables {
            for column in table.table.blobs where table.table.erase.takesFiles(of: column) {
                queries.append(.init(label: "\(displayName(table.table.name)).\(column)") { after in
                    sql.blobKeys(table, column: column, key: key, after: after, limit: batch)
                })
            }
            for (index, cascade) in table.cascades.enumerated() where cascade.deletesRows {
                for column in plan.mappedTable(cascade.table)?.table.blobs ?? [] {
                    queries.append(.init(label: "\(displayName(cascade.table)).\(column)") { after in
                        sql.cascadeBlobKeys(table, cascade: index, column: column, key: key, after: after, limit: batch)
                    })
                }
            }
        }
        return queries
    }

    /// What requesting deletion does in the app (`on_deletion:`), in the request's
    /// transaction: the values it replaces kept in lifecycle's namespace, then set, and the
    /// user's sessions and tokens removed. The rows removed (the sessions signed out).
    public func beginGrace<T: OwnStateTransaction>(key: String, in tx: T) throws -> SignedOut {
        var kept: [GraceValue] = []
        for setting in plan.onDeletion.set {
            let keyColumns = sql.graceKey(setting.table).count
            for row in try tx.rows(sql.graceCapture(setting, key: key)) {
                let texts: [String?] = row.map { if case .text(let text) = $0 { text } else { nil } }
                let rowKey = String(decoding: try JSONEncoder().encode(Array(texts.prefix(keyColumns))), as: UTF8.self)
                for (index, value) in setting.values.enumerated() {
                    kept.append(GraceValue(table: setting.table.description, row: rowKey, column: value.column, value: texts[keyColumns + index]))
                }
            }
        }
        try tx.recordGraceValues(key: key, values: kept)
        for setting in plan.onDeletion.set { _ = try tx.execute(sql.graceSet(setting, key: key)) }
        return try signOut(key: key, in: tx)
    }

    /// The rows `on_deletion: remove:` names (sessions, tokens), deleted, and the rows
    /// `insert:` adds (simplejwt's blacklist), added: when deletion is asked for, and again
    /// as the purge erases the user (sessions signed in since). Rows whose owner is encoded
    /// are found through lifecycle's index (EncodedOwnerIndex.swift). Counted apart: the sessions signed out
    /// (rows of a table whose name says it holds sessions) and the tokens revoked (any other
    /// row removed, a blacklist row added); not the rows removed only because they
    /// referenced one (`via:`).
    public func signOut<T: GeneratedSQLTransaction>(key: String, in tx: T) throws -> SignedOut {
        var signedOut = SignedOut()
        func removed(_ count: Int, from table: DataMap.TableName) {
            if table.name.lowercased().contains("session") { signedOut.sessions += count } else { signedOut.tokens += count }
        }
        // A guarded table (a platform's trigger against SQL deletes) is opened as the purge opens it.
        if !plan.onDeletion.remove.isEmpty || !plan.onDeletion.insert.isEmpty { try tx.prepareErasure(settings: plan.eraseSettings) }
        for removal in plan.onDeletion.remove {
            guard let encoding = removal.owner.encoding else {
                let count = try tx.execute(sql.graceRemove(removal, key: key))
                if removal.parent == nil { removed(count, from: removal.table) }
                continue
            }
            removed(try signOutEncoded(removal, encoding: encoding, key: key, in: tx), from: removal.table)
        }
        // After the removals: a source row removed by the same request needs no new row.
        for insertion in plan.onDeletion.insert { signedOut.tokens += try tx.execute(sql.graceInsert(insertion, key: key)) }
        return signedOut
    }

    /// A restore's part in the app: every value deletion set, put back as it was. Removed
    /// sessions stay removed: the user signs in afresh.
    public func endGrace<T: OwnStateTransaction>(key: String, in tx: T) throws {
        for value in try tx.takeGraceValues(key: key) {
            let parts = value.table.split(separator: ".", maxSplits: 1).map(String.init)
            let table = parts.count == 2 ? DataMap.TableName(schema: parts[0], name: parts[1]) : DataMap.TableName(name: parts[0])
            guard plan.catalog.table(table) != nil, let row = try? JSONDecoder().decode([String?].self, from: Data(value.row.utf8)),
                  row.count == sql.graceKey(table).count, !row.isEmpty else {
                throw LifecycleError(.internalError, """
                    cannot put back \(value.table).\(value.column) for account \(key): the table, or its primary key, is not \
                    what it was when deletion was asked for; nothing was restored (put the value back by hand, or the table \
                    as it was, and run the restore again)
                    """)
            }
            _ = try tx.execute(sql.graceRestore(table: table, row: row, column: value.column, value: value.value))
        }
    }

    /// A table by its plain name when it lives in the default schema (`users`, not `public.users`).
    public func displayName(_ name: DataMap.TableName) -> String {
        name.schema == plan.catalog.defaultSchema ? name.name : name.description
    }
}

/// The app data of one installation, read once per process: the map file and the catalog
/// do not change under a running worker (a schema change needs a restart, as the map's
/// check runs at start).
public final class AppDataCache: Sendable {
    /// The load in flight, or done: a thousand purges starting together wait for one read
    /// of the catalog instead of each reading it (a tenth of a purge run's time).
    private let loading = Mutex<Task<AppData, any Error>?>(nil)
    private let loaded = Mutex<AppData?>(nil)

    public init() {}

    /// A cache already holding the app data of an app directory.
    init<Store: LifecycleStore>(directory: AccountDirectory<Store>) {
        loaded.withLock { $0 = directory.data }
    }

    /// What `appData` loaded, if it has: for a database step, which cannot wait on the
    /// catalog, after an earlier step of the same run loaded it.
    var loadedAppData: AppData? { loaded.withLock { $0 } }

    public func appData<Store: LifecycleStore>(_ services: LifecycleServices<Store>) async throws -> AppData {
        if let loaded = loaded.withLock({ $0 }) { return loaded }
        let task = loading.withLock { task in
            if let task { return task }
            let started = Task {
                let map = try services.dataMapDocument()
                let plan = try DataMapPlan(map: map, catalog: try await services.store.catalog())
                return AppData(plan: plan, dialect: services.store.dialect)
            }
            task = started
            return started
        }
        do {
            let data = try await task.value
            loaded.withLock { $0 = data }
            return data
        } catch {
            // A failed load (a map being fixed, a database coming up) is tried again next time.
            loading.withLock { if $0 == task { $0 = nil } }
            throw error
        }
    }
}

/// What a deletion request signed out: sessions ended, and tokens revoked (refresh and API
/// tokens removed, JWTs blacklisted), counted apart so "N session(s)" means sessions.
public struct SignedOut: Sendable, Equatable {
    public var sessions = 0
    public var tokens = 0

    public init(sessions: Int = 0, tokens: Int = 0) {
        self.sessions = sessions
        self.tokens = tokens
    }
}
