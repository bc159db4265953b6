import Foundation

/// One file of an app's export: the user row or one mapped table, with how its rows are
/// read page by page.
public struct ExportedTable: Sendable {
    public var name: DataMap.TableName
    /// nil: the table is read only for the files its rows name.
    public var exportFile: String?
    /// The README's line for its file (`description:`).
    public var fileDescription: String?
    public var columns: [String]
    public var timestamps: [String]
    public var blobs: [String]
    /// What the rows record of the files their blob columns name (`recorded:`).
    public var recordedFiles: [String: DataMap.RecordedFile] = [:]
    /// `order_by`, then the key columns it leaves out: a page starts after the last row
    /// of the one before, so every row comes once however the table changes meanwhile.
    public var pageKey: [String]
    /// nil for the user row.
    var owner: DataMapPlan.Owner?
}

extension DataMapSQL {
    /// The user row first, then the mapped tables in the map's order (the order the
    /// archive lists them in), every one of them: a table without `export_file` may still
    /// name files.
    public func exportedTables() -> [ExportedTable] {
        let subject = plan.subject
        var tables = [ExportedTable(
            name: subject.table, exportFile: subject.exportFile, fileDescription: subject.fileDescription, columns: subject.columns,
            timestamps: subject.timestamps,
            blobs: subject.blobs, pageKey: [subject.key], owner: nil)]
        for entry in plan.map.tables {
            guard let table = plan.plan(for: entry.name) else { continue }
            let order = table.table.orderBy
            tables.append(ExportedTable(
                name: table.table.name, exportFile: table.table.exportFile, fileDescription: table.table.fileDescription,
                columns: table.table.columns,
                timestamps: table.table.timestamps, blobs: table.table.blobs, recordedFiles: table.table.recordedFiles,
                pageKey: order + table.key.filter { !order.contains($0) }, owner: table.owner))
        }
        return tables
    }

    /// `alias`'s rows that are the subject's: the user row, or rows the map says they own
    /// (every side of a row naming two users).
    private func exportCondition(_ table: ExportedTable, alias: String, key: String, into builder: inout SQLBuilder) -> String {
        guard let owner = table.owner else {
            let keyColumn = column(table.name, plan.subject.key)
            return "\(alias).\(q(plan.subject.key)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))"
        }
        return owned(owner, table: table.name, alias: alias, key: key, into: &builder)
    }

    /// How a column is selected for the export and read back. PostgreSQL types the
    /// export has no value for (uuid, json, numeric, arrays, date, time) come as their text, exactly.
    private func exportColumn(_ table: ExportedTable, _ name: String, alias: String) -> (String, SchemaCatalog.ColumnKind) {
        let column = column(table.name, name)
        let expression = "\(alias).\(q(name))"
        switch dialect {
        case .sqlite:
            // SQLite keeps what it was given: a listed timestamp may be text or a number.
            return (expression, table.timestamps.contains(name) ? .timestamp : column.kind)
        case .postgres:
            let declared = column.declaredType.lowercased()
            let exact = column.kind == .other || declared.hasPrefix("numeric") || (column.kind == .timestamp && !declared.hasPrefix("timestamp"))
            if exact {
                return ("CAST(\(expression) AS text)", .text)
            }
            return (expression, column.kind)
        }
    }

    /// A page of the subject's rows of `table`: the exported columns, then the page key's
    /// columns as the database holds them (text on PostgreSQL, raw on SQLite), which the
    /// next page binds back unchanged, so no value is rounded on the way
    /// (`cursorColumns` says where they are). On SQLite an exported column is the stored
    /// value already, so a page key column that is exported is read from there: selected
    /// twice, it went twice through the sort of every page (100,000 journal entries:
    /// sqlite3 read them in 0.20 s instead of 0.27).
    public func exportPage(_ table: ExportedTable, key: String, after: [SQLValue]?, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        var expressions: [String] = []
        var kinds: [SchemaCatalog.ColumnKind] = []
        for name in table.columns {
            let (expression, kind) = exportColumn(table, name, alias: "t")
            expressions.append(expression)
            kinds.append(kind)
        }
        var cursorColumns: [Int] = []
        for name in table.pageKey {
            switch dialect {
            case .sqlite:
                if let exported = table.columns.firstIndex(of: name) {
                    cursorColumns.append(exported)
                    continue
                }
                expressions.append("t.\(q(name))")
                kinds.append(.other)
            case .postgres:
                expressions.append("CAST(t.\(q(name)) AS text)")
                kinds.append(.text)
            }
            cursorColumns.append(expressions.count - 1)
        }
        var condition = exportCondition(table, alias: "t", key: key, into: &builder)
        if let after { condition += " AND " + following(table, after: after, alias: "t", into: &builder) }
        let order = table.pageKey.map { "t.\(q($0))" + (dialect == .postgres ? " NULLS FIRST" : "") }
        builder.append("""
            SELECT \(expressions.joined(separator: ", ")) FROM \(dialect.table(table.name)) t WHERE \(condition) \
            ORDER BY \(order.joined(separator: ", ")) LIMIT \(limit)
            """)
        var statement = builder.statement(kinds)
        statement.cursorColumns = cursorColumns
        return statement
    }

    /// Rows after `after` in page-key order, nulls first as both dialects sort them here:
    /// (a, b) > (x, y) spelled out, since a row-value comparison is never true with a null.
    private func following(_ table: ExportedTable, after: [SQLValue], alias: String, into builder: inout SQLBuilder) -> String {
        // A cursor without nulls compares as a row value, which both databases walk an index
        // for. A row with a null where the cursor has none compares as unknown, and is
        // left out rightly: nulls sort first, so it came on an earlier page.
        if table.pageKey.count == after.count, !after.contains(.null) {
            let names = table.pageKey.map { "\(alias).\(q($0))" }
            let values = zip(table.pageKey, after).map { builder.bind($1, as: column(table.name, $0)) }
            return names.count == 1
                ? "\(names[0]) > \(values[0])"
                : "(\(names.joined(separator: ", "))) > (\(values.joined(separator: ", ")))"
        }
        var alternatives: [String] = []
        for (index, name) in table.pageKey.enumerated() where index < after.count {
            var terms: [String] = []
            for (earlier, earlierName) in table.pageKey.prefix(index).enumerated() {
                terms.append(after[earlier] == .null
                    ? "\(alias).\(q(earlierName)) IS NULL"
                    : "\(alias).\(q(earlierName)) = \(builder.bind(after[earlier], as: column(table.name, earlierName)))")
            }
            terms.append(after[index] == .null
                ? "\(alias).\(q(name)) IS NOT NULL"
                : "\(alias).\(q(name)) > \(builder.bind(after[index], as: column(table.name, name)))")
            alternatives.append("(" + terms.joined(separator: " AND ") + ")")
        }
        return "(" + alternatives.joined(separator: " OR ") + ")"
    }

    /// The files one column of the subject's rows names, each once, in key order after
    /// `after`. Five columns, read by position: the key; the earliest of the rows' first
    /// timestamp that is set (which dates the file in the archive); then the SHA-256, size
    /// and media type the rows record of the file (`recorded:`), NULL where the map names
    /// no column for them.
    public func exportFiles(_ table: ExportedTable, column name: String, key: String, after: String?, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let blob = "t.\(q(name))"
        var condition = exportCondition(table, alias: "t", key: key, into: &builder)
        condition += " AND \(blob) IS NOT NULL AND \(blob) <> ''"
        if let after { condition += " AND \(blob) > \(builder.bind(.text(after), as: column(table.name, name)))" }
        var dated = "NULL"
        var kinds: [SchemaCatalog.ColumnKind] = [.text, .text]
        if let timestamp = table.timestamps.first {
            // The first of the row's timestamps that is set (taken, else uploaded), among
            // those of the first one's type, which COALESCE can mix.
            let kind = column(table.name, timestamp)
            let alike = table.timestamps.filter { column(table.name, $0).declaredType == kind.declaredType }
            let value = alike.count == 1 ? "t.\(q(timestamp))" : "COALESCE(\(alike.map { "t.\(q($0))" }.joined(separator: ", ")))"
            dated = "MIN(\(value))"
            kinds[1] = dialect == .sqlite || kind.declaredType.lowercased().hasPrefix("timestamp") ? .timestamp : .other
            if dialect == .postgres, kinds[1] == .other {
                dated = "MIN(CAST(\(value) AS text))"
                kinds[1] = .text
            }
        }
        let blobText = dialect == .postgres ? "CAST(\(blob) AS text)" : blob
        // What the row records of the file, when the map names it (NULL else): rows naming the
        // same file record the same file.
        let recorded = table.recordedFiles[name]
        let recordedColumns = [recorded?.sha256, recorded?.bytes, recorded?.contentType].map { column in
            column.map { dialect == .postgres && $0 != recorded?.bytes ? "MIN(CAST(t.\(q($0)) AS text))" : "MIN(t.\(q($0)))" } ?? "NULL"
        }
        kinds += [.text, .integer, .text]
        builder.append("""
            SELECT \(blobText), \(dated), \(recordedColumns.joined(separator: ", ")) FROM \(dialect.table(table.name)) t WHERE \(condition) \
            GROUP BY \(blob) ORDER BY \(blob) LIMIT \(limit)
            """)
        return builder.statement(kinds)
    }
}
