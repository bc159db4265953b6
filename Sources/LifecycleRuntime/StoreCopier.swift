import Crypto
import Foundation
import GRDB
import JobRunner
import Lifecycle
import PostgresBackend
import PostgresNIO
import SQLiteBackend

/// `lifecycle copy-store`: moves an embedded installation (SQLite file + blob directory)
/// up to PostgreSQL and, optionally, another blob store such as S3-compatible storage.
public enum StoreCopier {
    /// What a copy is doing, for a progress display.
    public enum Progress: Sendable {
        /// Copying this table's rows.
        case copyingTable(String)
        /// So many blobs are checked (copied or found already there) so far.
        case blobsChecked(Int)
    }

    /// Copies the SQLite installation `source` names (its `database` and `blobs`) into the
    /// PostgreSQL database `toDatabase` and, given `toBlobs`, its blobs into that store.
    /// Every table is copied in one PostgreSQL transaction, which commits only once each
    /// table's row count and checksum match the source: an interrupted copy leaves nothing,
    /// and running it again copies everything. Blobs are copied key by key, skipping those
    /// already there with the same SHA-256, and each is read back and checked.
    ///
    /// Refused with a `LifecycleError`: `.badConfiguration` for a source or destination of
    /// the wrong kind, `.inputMissing` without the SQLite file, `.tryLater` while a worker
    /// still holds a job's lease, `.badInput` when the destination holds other data.
    public static func copy(
        from source: LifecycleConfiguration, toDatabase: String, toBlobs: String?,
        progress: @escaping @Sendable (Progress) -> Void = { _ in }
    ) async throws -> CopyReport {
        guard !source.usesPostgres else {
            throw LifecycleError(.badConfiguration, "copy-store copies from a SQLite file: --database must name one (it is a PostgreSQL URL)")
        }
        guard PostgresLocation.isURL(toDatabase) else {
            throw LifecycleError(.badConfiguration, "--to-database must be a postgres://user:password@host:port/database URL")
        }
        if let toBlobs, URL(fileURLWithPath: toBlobs).standardizedFileURL == URL(fileURLWithPath: source.blobs).standardizedFileURL {
            throw LifecycleError(.badConfiguration, "--to-blobs is the source blob directory itself; leave it out to keep the blobs where they are")
        }
        guard try SQLiteStore.installationState(path: source.database) == .initialised else {
            throw LifecycleError(.inputMissing, "\(source.database): no lifecycle installation to copy from (pass the installation's --database)")
        }
        let from = try SQLiteStore(path: source.database)
        let location: PostgresLocation
        do {
            location = try PostgresLocation(url: toDatabase)
        } catch let error as PostgresStoreError {
            throw LifecycleError(.badConfiguration, "--to-database: \(error.message)")
        }
        let destination = try await PostgresStore(location, logger: source.databaseLogger)
        defer { destination.close() }
        let now = source.clock.now()

        let tables = try await RowCopier.copy(from: from, to: destination, now: now) { progress(.copyingTable($0)) }
        var blobs: BlobCopyReport?
        if let toBlobs {
            let fromBlobs = try FileSystemBlobStore(root: source.blobs)
            let toStore = try await BlobLocation.open(toBlobs, environment: source.environment)
            blobs = try await BlobCopier.copy(from: fromBlobs, to: toStore) { progress(.blobsChecked($0)) }
        }
        // Archives apart from the blobs (`<database>.exports`) are not copied: they are
        // private to the machine that made them, and the new installation keeps reading them
        // there once it is told where (the report and the command's output say so).
        return CopyReport(
            source: from.path, destination: destination.location, tables: tables, blobs: blobs, exportsKeptIn: source.exportLocation)
    }
}

public struct CopyReport: Encodable, Sendable {
    /// The SQLite file.
    public var source: String
    /// The PostgreSQL server and database.
    public var destination: String
    /// In the order they were copied.
    public var tables: [TableCopyReport]
    /// Nil when the blobs were not copied.
    public var blobs: BlobCopyReport?
    /// Where the source keeps its export archives apart from its blobs, left there: the new
    /// installation runs with `--exports` naming it. Nil when they are in the blob store
    /// (copied with the blobs).
    public var exportsKeptIn: String?

    enum CodingKeys: String, CodingKey {
        case source, destination, tables, blobs, exportsKeptIn = "exports_kept_in"
    }
}

public struct TableCopyReport: Encodable, Sendable {
    public var table: String
    public var rows: Int
    /// Order-independent, over the rows' canonical values: the same on both sides.
    public var checksum: String
}

public struct BlobCopyReport: Encodable, Sendable {
    public var blobs = 0
    public var bytes: Int64 = 0
    public var copied = 0
    public var alreadyThere = 0

    enum CodingKeys: String, CodingKey {
        case blobs, bytes, copied, alreadyThere = "already_there"
    }
}

/// Copies every table in one PostgreSQL transaction that commits only after each table
/// checks out, so a copy is all or nothing and a rerun simply starts again.
enum RowCopier {
    /// One table on both sides: lifecycle's own tables are `lifecycle_<name>` in the SQLite
    /// file and `lifecycle.<name>` in PostgreSQL; the app's keep their name, in the
    /// destination's current schema.
    struct Table: Sendable {
        var name: String
        var isOwn: Bool
        /// The destination's own rows give way to the source's: the installation's settings
        /// (its lookup secret, which the purged accounts' lookup digests were made with),
        /// which a new installation fills in for itself when it is created.
        var replacesDestination = false

        static func own(_ name: String, replacesDestination: Bool = false) -> Table {
            Table(name: name, isOwn: true, replacesDestination: replacesDestination)
        }
        static func app(_ name: String) -> Table { Table(name: name, isOwn: false) }

        var source: String { isOwn ? SQLDialect.sqlite.ownTable(name) : name }
        /// Nil: the destination's current schema.
        var destinationSchema: String? { isOwn ? SQLDialect.ownSchema : nil }
        var destination: String { (destinationSchema.map { quoted($0) + "." } ?? "") + quoted(name) }
    }

    /// Parents before children (foreign keys are checked as rows arrive). A table the
    /// source has and this list lacks stops the copy: it would otherwise be left behind.
    static let tableOrder: [Table] = [
        .own("jobs"), .own("job_steps"), .own("job_schedules"), .own("runner_probe_effects"),
        .app("accounts"), .app("preferences"), .app("sessions"), .app("journal_entries"), .app("photos"), .app("mesocycles"),
        .app("meditation_sessions"),
        .own("audit_events"), .own("exports"), .own("outbox"), .own("purge_inventory"), .own("deletion_attempts"),
        .own("subjects"), .own("purge_progress"), .own("purge_files"), .own("grace_values"),
        .own("paused_kinds"), .own("holds"), .own("settings", replacesDestination: true), .own("lookup_digests"),
        .own("part_deletion_rows"), .own("encoded_owners"), .own("encoded_indexes"), .own("unreported_stops"),
    ]
    /// The source's record of its own migrations: the destination has run its own.
    static let bookkeeping: Set<String> = [SQLDialect.sqlite.ownTable("migrations")]
    static let batchRows = 500

    static func copy(
        from source: SQLiteStore, to destination: PostgresStore, now: Date, progress: @escaping @Sendable (String) -> Void
    ) async throws -> [TableCopyReport] {
        try await destination.write { pg in
            // The source's write lock, held for the whole copy: nothing changes under it.
            try source.writeSync { sqlite in
                let db = sqlite.db
                let leased = try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM lifecycle_jobs WHERE state = 'running' AND lease_expires_at > ?", arguments: [now]) ?? 0
                if leased > 0 {
                    throw LifecycleError(.tryLater, """
                        \(leased) job(s) in \(source.path) are still leased to a running worker: stop the workers and cron \
                        (or wait for their leases to expire), then run copy-store again
                        """)
                }
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
                    .filter { !bookkeeping.contains($0) }
                if let unknown = tables.first(where: { name in !tableOrder.contains { $0.source == name } }) {
                    throw LifecycleError(.internalError, "copy-store does not know the table '\(unknown)' of \(source.path); nothing was copied")
                }
                var reports: [TableCopyReport] = []
                for table in tableOrder where tables.contains(table.source) {
                    progress(table.name)
                    let columns = try destinationColumns(of: table, in: pg)
                    let sourceColumns = try db.columns(in: table.source).map(\.name)
                    if let missing = sourceColumns.first(where: { columns[$0] == nil }) {
                        throw LifecycleError(.badInput, "the destination's \(table.name) has no column \(missing): is it at the same version as this lifecycle?")
                    }
                    if table.replacesDestination { _ = try pg.execute(PostgresQuery(unsafeSQL: "DELETE FROM \(table.destination)")) }
                    try copyRows(of: table, columns: sourceColumns, types: columns, from: db, to: pg)
                    let expected = try sourceDigest(of: table, columns: sourceColumns, types: columns, in: db)
                    let found = try destinationDigest(of: table, columns: sourceColumns, types: columns, in: pg)
                    guard expected == found else {
                        throw LifecycleError(.badInput, """
                            \(table.name) differs after the copy (\(expected.rows) row(s) in the source, \(found.rows) in the destination): \
                            the destination already holds other data; copy into an empty database. Nothing was copied.
                            """)
                    }
                    try advanceIdentity(of: table, in: pg)
                    reports.append(TableCopyReport(table: table.name, rows: expected.rows, checksum: expected.hex))
                }
                return reports
            }
        }
    }

    enum ColumnKind { case timestamp, boolean, integer, text }

    /// The destination's columns of the table with their SQL type, for the casts and the digest.
    private static func destinationColumns(of table: Table, in pg: PostgresTransaction) throws -> [String: (type: String, kind: ColumnKind)] {
        let rows = try pg.query("""
            SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            WHERE c.relname = \(table.name) AND c.relnamespace = COALESCE(\(table.destinationSchema)::text, current_schema())::regnamespace
              AND a.attnum > 0 AND NOT a.attisdropped
            """)
        guard !rows.isEmpty else { throw LifecycleError(.badInput, "the destination has no table \(table.destination): is it at the same version as this lifecycle?") }
        var columns: [String: (type: String, kind: ColumnKind)] = [:]
        for row in rows {
            let (name, type) = try row.decode((String, String).self)
            let kind: ColumnKind =
                type.hasPrefix("timestamp") ? .timestamp
                : type == "boolean" ? .boolean
                : ["bigint", "integer", "smallint"].contains(type) ? .integer
                : .text
            columns[name] = (type, kind)
        }
        return columns
    }

    private static func copyRows(
        of table: Table, columns: [String], types: [String: (type: String, kind: ColumnKind)], from db: Database, to pg: PostgresTransaction
    ) throws {
        let names = columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        let cursor = try Row.fetchCursor(db, sql: "SELECT \(names) FROM \(table.source.quotedDatabaseIdentifier)")
        var batch: [[String?]] = []
        func flush() throws {
            guard !batch.isEmpty else { return }
            var binds = PostgresBindings(capacity: batch.count * columns.count)
            var tuples: [String] = []
            for row in batch {
                var placeholders: [String] = []
                for (index, value) in row.enumerated() {
                    binds.append(value)
                    placeholders.append("$\(binds.count)::\(types[columns[index]]!.type)")
                }
                tuples.append("(" + placeholders.joined(separator: ", ") + ")")
            }
            // Identifiers come from the schema of the source, checked against the destination's; values are bound.
            _ = try pg.execute(PostgresQuery(
                unsafeSQL: "INSERT INTO \(table.destination) (\(columns.map(quoted).joined(separator: ", "))) OVERRIDING SYSTEM VALUE VALUES "
                    + tuples.joined(separator: ", ") + " ON CONFLICT DO NOTHING",
                binds: binds))
            batch.removeAll(keepingCapacity: true)
        }
        while let row = try cursor.next() {
            batch.append(columns.indices.map { index in literal(row[index] as DatabaseValue, kind: types[columns[index]]!.kind) })
            if batch.count == batchRows { try flush() }
        }
        try flush()
    }

    /// A source value as text PostgreSQL casts to the column's type.
    private static func literal(_ value: DatabaseValue, kind: ColumnKind) -> String? {
        switch value.storage {
        case .null: return nil
        case .int64(let number): return String(number)
        case .double(let number): return String(number)
        case .string(let text):
            // GRDB writes dates as "yyyy-MM-dd HH:mm:ss.SSS" in UTC without saying so; passed on as
            // text (never through a Double, which could lose the last millisecond), marked UTC.
            if kind == .timestamp, !text.contains("T"), !text.hasSuffix("Z") { return text + "+00" }
            return text
        case .blob(let data): return "\\x" + data.map { String(format: "%02x", $0) }.joined()
        }
    }

    struct Digest: Equatable {
        var rows = 0
        var sum: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

        /// Order-independent: each row's SHA-256 is added in, so the two sides need not agree on an order.
        mutating func add(_ canonical: [String?]) {
            var text = ""
            for value in canonical {
                text += value.map { "v" + $0 } ?? "n"
                text += "\u{1F}"
            }
            let digest = Array(SHA256.hash(data: Data(text.utf8)))
            func word(_ at: Int) -> UInt64 { digest[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
            sum = (sum.0 &+ word(0), sum.1 &+ word(8), sum.2 &+ word(16), sum.3 &+ word(24))
            rows += 1
        }

        var hex: String { [sum.0, sum.1, sum.2, sum.3].map { String(format: "%016llx", $0) }.joined() }

        static func == (lhs: Digest, rhs: Digest) -> Bool { lhs.rows == rhs.rows && lhs.hex == rhs.hex }
    }

    /// Canonical values: instants as Unix milliseconds, booleans and integers as numbers, text as itself.
    private static func sourceDigest(
        of table: Table, columns: [String], types: [String: (type: String, kind: ColumnKind)], in db: Database
    ) throws -> Digest {
        var digest = Digest()
        let cursor = try Row.fetchCursor(db, sql: "SELECT \(columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")) FROM \(table.source.quotedDatabaseIdentifier)")
        while let row = try cursor.next() {
            digest.add(columns.indices.map { index -> String? in
                let value = row[index] as DatabaseValue
                if value.isNull { return nil }
                switch types[columns[index]]!.kind {
                case .timestamp:
                    return Date.fromDatabaseValue(value).map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? "invalid"
                case .boolean:
                    return (Int64.fromDatabaseValue(value) ?? 0) != 0 ? "1" : "0"
                case .integer:
                    return Int64.fromDatabaseValue(value).map { String($0) } ?? "invalid"
                case .text:
                    return String.fromDatabaseValue(value) ?? "invalid"
                }
            })
        }
        return digest
    }

    /// The same canonical values, made by the server and read through a cursor so a big table never sits in memory.
    private static func destinationDigest(
        of table: Table, columns: [String], types: [String: (type: String, kind: ColumnKind)], in pg: PostgresTransaction
    ) throws -> Digest {
        let selected = columns.map { column -> String in
            let name = quoted(column)
            switch types[column]!.kind {
            case .timestamp: return "(round(extract(epoch FROM \(name)) * 1000))::bigint::text"
            case .boolean: return "(\(name))::int::text"
            case .integer, .text: return "(\(name))::text"
            }
        }
        _ = try pg.execute(PostgresQuery(unsafeSQL: "DECLARE copy_check NO SCROLL CURSOR FOR SELECT \(selected.joined(separator: ", ")) FROM \(table.destination)"))
        var digest = Digest()
        while true {
            let rows = try pg.query(PostgresQuery(unsafeSQL: "FETCH 2000 FROM copy_check"))
            for row in rows {
                digest.add(try row.map { cell in try cell.decode(String?.self) })
            }
            if rows.count < 2000 { break }
        }
        _ = try pg.execute(PostgresQuery(unsafeSQL: "CLOSE copy_check"))
        return digest
    }

    /// Copied ids were given explicitly: the identity sequence must continue after them.
    private static func advanceIdentity(of table: Table, in pg: PostgresTransaction) throws {
        let identity = try pg.query("""
            SELECT column_name::text FROM information_schema.columns
            WHERE table_schema = COALESCE(\(table.destinationSchema)::text, current_schema()) AND table_name = \(table.name) AND is_identity = 'YES'
            """).map { try $0.decode(String.self) }
        for column in identity {
            _ = try pg.query(PostgresQuery(unsafeSQL: """
                SELECT setval(pg_get_serial_sequence('\(table.destination)', '\(column)'), COALESCE((SELECT max(\(quoted(column))) FROM \(table.destination)), 0) + 1, false)
                """))
        }
    }

    private static func quoted(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// Copies every blob under `accounts/`, skipping those the destination already holds
/// with the same bytes, and reads each copy back to check its SHA-256.
enum BlobCopier {
    static let page = 1000

    static func copy(from source: FileSystemBlobStore, to destination: any BlobStore, progress: @Sendable (Int) -> Void) async throws -> BlobCopyReport {
        var report = BlobCopyReport()
        var after: String?
        while true {
            let blobs = try await source.list(prefix: "accounts/", after: after, limit: page)
            for blob in blobs {
                let path = try source.path(for: blob.key)
                let expected = try FileDigest.sha256(ofFile: path).hex
                if let there = try await destination.info(key: blob.key), there.size == blob.size,
                   try await sha256(of: blob.key, in: destination) == expected {
                    report.alreadyThere += 1
                } else {
                    _ = try await destination.put(key: blob.key, fromFile: path, moving: false)
                    let copied = try await sha256(of: blob.key, in: destination)
                    guard copied == expected else {
                        throw LifecycleError(.unavailable, "blob \(blob.key) reads back with SHA-256 \(copied), not \(expected): the destination store is not keeping what it is given")
                    }
                    report.copied += 1
                }
                report.blobs += 1
                report.bytes += blob.size
            }
            progress(report.blobs)
            guard blobs.count == page, let last = blobs.last else { break }
            after = last.key
        }
        return report
    }

    private static func sha256(of key: String, in store: any BlobStore) async throws -> String {
        var hasher = SHA256()
        try await store.read(key: key, chunkSize: 1 << 20) { chunk in hasher.update(bufferPointer: chunk) }
        return FileDigest.hex(hasher.finalize())
    }
}
