import Foundation

/// Whose each row of an encoded table is (`django_session`, whose user is known only once
/// `session_data` is decoded), kept in lifecycle's own table so that signing one user out
/// reads her rows, not the whole table: a deletion request on a site holding a million
/// sessions would otherwise decode a million rows inside its transaction. Rows enter the
/// index as they are decoded (`AppData.refreshEncodedOwners`, run by the purge sweep and
/// before the first sign-out) and as the app reports a sign-in (the restore call's
/// `session_key`). A row decoded as naming no one is indexed as such (NULL): a session's
/// user never changes under the same key (Django's `login()` gives the session a new key
/// and reports it), so it is not decoded again.
extension DataMapSQL {
    private func encodedKeyColumn(_ removal: DataMap.OnDeletion.Removal) -> String { graceKey(removal.table)[0] }

    /// `text` (a row key as the index holds it) as the table's key column: the comparison
    /// then uses the table's own primary key index on PostgreSQL, where a varchar and an
    /// integer key alike are compared in their own type.
    private func asKey(_ text: String, _ removal: DataMap.OnDeletion.Removal) -> String {
        guard dialect == .postgres else { return text }
        return "CAST(\(text) AS \(column(removal.table, encodedKeyColumn(removal)).declaredType))"
    }

    /// When the index of this table was last brought up to date, or no row if never.
    public func encodedIndexState(_ removal: DataMap.OnDeletion.Removal) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let name = builder.bind(.text(removal.table.description))
        builder.append("SELECT CAST(refreshed_at AS TEXT) FROM \(dialect.table(.encodedIndexes)) WHERE table_name = \(name)")
        return builder.statement([.text])
    }

    public func markEncodedIndex(_ removal: DataMap.OnDeletion.Removal, at now: Date) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let (name, at) = (builder.bind(.text(removal.table.description)), builder.bind(.text(ISO8601DateFormatter().string(from: now))))
        builder.append("""
            INSERT INTO \(dialect.table(.encodedIndexes)) (table_name, refreshed_at) VALUES (\(name), \(at)) \
            ON CONFLICT (table_name) DO UPDATE SET refreshed_at = excluded.refreshed_at
            """)
        return builder.statement()
    }

    /// A page of the rows the index does not know yet, in key order after `after`: each
    /// row's key and its encoded value, as text, for lifecycle to decode.
    public func unindexedEncodedRows(_ removal: DataMap.OnDeletion.Removal, after: String?, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let key = q(encodedKeyColumn(removal))
        let name = builder.bind(.text(removal.table.description))
        let cursor = after.map { " AND t.\(key) > \(builder.bind(.text($0), as: column(removal.table, encodedKeyColumn(removal))))" } ?? ""
        builder.append("""
            SELECT CAST(t.\(key) AS TEXT), CAST(t.\(q(removal.owner.column)) AS TEXT) FROM \(dialect.table(removal.table)) t \
            WHERE NOT EXISTS (SELECT 1 FROM \(dialect.table(.encodedOwners)) o WHERE o.table_name = \(name) AND o.row_key = CAST(t.\(key) AS TEXT))\
            \(cursor) ORDER BY t.\(key) LIMIT \(limit)
            """)
        return builder.statement([.text, .text])
    }

    /// Indexes rows as `owners` says (a nil owner: the row names no one). A decoded row
    /// never overwrites what a sign-in reported meanwhile; a reported sign-in does.
    public func indexEncodedRows(_ removal: DataMap.OnDeletion.Removal, owners: [(row: String, owner: String?)], reported: Bool) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let name = builder.bind(.text(removal.table.description))
        let values = owners.map { entry in
            let (row, owner) = (builder.bind(.text(entry.row)), builder.bind(entry.owner.map(SQLValue.text) ?? .null))
            return dialect == .postgres ? "(CAST(\(name) AS text), CAST(\(row) AS text), CAST(\(owner) AS text))" : "(\(name), \(row), \(owner))"
        }
        builder.append("""
            INSERT INTO \(dialect.table(.encodedOwners)) (table_name, row_key, owner_key) VALUES \(values.joined(separator: ", ")) \
            ON CONFLICT (table_name, row_key) DO \(reported ? "UPDATE SET owner_key = excluded.owner_key" : "NOTHING")
            """)
        return builder.statement()
    }

    /// The rows the index says are the subject's, with their encoded values, to be decoded
    /// again before anything is removed: the index finds rows, never decides.
    public func indexedEncodedRows(_ removal: DataMap.OnDeletion.Removal, key: String) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let (name, owner) = (builder.bind(.text(removal.table.description)), builder.bind(.text(key)))
        let keyColumn = q(encodedKeyColumn(removal))
        builder.append("""
            SELECT CAST(t.\(keyColumn) AS TEXT), CAST(t.\(q(removal.owner.column)) AS TEXT) FROM \(dialect.table(removal.table)) t \
            WHERE t.\(keyColumn) IN (SELECT \(asKey("o.row_key", removal)) FROM \(dialect.table(.encodedOwners)) o \
            WHERE o.table_name = \(name) AND o.owner_key = \(owner))
            """)
        return builder.statement([.text, .text])
    }

    /// Forgets index rows whose table row is gone (signed out, expired and cleared): of one
    /// subject, or of everyone.
    public func forgetGoneEncodedRows(_ removal: DataMap.OnDeletion.Removal, key: String?) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let name = builder.bind(.text(removal.table.description))
        let ofOwner = key.map { " AND o.owner_key = \(builder.bind(.text($0)))" } ?? ""
        let keyColumn = q(encodedKeyColumn(removal))
        builder.append("""
            DELETE FROM \(dialect.table(.encodedOwners)) AS o WHERE o.table_name = \(name)\(ofOwner) AND NOT EXISTS \
            (SELECT 1 FROM \(dialect.table(removal.table)) t WHERE t.\(keyColumn) = \(asKey("o.row_key", removal)))
            """)
        return builder.statement()
    }

    /// The index's rows of accounts whose deletion is pending or under way: each row's key,
    /// its owner and the encoded value, for a refresh to sign them out (a session begun
    /// without a reported sign-in, found only as the index caught up).
    public func pendingSubjectsEncodedRows(_ removal: DataMap.OnDeletion.Removal) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let name = builder.bind(.text(removal.table.description))
        let keyColumn = q(encodedKeyColumn(removal))
        builder.append("""
            SELECT CAST(t.\(keyColumn) AS TEXT), o.owner_key, CAST(t.\(q(removal.owner.column)) AS TEXT) \
            FROM \(dialect.table(.subjects)) s JOIN \(dialect.table(.encodedOwners)) o ON o.owner_key = s.subject_key AND o.table_name = \(name) \
            JOIN \(dialect.table(removal.table)) t ON t.\(keyColumn) = \(asKey("o.row_key", removal)) \
            WHERE s.state IN ('pendingDeletion', 'purging')
            """)
        return builder.statement([.text, .text, .text])
    }
}
