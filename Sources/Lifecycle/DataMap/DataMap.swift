import Foundation

/// An app's account data, declared (`Jobs/account-data.yaml`, `version: 2`): who the user
/// is (`subject`), which rows belong to them (directly, through parent rows, or as one side
/// of a row naming two users), which columns name files in the blob store, and what erasure
/// does to each table. Export, purge and their dry runs are generated from it; the app's
/// schema is only read, never altered.
///
/// This is the file as written, checked for shape. `DataMapPlan` checks it against the live
/// database's catalog and derives the order rows are deleted in.
public struct DataMap: Sendable, Equatable {
    /// A table, optionally schema-qualified (`auth.users`); unqualified names are the
    /// backend's default (`public` on PostgreSQL, `main` on SQLite).
    public struct TableName: Sendable, Hashable, Comparable, CustomStringConvertible {
        public var schema: String?
        public var name: String

        public init(schema: String? = nil, name: String) {
            self.schema = schema
            self.name = name
        }

        public var description: String { schema.map { "\($0).\(name)" } ?? name }

        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.description < rhs.description }
    }

    /// `TABLE.COLUMN` (or `SCHEMA.TABLE.COLUMN`).
    public struct ColumnReference: Sendable, Hashable, CustomStringConvertible {
        public var table: TableName
        public var column: String

        public init(table: TableName, column: String) {
            self.table = table
            self.column = column
        }

        public var description: String { "\(table).\(column)" }
    }

    /// What a masked column becomes.
    public enum MaskValue: Sendable, Equatable {
        case null
        case text(String)
        case integer(Int64)
        case real(Double)
        case boolean(Bool)
        /// Text with `{key}` replaced by the subject's key, so a UNIQUE column stays unique.
        case template(String)

        /// In a file column: no file. Null, or the empty text Django's FileField keeps for
        /// "no file" in its NOT NULL column; every file query passes over both.
        public var namesNoFile: Bool { self == .null || self == .text("") }

        /// As a map writes it (`null`, `"deleted-{key}"`, `0`, `false`).
        public var shownInMap: String {
            switch self {
            case .null: "null"
            case .text(let text), .template(let text): "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
            case .integer(let number): String(number)
            case .real(let number): String(number)
            case .boolean(let flag): flag ? "true" : "false"
            }
        }

        public func resolved(key: String) -> MaskValue {
            if case .template(let text) = self { return .text(text.replacingOccurrences(of: "{key}", with: key)) }
            return self
        }
    }

    /// Column → what it becomes, in the order written.
    public typealias Mask = [(column: String, value: MaskValue)]

    /// What erasure does to a row.
    public enum Erase: Sendable, Equatable {
        case delete
        case mask(Mask)
        /// Deleted, unless another row (a reply, a favourite) still references it through one
        /// of these columns: then masked, so the other user's row keeps its meaning.
        case deleteUnlessReferenced(by: [ColumnReference], mask: Mask)

        public static func == (lhs: Erase, rhs: Erase) -> Bool {
            switch (lhs, rhs) {
            case (.delete, .delete): true
            case (.mask(let a), .mask(let b)): same(a, b)
            case (.deleteUnlessReferenced(let x, let a), .deleteUnlessReferenced(let y, let b)): x == y && same(a, b)
            default: false
            }
        }

        private static func same(_ a: Mask, _ b: Mask) -> Bool {
            a.count == b.count && zip(a, b).allSatisfy { $0.column == $1.column && $0.value == $1.value }
        }

        public var mask: Mask? {
            switch self {
            case .delete: nil
            case .mask(let mask), .deleteUnlessReferenced(_, let mask): mask
            }
        }
    }

    /// Where password hashes live: a column of the subject table, or of another table
    /// keyed by the subject's key (Supabase keeps them in `auth.users`).
    public struct Password: Sendable, Equatable {
        public var table: TableName?
        public var key: String?
        public var column: String
        /// `set: argon2id`: the app reads argon2id's PHC strings (`$argon2id$v=19$…`), so
        /// `accounts set-password` may store a new one here, for a hash nothing can check.
        /// Without it lifecycle never writes the column: the app sets its own passwords.
        public var settable = false
    }

    /// The user table: one row per account.
    public struct Subject: Sendable, Equatable {
        public var table: TableName
        /// The primary-key column; its value is "the account" everywhere in lifecycle.
        public var key: String
        /// Columns an operator may name an account by (`email`, `username`), besides the key.
        public var lookup: [String]
        /// Lookup columns whose values are compared whatever their case (`ignore_case:`):
        /// emails, which apps store as typed and look up caselessly.
        public var ignoreCase: [String] = []
        public var password: Password?
        /// The column holding the address the export-ready message goes to; without it the
        /// message waits in the outbox with no recipient, for the app to deliver.
        public var email: String?
        /// `greeting:`: columns of the user row the export-ready message greets her by, the
        /// first that is not empty ("Hi Ada,"); without one it says "Hello,".
        public var greeting: [String] = []
        /// `timezone:`: the column holding her IANA time zone (`Asia/Tokyo`): the export files
        /// her files by their date there, as she would; without it, or when it names no zone, UTC.
        public var timeZone: String?
        public var exportFile: String?
        /// `description:`: what the export's README says the file holds ("your journal entries").
        public var fileDescription: String? = nil
        public var columns: [String]
        public var timestamps: [String]
        public var blobs: [String]
        /// `delete`, or `mask`: the row stays as a tombstone with these values.
        public var erase: Erase
        public var line: Int
        /// Folders of the blob store that are the user's alone (`blob_prefixes:`).
        public var blobPrefixes: [BlobPrefix] = []
        /// `erase: {keep: […], mask: {…}}`: the columns a masked user row keeps as they are.
        /// Every other column but the key is emptied, one added to the table later too (the
        /// plan adds it to the mask from the catalog), so a new personal column cannot
        /// outlive a purge by being forgotten in the map. nil: only the mask's columns change.
        public var keep: [String]?
    }

    /// The columns of a row that record the file its blob column names: the export checks
    /// its copy against the SHA-256 (hex) and the size, and ends the file's name in the
    /// media type's extension where it does not already (`photos/…/p1` becomes `p1.jpg`;
    /// documents and media types only, ExportNames.fileExtension).
    public struct RecordedFile: Sendable, Equatable {
        public var sha256: String?
        public var bytes: String?
        public var contentType: String?
    }

    /// How a table's rows belong to a subject.
    public enum Ownership: Sendable, Equatable {
        /// The column holds the subject's key.
        case column(String)
        /// A value that names the subject in a way no foreign key can: a field inside a
        /// JSON column, or a generic relation (the key in one column, what kind of thing
        /// it names in another).
        case value(OwnerValue)
        /// The column references a row of `parent`, which belongs to the subject.
        case parent(via: String, parent: TableName)
        /// The row names two (or more) users; each side is erased on its own.
        case sides([Side])
    }

    /// Where a row holds the subject's key, when it is not simply a column: `json` is the
    /// path of object keys inside the JSON column (`payload->>'actor_id'` is
    /// `{column: payload, json: actor_id}`); `type` says which rows of a generic relation
    /// name the subject's table at all (Django's `content_type_id` + `object_id`, Rails'
    /// `commentable_type` + `commentable_id`).
    public struct OwnerValue: Sendable, Hashable {
        public var column: String
        public var json: [String]
        public var type: TypeCondition?
        /// The column holds an encoded value (a Django session) that names the user only once
        /// decoded: only under `on_deletion: remove:`, where lifecycle reads each row.
        public var encoding: ValueEncoding?

        public init(column: String, json: [String] = [], type: TypeCondition? = nil, encoding: ValueEncoding? = nil) {
            self.column = column
            self.json = json
            self.type = type
            self.encoding = encoding
        }

        public var isPlainColumn: Bool { json.isEmpty && type == nil && encoding == nil }

        public var description: String {
            var text = column
            if let encoding { text += " (\(encoding.rawValue))" }
            if !json.isEmpty { text += "->" + json.joined(separator: "->") }
            if let type { text += " where \(type.description)" }
            return text
        }
    }

    /// Which rows of a generic relation name the subject's table: the type column equals
    /// `value`, or references the row of `table` whose columns equal `match`.
    public struct TypeCondition: Sendable, Hashable {
        public var column: String
        public var value: String?
        public var table: TableName?
        public var match: [Pair]

        public struct Pair: Sendable, Hashable {
            public var column: String
            public var value: String
        }

        public var description: String {
            if let value { return "\(column) = '\(value)'" }
            let conditions = match.map { "\($0.column) = '\($0.value)'" }.joined(separator: " and ")
            return "\(column) is the \(table?.description ?? "?") row with \(conditions)"
        }
    }

    public struct Side: Sendable, Equatable {
        public var column: String
        /// Inside a JSON column, or a generic relation (see `OwnerValue`); empty and nil
        /// for a plain column holding the key.
        public var json: [String] = []
        public var type: TypeCondition?
        /// What erasing this user's side does (default: delete the row).
        public var erase: Erase

        public var value: OwnerValue { OwnerValue(column: column, json: json, type: type) }
    }

    public struct Table: Sendable, Equatable {
        public var name: TableName
        public var ownership: Ownership
        /// Key columns, for tables without a primary key the catalog can name.
        public var key: [String]?
        public var exportFile: String?
        /// `description:`: what the export's README says the file holds ("your journal entries").
        public var fileDescription: String? = nil
        public var columns: [String]
        public var timestamps: [String]
        public var orderBy: [String]
        public var blobs: [String]
        /// `recorded:`: what the row records of the file a blob column names, per column; the
        /// export checks its copy against it and calls a file that differs corrupt.
        public var recordedFiles: [String: RecordedFile] = [:]
        public var erase: Erase
        /// Other users' rows that reference a row of this table (`favourites.status_id`) and
        /// are deleted with it.
        public var cascade: [ColumnReference]
        /// Cascades that keep the other users' rows and set the referencing column instead
        /// (Django's `on_delete=SET_NULL` from a row the purge deletes): `{column: T.C, set: null}`.
        public var cascadeValues: [ColumnReference: MaskValue] = [:]
        /// A choice the map leaves to its author (`decide:`, written by `map init` where the
        /// app's own rules refuse the deletion: PROTECT, RESTRICT, NO ACTION): the map is
        /// refused until the line is replaced by the choice.
        public var decision: String? = nil
        public var line: Int
        /// The preset (`include:`) the entry comes from; nil when the map itself lists it.
        public var preset: String? = nil
        /// PostgreSQL settings in force (`SET LOCAL`) while the purge erases rows: a
        /// platform's guard that refuses SQL deletes unless one is set (Supabase Storage's
        /// `storage.allow_delete_query`).
        public var eraseSettings: [TransactionSetting] = []
        /// A file catalog (`file_key: [bucket_id, name]`, Supabase Storage's objects): each
        /// row is a file whose blob key is these columns' values joined by '/', deleted with it.
        public var fileKey: [String] = []
    }

    /// A namespaced (`prefix.name`) PostgreSQL setting: one an extension or platform
    /// defines. Built-in settings are refused: `session_replication_role` would switch
    /// off every trigger and foreign key the erasure relies on.
    public struct TransactionSetting: Sendable, Equatable, Hashable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// A table, or one column of a table, that references the subject (or a row the purge
    /// erases) but holds nothing to export or erase, with why.
    public struct Ignored: Sendable, Equatable {
        public var table: TableName
        /// nil: the whole table.
        public var column: String?
        public var reason: String
        public var line: Int
        public var preset: String? = nil

        public var description: String { column.map { "\(table).\($0)" } ?? table.description }
    }

    /// What requesting deletion does in the app, in the same transaction, so the grace
    /// period is felt: the user's sessions and tokens go (never put back), and values are
    /// set (a profile hidden) that a restore puts back as they were.
    public struct OnDeletion: Sendable, Equatable {
        public struct Removal: Sendable, Equatable {
            public var table: TableName
            /// With `parent`, `owner.column` is the column referencing the parent's rows
            /// (`owner: {via: token_id, parent: token_blacklist_outstandingtoken}`).
            public var owner: OwnerValue
            public var line: Int
            public var preset: String? = nil
            /// Rows referencing the rows another `remove:` entry removes: removed before those.
            public var parent: TableName? = nil
            /// The parent's column `owner.column` references (the plan resolves it).
            public var parentColumn: String? = nil

            public var description: String {
                parent.map { "\(owner.column) → \($0)" } ?? owner.description
            }
        }

        /// One row added per row of the user's in `source` that has none yet, for a library
        /// whose sign-out adds a row rather than removing one (simplejwt blacklists each
        /// outstanding token). Never undone: a restore leaves the user signed out.
        public struct Insertion: Sendable, Equatable {
            public var table: TableName
            public var source: TableName
            public var sourceOwner: OwnerValue
            /// The column of `table` that references the source row by a foreign key: a
            /// source row already referenced gets no second row.
            public var link: String
            /// The source's column `link` references (the plan resolves it).
            public var linkedColumn: String? = nil
            /// Columns set to the time of the request.
            public var now: [String]
            public var values: Mask
            public var line: Int
            public var preset: String? = nil

            public static func == (lhs: Self, rhs: Self) -> Bool {
                lhs.table == rhs.table && lhs.source == rhs.source && lhs.sourceOwner == rhs.sourceOwner && lhs.link == rhs.link
                    && lhs.linkedColumn == rhs.linkedColumn && lhs.now == rhs.now && lhs.line == rhs.line && lhs.preset == rhs.preset
                    && DataMap.Erase.mask(lhs.values) == DataMap.Erase.mask(rhs.values)
            }
        }

        public struct Setting: Sendable, Equatable {
            public var table: TableName
            public var owner: OwnerValue
            public var values: Mask
            public var line: Int
            public var preset: String? = nil

            public static func == (lhs: Self, rhs: Self) -> Bool {
                lhs.table == rhs.table && lhs.owner == rhs.owner && lhs.line == rhs.line && lhs.preset == rhs.preset
                    && DataMap.Erase.mask(lhs.values) == DataMap.Erase.mask(rhs.values)
            }
        }

        public var remove: [Removal] = []
        public var set: [Setting] = []
        public var insert: [Insertion] = []

        public var isEmpty: Bool { remove.isEmpty && set.isEmpty && insert.isEmpty }
    }

    /// Part of an account's data a user may delete without closing the account (the store
    /// rule's "delete some of my data"): mapped tables whose rows go as a purge erases them,
    /// and columns of the user row that named those rows (a profile photo's id), set to a
    /// value. Offered by the web deletion page and the API under `name`.
    public struct Part: Sendable, Equatable {
        /// Letters, digits, '_' and '-': the name the API and the page's form use.
        public var name: String
        /// What the user reads on the page ("Photos").
        public var label: String
        public var tables: [TableName]
        /// Columns of the user row set when the part goes (`profile_photo_id: null`).
        public var userColumns: Mask
        public var line: Int

        public static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.name == rhs.name && lhs.label == rhs.label && lhs.tables == rhs.tables && lhs.line == rhs.line
                && DataMap.Erase.mask(lhs.userColumns) == DataMap.Erase.mask(rhs.userColumns)
        }
    }

    /// Where an account's profile photo lives (`profile_photo:`): a file column of the user
    /// row, or of a table with one row per user (`owner: COLUMN`), holding the photo's blob
    /// key. Uploads, normalisation and removal write that column and the files under `prefix`;
    /// export and purge take the file as they take every file column's.
    public struct ProfilePhoto: Sendable, Equatable {
        /// nil: the user table.
        public var table: TableName?
        public var column: String
        /// Where uploads and rendered photos are stored in the blob store, ending in '/'.
        public var prefix: String
        /// What the column holds when there is no photo: null, or Django's "".
        public var empty: MaskValue
        public var line: Int

        public static let defaultPrefix = "profile-photos/"
    }

    /// `profile_photo:`, when the app lets lifecycle store and normalise its users' photos.
    public var profilePhoto: ProfilePhoto?
    public var subject: Subject
    public var tables: [Table]
    public var ignored: [Ignored]
    public var onDeletion = OnDeletion()
    /// What a user may delete without closing the account (`parts:`), in the order written.
    public var parts: [Part] = []
    /// Presets the map includes (`include: [supabase]`), in the order written.
    public var presets: [String] = []
    /// `residue:`: what the scan after erasure may leave, and why (see `ResidueScan`).
    public var residue = Residue()
    /// `app: reference`: the schema is lifecycle's own, the reference app's, which `init`
    /// creates and `accounts import` loads; nothing else reads this flag, so the reference
    /// app's accounts are deleted, exported, purged and given photos as any app's are.
    /// Any other map describes an app's own database, which lifecycle never alters.
    public var lifecycleOwnsSchema: Bool = false
    /// The file it was read from, for messages.
    public var source: String

    public func table(_ name: TableName) -> Table? { tables.first { $0.name == name } }

    /// Where an entry was written, for messages: the map's file and line, or the preset's.
    /// A preset's entries carry `presetLine` lines (the preset's index in the millions), so
    /// every check that names a line names the right file without knowing about presets.
    public func place(_ line: Int?) -> String {
        guard let line else { return source }
        let index = line / Self.presetLine - 1
        guard index >= 0, index < presets.count else { return "\(source):\(line)" }
        return "preset \(presets[index]) (included by \(source)):\(line % Self.presetLine)"
    }

    static let presetLine = 1_000_000
}
