import Foundation

/// What deleting a user does, as the app's own rules say it: each relation between tables
/// with its delete action (Django's `on_delete`, or the database's `ON DELETE`), the
/// generic relations Django deletes with their holder, the columns that hold file keys,
/// and the user table. `DataMapGenerator` writes a starting data map from it.
public struct RelationGraph: Sendable, Codable {
    public enum Action: String, Sendable, Codable {
        case cascade, protect, restrict
        case setNull = "set_null", setDefault = "set_default"
        /// Django's `SET(value)` or an `on_delete` function of the app's own.
        case set
        case doNothing = "do_nothing"
        /// The database's NO ACTION: the delete fails while such a row exists.
        case noAction = "no_action"

        /// Whether deleting the referenced row is refused (or fails) while a referencing one exists.
        public var blocks: Bool { [.protect, .restrict, .doNothing, .noAction, .set].contains(self) }

        /// How the app's rule is spelled where it is written, for the map's comments.
        public var spelled: String {
            switch self {
            case .cascade: "CASCADE"
            case .protect: "PROTECT"
            case .restrict: "RESTRICT"
            case .setNull: "SET_NULL"
            case .setDefault: "SET_DEFAULT"
            case .set: "SET(…)"
            case .doNothing: "DO_NOTHING"
            case .noAction: "NO ACTION"
            }
        }
    }

    /// `table.column` references `referenced_table.referenced_column`.
    public struct Relation: Sendable, Codable, Equatable {
        public var table: String
        public var column: String
        public var referencedTable: String
        public var referencedColumn: String
        public var action: Action
        /// Where the rule is written (`blog.Post.author`, or the foreign key), for comments.
        public var origin: String?
        public var nullable: Bool?
        /// Django's multi-table inheritance: the child's link to its parent row, which
        /// Django deletes with the child.
        public var parentLink: Bool?
        /// SET_DEFAULT's default, when it is a constant: a list of one, so a default of null
        /// is told from none.
        public var values: [JSONScalar]?
        public var value: JSONScalar? { values?.first }

        enum CodingKeys: String, CodingKey {
            case table, column, referencedTable = "referenced_table", referencedColumn = "referenced_column", action, origin, nullable, values = "value", parentLink = "parent_link"
        }

        public init(table: String, column: String, referencedTable: String, referencedColumn: String, action: Action, origin: String? = nil, nullable: Bool? = nil) {
            self.table = table
            self.column = column
            self.referencedTable = referencedTable
            self.referencedColumn = referencedColumn
            self.action = action
            self.origin = origin
            self.nullable = nullable
        }
    }

    /// A constant a JSON document holds.
    public enum JSONScalar: Sendable, Codable, Equatable {
        case null, bool(Bool), int(Int64), double(Double), string(String)

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() { self = .null }
            else if let flag = try? container.decode(Bool.self) { self = .bool(flag) }
            else if let number = try? container.decode(Int64.self) { self = .int(number) }
            else if let number = try? container.decode(Double.self) { self = .double(number) }
            else { self = .string(try container.decode(String.self)) }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let flag): try container.encode(flag)
            case .int(let number): try container.encode(number)
            case .double(let number): try container.encode(number)
            case .string(let text): try container.encode(text)
            }
        }

        var maskValue: DataMap.MaskValue {
            switch self {
            case .null: .null
            case .bool(let flag): .boolean(flag)
            case .int(let number): .integer(number)
            case .double(let number): .real(number)
            case .string(let text): .text(text)
            }
        }
    }

    /// Django's GenericRelation: rows of `table` whose type column names the holder's
    /// model and whose object id is the holder's key are deleted with the holder.
    public struct GenericRelation: Sendable, Codable, Equatable {
        public var table: String
        public var objectIDColumn: String
        public var typeColumn: String
        public var typeTable: String
        public var appLabel: String
        public var model: String
        public var referencedTable: String
        public var origin: String?

        enum CodingKeys: String, CodingKey {
            case table, objectIDColumn = "object_id_column", typeColumn = "type_column", typeTable = "type_table"
            case appLabel = "app_label", model, referencedTable = "referenced_table", origin
        }
    }

    public struct User: Sendable, Codable, Equatable {
        public var table: String
        public var key: String
        public var lookup: [String]
        public var email: String?
        public var password: String?
    }

    /// Where the rules were read (`Django 5.2.1 models`, `the database's foreign keys`).
    public var source: String
    public var user: User
    public var relations: [Relation]
    public var generic: [GenericRelation] = []
    /// Table → columns holding file keys (Django's FileField and ImageField).
    public var files: [String: [String]] = [:]
    /// Table → what the app calls it (`blog.Post`), for comments.
    public var labels: [String: String] = [:]
    /// Django's INSTALLED_APPS, for the presets of the apps lifecycle knows.
    public var installedApps: [String] = []
    /// Whether the database itself carries out the actions (its own ON DELETE), so what it
    /// does without being told (SET DEFAULT) needs no entry.
    public var enforcedByDatabase: Bool?

    enum CodingKeys: String, CodingKey {
        case source, user, relations, generic, files, labels, installedApps = "installed_apps", enforcedByDatabase = "enforced_by_database"
    }

    public init(source: String, user: User, relations: [Relation]) {
        self.source = source
        self.user = user
        self.relations = relations
    }
}

extension RelationGraph {
    /// The database's own rules: its foreign keys and their ON DELETE actions, from `user`
    /// (a table, or nil to recognise it: Supabase's profile table, Django's `auth_user`, a
    /// table named users or accounts).
    public init(catalog: SchemaCatalog, user written: String?) throws {
        func shown(_ table: DataMap.TableName) -> String { table.schema == catalog.defaultSchema ? table.name : table.description }
        let userTable: SchemaCatalog.Table
        if let written {
            let parts = written.split(separator: ".", maxSplits: 1).map(String.init)
            let name = catalog.qualified(parts.count == 2 ? .init(schema: parts[0], name: parts[1]) : .init(name: written))
            guard let table = catalog.table(name) else {
                throw LifecycleError(.badInput, "--user-table \(written) is not a table of this database (looked for \(name))")
            }
            userTable = table
        } else {
            userTable = try Self.recogniseUserTable(catalog)
        }
        guard userTable.primaryKey.count == 1 else {
            throw LifecycleError(.badInput, "the user table \(shown(userTable.name)) has no single-column primary key; a map's subject needs one")
        }
        let textColumns = userTable.columns.filter { $0.kind == .text || $0.kind == .other }.map(\.name)
        let lookup = ["email", "username", "login", "handle"].filter(textColumns.contains)
        let password = ["password", "password_hash", "encrypted_password", "hashed_password"].first(where: textColumns.contains)
        var relations: [Relation] = []
        for key in catalog.foreignKeys where key.columns.count == 1 && key.referencedColumns.count == 1 {
            let action: Action = switch key.onDelete {
            case .cascade: .cascade
            case .setNull: .setNull
            case .setDefault: .setDefault
            case .restrict: .restrict
            case .noAction: .noAction
            }
            relations.append(.init(
                table: shown(key.table), column: key.columns[0], referencedTable: shown(key.referencedTable), referencedColumn: key.referencedColumns[0],
                action: action, origin: "\(shown(key.table)).\(key.columns[0]) → \(shown(key.referencedTable)) (ON DELETE \(key.onDelete.rawValue))",
                nullable: catalog.table(key.table)?.column(key.columns[0]).map { !$0.isNotNull }))
        }
        self.init(
            source: "the database's foreign keys",
            user: .init(table: shown(userTable.name), key: userTable.primaryKey[0], lookup: lookup, email: lookup.contains("email") ? "email" : nil, password: password),
            relations: relations)
        self.enforcedByDatabase = true
    }

    /// The presets for what this database holds: Supabase's `auth` and `storage` schemas,
    /// Django's tables and those of the Django apps lifecycle knows.
    public static func presets(for catalog: SchemaCatalog) -> [String] {
        func has(_ schema: String?, _ name: String) -> Bool { catalog.table(.init(schema: schema, name: name)) != nil }
        var presets: [String] = []
        if has("auth", "users") && has("auth", "identities") { presets.append("supabase") }
        if has(nil, "auth_user") && has(nil, "django_content_type") { presets.append("django") }
        if has(nil, "account_emailaddress") { presets.append("django-allauth") }
        if has(nil, "token_blacklist_outstandingtoken") { presets.append("django-rest-framework-simplejwt") }
        if has(nil, "knox_authtoken") { presets.append("django-rest-knox") }
        return presets
    }

    /// The presets of the installed Django apps lifecycle knows; `django` only for Django's
    /// own user model, whose tables and generic relation the preset names.
    public func djangoPresets() -> [String] {
        var presets: [String] = []
        if user.table == "auth_user" && installedApps.contains("django.contrib.auth") { presets.append("django") }
        if installedApps.contains(where: { $0 == "allauth" || $0.hasPrefix("allauth.") }) { presets.append("django-allauth") }
        if installedApps.contains("rest_framework_simplejwt.token_blacklist") { presets.append("django-rest-framework-simplejwt") }
        if installedApps.contains("knox") { presets.append("django-rest-knox") }
        return presets
    }

    private static func recogniseUserTable(_ catalog: SchemaCatalog) throws -> SchemaCatalog.Table {
        // Supabase: the app's profile table keyed by auth.users' id, else auth.users itself.
        if let auth = catalog.table(.init(schema: "auth", name: "users")) {
            let profiles = catalog.foreignKeys.filter {
                $0.referencedTable == auth.name && $0.table.schema == catalog.defaultSchema && catalog.table($0.table)?.primaryKey == $0.columns
            }
            if profiles.count == 1, let table = catalog.table(profiles[0].table) { return table }
            return auth
        }
        for name in ["auth_user", "users", "accounts", "user", "account", "members", "profiles"] {
            if let table = catalog.table(.init(name: name)) { return table }
        }
        throw LifecycleError(.badInput, "no table here looks like the user table (users, accounts, auth_user, …): name it with --user-table TABLE")
    }
}
