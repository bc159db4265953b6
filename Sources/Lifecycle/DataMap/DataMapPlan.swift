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
    }

    public let map: DataMap
    public let catalog: SchemaCatalog
    public let subject: DataMap.Subject
    public let subjectCatalog: SchemaCatalog.Table
    /// Integer or text: how the subject's key is bound.
    public let subjectKeyKind: SchemaCatalog.ColumnKind
    /// Mapped tables in erase order: every table before the tables it references.
    public let tables: [TablePlan]

    public init(map: DataMap, catalog: SchemaCatalog) throws {
        var checker = Checker(map: map, catalog: catalog)
        let (subject, subjectTable, keyKind) = try checker.subject()
        let plans = try checker.tables(subject: subject, keyKind: keyKind)
        try checker.coverage(plans: plans, subject: subject)
        try checker.otherUsersReferences(plans: plans, subject: subject)
        try checker.keptRowsReferences(plans: plans, subject: subject)
        self.map = map
        self.catalog = catalog
        self.subject = subject
        self.subjectCatalog = subjectTable
        self.subjectKeyKind = keyKind
        self.tables = try checker.eraseOrder(plans, subject: subject)
    }

    public func plan(for name: DataMap.TableName) -> TablePlan? {
        let qualified = catalog.qualified(name)
        return tables.first { $0.table.name == qualified }
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

    func fail(_ line: Int?, _ message: String) -> LifecycleError {
        LifecycleError(.badInput, "\(map.source)\(line.map { ":\($0)" } ?? ""): \(message)")
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
                throw fail(line, "\(table.name).\(name) is NOT NULL, so masking it to null would fail every purge: give it a value such as \"deleted-{key}\"")
            }
            if key.contains(name) { throw fail(line, "\(table.name).\(name) is part of the key and cannot be masked") }
            if case .template = value, column.kind != .text, column.kind != .other {
                throw fail(line, "\(table.name).\(name) is not text, so its mask cannot contain {key}")
            }
            // A value the column cannot hold as written would fail every purge on PostgreSQL,
            // or be stored converted on SQLite and never again read as masked.
            if case .text(let text) = value, [.integer, .real, .boolean].contains(column.kind) {
                throw fail(line, "\(table.name).\(name) is \(column.declaredType), so its mask must be a number or true/false, not \(String(reflecting: text))")
            }
        }
    }

    // MARK: The subject

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
        }
        for name in subject.columns + subject.blobs { _ = try column(name, of: table, line: line, role: "column") }
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
        if let mask = subject.erase.mask {
            try self.mask(mask, of: table, key: [subject.key], line: line)
            if let blob = subject.blobs.first(where: { name in !mask.contains { $0.column == name && $0.value == .null } }) {
                throw fail(line, "the user row is kept (masked) but its file column \(blob) is not masked to null: the purge deletes the file")
            }
        }
        return (subject, table, key.kind == .integer ? .integer : .text)
    }

    // MARK: Tables

    func tables(subject: DataMap.Subject, keyKind: SchemaCatalog.ColumnKind) throws -> [DataMapPlan.TablePlan] {
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
            case .sides(let sides):
                for side in sides {
                    try ownerColumn(side.column, of: table, keyKind: keyKind, line: entry.line)
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
        for entry in map.tables {
            var table = entry
            table.name = catalog.qualified(entry.name)
            let info = try self.table(entry.name, line: entry.line, role: "table")
            let ownerPath = try owner(of: table.name, trail: [])
            let key = entry.key ?? info.primaryKey
            guard !key.isEmpty else {
                throw fail(entry.line, "table \(table.name) has no primary key: list the columns that identify a row under `key:`")
            }
            for name in key + entry.columns + entry.blobs + entry.orderBy {
                _ = try column(name, of: info, line: entry.line, role: "column")
            }
            for name in entry.blobs where ![.text, .other].contains(info.column(name)?.kind) {
                throw fail(entry.line, "blob column \(table.name).\(name) is \(info.column(name)?.declaredType ?? "?"); it must hold text (blob keys)")
            }
            if let mask = entry.erase.mask { try self.mask(mask, of: info, key: key, line: entry.line) }
            var cascades: [DataMapPlan.Cascade] = []
            var cascaded: [SchemaCatalog.Table] = [info]
            for item in entry.cascade {
                let cascade = try reference(item, to: cascaded, line: entry.line, role: "cascade")
                cascades.append(cascade)
                if let table = catalog.table(cascade.table), !cascaded.contains(where: { $0.name == table.name }) { cascaded.append(table) }
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
            for cascade in cascades where (mapped[cascade.table]?.key ?? catalog.table(cascade.table)?.primaryKey ?? []).isEmpty {
                throw fail(entry.line, "cascade: \(cascade.table) has no primary key, so its rows cannot be deleted in batches; map it with `key:`")
            }
            // A kept row must not name a file the purge deletes.
            if let mask = entry.erase.mask, let blob = entry.blobs.first(where: { name in !mask.contains { $0.column == name && $0.value == .null } }) {
                throw fail(entry.line, "\(table.name) rows are kept (masked) but their file column \(blob) is not masked to null: the purge deletes the file")
            }
            var keptBy: [DataMapPlan.Cascade] = []
            if case .deleteUnlessReferenced(let references, _) = entry.erase {
                keptBy = try references.map { try reference($0, to: [info], line: entry.line, role: "delete_unless_referenced_by") }
            }
            table.cascade = cascades.map { .init(table: $0.table, column: $0.column) }
            plans.append(.init(table: table, key: key, owner: ownerPath, cascades: cascades, keptBy: keptBy, catalog: info))
        }
        return plans
    }

    private func ownerColumn(_ name: String, of table: SchemaCatalog.Table, keyKind: SchemaCatalog.ColumnKind, line: Int) throws {
        let column = try column(name, of: table, line: line, role: "owner")
        let kind: SchemaCatalog.ColumnKind = column.kind == .integer ? .integer : .text
        guard kind == keyKind || column.kind == .other else {
            throw fail(line, "owner \(table.name).\(name) is \(column.declaredType) but the subject key is \(keyKind == .integer ? "an integer" : "text")")
        }
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

    /// Every table with a foreign-key path to the subject is mapped or ignored with a reason:
    /// otherwise its rows would be left behind, or block the purge.
    func coverage(plans: [DataMapPlan.TablePlan], subject: DataMap.Subject) throws {
        let handled = Set(plans.map(\.table.name) + map.ignored.map { catalog.qualified($0.table) } + [subject.table])
        for entry in map.ignored where catalog.table(entry.table) == nil {
            throw fail(nil, "ignored table \(entry.table) does not exist in the database")
        }
        // Breadth first from the subject, so the path named is a shortest one.
        var paths: [DataMap.TableName: [SchemaCatalog.ForeignKey]] = [subject.table: []]
        var frontier = [subject.table]
        while !frontier.isEmpty {
            var next: [DataMap.TableName] = []
            for target in frontier {
                for key in catalog.foreignKeys(to: target) where paths[key.table] == nil && !Checker.isLifecycleOwn(key.table) {
                    paths[key.table] = [key] + (paths[target] ?? [])
                    next.append(key.table)
                }
            }
            frontier = next
        }
        for (name, path) in paths.sorted(by: { $0.key < $1.key }) where !handled.contains(name) {
            throw fail(nil, """
                table \(name) references the subject (\(path.map(\.description).joined(separator: ", then "))) but is not in the map: \
                add it under `tables:` (with how its rows belong to the user and what erasure does), or under `ignore:` with a reason
                """)
        }
    }

    // MARK: Other users' rows

    /// A foreign key from rows that may be another user's, into rows erasure deletes,
    /// must be handled, or deleting this user's row would fail (or orphan theirs).
    func otherUsersReferences(plans: [DataMapPlan.TablePlan], subject: DataMap.Subject) throws {
        let byName = Dictionary(plans.map { ($0.table.name, $0) }, uniquingKeysWith: { first, _ in first })
        for key in catalog.foreignKeys where !key.onDelete.handlesReferencingRows && !Checker.isLifecycleOwn(key.table) {
            let column = key.columns.count == 1 ? key.columns[0] : nil
            if key.referencedTable == subject.table {
                guard subject.erase == .delete else { continue }  // The tombstone row stays.
                if let plan = byName[key.table], let column, plan.owns(throughSubjectColumn: column) { continue }
                if map.ignored.contains(where: { catalog.qualified($0.table) == key.table }) { continue }
                throw fail(subject.line, """
                    \(key) lets rows that are not this user's point at the user row, which `erase: delete` removes: \
                    make \(key.table) owned through that column, or mask the subject instead of deleting it
                    """)
            }
            // Rows only ever masked stay where they are.
            guard let target = byName[key.referencedTable], target.table.erase.deletesRows else { continue }
            if let plan = byName[key.table], let column, plan.isOwnershipPath(column: column, to: key.referencedTable) { continue }
            if let column, target.cascades.contains(where: { $0.table == key.table && $0.column == column }) { continue }
            if let column, target.keptBy.contains(where: { $0.table == key.table && $0.column == column }) { continue }
            throw fail(target.table.line, """
                \(key): other users' \(key.table) rows may reference this user's \(target.table.name) rows, which erasure \
                deletes. Add '\(key.table).\(key.columns.joined(separator: ","))' to \(target.table.name)'s `cascade:` (they go \
                with it) or use `erase: {delete_unless_referenced_by: [\(key.table).\(key.columns.joined(separator: ","))], mask: {…}}`
                """)
        }
    }

    /// A row that is kept (masked) must not keep pointing at a row erasure deletes. On a
    /// row naming several users, the other sides point at users who stay.
    func keptRowsReferences(plans: [DataMapPlan.TablePlan], subject: DataMap.Subject) throws {
        let deletedTables = Set(plans.filter { $0.table.erase.deletesRows }.map(\.table.name)
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
                    && !(key.referencedTable == subject.table && Set(key.columns).isSubset(of: otherSides)) {
                    throw fail(plan.table.line, """
                        \(plan.table.name) rows are kept (masked) but \(key) still points at rows erasure deletes: \
                        mask \(key.columns.joined(separator: ", ")) to null as well
                        """)
                }
            }
        }
    }

    // MARK: Order

    /// Children before parents, from the foreign keys between mapped tables. A key the
    /// database handles itself (ON DELETE CASCADE / SET NULL) and a table's reference to
    /// itself (replies) do not constrain the order; a cycle of the others is refused.
    func eraseOrder(_ plans: [DataMapPlan.TablePlan], subject: DataMap.Subject) throws -> [DataMapPlan.TablePlan] {
        let names = plans.map(\.table.name)
        // Rows of a mask-only table never go, so nothing has to be erased before them.
        let deleting = Set(plans.filter { $0.table.erase.deletesRows }.map(\.table.name))
        var mustPrecede: [DataMap.TableName: Set<DataMap.TableName>] = [:]  // table → tables that reference it
        for key in catalog.foreignKeys where !key.onDelete.handlesReferencingRows && key.table != key.referencedTable
            && deleting.contains(key.referencedTable) {
            if names.contains(key.table) {
                mustPrecede[key.referencedTable, default: []].insert(key.table)
            }
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
    /// Whether erasure may delete rows (a mask-only table keeps every row).
    var deletesRows: Bool {
        if case .mask = self { return false }
        return true
    }
}

extension DataMapPlan.TablePlan {
    /// Whether rows are the subject's through `column` pointing straight at the subject key.
    func owns(throughSubjectColumn column: String) -> Bool {
        switch owner {
        case .column(let name): name == column
        case .sides(let sides): sides.contains { $0.column == column }
        case .parent: false
        }
    }

    /// Whether `column` is how this table's rows belong to the user through `parent`.
    func isOwnershipPath(column: String, to parent: DataMap.TableName) -> Bool {
        if case .parent(let via, let parentName, _, _) = owner { return via == column && parentName == parent }
        return false
    }
}
