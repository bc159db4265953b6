import Foundation

/// The rows a part deletion erases: the part's rows as they were when the user asked
/// (issue 53). A row of the part added afterwards (a photo uploaded while the job waited
/// in the queue) is new content the user did not ask to delete, and stays. The keys of the
/// part's top-level rows are recorded in lifecycle's own table in the request's own
/// transaction (`record`), one row per key, never a blob in the payload; every statement
/// of the job then adds "and recorded" to those tables' ownership. What hangs on a
/// recorded row goes with it as the map says (its `cascade:` rows, a table owned through
/// it, the database's own ON DELETE CASCADE), whenever it was added: a comment left since
/// under a recorded post goes with the post, as it would with any deletion of the post.
public struct RecordedRows: Sendable, Equatable {
    /// The request (its job) the keys were recorded for.
    public var job: Int64
    /// The part's tables whose rows were recorded: those not owned through another of its tables.
    public var tables: Set<DataMap.TableName>

    public init(job: Int64, tables: Set<DataMap.TableName>) {
        self.job = job
        self.tables = tables
    }

    /// The top-level tables of a part's plan: a table owned through a parent the part also
    /// deletes is reached through the parent's recorded rows instead.
    public static func tables(of plan: DataMapPlan) -> Set<DataMap.TableName> {
        let inPart = Set(plan.tables.map(\.table.name))
        func throughPart(_ owner: DataMapPlan.Owner) -> Bool {
            guard case .parent(_, let parent, _, let parentOwner) = owner else { return false }
            return inPart.contains(parent) || throughPart(parentOwner)
        }
        return Set(plan.tables.filter { !throughPart($0.owner) }.map(\.table.name))
    }
}

extension DataMapSQL {
    /// A row's key as one text, the same expression when it is recorded and when it is
    /// compared, so a uuid, an integer or a composite key all round-trip.
    private func recordedKey(_ table: DataMap.TableName, alias: String) -> String {
        let columns = (plan.mappedTable(table)?.key ?? catalog.table(table)?.primaryKey ?? []).map { "\(alias).\(q($0))" }
        switch (dialect, columns.count) {
        case (.sqlite, 1): return "CAST(\(columns[0]) AS TEXT)"
        case (.postgres, 1): return "CAST(\(columns[0]) AS text)"
        case (.sqlite, _): return "json_array(\(columns.joined(separator: ", ")))"
        case (.postgres, _): return "CAST(json_build_array(\(columns.joined(separator: ", "))) AS text)"
        }
    }

    /// `alias`'s row is one the request recorded.
    func recordedRow(_ table: DataMap.TableName, alias: String, recorded: RecordedRows, into builder: inout SQLBuilder) -> String {
        let job = builder.bind(.integer(recorded.job))
        let name = builder.bind(.text(table.description))
        return "\(recordedKey(table, alias: alias)) IN (SELECT r.row_key FROM \(dialect.table(.partDeletionRows)) r WHERE r.job_id = \(job) AND r.table_name = \(name))"
    }

    /// Records, for request `job`, the keys of the subject's rows of this (part's) plan's
    /// top-level tables as they stand: one INSERT … SELECT per table, run in the request's
    /// transaction, so the keys never pass through the process and a request is never
    /// queued without them. Rows the subject owns on either side of a two-user table are
    /// recorded; which side's erase applies is decided when the job runs, as before.
    public func recordRows(key: String, job: Int64) -> [SQLStatement] {
        let unscoped = DataMapSQL(plan: plan, dialect: dialect)
        let topLevel = RecordedRows.tables(of: plan)
        return plan.tables.filter { topLevel.contains($0.table.name) }.map { table in
            var builder = SQLBuilder(dialect)
            let name = table.table.name
            // PostgreSQL types a bare placeholder in a select list as text.
            let (jobValue, tableName) = (builder.bind(.integer(job)), builder.bind(.text(name.description)))
            let selected = dialect == .postgres ? "CAST(\(jobValue) AS bigint), CAST(\(tableName) AS text)" : "\(jobValue), \(tableName)"
            let condition = unscoped.owned(table.owner, table: name, alias: "t", key: key, into: &builder)
            builder.append("""
                INSERT INTO \(dialect.table(.partDeletionRows)) (job_id, table_name, row_key) \
                SELECT \(selected), \(recordedKey(name, alias: "t")) FROM \(dialect.table(name)) t WHERE \(condition)
                """)
            return builder.statement()
        }
    }

    /// Forgets request `job`'s recorded keys, in the transaction that ends the job.
    public static func forgetRecordedRows(job: Int64, dialect: SQLDialect) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let bound = builder.bind(.integer(job))
        builder.append("DELETE FROM \(dialect.table(.partDeletionRows)) WHERE job_id = \(bound)")
        return builder.statement()
    }
}
