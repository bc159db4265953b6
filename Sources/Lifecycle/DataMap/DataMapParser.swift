import Foundation
import JobRunner
import Yams

extension DataMap {
    public static let fileName = "account-data.yaml"

    /// Reads `<jobsDirectory>/account-data.yaml`.
    public init(jobsDirectory: String) throws {
        let path = (jobsDirectory as NSString).appendingPathComponent(Self.fileName)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw LifecycleError(.inputMissing, "\(path): the account data map is missing; it says which tables hold an account's data (see Jobs/README.md)")
        }
        try self.init(yaml: text, source: path)
    }

    /// Parses a format-2 map. Every refusal names the file, the line and the key at fault;
    /// an unknown or wrongly typed key at any level is refused, never ignored.
    public init(yaml: String, source: String) throws {
        let root: Node?
        do {
            root = try YAMLDocument.compose(yaml)
        } catch {
            throw LifecycleError(.badInput, "\(source): not valid YAML: \(error)")
        }
        guard let root else { throw LifecycleError(.badInput, "\(source): the file is empty; it needs `version: 2`, `subject:` and `tables:`") }
        let top = try YAMLField(node: root, path: "", source: source).mapping(
            allowed: ["version", "app", "include", "subject", "tables", "ignore", "on_deletion", "parts", "residue", "profile_photo"])
        guard let version = top["version"] else {
            if top["tables"] != nil {
                throw LifecycleError(.badInput, """
                    \(source): this is a format 1 data map (no `version:`). Format 2 names the user table and how each \
                    table's rows belong to it. For the reference schema, add at the top:
                      version: 2
                      subject: {table: accounts, key: id, lookup: [email], password: {column: password_hash}, erase: {mask: {email: null}}}
                    and give each table `owner: account_id` (see Jobs/README.md, "The account data map")
                    """)
            }
            throw top.error("`version: 2` is required")
        }
        guard try version.integer() == 2 else { throw version.error("must be 2 (this toolkit reads format 2)") }
        guard let subjectField = top["subject"] else { throw top.error("`subject:` (the user table) is required") }
        let subject = try Self.subject(subjectField)
        var tables: [Table] = []
        for item in try top["tables"]?.sequence() ?? [] {
            tables.append(try Self.table(item))
        }
        var ignored: [Ignored] = []
        for item in try top["ignore"]?.sequence() ?? [] {
            ignored.append(try Self.ignored(item))
        }
        var onDeletion = try top["on_deletion"].map(Self.onDeletion) ?? OnDeletion()
        var presets: [String] = []
        for item in try top["include"]?.sequence() ?? [] {
            let name = try item.string()
            guard let preset = DataMapPreset.named(name) else {
                throw item.error("unknown preset '\(name)' (known: \(DataMapPreset.all.map(\.name).joined(separator: ", ")))")
            }
            guard !presets.contains(name) else { throw item.error("includes '\(name)' twice") }
            presets.append(name)
            let part = try Self.preset(preset, lineBase: presets.count * Self.presetLine)
            // The map's own entries win: a table it maps or ignores, or the user table itself,
            // is the map's, whatever the preset says of it.
            let own = Set(tables.map(\.name.description) + [subject.table.description] + ignored.filter { $0.column == nil }.map(\.table.description))
            let ownIgnores = Set(ignored.map(\.description))
            let earlier = Set(tables.map(\.name.description))
            tables += part.tables.filter { !own.contains($0.name.description) && !earlier.contains($0.name.description) }
            ignored += part.ignored.filter { !own.contains($0.table.description) && !ownIgnores.contains($0.description) }
            let removed = Set(onDeletion.remove.map(\.table.description))
            onDeletion.remove += part.onDeletion.remove.filter { !removed.contains($0.table.description) }
            let set = Set(onDeletion.set.map(\.table.description))
            onDeletion.set += part.onDeletion.set.filter { !set.contains($0.table.description) }
            let inserted = removed.union(set).union(onDeletion.insert.map(\.table.description))
            onDeletion.insert += part.onDeletion.insert.filter { !inserted.contains($0.table.description) }
        }
        var seen: [TableName: Int] = [subject.table: subject.line]
        for table in tables {
            if let first = seen.updateValue(table.line, forKey: table.name) {
                throw LifecycleError(.badInput, "\(source):\(table.line): table \(table.name) is listed twice (first at line \(first))")
            }
        }
        for entry in ignored where entry.column == nil && seen[entry.table] != nil {
            throw LifecycleError(.badInput, "\(source):\(entry.line): table \(entry.table) is both mapped and ignored")
        }
        if let twice = Dictionary(grouping: ignored, by: \.description).first(where: { $0.value.count > 1 })?.value.last {
            throw LifecycleError(.badInput, "\(source):\(twice.line): \(twice.description) is ignored twice")
        }
        let files = ([subject.exportFile] + tables.map(\.exportFile)).compactMap { $0 }
        if let twice = Dictionary(grouping: files, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw LifecycleError(.badInput, "\(source): two tables share export_file '\(twice)'")
        }
        var lifecycleOwnsSchema = false
        if let app = top["app"] {
            guard try app.string() == "reference" else {
                throw app.error("the only value is `reference` (the reference app whose schema lifecycle creates); leave it out for your own database")
            }
            lifecycleOwnsSchema = true
        }
        var parts: [Part] = []
        for item in try top["parts"]?.sequence() ?? [] {
            let part = try Self.part(item)
            if let first = parts.first(where: { $0.name == part.name }) {
                throw item.error("part '\(part.name)' is declared twice (first at line \(first.line))")
            }
            parts.append(part)
        }
        self.init(
            subject: subject, tables: tables, ignored: ignored, onDeletion: onDeletion, parts: parts, presets: presets,
            lifecycleOwnsSchema: lifecycleOwnsSchema, source: source)
        if let field = top["residue"] { residue = try Self.residue(field) }
        if let field = top["profile_photo"] { profilePhoto = try Self.profilePhoto(field) }
    }

    /// `profile_photo: {table: TABLE, column: COLUMN, prefix: "avatars/", empty: null}`.
    private static func profilePhoto(_ field: YAMLField) throws -> ProfilePhoto {
        let fields = try field.mapping(allowed: ["table", "column", "prefix", "empty"])
        let columnField = try fields.required("column")
        let column = try columnField.string()
        guard DataMap.isIdentifier(column) else { throw columnField.error("'\(column)' is not a plain SQL identifier") }
        var prefix = ProfilePhoto.defaultPrefix
        if let prefixField = fields["prefix"] {
            prefix = try prefixField.string()
            let segments = prefix.split(separator: "/", omittingEmptySubsequences: false)
            guard prefix.hasSuffix("/"), segments.dropLast().allSatisfy(BlobKey.isSafeSegment), segments.count > 1,
                  !BlobKey.isLifecycleOwn(prefix + "x") else {
                throw prefixField.error("""
                    '\(prefix)' must be a folder of the blob store for the photos lifecycle stores, made of letters, digits, \
                    '.', '_' and '-' and ending in '/' ("avatars/"), outside lifecycle's own folders
                    """)
            }
        }
        var empty = MaskValue.null
        if let emptyField = fields["empty"] {
            empty = try emptyField.maskValue()
            guard empty.namesNoFile else { throw emptyField.error("is what the column holds for \"no photo\": null, or \"\" (Django's FileField)") }
        }
        return ProfilePhoto(table: try fields["table"]?.tableName(), column: column, prefix: prefix, empty: empty, line: field.line)
    }

    /// `residue: {allow: [TABLE.COLUMN, …], reason: …, user_columns: [COLUMN, …]}`.
    private static func residue(_ field: YAMLField) throws -> Residue {
        let fields = try field.mapping(allowed: ["allow", "reason", "user_columns"])
        let allow = try fields["allow"]?.sequence().map { try $0.columnReference() } ?? []
        let reason = try fields["reason"]?.string().nilIfBlank
        if !allow.isEmpty && reason == nil {
            throw fields.error("`reason:` must say why the columns `allow:` names may still hold the user's identifiers after a purge (the receipt lists it)")
        }
        return Residue(allow: allow, reason: reason, userColumns: try fields["user_columns"]?.identifiers() ?? [], line: field.line)
    }

    /// `{name: photos, label: Photos, tables: [TABLE, …], user_columns: {COLUMN: VALUE}}`.
    private static func part(_ item: YAMLField) throws -> Part {
        let fields = try item.mapping(allowed: ["name", "label", "tables", "user_columns"])
        let nameField = try fields.required("name")
        let name = try nameField.string()
        guard !name.isEmpty, name.utf8.count <= 40, BlobKey.isSafeSegment(name), !name.contains(".") else {
            throw nameField.error("'\(name)' must be letters, digits, '_' or '-' (at most 40): the API and the deletion page name the part by it")
        }
        guard let label = try fields.required("label").string().nilIfBlank, label.count <= 80, !label.contains(where: \.isNewline) else {
            throw fields.error("`label:` is what the user reads on the deletion page (\"Photos\"): one line of at most 80 characters")
        }
        let tablesField = try fields.required("tables")
        let tables = try tablesField.sequence().map { try $0.tableName() }
        guard !tables.isEmpty else { throw tablesField.error("lists the mapped tables whose rows the part deletes") }
        if let twice = Dictionary(grouping: tables, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw tablesField.error("names \(twice) twice")
        }
        var userColumns: Mask = []
        for (column, value) in try fields["user_columns"]?.pairs() ?? [] {
            guard DataMap.isIdentifier(column.text) else { throw column.error("'\(column.text)' is not a plain SQL identifier") }
            userColumns.append((column.text, try value.maskValue()))
        }
        return Part(name: name, label: label, tables: tables, userColumns: userColumns, line: item.line)
    }

    /// A preset's entries, their lines moved to `lineBase` and up (see `place`).
    static func preset(_ preset: DataMapPreset, lineBase: Int) throws -> (tables: [Table], ignored: [Ignored], onDeletion: OnDeletion) {
        let source = "preset \(preset.name)"
        guard let root = try? YAMLDocument.compose(preset.yaml) else {
            throw LifecycleError(.internalError, "\(source): the preset is not valid YAML")
        }
        let top = try YAMLField(node: root, path: "", source: source).mapping(allowed: ["tables", "ignore", "on_deletion"])
        var tables = try top["tables"]?.sequence().map(table) ?? []
        var ignored = try top["ignore"]?.sequence().map(Self.ignored) ?? []
        var onDeletion = try top["on_deletion"].map(Self.onDeletion) ?? OnDeletion()
        for index in tables.indices {
            tables[index].line += lineBase
            tables[index].preset = preset.name
        }
        for index in ignored.indices {
            ignored[index].line += lineBase
            ignored[index].preset = preset.name
        }
        for index in onDeletion.remove.indices {
            onDeletion.remove[index].line += lineBase
            onDeletion.remove[index].preset = preset.name
        }
        for index in onDeletion.set.indices {
            onDeletion.set[index].line += lineBase
            onDeletion.set[index].preset = preset.name
        }
        for index in onDeletion.insert.indices {
            onDeletion.insert[index].line += lineBase
            onDeletion.insert[index].preset = preset.name
        }
        return (tables, ignored, onDeletion)
    }

    private static func ignored(_ item: YAMLField) throws -> Ignored {
        let fields = try item.mapping(allowed: ["table", "column", "reason"])
        guard let reason = try fields.required("reason").string().nilIfBlank else {
            throw fields.error("`reason:` must say why it holds nothing to export or erase")
        }
        switch (fields["table"], fields["column"]) {
        case (let table?, nil):
            return Ignored(table: try table.tableName(), column: nil, reason: reason, line: item.line)
        case (nil, let column?):
            let reference = try column.columnReference()
            return Ignored(table: reference.table, column: reference.column, reason: reason, line: item.line)
        default:
            throw fields.error("needs `table: TABLE` (the whole table) or `column: TABLE.COLUMN` (one reference), not both")
        }
    }

    /// `on_deletion: {remove: [{table, owner}], set: [{table, owner, values: {COLUMN: VALUE}}],
    /// insert: [{table, for_each: {table, owner}, link, now, values}]}`.
    private static func onDeletion(_ field: YAMLField) throws -> OnDeletion {
        let parts = try field.mapping(allowed: ["remove", "set", "insert"])
        var result = OnDeletion()
        func owner(_ fields: YAMLMapping, encodingAllowed: Bool) throws -> OwnerValue {
            let owner = try fields.required("owner")
            guard owner.isMapping else { return OwnerValue(column: try owner.identifier()) }
            let parts = try owner.mapping(allowed: encodingAllowed ? ["column", "json", "type", "encoding"] : ["column", "json", "type"])
            var value = try ownerValue(parts)
            if let field = parts["encoding"] {
                let name = try field.string()
                guard let encoding = ValueEncoding(rawValue: name) else {
                    throw field.error("unknown encoding '\(name)' (known: \(ValueEncoding.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                guard !value.json.isEmpty else {
                    throw field.error("says where the user's key is inside the decoded value with `json:` (Django's sessions: json: _auth_user_id)")
                }
                value.encoding = encoding
            }
            return value
        }
        for item in try parts["remove"]?.sequence() ?? [] {
            let fields = try item.mapping(allowed: ["table", "owner"])
            let table = try fields.required("table").tableName()
            // `{via: COLUMN, parent: TABLE}`: the rows referencing what another entry removes.
            if let via = fields["owner"], via.isMapping, try via.pairs().contains(where: { $0.key.text == "via" }) {
                let link = try via.mapping(allowed: ["via", "parent"])
                guard let parent = link["parent"] else {
                    throw link.error("`via:` goes with `parent: TABLE`, the table (removed by another `remove:` entry) whose rows the column references")
                }
                result.remove.append(.init(
                    table: table, owner: OwnerValue(column: try link.required("via").identifier()), line: item.line, parent: try parent.tableName()))
                continue
            }
            result.remove.append(.init(table: table, owner: try owner(fields, encodingAllowed: true), line: item.line))
        }
        for item in try parts["insert"]?.sequence() ?? [] {
            let fields = try item.mapping(allowed: ["table", "for_each", "link", "now", "values"])
            let source = try fields.required("for_each").mapping(allowed: ["table", "owner"])
            var values: Mask = []
            for (column, value) in try fields["values"]?.pairs() ?? [] {
                guard DataMap.isIdentifier(column.text) else { throw column.error("'\(column.text)' is not a plain SQL identifier") }
                values.append((column.text, try value.maskValue()))
            }
            let link = try fields.required("link").identifier()
            let now = try fields["now"]?.identifiers() ?? []
            let columns = [link] + now + values.map(\.column)
            if let twice = Dictionary(grouping: columns, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
                throw fields.error("sets column '\(twice)' twice (`link:`, `now:` and `values:` each name different columns)")
            }
            result.insert.append(.init(
                table: try fields.required("table").tableName(), source: try source.required("table").tableName(),
                sourceOwner: try owner(source, encodingAllowed: false), link: link, now: now, values: values, line: item.line))
        }
        for item in try parts["set"]?.sequence() ?? [] {
            let fields = try item.mapping(allowed: ["table", "owner", "values"])
            let valuesField = try fields.required("values")
            var values: Mask = []
            for (column, value) in try valuesField.pairs() {
                guard DataMap.isIdentifier(column.text) else { throw column.error("'\(column.text)' is not a plain SQL identifier") }
                values.append((column.text, try value.maskValue()))
            }
            guard !values.isEmpty else { throw valuesField.error("names no column") }
            result.set.append(.init(table: try fields.required("table").tableName(), owner: try owner(fields, encodingAllowed: false), values: values, line: item.line))
        }
        let tables = result.remove.map(\.table.description) + result.set.map(\.table.description) + result.insert.map(\.table.description)
        if let twice = Dictionary(grouping: tables, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw field.error("names table \(twice) twice (a table's rows are removed, have values set, or get rows inserted, once)")
        }
        return result
    }

    private static func subject(_ field: YAMLField) throws -> Subject {
        let fields = try field.mapping(allowed: [
            "table", "key", "lookup", "ignore_case", "password", "email", "greeting", "timezone", "export_file", "description", "columns",
            "timestamps", "blobs", "erase", "blob_prefixes",
        ])
        var password: Password?
        if let passwordField = fields["password"] {
            let parts = try passwordField.mapping(allowed: ["table", "key", "column", "set"])
            let table = try parts["table"]?.tableName()
            let key = try parts["key"]?.identifier()
            guard (table == nil) == (key == nil) else {
                throw parts.error("`table:` and `key:` go together: the table holding the hashes and its column holding the subject's key")
            }
            password = Password(table: table, key: key, column: try parts.required("column").identifier())
            if let set = parts["set"] {
                // The one format lifecycle writes, named so a map says what its app reads.
                guard try set.identifier() == "argon2id" else {
                    throw set.error("`set:` names the hash format `accounts set-password` writes, and the app reads: argon2id (PHC string)")
                }
                password?.settable = true
            }
        }
        let (erase, keep) = try fields["erase"].map { try eraseKeeping($0, allowsKeep: true) } ?? (.delete, nil)
        if case .deleteUnlessReferenced = erase {
            throw fields["erase"]!.error("the subject row is deleted or masked: use `delete` or `{mask: {…}}`")
        }
        let columns = try fields["columns"]?.identifiers() ?? []
        let timestamps = try fields["timestamps"]?.identifiers() ?? []
        let exportFile = try fields["export_file"]?.fileStem()
        try checkExported(fields, exportFile: exportFile, columns: columns, timestamps: timestamps)
        var subject = Subject(
            table: try fields.required("table").tableName(), key: try fields.required("key").identifier(),
            lookup: try fields["lookup"]?.identifiers() ?? [], password: password, email: try fields["email"]?.identifier(),
            exportFile: exportFile, columns: columns,
            timestamps: timestamps, blobs: try fields["blobs"]?.identifiers() ?? [], erase: erase, line: field.line)
        subject.keep = keep
        subject.greeting = try fields["greeting"]?.identifiers() ?? []
        subject.timeZone = try fields["timezone"]?.identifier()
        subject.fileDescription = try fields["description"].map { try fileDescription($0, exportFile: exportFile ?? ExportNames.appSubjectFile) }
        if let ignoreCase = fields["ignore_case"] {
            subject.ignoreCase = try ignoreCase.identifiers()
            if let stray = subject.ignoreCase.first(where: { !subject.lookup.contains($0) }) {
                let lookups = subject.lookup.isEmpty ? "the subject has no `lookup:` columns" : "`lookup:` is \(subject.lookup.joined(separator: ", "))"
                throw ignoreCase.error("'\(stray)' is not a lookup column (\(lookups)): only lookup columns are compared whatever their case")
            }
        }
        for item in try fields["blob_prefixes"]?.sequence() ?? [] {
            let template = try item.string()
            if let problem = BlobPrefix.problem(template) { throw item.error("'\(template)' \(problem)") }
            guard !subject.blobPrefixes.contains(where: { $0.template == template }) else { throw item.error("'\(template)' is listed twice") }
            subject.blobPrefixes.append(BlobPrefix(template: template, line: item.line))
        }
        return subject
    }

    private static func table(_ field: YAMLField) throws -> Table {
        let fields = try field.mapping(allowed: [
            "table", "owner", "owners", "key", "export_file", "description", "columns", "timestamps", "order_by", "blobs", "recorded", "erase",
            "cascade",
            "erase_settings", "file_key", "decide",
        ])
        let name = try fields.required("table").tableName()
        let ownership: Ownership
        switch (fields["owner"], fields["owners"]) {
        case (let owner?, nil):
            if owner.isMapping, try owner.pairs().contains(where: { $0.key.text == "via" }) {
                let parts = try owner.mapping(allowed: ["via", "parent"])
                ownership = .parent(via: try parts.required("via").identifier(), parent: try parts.required("parent").tableName())
            } else if owner.isMapping {
                let parts = try owner.mapping(allowed: ["column", "json", "type"])
                let value = try ownerValue(parts)
                ownership = value.isPlainColumn ? .column(value.column) : .value(value)
            } else {
                ownership = .column(try owner.identifier())
            }
        case (nil, let owners?):
            var sides: [Side] = []
            for side in try owners.sequence() {
                if side.isMapping {
                    let parts = try side.mapping(allowed: ["column", "json", "type", "erase"])
                    let erase = try parts["erase"].map(erase) ?? .delete
                    if case .deleteUnlessReferenced = erase {
                        throw parts["erase"]!.error("a side is deleted or masked: use `delete` or `{mask: {…}}`")
                    }
                    let value = try ownerValue(parts)
                    sides.append(Side(column: value.column, json: value.json, type: value.type, erase: erase))
                } else {
                    sides.append(Side(column: try side.identifier(), erase: .delete))
                }
            }
            guard sides.count >= 2 else { throw owners.error("lists the columns naming each user of a row: at least two") }
            guard Set(sides.map(\.value)).count == sides.count else { throw owners.error("names a column twice") }
            ownership = .sides(sides)
        case (nil, nil):
            throw fields.error("needs `owner: COLUMN`, `owner: {via: COLUMN, parent: TABLE}` or `owners: [COLUMN, …]`")
        case (_?, _?):
            throw fields.error("has both `owner:` and `owners:`; a table uses one")
        }
        let columns = try fields["columns"]?.identifiers() ?? []
        let timestamps = try fields["timestamps"]?.identifiers() ?? []
        let exportFile = try fields["export_file"]?.fileStem()
        try checkExported(fields, exportFile: exportFile, columns: columns, timestamps: timestamps)
        var orderBy: [String] = []
        if let order = fields["order_by"] {
            orderBy = order.isSequence ? try order.identifiers() : [try order.identifier()]
        }
        let erase = try fields["erase"].map(erase) ?? .delete
        if case .sides = ownership, fields["erase"] != nil {
            throw fields["erase"]!.error("a row naming several users is erased per side: put `erase:` on each entry of `owners:`")
        }
        var table = Table(
            name: name, ownership: ownership, key: try fields["key"]?.identifiers(), exportFile: exportFile,
            columns: columns, timestamps: timestamps, orderBy: orderBy, blobs: try fields["blobs"]?.identifiers() ?? [],
            erase: erase, cascade: [], line: field.line)
        if let text = fields["description"] {
            guard let exportFile else { throw text.error("describes the file the table is exported to: give it an `export_file:` too") }
            table.fileDescription = try fileDescription(text, exportFile: exportFile)
        }
        if let recorded = fields["recorded"] { table.recordedFiles = try recordedFiles(recorded, blobs: table.blobs) }
        for item in try fields["cascade"]?.sequence() ?? [] {
            let reference: ColumnReference
            if item.isMapping {
                let parts = try item.mapping(allowed: ["column", "set"])
                reference = try parts.required("column").columnReference()
                guard let value = parts["set"] else {
                    throw parts.error("needs `set: VALUE` (the column's value once the row it references is gone), or write the plain TABLE.COLUMN to delete the rows")
                }
                table.cascadeValues[reference] = try value.maskValue()
            } else {
                reference = try item.columnReference()
            }
            guard !table.cascade.contains(reference) else { throw item.error("'\(reference)' is listed twice") }
            table.cascade.append(reference)
        }
        if let decide = fields["decide"] {
            table.decision = try decide.string()
        }
        if let settings = fields["erase_settings"] {
            table.eraseSettings = try eraseSettings(settings)
        }
        if let field = fields["file_key"] {
            table.fileKey = field.isSequence ? try field.identifiers() : [try field.identifier()]
            guard !table.fileKey.isEmpty else {
                throw field.error("names the columns whose values, joined by '/', are each row's blob key: [bucket_id, name]")
            }
            // A masked row stays, and would keep naming a file the purge deleted.
            let deletes = if case .sides(let sides) = ownership { sides.allSatisfy { $0.erase == .delete } } else { erase == .delete }
            guard deletes else {
                throw field.error("a file catalog's rows are files, deleted with their files: leave its `erase:` (and each side's) at delete")
            }
        }
        return table
    }

    /// `erase_settings: {prefix.name: VALUE, …}`: namespaced settings only (see
    /// `DataMap.TransactionSetting`), values as PostgreSQL reads them, text.
    private static func eraseSettings(_ field: YAMLField) throws -> [TransactionSetting] {
        var settings: [TransactionSetting] = []
        for (name, value) in try field.pairs() {
            let text = name.text
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ DataMap.isIdentifier(String($0)) }) else {
                throw value.error("""
                    `\(text)` is not a namespaced setting (`prefix.name`, as a platform or extension defines one): \
                    built-in settings are refused, since some (session_replication_role) switch off the triggers and \
                    foreign keys the erasure relies on
                    """)
            }
            guard !value.isMapping, !value.isSequence, let scalar = try? value.string() else {
                throw value.error("the value of `\(text)` is one scalar (text, a number or true/false)")
            }
            settings.append(TransactionSetting(name: text, value: scalar))
        }
        guard !settings.isEmpty else { throw field.error("lists no setting; leave `erase_settings:` out") }
        return settings
    }

    /// `{column: C}`, `{column: C, json: KEY or [KEY, …]}`, or `{column: C, type: {column: T,
    /// value: V}}` / `{column: C, type: {column: T, table: TABLE, match: {COLUMN: VALUE, …}}}`.
    private static func ownerValue(_ parts: YAMLMapping) throws -> OwnerValue {
        let column = try parts.required("column").identifier()
        var json: [String] = []
        if let path = parts["json"] {
            json = path.isSequence ? try path.sequence().map { try $0.jsonKey() } : [try path.jsonKey()]
            guard !json.isEmpty else { throw path.error("names the key (or the path of keys) inside the JSON value that holds the user's key") }
        }
        var type: TypeCondition?
        if let field = parts["type"] {
            let typeParts = try field.mapping(allowed: ["column", "value", "table", "match"])
            let typeColumn = try typeParts.required("column").identifier()
            switch (typeParts["value"], typeParts["table"], typeParts["match"]) {
            case (let value?, nil, nil):
                type = TypeCondition(column: typeColumn, value: try value.scalarText(), table: nil, match: [])
            case (nil, let table?, let match?):
                var pairs: [TypeCondition.Pair] = []
                for (key, value) in try match.pairs() {
                    guard DataMap.isIdentifier(key.text) else { throw key.error("'\(key.text)' is not a plain SQL identifier") }
                    pairs.append(.init(column: key.text, value: try value.scalarText()))
                }
                guard !pairs.isEmpty else { throw match.error("names the columns that pick the type's row, e.g. {app_label: auth, model: user}") }
                type = TypeCondition(column: typeColumn, value: nil, table: try table.tableName(), match: pairs)
            default:
                throw typeParts.error("needs `value: V` (the type column holds V for this subject) or `table: TABLE` with `match: {COLUMN: VALUE, …}` (it references that row)")
            }
        }
        guard json.isEmpty || type == nil else {
            throw parts.error("a value is inside a JSON column (`json:`) or a generic relation (`type:`), not both")
        }
        return OwnerValue(column: column, json: json, type: type)
    }

    /// One line of the README, in the user's words; never a control character, which would
    /// lay out the user's README as the map's author did not mean.
    private static func fileDescription(_ field: YAMLField, exportFile: String) throws -> String {
        let text = try field.string().trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, text.count <= 160, !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }) else {
            throw field.error("says in one line of at most 160 characters what \(exportFile).json holds (it is the export README's line for it)")
        }
        return text
    }

    /// `recorded: {blob_key: {sha256: sha256, bytes: byte_size, content_type: content_type}}`:
    /// per blob column, the columns recording its file's digest, size and media type.
    private static func recordedFiles(_ field: YAMLField, blobs: [String]) throws -> [String: DataMap.RecordedFile] {
        var result: [String: DataMap.RecordedFile] = [:]
        for (key, value) in try field.pairs() {
            let column = try key.identifier()
            guard blobs.contains(column) else {
                throw key.error("'\(column)' is not one of this table's `blobs:` columns; `recorded:` describes the file a blob column names")
            }
            let parts = try value.mapping(allowed: ["sha256", "bytes", "content_type"])
            let recorded = DataMap.RecordedFile(
                sha256: try parts["sha256"]?.identifier(), bytes: try parts["bytes"]?.identifier(),
                contentType: try parts["content_type"]?.identifier())
            guard recorded != DataMap.RecordedFile() else {
                throw value.error("names no column: give `sha256:` (the hex digest's column), `bytes:` (the size's), `content_type:`, or several")
            }
            result[column] = recorded
        }
        return result
    }

    private static func checkExported(_ fields: YAMLMapping, exportFile: String?, columns: [String], timestamps: [String]) throws {
        if exportFile != nil, columns.isEmpty {
            throw fields.error("an exported table lists its `columns:` (the export never guesses which are safe to hand out)")
        }
        if let stray = timestamps.first(where: { !columns.contains($0) }) {
            throw fields["timestamps"]!.error("'\(stray)' is not one of the exported `columns:`")
        }
    }

    private static func erase(_ field: YAMLField) throws -> Erase {
        try eraseKeeping(field, allowsKeep: false).erase
    }

    /// `allowsKeep`: the user row's `erase:` may also say which columns a mask keeps
    /// (`keep: [COLUMN, …]`), emptying every other one.
    private static func eraseKeeping(_ field: YAMLField, allowsKeep: Bool) throws -> (erase: Erase, keep: [String]?) {
        if !field.isMapping {
            guard try field.string() == "delete" else {
                throw field.error("must be `delete`, `{mask: {COLUMN: VALUE, …}}` or `{delete_unless_referenced_by: [TABLE.COLUMN, …], mask: {…}}`")
            }
            return (.delete, nil)
        }
        let parts = try field.mapping(allowed: allowsKeep ? ["mask", "delete_unless_referenced_by", "keep"] : ["mask", "delete_unless_referenced_by"])
        let keep = try parts["keep"]?.identifiers()
        guard let maskField = parts["mask"] else {
            if keep != nil { return (.mask([]), keep) }
            throw parts.error("needs `mask: {COLUMN: VALUE, …}`: what the row becomes when it is kept")
        }
        var mask: Mask = []
        for (column, value) in try maskField.pairs() {
            guard DataMap.isIdentifier(column.text) else { throw column.error("'\(column.text)' is not a plain SQL identifier") }
            if mask.contains(where: { $0.column == column.text }) { throw column.error("'\(column.text)' is masked twice") }
            if keep?.contains(column.text) == true { throw column.error("'\(column.text)' is both masked and kept: leave it out of one") }
            mask.append((column.text, try value.maskValue()))
        }
        guard !mask.isEmpty || keep != nil else { throw maskField.error("names no column") }
        if let references = parts["delete_unless_referenced_by"] {
            let columns = try references.sequence().map { try $0.columnReference() }
            guard !columns.isEmpty else { throw references.error("lists the TABLE.COLUMN references that keep a row") }
            return (.deleteUnlessReferenced(by: columns, mask: mask), keep)
        }
        return (.mask(mask), keep)
    }

    /// Letters, digits and underscores, not starting with a digit, at most 63 characters
    /// (PostgreSQL's limit): safe to quote as an identifier in either dialect.
    static func isIdentifier(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, !("0"..."9").contains(first), text.utf8.count <= 63 else { return false }
        return text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
        }
    }
}

private extension String {
    var nilIfBlank: String? { trimmingCharacters(in: .whitespaces).isEmpty ? nil : self }
}

/// One node of the map file with where it is, so every refusal names file, line and key.
struct YAMLField {
    let node: Node
    /// `subject.password.column`, `tables[2].erase.mask`.
    let path: String
    let source: String

    var line: Int { (node.mark?.line ?? 0) }
    var isMapping: Bool { node.mapping != nil }
    var isSequence: Bool { node.sequence != nil }
    /// The scalar as written, for messages and names.
    var text: String { node.scalar?.string ?? "" }

    func error(_ message: String) -> LifecycleError {
        LifecycleError(.badInput, "\(source):\(line): \(path.isEmpty ? "" : path + ": ")\(message)")
    }

    private func child(_ node: Node, _ name: String) -> YAMLField {
        YAMLField(node: node, path: path.isEmpty ? name : "\(path).\(name)", source: source)
    }

    func mapping(allowed: Set<String>) throws -> YAMLMapping {
        var fields: [String: YAMLField] = [:]
        for (key, value) in try pairs() {
            guard allowed.contains(key.text) else {
                throw key.error("unknown key '\(key.text)' (known here: \(allowed.sorted().joined(separator: ", ")))")
            }
            fields[key.text] = value
        }
        return YAMLMapping(owner: self, fields: fields)
    }

    func pairs() throws -> [(key: YAMLField, value: YAMLField)] {
        guard let mapping = node.mapping else { throw error("must be a mapping of key: value") }
        var result: [(YAMLField, YAMLField)] = []
        for (key, value) in mapping {
            guard let name = key.scalar?.string else { throw error("keys must be plain words") }
            let keyField = child(key, name)
            if result.contains(where: { $0.0.text == name }) { throw keyField.error("appears twice") }
            result.append((keyField, child(value, name)))
        }
        return result
    }

    func sequence() throws -> [YAMLField] {
        guard let items = node.sequence else { throw error("must be a list") }
        return items.enumerated().map { index, item in
            YAMLField(node: item, path: "\(path)[\(index)]", source: source)
        }
    }

    func string() throws -> String {
        guard let scalar = node.scalar, !(node.any is NSNull) else { throw error("must be text") }
        return scalar.string
    }

    func integer() throws -> Int {
        guard let value = node.any as? Int else { throw error("must be a whole number") }
        return value
    }

    func identifier() throws -> String {
        let value = try string()
        guard DataMap.isIdentifier(value) else {
            throw error("'\(value)' is not a plain SQL identifier (letters, digits, '_', at most 63, not starting with a digit)")
        }
        return value
    }

    func identifiers() throws -> [String] {
        let items = try sequence().map { try $0.identifier() }
        if let twice = Dictionary(grouping: items, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw error("names '\(twice)' twice")
        }
        return items
    }

    func tableName() throws -> DataMap.TableName {
        let parts = try string().split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(parts.count), parts.allSatisfy(DataMap.isIdentifier) else {
            throw error("'\(text)' is not a table name (TABLE or SCHEMA.TABLE, plain SQL identifiers)")
        }
        return parts.count == 2 ? .init(schema: parts[0], name: parts[1]) : .init(name: parts[0])
    }

    func columnReference() throws -> DataMap.ColumnReference {
        let parts = try string().split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard (2...3).contains(parts.count), parts.allSatisfy(DataMap.isIdentifier) else {
            throw error("'\(text)' is not TABLE.COLUMN (or SCHEMA.TABLE.COLUMN)")
        }
        let table = parts.count == 3 ? DataMap.TableName(schema: parts[0], name: parts[1]) : DataMap.TableName(name: parts[0])
        return .init(table: table, column: parts[parts.count - 1])
    }

    func fileStem() throws -> String {
        let value = try string()
        guard BlobKey.isSafeSegment(value), !value.contains(".") else {
            throw error("'\(value)' must be letters, digits, '_' or '-' (it names <stem>.json and <stem>.csv)")
        }
        return value
    }

    /// One key of a JSON object: letters, digits, '_', '-' and '.', so it can be spelled
    /// in either dialect's JSON path without quoting rules of its own.
    func jsonKey() throws -> String {
        let value = try scalarText()
        guard !value.isEmpty, value.utf8.count <= 63, value.unicodeScalars.allSatisfy({
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-"
        }) else {
            throw error("'\(value)' is not a JSON key this map can name (letters, digits, '_' and '-', at most 63)")
        }
        return value
    }

    /// A scalar written as text or a number, as text (`model: user`, `content_type_id: 7`).
    func scalarText() throws -> String {
        guard let scalar = node.scalar, !(node.any is NSNull) else { throw error("must be text or a number") }
        return scalar.string
    }

    func maskValue() throws -> DataMap.MaskValue {
        switch node.any {
        case is NSNull: return .null
        case let flag as Bool: return .boolean(flag)
        case let number as Int: return .integer(Int64(number))
        case let number as Double: return .real(number)
        case let text as String: return text.contains("{key}") ? .template(text) : .text(text)
        default: throw error("must be text, a number, true/false or null")
        }
    }
}

/// The keys of one mapping, each with its place in the file.
struct YAMLMapping {
    let owner: YAMLField
    let fields: [String: YAMLField]

    subscript(_ key: String) -> YAMLField? { fields[key] }

    func required(_ key: String) throws -> YAMLField {
        guard let field = fields[key] else { throw owner.error("`\(key):` is required") }
        return field
    }

    func error(_ message: String) -> LifecycleError { owner.error(message) }
}
