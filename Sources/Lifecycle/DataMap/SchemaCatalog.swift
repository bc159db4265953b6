import Foundation

/// What a live database says about its tables: columns, primary keys, foreign keys.
/// Read by each backend (`LifecycleStore.catalog()`), so the data map is checked against
/// the schema as it is, not as the map's author remembered it.
public struct SchemaCatalog: Sendable {
    public enum ColumnKind: Sendable, Equatable {
        case integer, real, text, boolean, timestamp, bytes
        /// A type neither dialect maps to one of the above (json, uuid, arrays, …): exported as text.
        case other
    }

    public struct Column: Sendable, Equatable {
        public var name: String
        /// As the catalog spells it (`TEXT`, `timestamp with time zone`, `varchar(255)`).
        public var declaredType: String
        public var kind: ColumnKind
        public var isNotNull: Bool
        /// An insert may leave it out: it has a default, is an identity or generated column,
        /// or (SQLite) is the table's rowid.
        public var hasDefault: Bool

        public init(name: String, declaredType: String, kind: ColumnKind, isNotNull: Bool, hasDefault: Bool = false) {
            self.name = name
            self.declaredType = declaredType
            self.kind = kind
            self.isNotNull = isNotNull
            self.hasDefault = hasDefault
        }
    }

    public enum DeleteAction: String, Sendable, Equatable {
        case noAction = "NO ACTION", restrict = "RESTRICT", cascade = "CASCADE", setNull = "SET NULL", setDefault = "SET DEFAULT"

        /// Whether the database itself handles referencing rows when the referenced one goes.
        public var handlesReferencingRows: Bool { self == .cascade || self == .setNull || self == .setDefault }
    }

    public struct ForeignKey: Sendable, Equatable, CustomStringConvertible {
        public var table: DataMap.TableName
        public var columns: [String]
        public var referencedTable: DataMap.TableName
        public var referencedColumns: [String]
        public var onDelete: DeleteAction

        public init(
            table: DataMap.TableName, columns: [String], referencedTable: DataMap.TableName, referencedColumns: [String],
            onDelete: DeleteAction
        ) {
            self.table = table
            self.columns = columns
            self.referencedTable = referencedTable
            self.referencedColumns = referencedColumns
            self.onDelete = onDelete
        }

        public var description: String {
            "\(table).\(columns.joined(separator: ",")) → \(referencedTable).\(referencedColumns.joined(separator: ","))"
        }
    }

    public struct Table: Sendable, Equatable {
        public var name: DataMap.TableName
        public var columns: [Column]
        public var primaryKey: [String]
        /// What the connection's role may do with the table's rows.
        public var access: Access
        /// Columns that lead an index (or a primary key, or a unique constraint): where a
        /// look-up by that column alone does not read the whole table.
        public var indexedColumns: Set<String>
        /// SQLite only: the name that reads the row's rowid (`rowid`, `_rowid_` or `oid`,
        /// the first no column has taken); nil for a WITHOUT ROWID table, and in PostgreSQL.
        public var rowID: String?

        public init(
            name: DataMap.TableName, columns: [Column], primaryKey: [String], access: Access = .full, indexedColumns: Set<String> = [],
            rowID: String? = nil
        ) {
            self.name = name
            self.columns = columns
            self.primaryKey = primaryKey
            self.access = access
            self.indexedColumns = indexedColumns
            self.rowID = rowID
        }

        public func column(_ name: String) -> Column? { columns.first { $0.name == name } }
    }

    /// The privileges and row level security a table holds for the connection's role.
    /// SQLite has neither: every table is fully accessible.
    public struct Access: Sendable, Equatable {
        /// Row level security is on and this role does not bypass it (not a superuser, no
        /// BYPASSRLS, not the owner of a table without FORCE ROW LEVEL SECURITY): its
        /// statements see and change only the rows a policy lets through.
        public var rowSecurity: Bool
        public var select: Bool
        public var update: Bool
        public var delete: Bool
        /// Needed only where a deletion request inserts rows (`on_deletion: insert:`).
        public var insert: Bool

        public init(rowSecurity: Bool, select: Bool, update: Bool, delete: Bool, insert: Bool = true) {
            self.rowSecurity = rowSecurity
            self.select = select
            self.update = update
            self.delete = delete
            self.insert = insert
        }

        public static let full = Access(rowSecurity: false, select: true, update: true, delete: true)
    }

    /// `public` on PostgreSQL (the connection's current schema), `main` on SQLite.
    public let defaultSchema: String
    public let tables: [DataMap.TableName: Table]
    public let foreignKeys: [ForeignKey]
    /// Whether a transaction can set settings for its length (`SET LOCAL`): PostgreSQL's.
    public let hasTransactionSettings: Bool
    /// Whether roles, privileges and row level security can hide or keep rows from the
    /// connection (PostgreSQL); a SQLite connection sees and may change every row.
    public let hasAccessControl: Bool

    /// Tables and keys are keyed by fully qualified names.
    public init(
        defaultSchema: String, tables: [Table], foreignKeys: [ForeignKey], hasTransactionSettings: Bool = false, hasAccessControl: Bool = false
    ) {
        self.defaultSchema = defaultSchema
        self.hasTransactionSettings = hasTransactionSettings
        self.hasAccessControl = hasAccessControl
        self.tables = Dictionary(tables.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.foreignKeys = foreignKeys
    }

    /// `users` → `public.users`; a qualified name stays as it is.
    public func qualified(_ name: DataMap.TableName) -> DataMap.TableName {
        name.schema == nil ? .init(schema: defaultSchema, name: name.name) : name
    }

    public func table(_ name: DataMap.TableName) -> Table? { tables[qualified(name)] }

    public func foreignKeys(from table: DataMap.TableName) -> [ForeignKey] {
        let name = qualified(table)
        return foreignKeys.filter { $0.table == name }
    }

    /// The column of a generic relation's type table that its type column holds: the one a
    /// foreign key names, else the type table's single-column primary key.
    public func typeKey(_ type: DataMap.TypeCondition, of table: DataMap.TableName) -> String? {
        guard let typeTable = type.table.map(qualified) else { return nil }
        if let key = foreignKeys(from: table).first(where: { $0.columns == [type.column] && $0.referencedTable == typeTable }) {
            return key.referencedColumns[0]
        }
        guard let primaryKey = self.table(typeTable)?.primaryKey, primaryKey.count == 1 else { return nil }
        return primaryKey[0]
    }

    public func foreignKeys(to table: DataMap.TableName) -> [ForeignKey] {
        let name = qualified(table)
        return foreignKeys.filter { $0.referencedTable == name }
    }
}
