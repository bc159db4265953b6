import Foundation
import JobRunner

/// Signing a user out of a table whose rows name her only once decoded (`django_session`),
/// in time that does not grow with the table: through lifecycle's index of whose each row
/// is (EncodedOwnersSQL.swift). The index is built by `lifecycle init`, else the first time
/// it is needed (one pass decoding the table, as every sign-out did before it), kept up by the sign-ins the app
/// reports and by each purge sweep, which decodes only rows it has not seen and signs out
/// any that belong to an account pending deletion (a session begun by a password change,
/// whose new key no sign-in reported).
extension AppData {
    /// Rows decoded, and indexed, per statement.
    static let encodedPage = 1_000

    public var hasEncodedRemovals: Bool { !encodedRemovals.isEmpty }

    /// The map's removals whose owner is encoded, with their encoding.
    var encodedRemovals: [(removal: DataMap.OnDeletion.Removal, encoding: ValueEncoding)] {
        plan.onDeletion.remove.compactMap { removal in removal.owner.encoding.map { (removal, $0) } }
    }

    /// The subject's rows of one encoded table removed: those the index names, decoded
    /// again first so that only rows naming her go. Builds the index if it never was.
    func signOutEncoded<T: GeneratedSQLTransaction>(_ removal: DataMap.OnDeletion.Removal, encoding: ValueEncoding, key: String, in tx: T) throws -> Int {
        if try tx.rows(sql.encodedIndexState(removal)).isEmpty {
            var after: String?
            while true {
                let (read, last) = try indexEncodedPage(removal, encoding: encoding, after: after, in: tx)
                guard read == Self.encodedPage else { break }
                after = last
            }
            try tx.execute(sql.markEncodedIndex(removal, at: Date()))
        }
        var doomed: [String] = []
        var misfiled: [(row: String, owner: String?)] = []
        for row in try tx.rows(sql.indexedEncodedRows(removal, key: key)) {
            guard row.count == 2, case .text(let rowKey) = row[0], case .text(let value) = row[1] else { continue }
            switch encoding.value(in: value, at: removal.owner.json) {
            case key: doomed.append(rowKey)
            // A row that names no one yet may be a sign-in reported before its session is
            // saved with her in it: it stays filed under her.
            case nil: break
            case let other?: misfiled.append((rowKey, other))
            }
        }
        if !misfiled.isEmpty { try tx.execute(sql.indexEncodedRows(removal, owners: misfiled, reported: true)) }
        let removed = try deleteEncodedRows(removal, keys: doomed, in: tx)
        try tx.execute(sql.forgetGoneEncodedRows(removal, key: key))
        return removed
    }

    private func deleteEncodedRows<T: GeneratedSQLTransaction>(_ removal: DataMap.OnDeletion.Removal, keys: [String], in tx: T) throws -> Int {
        var removed = 0
        for start in stride(from: 0, to: keys.count, by: 500) {
            removed += try tx.execute(sql.graceDelete(removal, keys: Array(keys[start..<min(start + 500, keys.count)])))
        }
        return removed
    }

    /// Decodes and indexes one page of rows the index does not know: how many were read.
    private func indexEncodedPage<T: GeneratedSQLTransaction>(
        _ removal: DataMap.OnDeletion.Removal, encoding: ValueEncoding, after: String?, in tx: T
    ) throws -> (read: Int, last: String?) {
        let page = try tx.rows(sql.unindexedEncodedRows(removal, after: after, limit: Self.encodedPage))
        let owners = page.compactMap { row -> (row: String, owner: String?)? in
            guard row.count == 2, case .text(let rowKey) = row[0] else { return nil }
            guard case .text(let value) = row[1] else { return (rowKey, nil) }
            return (rowKey, encoding.value(in: value, at: removal.owner.json))
        }
        if !owners.isEmpty { try tx.execute(sql.indexEncodedRows(removal, owners: owners, reported: false)) }
        return (page.count, owners.last?.row)
    }

    /// A sign-in the app reports (the restore call's `session_key`): the row is the
    /// subject's in every encoded table, checked when the row is decoded at sign-out.
    public func recordSignIn<T: GeneratedSQLTransaction>(key: String, session: String, in tx: T) throws {
        for (removal, _) in encodedRemovals {
            try tx.execute(sql.indexEncodedRows(removal, owners: [(session, key)], reported: true))
        }
    }

    public struct EncodedRefresh: Sendable, Equatable {
        /// Rows decoded for the first time.
        public var indexed = 0
        /// Rows of accounts pending deletion, removed.
        public var signedOut = 0
    }

    /// Brings the index up to date, a page per transaction; forgets rows gone from the
    /// table; and signs out what it finds of accounts pending deletion. Run once per
    /// purge sweep: its cost is the table's size once, not once per account.
    public func refreshEncodedOwners<Store: LifecycleStore>(store: Store) async throws -> EncodedRefresh {
        var refresh = EncodedRefresh()
        for (removal, encoding) in encodedRemovals {
            var after: String?
            while true {
                let cursor = after
                let (read, last) = try await store.write { tx in try indexEncodedPage(removal, encoding: encoding, after: cursor, in: tx) }
                refresh.indexed += read
                guard read == Self.encodedPage else { break }
                after = last
            }
            let sql = self.sql
            refresh.signedOut += try await store.write { tx in
                let doomed = try tx.rows(sql.pendingSubjectsEncodedRows(removal)).compactMap { row -> String? in
                    guard row.count == 3, case .text(let rowKey) = row[0], case .text(let owner) = row[1], case .text(let value) = row[2] else { return nil }
                    return encoding.value(in: value, at: removal.owner.json) == owner ? rowKey : nil
                }
                if !doomed.isEmpty { try tx.prepareErasure(settings: plan.eraseSettings) }
                let removed = try deleteEncodedRows(removal, keys: doomed, in: tx)
                try tx.execute(sql.forgetGoneEncodedRows(removal, key: nil))
                try tx.execute(sql.markEncodedIndex(removal, at: Date()))
                return removed
            }
        }
        return refresh
    }
}
