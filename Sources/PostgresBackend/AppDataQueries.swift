import Foundation
import JobRunner
import Lifecycle
import NIOCore
import PostgresNIO

extension PostgresStore {
    public var dialect: SQLDialect { .postgres }
}

extension PostgresTransaction: OwnStateTransaction {
    public var dialect: SQLDialect { .postgres }
    public var mayLockRows: Bool { !isReadOnly }

    public func rows(_ statement: SQLStatement) throws -> [[SQLValue]] {
        try query(Self.query(statement)).map { try Self.values($0, kinds: statement.resultKinds) }
    }

    @discardableResult
    public func execute(_ statement: SQLStatement) throws -> Int {
        try execute(Self.query(statement))
    }

    public func tableAccess(_ tables: [DataMap.TableName]) throws -> [DataMap.TableName: SchemaCatalog.Access] {
        guard !tables.isEmpty else { return [:] }
        let schemas = tables.map { $0.schema ?? "public" }
        let names = tables.map(\.name)
        var access: [DataMap.TableName: SchemaCatalog.Access] = [:]
        for row in try query(PostgresQuery(unsafeSQL: "SELECT n.nspname::text, c.relname::text, \(PostgresStore.accessColumns) " + """
            FROM unnest($1::text[], $2::text[]) AS t(schema_name, table_name)
            JOIN pg_namespace n ON n.nspname = t.schema_name
            JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.table_name
            """, binds: { var b = PostgresBindings(); b.append(schemas); b.append(names); return b }())) {
            let (schema, table, rowSecurity, select, update, delete, insert) = try row.decode((String, String, Bool, Bool, Bool, Bool, Bool).self)
            access[.init(schema: schema, name: table)] = .init(rowSecurity: rowSecurity, select: select, update: update, delete: delete, insert: insert)
        }
        return access
    }

    public func prepareErasure(settings: [DataMap.TransactionSetting]) throws {
        try execute("SET CONSTRAINTS ALL IMMEDIATE")
        for setting in settings {
            _ = try query(PostgresQuery(unsafeSQL: "SELECT set_config($1, $2, true)", binds: {
                var bindings = PostgresBindings()
                bindings.append(setting.name)
                bindings.append(setting.value)
                return bindings
            }()))
        }
    }

    static func query(_ statement: SQLStatement) -> PostgresQuery {
        PostgresQuery(unsafeSQL: statement.sql, binds: bindings(statement.bindings))
    }

    static func bindings(_ values: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .null: bindings.appendNull()
            case .integer(let number): bindings.append(number)
            case .real(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .boolean(let flag): bindings.append(flag)
            case .timestamp(let date): bindings.append(date)
            case .bytes(let data): bindings.append(ByteBuffer(bytes: data))
            }
        }
        return bindings
    }

    static func values(_ row: PostgresRow, kinds: [SchemaCatalog.ColumnKind]) throws -> [SQLValue] {
        var values: [SQLValue] = []
        for (index, cell) in row.enumerated() {
            guard cell.bytes != nil else {
                values.append(.null)
                continue
            }
            let kind = index < kinds.count ? kinds[index] : .text
            switch kind {
            case .integer: values.append(.integer(try cell.decode(Int64.self)))
            case .real: values.append(.real(try cell.decode(Double.self)))
            case .boolean: values.append(.boolean(try cell.decode(Bool.self)))
            case .timestamp: values.append(.timestamp(try cell.decode(Date.self)))
            case .bytes: values.append(.bytes(Data(buffer: try cell.decode(ByteBuffer.self))))
            case .text, .other: values.append(.text(try cell.decode(String.self)))
            }
        }
        return values
    }
}

