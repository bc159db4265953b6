import Foundation

extension DataMapSQL {
    /// Blob keys of the subject's rows of a file catalog (`file_key:`), in key order after
    /// `after`: each row's key columns joined by '/' (Supabase Storage: `bucket_id/name`).
    public func catalogFileKeys(_ table: DataMapPlan.TablePlan, key: String, after: String?, limit: Int) -> SQLStatement {
        var builder = SQLBuilder(dialect)
        let parts = table.table.fileKey.map { dialect == .postgres ? "CAST(t.\(q($0)) AS text)" : "t.\(q($0))" }
        let fileKey = parts.joined(separator: " || '/' || ")
        let condition = owned(table.owner, table: table.table.name, alias: "t", key: key, into: &builder)
        var sql = "SELECT DISTINCT \(fileKey) FROM \(dialect.table(table.table.name)) t WHERE \(condition)"
        for part in parts { sql += " AND \(part) IS NOT NULL AND \(part) <> ''" }
        if let after { sql += " AND \(fileKey) > \(builder.bind(.text(after)))" }
        builder.append(sql + " ORDER BY 1 LIMIT \(limit)")
        return builder.statement([.text])
    }
}
