import Foundation
import JobRunner
import Lifecycle
import PostgresNIO

extension PostgresTransaction {
    public func columns(of table: OwnTable) throws -> [SchemaCatalog.Column] {
        try query("""
            SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull, t.typname::text, t.typcategory::text
            FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
            WHERE a.attrelid = \(dialect.table(table))::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
            """).map { row in
            let (name, declared, notNull, typeName, category) = try row.decode((String, String, Bool, String, String).self)
            return SchemaCatalog.Column(
                name: name, declaredType: declared, kind: PostgresStore.kind(typeName: typeName, category: category), isNotNull: notNull)
        }
    }
}
