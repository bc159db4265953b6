import Foundation

/// A data map checked against the live catalog, with everything export and purge need
/// resolved: each table's key, how its rows reach the subject, which other users' rows
/// go with them, and the order rows are erased in (children first, from the foreign keys,
/// not from the file's order).
///
/// Every check here runs before any work. A map that passes cannot make a purge fail on
/// a foreign key half-way: a table that references the user and is not mapped, a foreign
/// key from other users' rows nobody handles, a masked row left pointing at a deleted
/// one, or a cycle no order can satisfy is refused with the table and the path named.
public struct DataMapPlan: Sendable {
    /// How one table's rows reach the subject's key.
    public indirect enum Owner: Sendable, Equatable {
        case column(String)
        /// Inside a JSON column, or one side of a generic relation (`DataMap.OwnerValue`).
        case value(DataMap.OwnerValue)
        /// `via` references `parentColumn` of `parent`, whose rows reach the subject through `parentOwner`.
        case parent(via: String, parent: DataMap.TableName, parentColumn: String, parentOwner: Owner)
        case sides([DataMap.Side])
    }

    /// Other users' rows that reference a row being deleted, deleted with it. A cascade
    /// may reference the mapped table or a table cascaded before it (a comment's files go
    /// with the comment that goes with the post), so the list is deleted from its end.
    public struct Cascade: Sendable, Equatable {
        public var table: DataMap.TableName
        public var column: String
        public var referencedTable: DataMap.TableName
        public var referencedColumn: String
        /// Set the column to this instead of deleting the row (`{column: T.C, set: null}`):
        /// the row stays, another user's, no longer pointing at the erased one.
        public var setValue: DataMap.MaskValue? = nil

        public var deletesRows: Bool { setValue == nil }
    }

    public struct TablePlan: Sendable {
        /// As mapped, with its name (and every reference's table) qualified.
        public var table: DataMap.Table
        public var key: [String]
        public var owner: Owner
        public var cascades: [Cascade]
        /// References that keep a row (masked instead of deleted): `delete_unless_referenced_by`.
        public var keptBy: [Cascade]
        public var catalog: SchemaCatalog.Table

        /// Whether erasure may delete rows of the table: a mask-only table, or one whose
        /// every side is masked, keeps every row.
        public var deletesRows: Bool {
            if case .sides(let sides) = owner { return sides.contains { $0.erase.deletesRows } }
            return table.erase.deletesRows
        }

        /// Whether a row erasure keeps no longer names the user: every mask clears the
        /// column the row was found by (Django's SET_NULL), so what references the row is
        /// not the user's either.
        public var keptRowsDisowned: Bool {
            switch owner {
            case .column(let column): return table.erase.mask?.contains { $0.column == column } ?? true
            case .value(let value): return table.erase.mask?.contains { $0.column == value.column } ?? true
            case .sides(let sides): return sides.allSatisfy { side in side.erase.mask?.contains { $0.column == side.column } ?? true }
            case .parent: return false
            }
        }
    }

    public let map: DataMap
    public let catalog: SchemaCatalog
    public private(set) var subject: DataMap.Subject
    public let subjectCatalog: SchemaCatalog.Table
    /// Integer or text: how the subject's key is bound.
    public let subjectKeyKind: SchemaCatalog.ColumnKind
    /// Mapped tables in erase order: every table before the tables it references.
    public private(set) var tables: [TablePlan]
    /// Foreign keys through which the database itself deletes rows when the purge deletes
    /// the rows they reference (ON DELETE CASCADE), listed so `map check` can say so.
    public let deletedByDatabase: [SchemaCatalog.ForeignKey]
    /// Columns that look like they hold the subject's key but are neither mapped nor
    /// ignored nor a foreign key (which the coverage check follows): warnings, each with
    /// the line that maps or ignores it.
    public let suspects: [Suspect]

    /// A column that may name the user where no foreign key says so.
    public struct Suspect: Sendable, Equatable {
        public var table: DataMap.TableName
        public var column: String
        public var declaredType: String
        /// For a JSON column: the key inside it that looks like a user's key.
        public var jsonKey: String?
        public var why: String
        /// What to add to the map: the table mapped by it, or the column ignored.
        public var suggestion: String
    }

    public init(map written: DataMap, catalog: SchemaCatalog) throws {
        // A preset's table this database does not have (a part of the platform the app does
        // not install, or an older release) is left out; the map's own entries never are.
        var map = written
        func present(_ name: DataMap.TableName) -> Bool { catalog.table(catalog.qualified(name)) != nil }
        var leftOut = Set<String>()
        for entry in map.tables where entry.preset != nil && !present(entry.name) { leftOut.insert("\(entry.name) (preset \(entry.preset!))") }
        for entry in map.onDeletion.remove where entry.preset != nil && !present(entry.table) { leftOut.insert("\(entry.table) (preset \(entry.preset!))") }
        for entry in map.onDeletion.insert where entry.preset != nil && !(present(entry.table) && present(entry.source)) {
            leftOut.insert("\(present(entry.table) ? entry.source : entry.table) (preset \(entry.preset!))")
        }
        map.tables.removeAll { $0.preset != nil && !present($0.name) }
        // Likewise a side of a preset's table that an older release lacks the column for
        // (GoTrue's flow_state.linking_target_id, 2026): the other sides still find her rows.
        for index in map.tables.indices where map.tables[index].preset != nil {
            guard case .sides(let sides) = map.tables[index].ownership,
                  let table = catalog.table(catalog.qualified(map.tables[index].name)) else { continue }
            let kept = sides.filter { table.column($0.column) != nil }
            guard kept.count < sides.count, !kept.isEmpty else { continue }
            for side in sides where table.column(side.column) == nil {
                leftOut.insert("\(map.tables[index].name).\(side.column) (preset \(map.tables[index].preset!))")
            }
            if kept.count == 1 {
                map.tables[index].ownership = kept[0].value.isPlainColumn ? .column(kept[0].column) : .value(kept[0].value)
                map.tables[index].erase = kept[0].erase
            } else {
                map.tables[index].ownership = .sides(kept)
            }
        }
        // And an exported column an older release lacks (GoTrue's sessions.user_agent, 2024):
        // the export holds the others. With none of them left, the table is not exported:
        // all its columns could hold what the preset chose not to (a token, a secret).
        for index in map.tables.indices where map.tables[index].preset != nil && map.tables[index].exportFile != nil {
            guard !map.tables[index].columns.isEmpty, let table = catalog.table(catalog.qualified(map.tables[index].name)) else { continue }
            let kept = map.tables[index].columns.filter { table.column($0) != nil }
            guard kept.count < map.tables[index].columns.count else { continue }
            for column in map.tables[index].columns where table.column(column) == nil {
                leftOut.insert("\(map.tables[index].name).\(column) from the export (preset \(map.tables[index].preset!))")
            }
            map.tables[index].columns = kept
            if kept.isEmpty { map.tables[index].exportFile = nil }
        }
        // The map's own entries win over a preset's for the same table, however either
        // spells its name (`auth_user_groups`, `public.auth_user_groups`).
        let own = Set(map.tables.filter { $0.preset == nil }.map { catalog.qualified($0.name) } + [catalog.qualified(map.subject.table)]
            + map.ignored.filter { $0.preset == nil && $0.column == nil }.map { catalog.qualified($0.table) })
        map.tables.removeAll { $0.preset != nil && own.contains(catalog.qualified($0.name)) }
        let mapped = Set(map.tables.map { catalog.qualified($0.name) })
        // A preset's ignore of a column stays beside the preset's own entry for its table.
        map.ignored.removeAll { entry in
            let table = catalog.qualified(entry.table)
            return entry.preset != nil && (own.contains(table) || (entry.column == nil && mapped.contains(table)))
        }
        let ownRemovals = Set(map.onDeletion.remove.filter { $0.preset == nil }.map { catalog.qualified($0.table) })
        let ownSettings = Set(map.onDeletion.set.filter { $0.preset == nil }.map { catalog.qualified($0.table) })
        map.onDeletion.remove.removeAll { $0.preset != nil && (ownRemovals.contains(catalog.qualified($0.table)) || ownSettings.contains(catalog.qualified($0.table))) }
        map.onDeletion.set.removeAll { $0.preset != nil && (ownSettings.contains(catalog.qualified($0.table)) || ownRemovals.contains(catalog.qualified($0.table))) }
        map.onDeletion.remove.removeAll { $0.preset != nil && !present($0.table) }
        map.onDeletion.set.removeAll { $0.preset != nil && !present($0.table) }
        let ownInsertions = Set(map.onDeletion.insert.filter { $0.preset == nil }.map { catalog.qualified($0.table) })
        map.onDeletion.insert.removeAll { entry in
            let table = catalog.qualified(entry.table)
            return entry.preset != nil
                && ([ownRemovals, ownSettings, ownInsertions].contains { $0.contains(table) } || !present(entry.table) || !present(entry.source))
        }
        map.ignored.removeAll { entry in
            entry.preset != nil && (catalog.table(catalog.qualified(entry.table)).map { table in entry.column.map { table.column($0) == nil } ?? false } ?? true)
        }
        self.presetTablesLeftOut = leftOut.sorted()
        let decisions = map.tables.filter { $0.decision != nil }
        if !decisions.isEmpty {
            throw LifecycleError(.badInput, """
                \(map.source): \(decisions.count == 1 ? "one choice is" : "\(decisions.count) choices are") still to make (`decide:`); \
                write each choice in its entry and delete its `decide:` line:
                \(decisions.map { "  - \(map.place($0.line)): \($0.name): \($0.decision!)" }.joined(separator: "\n"))
                """)
        }
        var checker = Checker(map: map, catalog: catalog)
        let (subject, subjectTable, keyKind) = try checker.subject()
        // Every problem of the entries, `on_deletion:` and `residue:` in one run; the references
        // between tables are followed once the entries hold.
        var (plans, problems) = checker.tables(subject: subject, keyKind: keyKind)
        do {
            self.onDeletion = try checker.onDeletion(keyKind: keyKind)
        } catch let error as LifecycleError {
            problems.add(error.message)
            self.onDeletion = DataMap.OnDeletion()
        }
        do {
            try ResidueScan.check(map, catalog: catalog)
        } catch let error as LifecycleError {
            problems.add(error.message)
        }
        try problems.raise("the map")
        // Every reference problem in one run, whichever check finds it.
        let (deletedByDatabase, references) = checker.coverage(plans: plans, subject: subject)
        let unhandled = references + checker.keptRowsReferences(plans: plans, subject: subject)
        if !unhandled.isEmpty {
            throw LifecycleError(.badInput, """
                \(map.source): the map does not say what happens to \(unhandled.count == 1 ? "one reference" : "\(unhandled.count) references") to rows the purge erases:
                \(unhandled.map { "  - " + $0 }.joined(separator: "\n"))
                """)
        }
        self.map = map
        self.catalog = catalog
        self.subject = subject
        self.subjectCatalog = subjectTable
        self.subjectKeyKind = keyKind
        self.tables = try checker.eraseOrder(plans, subject: subject)
        self.deletedByDatabase = deletedByDatabase
        self.suspects = checker.suspects(plans: plans, subject: subject, keyKind: keyKind)
        self.keyNames = checker.keyNames(subject: subject)
        self.parts = try checker.parts(plans: tables, subject: subject, subjectTable: subjectTable)
        self.touchedTables = neededTables()
        self.profilePhoto = try checker.profilePhoto(subject: subject, plans: tables)
        var seen = Set<DataMap.TransactionSetting>()
        self.eraseSettings = tables.flatMap(\.table.eraseSettings).filter { seen.insert($0).inserted }
    }

    /// Where the profile photo's key is read and written: `table`'s `column`, in the row whose
    /// `keyColumn` holds the user's key (the user row itself, or her one row of an owned table).
    public struct ProfilePhotoPlace: Sendable {
        public var table: DataMap.TableName
        public var keyColumn: String
        public var column: String
        public var prefix: String
        public var empty: DataMap.MaskValue
    }

    /// `profile_photo:`, checked: nil when the map has none.
    public private(set) var profilePhoto: ProfilePhotoPlace?

    /// Every mapped table's `erase_settings`, each once.
    public private(set) var eraseSettings: [DataMap.TransactionSetting] = []

    /// What a user may delete without closing the account (`parts:`), their tables
    /// qualified, each checked: deleting it cannot fail on a reference from a row it keeps.
    public let parts: [DataMap.Part]

    public func part(named name: String) -> DataMap.Part? { parts.first { $0.name == name } }

    /// The plan of erasing only these parts: their tables, in this plan's order, and the
    /// user row kept with only the parts' `user_columns` set. A purge's statements and
    /// verification read generated from it erase and check exactly that.
    public func restricted(to names: [String]) throws -> DataMapPlan {
        var chosen: [DataMap.Part] = []
        for name in names {
            guard let part = part(named: name) else {
                let known = parts.map(\.name)
                throw LifecycleError(.badInput, known.isEmpty
                    ? "\(map.source) declares no parts a user may delete (`parts:`), so there is no part '\(name)'"
                    : "there is no part '\(name)' (the data map declares: \(known.joined(separator: ", ")))")
            }
            if !chosen.contains(where: { $0.name == name }) { chosen.append(part) }
        }
        guard !chosen.isEmpty else { throw LifecycleError(.badInput, "name at least one part to delete") }
        let tables = Set(chosen.flatMap(\.tables))
        var userColumns: DataMap.Mask = []
        for part in chosen {
            for value in part.userColumns where !userColumns.contains(where: { $0.column == value.column }) { userColumns.append(value) }
        }
        var plan = self
        plan.tables = self.tables.filter { tables.contains($0.table.name) }
        plan.everyTable = everyTable ?? self.tables
        plan.subject.erase = .mask(userColumns)
        // Files the cleared columns named are the part's; the user row's other files stay.
        plan.subject.blobs = subject.blobs.filter { column in userColumns.contains { $0.column == column } }
        plan.subject.lookup = []
        plan.onDeletion = DataMap.OnDeletion()
        var seen = Set<DataMap.TransactionSetting>()
        // The settings of the tables whose rows go with the part's (`cascade:`) too.
        let cascaded = plan.tables.flatMap { $0.cascades.compactMap { mappedTable($0.table)?.table } }
        plan.eraseSettings = (plan.tables.map(\.table) + cascaded).flatMap(\.eraseSettings).filter { seen.insert($0).inserted }
        plan.touchedTables = plan.neededTables()
        return plan
    }

    /// Tables whose kept (masked) rows keep files: file columns no mask of theirs empties
    /// (the user row's included), for the receipt to say why those files stay.
    public var fileColumnsKeptWithMaskedRows: [(table: DataMap.TableName, columns: [String])] {
        func kept(_ blobs: [String], _ masks: [DataMap.Mask]) -> [String] {
            blobs.filter { blob in masks.contains { !DataMap.Erase.mask($0).takesFiles(of: blob) } }
        }
        var found: [(DataMap.TableName, [String])] = []
        let subjectColumns = kept(subject.blobs, [subject.erase.mask].compactMap { $0 })
        if !subjectColumns.isEmpty { found.append((subject.table, subjectColumns)) }
        for plan in tables {
            var masks = [plan.table.erase.mask].compactMap { $0 }
            if case .sides(let sides) = plan.owner { masks = sides.compactMap(\.erase.mask) }
            let columns = kept(plan.table.blobs, masks)
            if !columns.isEmpty { found.append((plan.table.name, columns)) }
        }
        return found
    }

    /// Whether this plan changes the user row at all (a part's plan may not).
    public var erasesUserRow: Bool { subject.erase.mask.map { !$0.isEmpty } ?? true }

    /// Preset tables this database does not have, left out (for `map check`'s notes).
    public let presetTablesLeftOut: [String]
    /// What requesting deletion does in the app (`on_deletion:`), tables qualified.
    public private(set) var onDeletion: DataMap.OnDeletion

    /// Column and JSON key names that usually hold a user's key (the schema's own foreign
    /// keys into the user table included).
    let keyNames: Set<String>

    /// File columns no index leads: a purge looks, for each file it would delete, whether a
    /// row it keeps still names it, and without an index that look-up reads the whole table.
    public var unindexedFileColumns: [DataMap.ColumnReference] {
        var columns: [DataMap.ColumnReference] = []
        for (table, column) in [(subject.table, subject.blobs)] + tables.map({ ($0.table.name, $0.table.blobs) }) {
            for name in column where !(catalog.table(table)?.indexedColumns.contains(name) ?? true) {
                columns.append(.init(table: table, column: name))
            }
        }
        return columns
    }

    /// JSON columns nothing maps or ignores, to look into for a key that names the user
    /// (an audit payload's `actor_id`): no foreign key can say so.
    public var jsonColumnsToLookInto: [(table: DataMap.TableName, column: String)] {
        let ignoredTables = Set(map.ignored.filter { $0.column == nil }.map { catalog.qualified($0.table) })
        let ignoredColumns = Set(map.ignored.compactMap { entry in entry.column.map { DataMap.ColumnReference(table: catalog.qualified(entry.table), column: $0) } })
        var mapped = Set<DataMap.ColumnReference>()
        for plan in tables {
            if case .value(let value) = plan.owner { mapped.insert(.init(table: plan.table.name, column: value.column)) }
            if case .sides(let sides) = plan.owner { for side in sides { mapped.insert(.init(table: plan.table.name, column: side.column)) } }
        }
        var found: [(DataMap.TableName, String)] = []
        for table in catalog.tables.values.sorted(by: { $0.name < $1.name })
        where !(table.name.schema == "lifecycle" || table.name.name.hasPrefix("lifecycle_")) && !ignoredTables.contains(table.name) {
            for column in table.columns where ["json", "jsonb"].contains(column.declaredType.lowercased()) {
                let reference = DataMap.ColumnReference(table: table.name, column: column.name)
                if !ignoredColumns.contains(reference) && !mapped.contains(reference) { found.append((table.name, column.name)) }
            }
        }
        return found
    }

    /// A warning for a JSON column whose values hold a key named like a user's key.
    public func jsonSuspect(table: DataMap.TableName, column: String, keys: [String]) -> Suspect? {
        guard let key = keys.sorted().first(where: { keyNames.contains($0.lowercased()) }) else { return nil }
        let declared = catalog.table(table)?.column(column)?.declaredType ?? "json"
        let mapped = tables.contains { $0.table.name == table }
        let shownTable = table.schema == catalog.defaultSchema ? table.name : table.description
        return Suspect(
            table: table, column: column, declaredType: declared, jsonKey: key,
            why: "its JSON values hold '\(key)', which looks like the user's key; no foreign key can say so",
            suggestion: mapped
                ? "add {column: \(column), json: \(key)} to the table's `owners:`, or - {column: \(shownTable).\(column), reason: …}   (under ignore:)"
                : "- {table: \(shownTable), owner: {column: \(column), json: \(key)}}   (under tables:) or - {column: \(shownTable).\(column), reason: …}   (under ignore:)")
    }

    /// Every table a purge or an export of an account reads or changes, with what it
    /// needs of it: the user table, the password table, each mapped table, and the
    /// tables other users' rows are cascaded from.
    /// (Worked out once: every purge and export asks.)
    public private(set) var touchedTables: [(table: DataMap.TableName, reads: Bool, updates: Bool, deletes: Bool)] = []

    private func neededTables() -> [(table: DataMap.TableName, reads: Bool, updates: Bool, deletes: Bool)] {
        var needs: [DataMap.TableName: (Bool, Bool, Bool)] = [:]
        func add(_ name: DataMap.TableName, updates: Bool = false, deletes: Bool = false) {
            let known = needs[name] ?? (true, false, false)
            needs[name] = (true, known.1 || updates, known.2 || deletes)
        }
        add(subject.table, updates: !(subject.erase.mask?.isEmpty ?? true), deletes: subject.erase == .delete)
        if let table = subject.password?.table { add(table) }
        for plan in tables {
            var updates = plan.table.erase.mask != nil
            var deletes = plan.table.erase.deletesRows
            if case .sides(let sides) = plan.owner {
                updates = sides.contains { $0.erase.mask != nil }
                deletes = sides.contains { $0.erase == .delete }
            }
            add(plan.table.name, updates: updates, deletes: deletes)
            for cascade in plan.cascades { add(cascade.table, updates: !cascade.deletesRows, deletes: cascade.deletesRows) }
            // Rows owned through a parent are found through the parent's: a policy hiding those hides them.
            var owner = plan.owner
            while case .parent(_, let parent, _, let next) = owner {
                add(parent)
                owner = next
            }
            // A generic relation reads its type table: a policy hiding its rows would hide the user's.
            var values: [DataMap.OwnerValue] = []
            if case .value(let value) = plan.owner { values.append(value) }
            if case .sides(let sides) = plan.owner { values += sides.map(\.value) }
            for case let table? in values.map({ $0.type?.table }) { add(catalog.qualified(table)) }
        }
        for removal in onDeletion.remove { add(removal.table, deletes: true) }
        for setting in onDeletion.set { add(setting.table, updates: true) }
        for insertion in onDeletion.insert {
            add(insertion.table)
            add(insertion.source)
        }
        return needs.map { ($0.key, $0.value.0, $0.value.1, $0.value.2) }.sorted { $0.table < $1.table }
    }

    /// What stops this role from erasing (or exporting) the account as the map says:
    /// row level security it does not bypass, or a missing privilege, one line per table.
    /// Without this, a policy that hides rows makes a purge delete nothing and report
    /// success, and an export hand out part of an account.
    public func accessProblems(_ access: [DataMap.TableName: SchemaCatalog.Access], exportOnly: Bool = false) -> [String] {
        var problems: [String] = []
        for need in touchedTables {
            let shown = need.table.schema == catalog.defaultSchema ? need.table.name : need.table.description
            guard let granted = access[need.table] else {
                problems.append("\(shown): this role cannot see the table at all (no USAGE on its schema, or it is gone): GRANT USAGE and SELECT to the role lifecycle connects as")
                continue
            }
            if granted.rowSecurity {
                problems.append("""
                    \(shown) has row level security, which this role does not bypass: its statements would see only the \
                    rows a policy lets through. Connect as a role with BYPASSRLS (ALTER ROLE … BYPASSRLS), or as the \
                    table's owner with row level security not forced
                    """)
            }
            var missing: [String] = []
            if need.reads && !granted.select { missing.append("SELECT") }
            if !exportOnly && need.updates && !granted.update { missing.append("UPDATE") }
            if !exportOnly && need.deletes && !granted.delete { missing.append("DELETE") }
            if !exportOnly && onDeletion.insert.contains(where: { $0.table == need.table }) && !granted.insert { missing.append("INSERT") }
            if !missing.isEmpty {
                problems.append("\(shown): this role lacks \(missing.joined(separator: ", ")): GRANT \(missing.joined(separator: ", ")) ON \(need.table) TO the role lifecycle connects as")
            }
        }
        return problems
    }

    public func plan(for name: DataMap.TableName) -> TablePlan? {
        let qualified = catalog.qualified(name)
        return tables.first { $0.table.name == qualified }
    }

    /// Every mapped table, in a part's plan too (which erases only some): what a cascaded
    /// row's files and key are, whichever table's erasure deletes it.
    private var everyTable: [TablePlan]?

    public func mappedTable(_ name: DataMap.TableName) -> TablePlan? {
        let qualified = catalog.qualified(name)
        return (everyTable ?? tables).first { $0.table.name == qualified }
    }
}

/// Problems found in one pass over part of the map, each named once and raised together,
/// so an author sees them all in one `map check`.
struct MapProblems {
    private(set) var messages: [String] = []

    mutating func add(_ message: String) {
        if !messages.contains(message) { messages.append(message) }
    }

    mutating func note(_ error: any Error) { add((error as? LifecycleError)?.message ?? "\(error)") }

    /// Throws them as one error: a single problem as it is, several listed under `heading`.
    func raise(_ heading: String) throws {
        if messages.count == 1 { throw LifecycleError(.badInput, messages[0]) }
        if messages.count > 1 {
            throw LifecycleError(.badInput, "\(messages.count) problems in \(heading):\n" + messages.map { "  - " + $0 }.joined(separator: "\n"))
        }
    }
}

/// The checks, each throwing a message that names the file, the line, the table and the
/// path at fault, and says what to write instead.
private struct Checker {
    let map: DataMap
    let catalog: SchemaCatalog

    init(map: DataMap, catalog: SchemaCatalog) {
        self.map = map
        self.catalog = catalog
    }

    /// A table as a map names it: plain in the default schema (`users`), else qualified.
    func shown(_ name: DataMap.TableName) -> String {
        name.schema == catalog.defaultSchema ? name.name : name.description
    }

    /// The photo's column must be a file column (`blobs:`) of the user table or of a table
    /// owned through a column of the user's key, so export and purge take its files.
    func profilePhoto(subject: DataMap.Subject, plans: [DataMapPlan.TablePlan]) throws -> DataMapPlan.ProfilePhotoPlace? {
        guard let photo = map.profilePhoto else { return nil }
        let name = catalog.qualified(photo.table ?? subject.table)
        let keyColumn: String
        let blobs: [String]
        if name == subject.table {
            (keyColumn, blobs) = (subject.key, subject.blobs)
        } else if let plan = plans.first(where: { $0.table.name == name }), case .column(let owner) = plan.table.ownership {
            (keyColumn, blobs) = (owner, plan.table.blobs)
        } else {
            throw fail(photo.line, """
                profile_photo: \(name) must be the user table or a mapped table with `owner: COLUMN` (one row per user), \
                so the photo's row is found by the user's key
                """)
        }
        guard blobs.contains(photo.column) else {
            throw fail(photo.line, """
                profile_photo: \(name).\(photo.column) is not among the table's `blobs:`; list it there, so the export \
                hands the photo out and the purge deletes it
                """)
        }
        guard let column = catalog.table(name)?.column(photo.column), column.kind == .text || column.kind == .other else {
            throw fail(photo.line, "profile_photo: \(name).\(photo.column) must be a text column holding the photo's blob key")
        }
        if photo.empty == .null && column.isNotNull {
            throw fail(photo.line, "profile_photo: \(name).\(photo.column) is NOT NULL, so \"no photo\" cannot be null there; write `empty: \"\"`")
        }
        return .init(table: name, keyColumn: keyColumn, column: photo.column, prefix: photo.prefix, empty: photo.empty)
    }

    func fail(_ line: Int?, _ message: String) -> LifecycleError {
        LifecycleError(.badInput, "\(map.place(line)): \(message)")
    }

    /// Lifecycle's own tables are never the app's: neither mapped nor required.
    static func isLifecycleOwn(_ name: DataMap.TableName) -> Bool {
        name.schema == "lifecycle" || name.name.hasPrefix("lifecycle_")
    }

    func table(_ name: DataMap.TableName, line: Int, role: String) throws -> SchemaCatalog.Table {
        guard let table = catalog.table(name) else {
            throw fail(line, "\(role) \(name) does not exist in the database (looked for \(catalog.qualified(name)))")
        }
        return table
    }

    func column(_ name: String, of table: SchemaCatalog.Table, line: Int, role: String) throws -> SchemaCatalog.Column {
        guard let column = table.column(name) else {
            throw fail(line, "\(role) '\(name)' is not a column of \(table.name) (it has \(table.columns.map(\.name).joined(separator: ", ")))")
        }
        return column
    }

    func mask(_ mask: DataMap.Mask, of table: SchemaCatalog.Table, key: [String], line: Int) throws {
        for (name, value) in mask {
            let column = try column(name, of: table, line: line, role: "masked column")
            if value == .null, column.isNotNull {
                throw fail(line, "\(table.name).\(name) is NOT NULL, so masking it to null would fail every purge: give it a value such as \"deleted-{key}\" (a file column: \"\", which names no file)")
            }
            if key.contains(name) { throw fail(line, "\(table.name).\(name) is part of the key and cannot be masked") }
            if case .template = value, column.kind != .text, column.kind != .other {
                throw fail(line, "\(table.name).\(name) is not text, so its mask cannot contain {key}")
            }
            // PostgreSQL's json and jsonb take text (or null); a number there is no JSON it parses.
            if ["json", "jsonb"].contains(column.declaredType.lowercased()), value != .null {
                guard case .text = value else {
                    throw fail(line, "\(table.name).\(name) is \(column.declaredType): mask it to null or to JSON written as text (\"{}\")")
                }
            }
            // A value the column cannot hold as written would fail every purge on PostgreSQL,
            // or be stored converted on SQLite and never again read as masked.
            if case .text(let text) = value, [.integer, .real, .boolean].contains(column.kind) {
                throw fail(line, "\(table.name).\(name) is \(column.declaredType), so its mask must be a number or true/false, not \(String(reflecting: text))")
            }
        }
    }

    // MARK: The subject

    /// `mask` and, for every other column of the user row but the key and `keep`, its empty
    /// value: NULL where the column may be null, else 0, false or the Unix epoch; a required
    /// column of any other type must be given a value or kept.
    func emptying(_ table: SchemaCatalog.Table, keeping keep: [String], besides mask: DataMap.Mask, key: String, line: Int) throws -> DataMap.Mask {
        for name in keep { _ = try column(name, of: table, line: line, role: "kept column") }
        var emptied = mask
        for column in table.columns where column.name != key && !keep.contains(column.name) && !mask.contains(where: { $0.column == column.name }) {
            guard column.isNotNull else {
                emptied.append((column.name, .null))
                continue
            }
            switch column.kind {
            case .integer: emptied.append((column.name, .integer(0)))
            case .real: emptied.append((column.name, .real(0)))
            case .boolean: emptied.append((column.name, .boolean(false)))
            case .timestamp: emptied.append((column.name, .text("1970-01-01T00:00:00Z")))
            case .text, .bytes, .other:
                throw fail(line, """
                    \(table.name).\(column.name) is NOT NULL \(column.declaredType), so the purge cannot empty it: give it a value \
                    under `erase: mask:` (such as "deleted-{key}"), or list it under `keep:`
                    """)
            }
        }
        return emptied
    }

    mutating func subject() throws -> (DataMap.Subject, SchemaCatalog.Table, SchemaCatalog.ColumnKind) {
        var subject = map.subject
        subject.table = catalog.qualified(subject.table)
        let line = subject.line
        let table = try table(subject.table, line: line, role: "subject table")
        let key = try column(subject.key, of: table, line: line, role: "subject key")
        guard key.kind == .integer || key.kind == .text || key.kind == .other else {
            throw fail(line, "subject key \(table.name).\(subject.key) is \(key.declaredType); it must be an integer or text column")
        }
        for name in subject.lookup {
            let column = try column(name, of: table, line: line, role: "lookup column")
            guard column.kind == .text || column.kind == .integer || column.kind == .other else {
                throw fail(line, "lookup column \(table.name).\(name) is \(column.declaredType); lookups compare text or integers")
            }
            if subject.ignoreCase.contains(name) && column.kind != .text {
                throw fail(line, "ignore_case column \(table.name).\(name) is \(column.declaredType), not a text type; only text has a case to ignore")
            }
        }
        for name in subject.columns + subject.blobs { _ = try column(name, of: table, line: line, role: "column") }
        if let zone = subject.timeZone {
            let column = try column(zone, of: table, line: line, role: "timezone column")
            guard column.kind == .text || column.kind == .other else {
                throw fail(line, "timezone column \(table.name).\(zone) is \(column.declaredType); it must hold text (an IANA zone such as Europe/Paris)")
            }
        }
        for name in subject.greeting {
            let column = try column(name, of: table, line: line, role: "greeting column")
            guard column.kind == .text || column.kind == .other else {
                throw fail(line, "greeting column \(table.name).\(name) is \(column.declaredType); it must hold text")
            }
        }
        if let email = subject.email {
            let column = try column(email, of: table, line: line, role: "email column")
            guard column.kind == .text || column.kind == .other else {
                throw fail(line, "email column \(table.name).\(email) is \(column.declaredType); it must hold text")
            }
        }
        if let password = subject.password {
            if let passwordTable = password.table {
                subject.password?.table = catalog.qualified(passwordTable)
                let holder = try self.table(passwordTable, line: line, role: "password table")
                _ = try column(password.key ?? "", of: holder, line: line, role: "password key")
                _ = try column(password.column, of: holder, line: line, role: "password column")
            } else {
                _ = try column(password.column, of: table, line: line, role: "password column")
            }
        }
        if let keep = subject.keep, case .mask(let listed) = subject.erase {
            subject.erase = .mask(try emptying(table, keeping: keep, besides: listed, key: subject.key, line: line))
        }
        if let mask = subject.erase.mask {
            try self.mask(mask, of: table, key: [subject.key], line: line)
            // A file column masked to another file's name would hand that file to the tombstone.
            if let blob = subject.blobs.first(where: { name in mask.contains { $0.column == name && !$0.value.namesNoFile } }) {
                throw fail(line, "the user row's file column \(blob) is masked to a value that is not \"no file\": mask it to null (or \"\", Django's \"no file\") to delete the file, or leave it out of the mask to keep the file with the row")
            }
        }
        return (subject, table, key.kind == .integer ? .integer : .text)
    }

    // MARK: Tables

    func tables(subject: DataMap.Subject, keyKind: SchemaCatalog.ColumnKind) -> (plans: [DataMapPlan.TablePlan], problems: MapProblems) {
        var resolved: [DataMap.TableName: DataMapPlan.Owner] = [:]
        let mapped = Dictionary(map.tables.map { (catalog.qualified($0.name), $0) }, uniquingKeysWith: { first, _ in first })

        func owner(of name: DataMap.TableName, trail: [DataMap.TableName]) throws -> DataMapPlan.Owner {
            if let known = resolved[name] { return known }
            guard let entry = mapped[name] else { throw fail(nil, "table \(name) is not mapped") }
            guard !trail.contains(name) else {
                throw fail(entry.line, "ownership runs in a circle: \((trail + [name]).map(\.description).joined(separator: " → "))")
            }
            let table = try self.table(entry.name, line: entry.line, role: "table")
            let result: DataMapPlan.Owner
            switch entry.ownership {
            case .column(let name):
                try ownerColumn(name, of: table, keyKind: keyKind, line: entry.line)
                result = .column(name)
            case .value(let value):
                try ownerValue(value, of: table, keyKind: keyKind, line: entry.line)
                result = .value(value)
            case .sides(let sides):
                for side in sides {
                    if side.value.isPlainColumn {
                        try ownerColumn(side.column, of: table, keyKind: keyKind, line: entry.line)
                    } else {
                        try ownerValue(side.value, of: table, keyKind: keyKind, line: entry.line)
                    }
                    if let mask = side.erase.mask { try self.mask(mask, of: table, key: [], line: entry.line) }
                }
                result = .sides(sides)
            case .parent(let via, let parentName):
                _ = try column(via, of: table, line: entry.line, role: "owner.via")
                let parent = catalog.qualified(parentName)
                let parentColumn: String
                if let key = catalog.foreignKeys(from: table.name).first(where: { $0.columns == [via] && $0.referencedTable == parent }) {
                    parentColumn = key.referencedColumns[0]
                } else if let parentTable = catalog.table(parent), parentTable.primaryKey.count == 1 {
                    // No declared foreign key (many apps have none): the parent's primary key.
                    parentColumn = parentTable.primaryKey[0]
                } else {
                    throw fail(entry.line, "\(table.name).\(via) does not reference \(parent) by a foreign key, and \(parent) has no single-column primary key to match it against")
                }
                if parent == subject.table {
                    result = .column(via)
                } else {
                    guard mapped[parent] != nil else {
                        throw fail(entry.line, "owner.parent \(parent) is not mapped: map it first (its rows must belong to the subject too)")
                    }
                    result = .parent(via: via, parent: parent, parentColumn: parentColumn, parentOwner: try owner(of: parent, trail: trail + [name]))
                }
            }
            resolved[name] = result
            return result
        }

        var plans: [DataMapPlan.TablePlan] = []
        // Every entry's problems in one run: an author fixing the map sees them all.
        var problems = MapProblems()
        for entry in map.tables {
            do {
                var table = entry
                table.name = catalog.qualified(entry.name)
                let info = try self.table(entry.name, line: entry.line, role: "table")
                let ownerPath = try owner(of: table.name, trail: [])
                let key = entry.key ?? info.primaryKey
                guard !key.isEmpty else {
                    throw fail(entry.line, "table \(table.name) has no primary key: list the columns that identify a row under `key:`")
                }
                for name in key + entry.columns + entry.blobs + entry.orderBy + entry.fileKey {
                    _ = try column(name, of: info, line: entry.line, role: "column")
                }
                for name in entry.blobs + entry.fileKey where ![.text, .other].contains(info.column(name)?.kind) {
                    throw fail(entry.line, "blob column \(table.name).\(name) is \(info.column(name)?.declaredType ?? "?"); it must hold text (blob keys)")
                }
                for (blob, recorded) in entry.recordedFiles.sorted(by: { $0.key < $1.key }) {
                    for (role, name) in [("sha256", recorded.sha256), ("content_type", recorded.contentType)] {
                        guard let name else { continue }
                        let kind = try column(name, of: info, line: entry.line, role: "recorded column").kind
                        guard kind == .text || kind == .other else {
                            throw fail(entry.line, "recorded.\(blob).\(role): \(table.name).\(name) is \(info.column(name)?.declaredType ?? "?"); it must hold text")
                        }
                    }
                    if let size = recorded.bytes, try column(size, of: info, line: entry.line, role: "recorded column").kind != .integer {
                        throw fail(entry.line, "recorded.\(blob).bytes: \(table.name).\(size) is \(info.column(size)?.declaredType ?? "?"); it must hold the size in bytes, an integer")
                    }
                }
                if let mask = entry.erase.mask { try self.mask(mask, of: info, key: key, line: entry.line) }
                if !entry.eraseSettings.isEmpty && !catalog.hasTransactionSettings {
                    throw fail(entry.line, "erase_settings are PostgreSQL settings (SET LOCAL); this database has none: leave them out")
                }
                for setting in entry.eraseSettings {
                    if let other = map.tables.first(where: { $0.eraseSettings.contains { $0.name == setting.name && $0.value != setting.value } }) {
                        throw fail(entry.line, "erase_settings: \(setting.name) is '\(setting.value)' here and something else for \(other.name) (line \(other.line)); every erasure transaction has one value")
                    }
                }
                var cascades: [DataMapPlan.Cascade] = []
                var cascaded: [SchemaCatalog.Table] = [info]
                for item in entry.cascade {
                    var cascade = try reference(item, to: cascaded, line: entry.line, role: "cascade")
                    // Deleting the rows that answer hers takes one level only; what answers those
                    // would then fail the delete. Unlinked, every level is done at once.
                    if cascade.table == table.name, cascade.referencedTable == table.name, entry.cascadeValues[item] == nil {
                        throw fail(entry.line, """
                            cascade: \(shown(table.name)).\(cascade.column) is the table's reference to itself: deleting the rows that \
                            answer hers would leave the rows answering those. Write `{column: \(shown(table.name)).\(cascade.column), set: null}` \
                            (the other rows stay, no longer answering hers), or keep a row of hers someone answered with \
                            `erase: {delete_unless_referenced_by: [\(shown(table.name)).\(cascade.column)], mask: {…}}`
                            """)
                    }
                    if let value = entry.cascadeValues[item], let referencing = catalog.table(cascade.table) {
                        try mask([(cascade.column, value)], of: referencing, key: referencing.primaryKey, line: entry.line)
                        cascade.setValue = value
                    }
                    cascades.append(cascade)
                    if cascade.deletesRows, let table = catalog.table(cascade.table), !cascaded.contains(where: { $0.name == table.name }) { cascaded.append(table) }
                }
                // Rows deleted by a cascade are other users' rows: whatever references them must go too.
                for table in cascaded.dropFirst() {
                    for key in catalog.foreignKeys(to: table.name) where !key.onDelete.handlesReferencingRows
                        && !cascades.contains(where: { $0.table == key.table && [$0.column] == key.columns }) {
                        throw fail(entry.line, """
                            cascade deletes other users' \(table.name) rows, but \(key) would still point at them: add \
                            '\(key.table).\(key.columns.joined(separator: ","))' to the same `cascade:` list
                            """)
                    }
                }
                for cascade in cascades where (mapped[cascade.table]?.key ?? catalog.table(cascade.table)?.primaryKey ?? []).isEmpty && catalog.table(cascade.table)?.rowID == nil {
                    throw fail(entry.line, "cascade: \(cascade.table) has no primary key, so its rows cannot be deleted in batches; map it with `key:`")
                }
                // A kept row keeps its files unless the mask empties the file column; masked to
                // another name, it would hand that file to the kept row.
                let masks = [entry.erase.mask].compactMap { $0 } + {
                    if case .sides(let sides) = entry.ownership { return sides.compactMap(\.erase.mask) }
                    return []
                }()
                for mask in masks {
                    if let blob = entry.blobs.first(where: { name in mask.contains { $0.column == name && !$0.value.namesNoFile } }) {
                        throw fail(entry.line, "\(table.name).\(blob) is a file column masked to a value that is not \"no file\": mask it to null (or \"\", Django's \"no file\") to delete the file, or leave it out of the mask to keep the file with the row")
                    }
                }
                var keptBy: [DataMapPlan.Cascade] = []
                if case .deleteUnlessReferenced(let references, _) = entry.erase {
                    keptBy = try references.map { try reference($0, to: [info], line: entry.line, role: "delete_unless_referenced_by") }
                }
                table.cascade = cascades.map { .init(table: $0.table, column: $0.column) }
                table.cascadeValues = Dictionary(cascades.compactMap { cascade in cascade.setValue.map { (DataMap.ColumnReference(table: cascade.table, column: cascade.column), $0) } }, uniquingKeysWith: { first, _ in first })
                plans.append(.init(table: table, key: key, owner: ownerPath, cascades: cascades, keptBy: keptBy, catalog: info))
            } catch {
                problems.note(error)
            }
        }
        for entry in map.ignored {
            if let problem = ignoredProblem(entry) { problems.add(problem) }
        }
        return (plans, problems)
    }

    private func ownerColumn(_ name: String, of table: SchemaCatalog.Table, keyKind: SchemaCatalog.ColumnKind, line: Int) throws {
        let column = try column(name, of: table, line: line, role: "owner")
        let kind: SchemaCatalog.ColumnKind = column.kind == .integer ? .integer : .text
        guard kind == keyKind || column.kind == .other else {
            throw fail(line, "owner \(table.name).\(name) is \(column.declaredType) but the subject key is \(keyKind == .integer ? "an integer" : "text")")
        }
    }

    /// A key inside a JSON column, or a generic relation's key column and its type.
    private func ownerValue(_ value: DataMap.OwnerValue, of table: SchemaCatalog.Table, keyKind: SchemaCatalog.ColumnKind, line: Int) throws {
        let column = try column(value.column, of: table, line: line, role: "owner")
        if !value.json.isEmpty {
            // PostgreSQL reads a path only out of json and jsonb; SQLite keeps JSON as text,
            // and a value that is not JSON is skipped rather than failing the statement.
            let declared = column.declaredType.lowercased()
            if catalog.defaultSchema != "main", declared != "json", declared != "jsonb" {
                throw fail(line, "owner \(table.name).\(value.column) is \(column.declaredType): `json:` reads inside a json or jsonb column")
            }
        }
        if let type = value.type {
            _ = try self.column(type.column, of: table, line: line, role: "owner.type column")
            if let typeTable = type.table {
                let holder = try self.table(typeTable, line: line, role: "owner.type table")
                for pair in type.match { _ = try self.column(pair.column, of: holder, line: line, role: "owner.type match column") }
                guard catalog.typeKey(type, of: table.name) != nil else {
                    throw fail(line, "\(table.name).\(type.column) does not reference \(holder.name) by a foreign key, and \(holder.name) has no single-column primary key to match it against")
                }
            }
            if value.json.isEmpty, column.kind != .text, column.kind != .other {
                try ownerColumn(value.column, of: table, keyKind: keyKind, line: line)
            }
        }
    }

    /// An entry of `ignore:` names a table (and column) that exists.
    /// `on_deletion:` entries: tables and columns that exist, owners that can hold the key,
    /// values their columns can hold, and a primary key for rows whose values a restore
    /// puts back.
    func onDeletion(keyKind: SchemaCatalog.ColumnKind) throws -> DataMap.OnDeletion {
        var result = map.onDeletion
        // Every entry's problem in one run; their order and references once the entries hold.
        var problems = MapProblems()
        func owner(_ value: DataMap.OwnerValue, of table: SchemaCatalog.Table, line: Int) throws {
            if value.isPlainColumn {
                try ownerColumn(value.column, of: table, keyKind: keyKind, line: line)
            } else {
                try ownerValue(value, of: table, keyKind: keyKind, line: line)
            }
        }
        for index in result.remove.indices {
            do {
                let entry = result.remove[index]
                let table = try self.table(catalog.qualified(entry.table), line: entry.line, role: "on_deletion table")
                if entry.owner.encoding != nil {
                    // Read and decoded row by row, a page at a time in key order.
                    let column = try column(entry.owner.column, of: table, line: entry.line, role: "on_deletion owner")
                    guard column.kind == .text || column.kind == .other else {
                        throw fail(entry.line, "on_deletion: \(shown(table.name)).\(column.name) is \(column.declaredType); an encoded value is text")
                    }
                    guard table.primaryKey.count == 1 else {
                        throw fail(entry.line, "on_deletion: \(shown(table.name)) needs a one-column primary key for lifecycle to read its encoded rows a page at a time")
                    }
                    result.remove[index].table = table.name
                    continue
                }
                if entry.parent != nil {
                    _ = try column(entry.owner.column, of: table, line: entry.line, role: "on_deletion owner.via")
                } else {
                    try owner(entry.owner, of: table, line: entry.line)
                }
                result.remove[index].table = table.name
            } catch {
                problems.note(error)
            }
        }
        if problems.messages.isEmpty { result.remove = try removalOrder(result.remove) }
        if problems.messages.isEmpty { try removalCoverage(result.remove) }
        for index in result.set.indices {
            do {
                let entry = result.set[index]
                let table = try self.table(catalog.qualified(entry.table), line: entry.line, role: "on_deletion table")
                try owner(entry.owner, of: table, line: entry.line)
                guard !table.primaryKey.isEmpty else {
                    throw fail(entry.line, "on_deletion: \(shown(table.name)) has no primary key, so a restore could not put each row's values back")
                }
                try mask(entry.values, of: table, key: table.primaryKey, line: entry.line)
                // Rows are found by these: changed during the grace period, erasure and its
                // verification would look for the user where they no longer are.
                var finders: Set<String> = [entry.owner.column]
                if let type = entry.owner.type { finders.insert(type.column) }
                for mapped in map.tables where catalog.qualified(mapped.name) == table.name {
                    switch mapped.ownership {
                    case .column(let column): finders.insert(column)
                    case .value(let value): finders.insert(value.column); if let type = value.type { finders.insert(type.column) }
                    case .parent(let via, _): finders.insert(via)
                    case .sides(let sides): for side in sides { finders.insert(side.column); if let type = side.type { finders.insert(type.column) } }
                    }
                }
                if catalog.qualified(map.subject.table) == table.name {
                    finders.formUnion([map.subject.key] + map.subject.lookup + [map.subject.email, map.subject.password?.column].compactMap { $0 })
                }
                if let column = entry.values.map(\.column).first(where: finders.contains) {
                    throw fail(entry.line, """
                        on_deletion: set: cannot change \(shown(table.name)).\(column): lifecycle finds the account's rows (or the \
                        account itself) by it, so erasure and its verification would miss them; set another column
                        """)
                }
                result.set[index].table = table.name
            } catch {
                problems.note(error)
            }
        }
        for index in result.insert.indices {
            do {
                result.insert[index] = try insertion(result.insert[index], keyKind: keyKind, removed: result.remove.map(\.table))
            } catch {
                problems.note(error)
            }
        }
        try problems.raise("`on_deletion:`")
        return result
    }

    /// An `on_deletion: remove:` entry owned `{via, parent}` references rows another entry
    /// removes: it is removed before them (so the parent's rows are still there to find
    /// its own by), whatever order the map lists them in.
    private func removalOrder(_ written: [DataMap.OnDeletion.Removal]) throws -> [DataMap.OnDeletion.Removal] {
        var removals = written
        for index in removals.indices {
            let entry = removals[index]
            guard let parentName = entry.parent.map(catalog.qualified) else { continue }
            let shownParent = shown(parentName)
            guard let parent = removals.first(where: { $0.table == parentName }) else {
                throw fail(entry.line, """
                    on_deletion: \(shown(entry.table)) is removed through \(shownParent) (`via: \(entry.owner.column)`), which no \
                    `remove:` entry removes: list \(shownParent) under `on_deletion: remove:` with its owner, or give \
                    \(shown(entry.table)) an owner of its own
                    """)
            }
            guard parent.owner.encoding == nil else {
                throw fail(entry.line, "on_deletion: \(shownParent)'s rows are found by decoding each one (`encoding:`), so no SQL can find the rows referencing them: give \(shown(entry.table)) an owner of its own")
            }
            let key = catalog.foreignKeys(from: entry.table).first { $0.columns == [entry.owner.column] && $0.referencedTable == parentName }
            if let key {
                removals[index].parentColumn = key.referencedColumns[0]
            } else if let primaryKey = catalog.table(parentName)?.primaryKey, primaryKey.count == 1 {
                removals[index].parentColumn = primaryKey[0]
            } else {
                throw fail(entry.line, "on_deletion: \(shown(entry.table)).\(entry.owner.column) does not reference \(shownParent) by a foreign key, and \(shownParent) has no single-column primary key to match it against")
            }
            removals[index].parent = parentName
        }
        var ordered: [DataMap.OnDeletion.Removal] = []
        var remaining = removals
        while !remaining.isEmpty {
            // Ready once every entry removed through it is removed.
            guard let index = remaining.firstIndex(where: { entry in !remaining.contains { $0.parent == entry.table } }) else {
                throw fail(remaining[0].line, "on_deletion: the `via:` entries of \(remaining.map { shown($0.table) }.joined(separator: ", ")) run in a circle")
            }
            ordered.append(remaining.remove(at: index))
        }
        return ordered
    }

    /// Every foreign key into the rows a deletion request removes, and into the rows the
    /// database deletes with them (ON DELETE CASCADE), is handled: by the database (CASCADE,
    /// SET NULL) or by a `remove:` entry through it (`via:`), removed first. Otherwise the
    /// request of every user who has such a row (simplejwt's blacklisted token, pointing at
    /// an outstanding one) would fail on that key, when nothing can be done about it.
    private func removalCoverage(_ removals: [DataMap.OnDeletion.Removal]) throws {
        var problems: [String] = []
        var removed = removals.map { ($0.table, $0.line, [SchemaCatalog.ForeignKey]()) }
        var seen = Set(removed.map(\.0))
        while !removed.isEmpty {
            let (target, line, path) = removed.removeFirst()
            for key in catalog.foreignKeys(to: target) where !Checker.isLifecycleOwn(key.table) {
                if removals.contains(where: { $0.table == key.table && $0.parent == target && [$0.owner.column] == key.columns }) { continue }
                if key.onDelete == .cascade {
                    if seen.insert(key.table).inserted { removed.append((key.table, line, path + [key])) }
                    continue
                }
                if key.onDelete.handlesReferencingRows { continue }
                let trail = (path + [key]).map(\.description).joined(separator: ", then ")
                let columns = key.columns.joined(separator: ",")
                problems.append("""
                    \(map.place(line)): on_deletion removes rows of \(shown(target)), and \(trail) (ON DELETE \
                    \(key.onDelete.rawValue)) would make the deletion request of every user with such a row fail. Add under \
                    `on_deletion: remove:` `- {table: \(shown(key.table)), owner: {via: \(columns), parent: \(shown(target))}}` \
                    (removed first), or make the foreign key ON DELETE CASCADE or SET NULL
                    """)
            }
        }
        if !problems.isEmpty {
            throw LifecycleError(.badInput, """
                \(map.source): `on_deletion:` does not say what happens to \(problems.count == 1 ? "one reference" : "\(problems.count) references") to rows a deletion request removes:
                \(problems.map { "  - " + $0 }.joined(separator: "\n"))
                """)
        }
    }

    /// An `on_deletion: insert:` entry: both tables exist, the source's owner can hold the
    /// key, `link` references the source by a foreign key, and every column the insert
    /// leaves out can be left out (it has a default, or takes null): otherwise every
    /// deletion request of a user with such a row would fail.
    private func insertion(
        _ written: DataMap.OnDeletion.Insertion, keyKind: SchemaCatalog.ColumnKind, removed: [DataMap.TableName]
    ) throws -> DataMap.OnDeletion.Insertion {
        var entry = written
        let line = entry.line
        let table = try self.table(catalog.qualified(entry.table), line: line, role: "on_deletion insert table")
        let source = try self.table(catalog.qualified(entry.source), line: line, role: "on_deletion for_each table")
        if entry.sourceOwner.isPlainColumn {
            try ownerColumn(entry.sourceOwner.column, of: source, keyKind: keyKind, line: line)
        } else {
            try ownerValue(entry.sourceOwner, of: source, keyKind: keyKind, line: line)
        }
        _ = try column(entry.link, of: table, line: line, role: "on_deletion link")
        guard let key = catalog.foreignKeys(from: table.name).first(where: { $0.columns == [entry.link] && $0.referencedTable == source.name }) else {
            throw fail(line, """
                on_deletion: insert: \(shown(table.name)).\(entry.link) has no foreign key to \(shown(source.name)): `link:` names the \
                column that references the `for_each:` row, by which a row already inserted is found
                """)
        }
        entry.linkedColumn = key.referencedColumns[0]
        for name in entry.now {
            let column = try column(name, of: table, line: line, role: "on_deletion now")
            guard column.kind == .timestamp || (column.kind == .text && catalog.defaultSchema == "main") else {
                throw fail(line, "on_deletion: insert: \(shown(table.name)).\(name) is \(column.declaredType); `now:` sets timestamp columns")
            }
        }
        try mask(entry.values, of: table, key: [], line: line)
        // A constant would name the same row for every user, or none: a foreign key takes null.
        for value in entry.values where value.value != .null {
            if let key = catalog.foreignKeys(from: table.name).first(where: { $0.columns.contains(value.column) }) {
                throw fail(line, "on_deletion: insert: \(shown(table.name)).\(value.column) is a foreign key (\(key)): leave it out, or set it to null")
            }
        }
        let given = Set([entry.link] + entry.now + entry.values.map(\.column))
        if let missing = table.columns.first(where: { $0.isNotNull && !$0.hasDefault && !given.contains($0.name) }) {
            throw fail(line, """
                on_deletion: insert: \(shown(table.name)).\(missing.name) is NOT NULL and has no default: give it under `values:` \
                (or `now:` for the time of the request), or every deletion request would fail
                """)
        }
        if removed.contains(source.name) {
            throw fail(line, "on_deletion: insert: \(shown(source.name)) rows are removed by the same request, so no row would be inserted for them: insert, or remove, not both")
        }
        entry.table = table.name
        entry.source = source.name
        return entry
    }

    func ignoredProblem(_ entry: DataMap.Ignored) -> String? {
        guard let table = catalog.table(entry.table) else {
            return fail(entry.line, "ignored table \(entry.table) does not exist in the database").message
        }
        if let column = entry.column, table.column(column) == nil {
            return fail(entry.line, "ignored column '\(column)' is not a column of \(table.name)").message
        }
        return nil
    }

    /// A `TABLE.COLUMN` that must reference one of `targets` by a foreign key.
    private func reference(
        _ reference: DataMap.ColumnReference, to targets: [SchemaCatalog.Table], line: Int, role: String
    ) throws -> DataMapPlan.Cascade {
        let referencing = try table(reference.table, line: line, role: "\(role) table")
        _ = try column(reference.column, of: referencing, line: line, role: role)
        let names = targets.map(\.name)
        guard let key = catalog.foreignKeys(from: referencing.name).first(where: { $0.columns == [reference.column] && names.contains($0.referencedTable) }) else {
            throw fail(line, "\(role): \(referencing.name).\(reference.column) has no foreign key to \(names.map(\.description).joined(separator: " or "))")
        }
        return .init(table: referencing.name, column: reference.column, referencedTable: key.referencedTable, referencedColumn: key.referencedColumns[0])
    }

    // MARK: Coverage

    /// What erasure does to a table's rows.
    struct Touch: OptionSet, Hashable {
        let rawValue: Int
        static let deleted = Touch(rawValue: 1)
        static let masked = Touch(rawValue: 2)
        /// Deleted by the database itself (ON DELETE CASCADE from a row the purge deletes).
        static let deletedByDatabase = Touch(rawValue: 4)
    }

    /// Every foreign key, column by column, into every row the purge touches — the rows
    /// it deletes and the rows it keeps masked alike, and transitively the rows the
    /// database deletes with them — is handled: by how the referencing table is mapped
    /// (its owner, a side, the parent it is owned through), by the referenced table's
    /// `cascade:` or `delete_unless_referenced_by:`, by `ignore:` (never where that would
    /// make the purge fail), or, into rows that are deleted, by the database itself. A
    /// masked row stays, so a row pointing at it would keep the user's data: the
    /// database's ON DELETE does nothing for it. All problems are named at once, each
    /// with the path from the user table and what to write. Returns the keys through
    /// which the database deletes rows itself.
    func coverage(plans: [DataMapPlan.TablePlan], subject: DataMap.Subject) -> (deletedByDatabase: [SchemaCatalog.ForeignKey], problems: [String]) {
        let byName = Dictionary(plans.map { ($0.table.name, $0) }, uniquingKeysWith: { first, _ in first })
        var touched: [DataMap.TableName: Touch] = [subject.table: subject.erase == .delete ? .deleted : .masked]
        var paths: [DataMap.TableName: [SchemaCatalog.ForeignKey]] = [subject.table: []]
        for plan in plans {
            var touch: Touch = []
            if case .sides(let sides) = plan.owner {
                for side in sides { touch.insert(side.erase.mask == nil ? .deleted : .masked) }
            } else {
                if plan.table.erase.deletesRows { touch.insert(.deleted) }
                if plan.table.erase.mask != nil { touch.insert(.masked) }
            }
            touched[plan.table.name, default: []].formUnion(touch)
            for cascade in plan.cascades where cascade.deletesRows { touched[cascade.table, default: []].insert(.deleted) }
        }
        let ignoredTables = Set(map.ignored.filter { $0.column == nil }.map { catalog.qualified($0.table) })
        let ignoredColumns = Dictionary(
            map.ignored.compactMap { entry in entry.column.map { (DataMap.ColumnReference(table: catalog.qualified(entry.table), column: $0), entry) } },
            uniquingKeysWith: { first, _ in first })
        func ignoreEntry(_ key: SchemaCatalog.ForeignKey) -> DataMap.Ignored? {
            if ignoredTables.contains(key.table) { return map.ignored.first { $0.column == nil && catalog.qualified($0.table) == key.table } }
            let entries = key.columns.compactMap { ignoredColumns[.init(table: key.table, column: $0)] }
            return entries.count == key.columns.count ? entries.first : nil
        }

        // The shortest foreign-key path from the user table to each touched table, for messages.
        var grew = true
        while grew {
            grew = false
            for key in catalog.foreignKeys where touched[key.table] != nil && paths[key.table] == nil && key.table != key.referencedTable {
                if let path = paths[key.referencedTable] {
                    paths[key.table] = path + [key]
                    grew = true
                }
            }
        }
        var problems: [String] = []
        var deletedByDatabase: [SchemaCatalog.ForeignKey] = []
        var queue = Array(touched.keys).sorted()
        var checked: [DataMap.TableName: Touch] = [:]
        while !queue.isEmpty {
            let target = queue.removeFirst()
            let touch = touched[target] ?? []
            // Checked again only when the table's rows are touched in a new way (a masked
            // table that the database also deletes from).
            guard checked[target].map({ !$0.isSuperset(of: touch) }) ?? true else { continue }
            checked[target] = touch
            let deletes = !touch.isDisjoint(with: [.deleted, .deletedByDatabase])
            for key in catalog.foreignKeys(to: target) where !Checker.isLifecycleOwn(key.table) {
                let path = (paths[target] ?? []) + [key]
                let trail = path.map(\.description).joined(separator: ", then ")
                if key.table == subject.table {
                    // The user row is erased last. A reference from it into a row erased before it
                    // is the erase order's to refuse; one into the user table itself comes from
                    // other accounts' rows, which the purge must neither block on nor delete.
                    guard target == subject.table, deletes, key.onDelete != .setNull, key.onDelete != .setDefault else { continue }
                    problems.append("""
                        \(key) lets other accounts' rows point at this one, which `erase: delete` removes \
                        (ON DELETE \(key.onDelete.rawValue): \(key.onDelete == .cascade ? "the database would delete those accounts" : "the database would refuse")): \
                        make that foreign key ON DELETE SET NULL, or mask the user row instead of deleting it
                        """)
                    continue
                }
                if handledByMap(key, byName: byName, subject: subject) { continue }
                let columns = key.columns.joined(separator: ",")
                let ignored = ignoreEntry(key)
                if deletes, !key.onDelete.handlesReferencingRows {
                    if let ignored {
                        problems.append("""
                            \(ignored.description) is ignored (line \(ignored.line)), but \(key) would make every purge fail: the \
                            purge deletes rows it references and the database refuses (ON DELETE \(key.onDelete.rawValue)). Map \
                            \(shown(key.table)) instead (owned through \(columns), or in \(shown(target))'s `cascade:`), or make the key ON DELETE CASCADE or SET NULL
                            """)
                    } else {
                        problems.append(unhandled(key, target: target, trail: trail, byName: byName, subject: subject, masked: false))
                    }
                    continue
                }
                // Rows the database deletes with the target's are followed, ignored or not:
                // whatever references them must not make the purge fail either.
                if deletes, key.onDelete == .cascade {
                    deletedByDatabase.append(key)
                    touched[key.table, default: []].insert(.deletedByDatabase)
                    if paths[key.table] == nil { paths[key.table] = path }
                    queue.append(key.table)
                }
                if ignored != nil { continue }
                // A kept row that no longer names the user (its owner column masked) holds
                // nothing of hers: what references it is another user's business.
                let keepsTheUser = !touch.isDisjoint(with: .masked) && !(byName[target]?.keptRowsDisowned ?? false)
                // The database deletes the rows (CASCADE) or unlinks them (SET NULL).
                if !keepsTheUser, target != subject.table, deletes || !touch.isDisjoint(with: .masked) { continue }
                problems.append(unhandled(key, target: target, trail: trail, byName: byName, subject: subject, masked: keepsTheUser))
            }
        }
        return (deletedByDatabase, problems)
    }

    /// The message for a reference nothing handles, with the lines to write. The first
    /// suggestion is always one that deletes nobody else's row (the referencing row kept,
    /// unlinked or ignored) when the column allows it; where only a delete would do, the
    /// message says the choice is the author's.
    private func unhandled(
        _ key: SchemaCatalog.ForeignKey, target: DataMap.TableName, trail: String, byName: [DataMap.TableName: DataMapPlan.TablePlan],
        subject: DataMap.Subject, masked: Bool
    ) -> String {
        let columns = key.columns.joined(separator: ",")
        let fate = masked ? "keeps masked (the row stays, so this one would keep pointing at the user)" : "deletes"
        let (table, referenced) = (shown(key.table), shown(target))
        let nullable = key.columns.allSatisfy { catalog.table(key.table)?.column($0)?.isNotNull == false }
        let head = "\(table).\(columns) references \(referenced), whose rows the purge \(fate) (\(trail))"
        let ignore = "`- {column: \(table).\(columns), reason: …}` under `ignore:`"
        let keyedByTheUser = if case .column(let owner)? = byName[target]?.owner { [owner] == key.referencedColumns } else { false }
        let namesTheUser = target == subject.table || keyedByTheUser
        if key.table == target, !masked, byName[target] != nil {
            // A reply to one of her rows, by anyone.
            return nullable
                ? "\(head): add `{column: \(table).\(columns), set: null}` to \(table)'s `cascade:` (a row answering hers stays, no longer answering it)"
                : "\(head), and \(columns) is NOT NULL: keep a row of hers someone answered, emptied, with `erase: {delete_unless_referenced_by: [\(table).\(columns)], mask: {…}}`"
        }
        if masked {
            // The kept row stays; whatever points at it is hers when it names her by her key,
            // and otherwise may stay as well.
            if byName[key.table] != nil {
                return "\(head); \(table) is mapped through another column: list \(columns) under its `owners:` if those rows are hers, or add \(ignore) if they hold nothing of hers"
            }
            return namesTheUser
                ? "\(head): add `- {table: \(table), owner: \(columns)}` under `tables:` (her rows, erased with her), or \(ignore) if they hold nothing of hers"
                : "\(head): add \(ignore) if those rows hold nothing of hers (the row they point at stays), or map \(table) (owned `{via: \(columns), parent: \(referenced)}`) if they are hers"
        }
        let unlinked = "{column: \(columns), erase: {mask: {\(columns): null}}}"
        if let plan = byName[key.table] {
            let existing: String = switch plan.table.ownership {
            case .column(let column): column
            case .sides(let sides): sides.map { $0.value.isPlainColumn && $0.erase == .delete ? $0.column : "…" }.joined(separator: ", ")
            default: "…"
            }
            if namesTheUser {
                return nullable
                    ? "\(head); \(table) is mapped through another column (line \(plan.table.line)). Keep its rows unlinked from her: write its owner as `owners: [\(existing), \(unlinked)]` (or `\(columns)` in that list to delete them with her)"
                    : "\(head); \(table) is mapped through another column (line \(plan.table.line)), and \(columns) is NOT NULL, so its rows cannot stay without her: a choice only you can make. Both columns under `owners:` (`owners: [\(existing), \(columns)]`) delete them with her (rows that may be another user's); or mask the user row instead of deleting it"
            }
        }
        if namesTheUser {
            return nullable
                ? "\(head), but \(table) is not in the map: add `- {table: \(table), owner: \(columns), erase: {mask: {\(columns): null}}}` under `tables:` to keep its rows unlinked from her, or `- {table: \(table), owner: \(columns)}` to delete them with her"
                : "\(head), but \(table) is not in the map: add `- {table: \(table), owner: \(columns)}` under `tables:` (its rows go with her: \(columns) is NOT NULL, so they cannot stay without her; if they are shared, a site or a group, mask the user row instead of deleting it)"
        }
        // Into another table's rows the purge deletes.
        if byName[target] != nil {
            let theirs = byName[key.table] == nil
                ? "`- {table: \(table), owner: {via: \(columns), parent: \(referenced)}}` under `tables:` if they are hers (erased and exported with hers), or "
                : ""
            return nullable
                ? "\(head): add `{column: \(table).\(columns), set: null}` to \(referenced)'s `cascade:` to keep those rows, unlinked; or \(theirs)`\(table).\(columns)` in that `cascade:` to delete them with hers"
                : "\(head), and \(columns) is NOT NULL, so those rows cannot stay: a choice only you can make. Add \(theirs)`\(table).\(columns)` to \(referenced)'s `cascade:` if they are other users' (deleted with hers: a site's or a group's row too); or keep \(referenced)'s rows (mask them) instead of deleting them"
        }
        return """
            \(head), but \(table) is not in the map: add `- {table: \(table), owner: {via: \(columns), parent: \(referenced)}}` under \
            `tables:` (its rows go with those), or `- {table: \(table), reason: …}` under `ignore:`
            """
    }

    /// Whether the map itself says what happens to rows referencing the target through
    /// `key`: the referencing rows are erased as the user's (the key is how they belong to
    /// the user), or go with the target's rows (cascade), or keep them (kept by).
    private func handledByMap(_ key: SchemaCatalog.ForeignKey, byName: [DataMap.TableName: DataMapPlan.TablePlan], subject: DataMap.Subject) -> Bool {
        guard key.columns.count == 1, key.referencedColumns.count == 1 else { return false }
        let column = key.columns[0]
        let target = byName[key.referencedTable]
        // Whether the referenced column holds the subject's key (the user table's key, or
        // the owner column of a table such as auth.users that is keyed by it).
        let referencesTheKey: Bool = {
            if key.referencedTable == subject.table { return key.referencedColumns[0] == subject.key }
            if case .column(let owner) = target?.owner { return owner == key.referencedColumns[0] }
            return false
        }()
        if let target, target.keptBy.contains(where: { $0.table == key.table && $0.column == column }) { return true }
        // A cascade may hang off another cascade (a comment's likes under the user's post):
        // whichever mapped table lists it.
        if byName.values.contains(where: { plan in
            plan.cascades.contains { $0.table == key.table && $0.column == column && $0.referencedTable == key.referencedTable }
        }) { return true }
        guard let referencing = byName[key.table] else { return false }
        switch referencing.owner {
        case .column(let owner): return owner == column && referencesTheKey
        case .sides(let sides): return referencesTheKey && sides.contains { $0.column == column && $0.value.isPlainColumn }
        case .parent(let via, let parent, _, _): return via == column && parent == key.referencedTable
        case .value: return false
        }
    }

    // MARK: Columns that look like the user's key

    /// Names that usually hold a user's key, besides those the schema's own foreign keys
    /// into the user table use.
    static let userKeyNames: Set<String> = [
        "user_id", "userid", "user_uuid", "uid", "owner_id", "owner", "account_id", "member_id", "author_id", "actor_id",
        "creator_id", "created_by", "updated_by", "deleted_by", "profile_id", "person_id", "customer_id", "subject_id",
    ]

    func keyNames(subject: DataMap.Subject) -> Set<String> {
        var names = Self.userKeyNames
        for key in catalog.foreignKeys(to: subject.table) { names.formUnion(key.columns.map { $0.lowercased() }) }
        var singular = subject.table.name.split(separator: "_").last.map(String.init) ?? subject.table.name
        if singular.hasSuffix("s") { singular.removeLast() }
        names.insert(singular.lowercased() + "_id")
        return names
    }

    func suspects(plans: [DataMapPlan.TablePlan], subject: DataMap.Subject, keyKind: SchemaCatalog.ColumnKind) -> [DataMapPlan.Suspect] {
        let names = keyNames(subject: subject)
        var covered = Set<DataMap.ColumnReference>()
        for plan in plans {
            switch plan.owner {
            case .column(let column): covered.insert(.init(table: plan.table.name, column: column))
            case .value(let value): covered.insert(.init(table: plan.table.name, column: value.column))
            case .sides(let sides): for side in sides { covered.insert(.init(table: plan.table.name, column: side.column)) }
            case .parent(let via, _, _, _): covered.insert(.init(table: plan.table.name, column: via))
            }
        }
        for key in catalog.foreignKeys { for column in key.columns { covered.insert(.init(table: key.table, column: column)) } }
        covered.insert(.init(table: subject.table, column: subject.key))
        if let password = subject.password, let table = password.table, let key = password.key { covered.insert(.init(table: table, column: key)) }
        let ignoredTables = Set(map.ignored.filter { $0.column == nil }.map { catalog.qualified($0.table) })
        for entry in map.ignored { if let column = entry.column { covered.insert(.init(table: catalog.qualified(entry.table), column: column)) } }

        var found: [DataMapPlan.Suspect] = []
        for table in catalog.tables.values.sorted(by: { $0.name < $1.name })
        where !Checker.isLifecycleOwn(table.name) && !ignoredTables.contains(table.name) {
            for column in table.columns where names.contains(column.name.lowercased()) && !covered.contains(.init(table: table.name, column: column.name)) {
                guard Self.mayHoldKey(column, keyKind: keyKind) else { continue }
                let mapped = plans.first { $0.table.name == table.name }
                found.append(.init(
                    table: table.name, column: column.name, declaredType: column.declaredType, jsonKey: nil,
                    why: mapped == nil
                        ? "looks like it holds the user's key, but no foreign key says so and the map neither maps nor ignores it"
                        : "looks like it holds the user's key, but the table is mapped through another column",
                    suggestion: mapped == nil
                        ? "- {table: \(shown(table.name)), owner: \(column.name)}   (under tables:) or - {column: \(shown(table.name)).\(column.name), reason: …}   (under ignore:)"
                        : "it beside the table's owner under `owners:`, or - {column: \(shown(table.name)).\(column.name), reason: …}   (under ignore:)"))
            }
        }
        return found
    }

    /// Whether a column of this type could hold the subject's key: integers for an
    /// integer key, text or a uuid (or another type compared as text) for a text key.
    static func mayHoldKey(_ column: SchemaCatalog.Column, keyKind: SchemaCatalog.ColumnKind) -> Bool {
        switch column.kind {
        case .integer: return keyKind == .integer
        case .text: return true
        case .other:
            let declared = column.declaredType.lowercased()
            return declared == "uuid" || (keyKind != .integer && !declared.hasPrefix("json"))
        default: return false
        }
    }

    // MARK: Parts

    /// Each part names mapped tables (never the user table), sets only columns of the user
    /// row, and can be deleted on its own: every foreign key into a row it deletes comes
    /// from a row it deletes too (its own tables, their cascades), is handled by the
    /// database (ON DELETE CASCADE / SET NULL), keeps the row (`delete_unless_referenced_by`)
    /// or is a user-row column the part sets to null. Otherwise the part's deletion would
    /// fail on the first such row, or leave a reference to nothing.
    func parts(plans: [DataMapPlan.TablePlan], subject: DataMap.Subject, subjectTable: SchemaCatalog.Table) throws -> [DataMap.Part] {
        let byName = Dictionary(plans.map { ($0.table.name, $0) }, uniquingKeysWith: { first, _ in first })
        func deletes(_ plan: DataMapPlan.TablePlan) -> Bool {
            if case .sides(let sides) = plan.owner { return sides.contains { $0.erase.deletesRows } }
            return plan.table.erase.deletesRows
        }
        var parts: [DataMap.Part] = []
        // Every part's problem in one run.
        var problems = MapProblems()
        for written in map.parts {
            do {
                var part = written
                part.tables = written.tables.map(catalog.qualified)
                let place = "part '\(part.name)'"
                for (name, shownName) in zip(part.tables, written.tables) {
                    if name == subject.table {
                        throw fail(part.line, """
                            \(place): \(shownName) is the user table; deleting its row closes the account (that is a deletion \
                            request). Name the columns the part empties under `user_columns:`
                            """)
                    }
                    guard byName[name] != nil else {
                        throw fail(part.line, "\(place): \(shownName) is not a table mapped under `tables:`; a part deletes rows the map already erases")
                    }
                }
                try mask(part.userColumns, of: subjectTable, key: [subject.key], line: part.line)
                if let password = subject.password, password.table == nil, part.userColumns.contains(where: { $0.column == password.column }) {
                    throw fail(part.line, "\(place): the password column \(password.column) cannot be part of a part: without it the account cannot be signed in to")
                }
                let inPart = Set(part.tables)
                let partPlans = part.tables.compactMap { byName[$0] }
                var handled = Set<DataMap.ColumnReference>()
                var deleted = Set<DataMap.TableName>()
                for plan in partPlans {
                    if deletes(plan) { deleted.insert(plan.table.name) }
                    for cascade in plan.cascades {
                        if cascade.deletesRows { deleted.insert(cascade.table) }
                        handled.insert(.init(table: cascade.table, column: cascade.column))
                    }
                    for kept in plan.keptBy { handled.insert(.init(table: kept.table, column: kept.column)) }
                }
                // Rows the database deletes with them (ON DELETE CASCADE), followed as far as it goes:
                // a mapped table's rows would go unseen (uncounted, their files never deleted), and
                // a reference into any of them must be handled as well.
                var frontier = Array(deleted)
                while let table = frontier.popLast() {
                    for key in catalog.foreignKeys(to: table) where key.onDelete == .cascade && !inPart.contains(key.table) && !deleted.contains(key.table) {
                        if byName[key.table] != nil {
                            throw fail(part.line, """
                                \(place) deletes rows of \(shown(table)), and the database deletes rows of \(shown(key.table)) with \
                                them (\(key), ON DELETE CASCADE), a mapped table the part does not name: add \(shown(key.table)) to \
                                the part's tables, so its rows and files are erased and counted
                                """)
                        }
                        deleted.insert(key.table)
                        frontier.append(key.table)
                    }
                }
                // A table owned through a parent the part deletes would be left with rows no
                // predicate finds any more (no export, no purge): whatever its foreign key says.
                for plan in plans where !inPart.contains(plan.table.name) && !handledTables(plan.table.name, partPlans) {
                    if case .parent(_, let parent, _, _) = plan.owner, deleted.contains(parent) {
                        throw fail(part.line, """
                            \(place) deletes rows of \(shown(parent)), through which \(shown(plan.table.name)) is owned \
                            (`owner: {via, parent}`): its rows would be left with nothing to find them by. Add \
                            \(shown(plan.table.name)) to the part's tables
                            """)
                    }
                }
                let nulled = Set(part.userColumns.filter { $0.value == .null }.map(\.column))
                for table in deleted.sorted() {
                    for key in catalog.foreignKeys(to: table) where !key.onDelete.handlesReferencingRows && !inPart.contains(key.table) {
                        if key.columns.count == 1, handled.contains(.init(table: key.table, column: key.columns[0])) { continue }
                        if key.table == subject.table {
                            guard !Set(key.columns).isSubset(of: nulled) else { continue }
                            throw fail(part.line, """
                                \(place) deletes rows of \(shown(table)) that the user row references (\(key)): add \
                                `user_columns: {\(key.columns[0]): null}` to the part
                                """)
                        }
                        let what = byName[key.table] != nil ? "a mapped table the part does not name" : "a table the part does not delete"
                        throw fail(part.line, """
                            \(place) deletes rows of \(shown(table)), which \(key) references from \(what): deleting the part \
                            would fail on the first such row. Add \(shown(key.table)) to the part's tables, or make the foreign \
                            key ON DELETE CASCADE or SET NULL
                            """)
                    }
                }
                parts.append(part)
            } catch {
                problems.note(error)
            }
        }
        try problems.raise("`parts:`")
        // Chosen together, parts set the user row's columns together: never two ways.
        for (index, part) in parts.enumerated() {
            for other in parts[..<index] {
                for value in part.userColumns {
                    if let set = other.userColumns.first(where: { $0.column == value.column }), set.value != value.value {
                        throw fail(part.line, "part '\(part.name)' sets \(value.column) of the user row, and part '\(other.name)' sets it to something else: both may be chosen at once")
                    }
                }
            }
        }
        return parts
    }

    /// Whether a part's tables delete the table's rows as cascades (`cascade:`).
    private func handledTables(_ name: DataMap.TableName, _ partPlans: [DataMapPlan.TablePlan]) -> Bool {
        partPlans.contains { $0.cascades.contains { $0.table == name && $0.deletesRows } }
    }

    // MARK: Kept rows

    /// A row that is kept (masked) must not keep pointing at a row erasure deletes. On a
    /// row naming several users, the other sides point at users who stay.
    func keptRowsReferences(plans: [DataMapPlan.TablePlan], subject: DataMap.Subject) -> [String] {
        var problems: [String] = []
        let deletedTables = Set(plans.filter(\.deletesRows).map(\.table.name)
            + (subject.erase == .delete ? [subject.table] : []))
        for plan in plans {
            var masks: [(mask: DataMap.Mask, otherSides: Set<String>)] = []
            if let mask = plan.table.erase.mask { masks.append((mask, [])) }
            if case .sides(let sides) = plan.table.ownership {
                for side in sides { if let mask = side.erase.mask { masks.append((mask, Set(sides.map(\.column)).subtracting([side.column]))) } }
            }
            for (mask, otherSides) in masks {
                let nulled = Set(mask.filter { $0.value == .null }.map(\.column))
                for key in catalog.foreignKeys(from: plan.table.name)
                where deletedTables.contains(key.referencedTable) && !key.onDelete.handlesReferencingRows
                    && !Set(key.columns).isSubset(of: nulled) && key.referencedTable != plan.table.name
                    && !(key.referencedTable == subject.table && Set(key.columns).isSubset(of: otherSides))
                    && !handledByCascade(key, plans: plans) {
                    let nullable = key.columns.allSatisfy { plan.catalog.column($0)?.isNotNull == false }
                    problems.append("""
                        \(map.place(plan.table.line)): \(shown(plan.table.name)) rows are kept (masked) but \(key) still points at rows \
                        erasure deletes: \(nullable
                            ? "mask \(key.columns.joined(separator: ", ")) to null as well, or add `{column: \(shown(plan.table.name)).\(key.columns.joined(separator: ",")), set: null}` to \(shown(key.referencedTable))'s `cascade:`"
                            : "\(key.columns.joined(separator: ", ")) is NOT NULL, so the kept row cannot stop pointing there: delete these rows instead of masking them, or keep \(shown(key.referencedTable))'s rows")
                        """)
                }
            }
        }
        return problems
    }

    /// Whether a `cascade:` entry (deleting, or `set:`) takes care of the rows referencing
    /// the erased ones through `key` before they go.
    private func handledByCascade(_ key: SchemaCatalog.ForeignKey, plans: [DataMapPlan.TablePlan]) -> Bool {
        key.columns.count == 1 && plans.contains { plan in
            plan.cascades.contains { $0.table == key.table && $0.column == key.columns[0] && $0.referencedTable == key.referencedTable }
        }
    }

    // MARK: Order

    /// Children before parents, from the foreign keys between mapped tables. A key the
    /// database handles itself (ON DELETE CASCADE / SET NULL) and a table's reference to
    /// itself (replies) do not constrain the order; a cycle of the others is refused.
    func eraseOrder(_ plans: [DataMapPlan.TablePlan], subject: DataMap.Subject) throws -> [DataMapPlan.TablePlan] {
        // Where it can, a mapped table goes before a mapped table it references even when
        // the database would delete its rows itself (ON DELETE CASCADE): the purge then
        // erases and counts them, rather than the database removing them unseen.
        if let preferred = try? eraseOrder(plans, subject: subject, keys: catalog.foreignKeys) { return preferred }
        return try eraseOrder(plans, subject: subject, keys: catalog.foreignKeys.filter { !$0.onDelete.handlesReferencingRows })
    }

    private func eraseOrder(_ plans: [DataMapPlan.TablePlan], subject: DataMap.Subject, keys: [SchemaCatalog.ForeignKey]) throws -> [DataMapPlan.TablePlan] {
        let names = plans.map(\.table.name)
        // Rows of a mask-only table never go, so nothing has to be erased before them.
        let deleting = Set(plans.filter(\.deletesRows).map(\.table.name))
        var mustPrecede: [DataMap.TableName: Set<DataMap.TableName>] = [:]  // table → tables that reference it
        // A table owned through a parent finds its rows through the parent's: it goes first,
        // declared foreign key or not, and whether the parent's rows are deleted or masked.
        for plan in plans {
            if case .parent(_, let parent, _, _) = plan.owner, parent != plan.table.name { mustPrecede[parent, default: []].insert(plan.table.name) }
        }
        for key in keys where key.table != key.referencedTable && deleting.contains(key.referencedTable) {
            if names.contains(key.table) {
                mustPrecede[key.referencedTable, default: []].insert(key.table)
            }
            guard !key.onDelete.handlesReferencingRows else { continue }
            if key.table == subject.table {
                throw fail(subject.line, """
                    \(key): the user row references \(key.referencedTable), whose rows are erased before it; make that \
                    foreign key ON DELETE SET NULL, or leave \(key.referencedTable) to its own erase without this reference
                    """)
            }
        }
        var ordered: [DataMapPlan.TablePlan] = []
        var remaining = plans
        while !remaining.isEmpty {
            let done = Set(ordered.map(\.table.name))
            guard let index = remaining.firstIndex(where: { plan in
                (mustPrecede[plan.table.name] ?? []).allSatisfy { done.contains($0) }
            }) else {
                let stuck = Set(remaining.map(\.table.name))
                let edges = catalog.foreignKeys.filter {
                    stuck.contains($0.table) && stuck.contains($0.referencedTable) && $0.table != $0.referencedTable
                        && !$0.onDelete.handlesReferencingRows
                }
                throw fail(nil, """
                    tables \(stuck.sorted().map(\.description).joined(separator: ", ")) reference each other in a cycle no \
                    delete order can satisfy (\(edges.map(\.description).joined(separator: "; "))): make one of these \
                    foreign keys ON DELETE SET NULL or CASCADE, or mask one table instead of deleting it
                    """)
            }
            ordered.append(remaining.remove(at: index))
        }
        return ordered
    }
}

extension DataMap.Erase {
    /// Whether erasure takes the files a file column names: the row goes, or its mask
    /// empties the column. A kept row keeps the files of the columns its mask leaves.
    func takesFiles(of column: String) -> Bool {
        guard case .mask(let mask) = self else { return true }
        return mask.contains { $0.column == column }
    }

    /// Whether erasure may delete rows (a mask-only table keeps every row).
    var deletesRows: Bool {
        if case .mask = self { return false }
        return true
    }
}
