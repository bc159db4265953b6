import Foundation
import Lifecycle
import PostgresNIO

extension PostgresStore {
    /// Every table of every schema but PostgreSQL's own (an app such as Supabase keeps
    /// users in `auth`), with columns, primary keys and foreign keys from pg_catalog.
    public func catalog() async throws -> SchemaCatalog {
        try await read { tx in try Self.catalog(tx) }
    }

    static func catalog(_ tx: PostgresTransaction) throws -> SchemaCatalog {
        let system = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"
        let defaultSchema = try tx.query("SELECT current_schema()::text").first?.decode(String.self) ?? "public"
        var columns: [DataMap.TableName: [SchemaCatalog.Column]] = [:]
        for row in try tx.query(PostgresQuery(unsafeSQL: """
            SELECT n.nspname::text, c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                   t.typname::text, t.typcategory::text, a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            JOIN pg_type t ON t.oid = a.atttypid
            WHERE c.relkind IN ('r', 'p') AND \(system)
            ORDER BY n.nspname, c.relname, a.attnum
            """)) {
            let (schema, table, column, declared, notNull, typeName, category, hasDefault) = try row.decode(
                (String, String, String, String, Bool, String, String, Bool).self)
            columns[.init(schema: schema, name: table), default: []].append(.init(
                name: column, declaredType: declared, kind: kind(typeName: typeName, category: category), isNotNull: notNull,
                hasDefault: hasDefault))
        }
        var primaryKeys: [DataMap.TableName: [String]] = [:]
        for row in try tx.query(PostgresQuery(unsafeSQL: """
            SELECT n.nspname::text, c.relname::text, a.attname::text
            FROM pg_index i
            JOIN pg_class c ON c.oid = i.indrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, position) ON true
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
            WHERE i.indisprimary AND \(system)
            ORDER BY n.nspname, c.relname, k.position
            """)) {
            let (schema, table, column) = try row.decode((String, String, String).self)
            primaryKeys[.init(schema: schema, name: table), default: []].append(column)
        }
        var keys: [SchemaCatalog.ForeignKey] = []
        for row in try tx.query(PostgresQuery(unsafeSQL: """
            SELECT n.nspname::text, c.relname::text, rn.nspname::text, rc.relname::text, con.confdeltype::text,
                   (SELECT string_agg(a.attname, ',' ORDER BY k.position) FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, position)
                    JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum),
                   (SELECT string_agg(a.attname, ',' ORDER BY k.position) FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, position)
                    JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum)
            FROM pg_constraint con
            JOIN pg_class c ON c.oid = con.conrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_class rc ON rc.oid = con.confrelid
            JOIN pg_namespace rn ON rn.oid = rc.relnamespace
            WHERE con.contype = 'f' AND \(system)
            ORDER BY n.nspname, c.relname, con.conname
            """)) {
            let (schema, table, referencedSchema, referencedTable, action, from, to) = try row.decode(
                (String, String, String, String, String, String, String).self)
            let onDelete: SchemaCatalog.DeleteAction = switch action {
            case "r": .restrict
            case "c": .cascade
            case "n": .setNull
            case "d": .setDefault
            default: .noAction
            }
            keys.append(.init(
                table: .init(schema: schema, name: table), columns: from.split(separator: ",").map(String.init),
                referencedTable: .init(schema: referencedSchema, name: referencedTable),
                referencedColumns: to.split(separator: ",").map(String.init), onDelete: onDelete))
        }
        var access: [DataMap.TableName: SchemaCatalog.Access] = [:]
        for row in try tx.query(PostgresQuery(unsafeSQL: """
            SELECT n.nspname::text, c.relname::text, \(accessColumns)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p') AND \(system)
            """)) {
            let (schema, table, rowSecurity, select, update, delete, insert) = try row.decode((String, String, Bool, Bool, Bool, Bool, Bool).self)
            access[.init(schema: schema, name: table)] = .init(rowSecurity: rowSecurity, select: select, update: update, delete: delete, insert: insert)
        }
        var indexed: [DataMap.TableName: Set<String>] = [:]
        for row in try tx.query(PostgresQuery(unsafeSQL: """
            SELECT n.nspname::text, c.relname::text, a.attname::text
            FROM pg_index i
            JOIN pg_class c ON c.oid = i.indrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
            WHERE \(system)
            """)) {
            let (schema, table, column) = try row.decode((String, String, String).self)
            indexed[.init(schema: schema, name: table), default: []].insert(column)
        }
        let tables = columns.map { name, columns in
            SchemaCatalog.Table(
                name: name, columns: columns, primaryKey: primaryKeys[name] ?? [], access: access[name] ?? .full, indexedColumns: indexed[name] ?? [])
        }
        return SchemaCatalog(defaultSchema: defaultSchema, tables: tables, foreignKeys: keys, hasTransactionSettings: true, hasAccessControl: true)
    }

    /// What the connection's role may do with table `c` (of namespace `n`): whether row
    /// level security applies to it (on, and the role neither a superuser, nor BYPASSRLS,
    /// nor the owner of a table that does not force it), and its privileges, the schema's
    /// USAGE included.
    static let accessColumns = """
        (c.relrowsecurity AND NOT (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)
         AND (c.relforcerowsecurity OR NOT pg_has_role(c.relowner, 'USAGE'))),
        has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT'),
        has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'UPDATE'),
        has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'DELETE'),
        has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'INSERT')
        """

    /// By pg_type name, then by type category (N numeric, S string, D date/time, B boolean).
    static func kind(typeName: String, category: String) -> SchemaCatalog.ColumnKind {
        switch typeName {
        case "int2", "int4", "int8": return .integer
        case "float4", "float8", "numeric": return .real
        case "bool": return .boolean
        case "bytea": return .bytes
        case "timestamp", "timestamptz", "date": return .timestamp
        case "text", "varchar", "bpchar", "name", "citext": return .text
        default:
            switch category {
            case "S": return .text
            case "N": return .real
            case "D": return .timestamp
            case "B": return .boolean
            default: return .other
            }
        }
    }
}
