import Foundation

/// Writes a starting data map from the app's own rules (`RelationGraph`): every table
/// whose rows deleting the user reaches, erased as those rules say. A CASCADE from the
/// user makes a table hers (deleted); SET_NULL keeps the row with the column emptied
/// (masked); a CASCADE from a row she owns makes a table hers through that row, and other
/// users' rows hanging off hers go with them (`cascade:`) or are unlinked (`set:`). A rule
/// that refuses the deletion (PROTECT, RESTRICT, NO ACTION) becomes a `decide:` line that
/// `map check` refuses until the author has chosen. Every entry carries a comment saying
/// which rule it comes from.
public struct DataMapGenerator: Sendable {
    public let graph: RelationGraph
    public let catalog: SchemaCatalog
    public let presets: [String]

    public struct Result: Sendable {
        public var yaml: String
        /// Tables the map itself lists (the presets' aside).
        public var tables: Int
        /// The choices left to the author, one line each.
        public var decisions: [String]
        public var lineCount: Int { yaml.split(separator: "\n", omittingEmptySubsequences: false).count - (yaml.hasSuffix("\n") ? 1 : 0) }
    }

    public init(graph: RelationGraph, catalog: SchemaCatalog, presets: [String]) {
        self.graph = graph
        self.catalog = catalog
        self.presets = presets
    }

    private func name(_ text: String) -> DataMap.TableName {
        let parts = text.split(separator: ".", maxSplits: 1).map(String.init)
        return catalog.qualified(parts.count == 2 ? .init(schema: parts[0], name: parts[1]) : .init(name: text))
    }

    private func shown(_ text: String) -> String { shown(name(text)) }

    private func shown(_ table: DataMap.TableName) -> String {
        table.schema == catalog.defaultSchema ? table.name : table.description
    }

    /// How one table's rows are reached from the user.
    private struct Reach {
        var direct: [RelationGraph.Relation] = []
        var viaParent: [RelationGraph.Relation] = []
        var generic: [RelationGraph.GenericRelation] = []
    }

    private enum Item {
        case delete(RelationGraph.Relation)
        case set(RelationGraph.Relation, DataMap.MaskValue)
    }

    public func generate() throws -> Result {
        let user = shown(graph.user.table)
        guard let userTable = catalog.table(name(user)) else {
            throw LifecycleError(.badInput, "the user table \(user) is not in the database: migrate the project first, or name the database it uses")
        }
        // Tables the included presets map: written by the preset, which also knows what the
        // app's rules cannot say (sessions to sign out, token columns that name the user).
        var presetTables: [String: String] = [:]
        for preset in presets.compactMap(DataMapPreset.named) {
            let entries = try DataMap.preset(preset, lineBase: 0)
            for table in entries.tables where catalog.table(catalog.qualified(table.name)) != nil {
                presetTables[shown(catalog.qualified(table.name))] = preset.name
            }
            for entry in entries.ignored where entry.column == nil { presetTables[shown(catalog.qualified(entry.table))] = preset.name }
        }
        let relations = graph.relations.filter { relation in
            catalog.table(name(relation.table)) != nil && catalog.table(name(relation.referencedTable)) != nil
                && !isLifecycleOwn(relation.table)
        }.map { relation -> RelationGraph.Relation in
            var shownRelation = relation
            shownRelation.table = shown(relation.table)
            shownRelation.referencedTable = shown(relation.referencedTable)
            return shownRelation
        }

        // A table the user's key references one to one (Supabase's auth.users, for a profile
        // table keyed by its id) is the user too: what references it names her.
        let keyedLikeUser = Set(catalog.foreignKeys(from: userTable.name).filter { key in
            key.columns == [graph.user.key] && catalog.table(key.referencedTable)?.primaryKey == key.referencedColumns
        }.map { shown($0.referencedTable) })
        var reach: [String: Reach] = [:]
        var deleted: Set<String> = [user]
        var queue = [user] + keyedLikeUser.sorted()
        var order: [String] = []
        // A preset's tables are the platform's: the preset says what becomes of them, and
        // `map check` names any app table hanging off them; they are not followed, but for a
        // table keyed like the user, whose referencing app tables are hers.
        func followed(_ relation: RelationGraph.Relation) -> Bool {
            relation.table != user && relation.table != relation.referencedTable && !keyedLikeUser.contains(relation.table)
                && presetTables[relation.table] == nil
                && (presetTables[relation.referencedTable] == nil || keyedLikeUser.contains(relation.referencedTable))
        }
        // Which tables deleting the user reaches, and how: breadth first, as Django's collector
        // and the database's own actions go.
        while !queue.isEmpty {
            let target = queue.removeFirst()
            for relation in relations where relation.referencedTable == target && followed(relation) {
                if reach[relation.table] == nil { order.append(relation.table) }
                if target == user || keyedLikeUser.contains(target) { reach[relation.table, default: Reach()].direct.append(relation) } else { reach[relation.table, default: Reach()].viaParent.append(relation) }
                // A rule that refuses the delete is written as a delete, with the choice to make.
                if relation.action == .cascade || relation.action.blocks, deleted.insert(relation.table).inserted { queue.append(relation.table) }
            }
        }
        for generic in graph.generic where shown(generic.referencedTable) == user && catalog.table(name(generic.table)) != nil {
            let table = shown(generic.table)
            if reach[table] == nil { order.append(table) }
            reach[table, default: Reach()].generic.append(generic)
            deleted.insert(table)
        }
        var notes: [String] = []
        for generic in graph.generic where shown(generic.referencedTable) != user && deleted.contains(shown(generic.referencedTable)) {
            notes.append("\(generic.origin ?? generic.table): Django deletes \(shown(generic.table)) rows naming a deleted \(shown(generic.referencedTable)) row through a generic relation; a map cannot cascade through one yet: map them if they hold her data")
        }

        // A table owned through a parent is found by that one relation; its other routes are
        // the other parent's `cascade:`. Only a parent whose rows of hers are deleted will do:
        // one she is only a masked side of (a document she reviewed) keeps its rows, and what
        // hangs off them is not hers.
        var parentOf: [String: RelationGraph.Relation] = [:]
        func deletesHerRows(_ table: String) -> Bool {
            guard let reached = reach[table] else { return false }
            if reached.direct.isEmpty && reached.generic.isEmpty { return parentOf[table] != nil }
            return deletesRows(table, reached)
        }
        func runsThrough(_ table: String, from parent: String) -> Bool {
            var current: String? = parent
            var steps = 0
            while let next = current, steps < order.count + 1 {
                if next == table { return true }
                current = parentOf[next]?.referencedTable
                steps += 1
            }
            return false
        }
        for table in order where reach[table]!.direct.isEmpty && reach[table]!.generic.isEmpty {
            let routes = (reach[table]!.viaParent.filter { $0.action == .cascade } + reach[table]!.viaParent.filter(\.action.blocks))
                .filter { deletesHerRows($0.referencedTable) && !runsThrough(table, from: $0.referencedTable) }
            if let chosen = routes.first(where: { !reach[$0.referencedTable, default: Reach()].direct.isEmpty }) ?? routes.first {
                parentOf[table] = chosen
            }
        }
        let mapped = Set(order.filter { !reach[$0]!.direct.isEmpty || !reach[$0]!.generic.isEmpty || parentOf[$0] != nil })

        for relation in relations where relation.parentLink == true && mapped.contains(relation.table) && deletesRows(relation.table, reach[relation.table]!) {
            notes.append("\(rule(relation)): Django deletes the \(relation.referencedTable) row of each \(relation.table) row it deletes (multi-table inheritance); a map cannot say so yet, so those rows stay: erase them yourself, or leave the model's parent out")
        }
        var decisions: [String] = []
        var text = """
            # Generated by `lifecycle map init` from \(graph.source) on \(Self.today()).
            # Each entry says which rule it comes from. Read it through, make the choices marked
            # `decide:`, then run `lifecycle map check` (it refuses the map until they are made).
            version: 2

            """
        if !presets.isEmpty { text += "include: [\(presets.joined(separator: ", "))]\n" }
        text += "\n" + subject(userTable, keyedLikeUser: keyedLikeUser.sorted()) + "\n"
        if !presetTables.isEmpty {
            let byPreset = Dictionary(grouping: presetTables.keys.sorted(), by: { presetTables[$0]! })
            for preset in presets where byPreset[preset] != nil {
                text += wrapped("From the preset \(preset) (as it maps them, which may erase more than the app's rules: sessions and tokens name her): \(byPreset[preset]!.joined(separator: ", ")).")
            }
        }
        text += "tables:\n"
        var written = 0
        for table in order where mapped.contains(table) && presetTables[table] == nil {
            let reached = reach[table]!
            guard let info = catalog.table(name(table)) else { continue }
            var entry: [String] = []
            var comments: [String] = []
            var decide: [String] = []
            entry.append("- table: \(table)")
            if !reached.direct.isEmpty || !reached.generic.isEmpty {
                // Each column naming her: kept as it is (the row deleted), or its mask (the row kept).
                var sides: [(column: String, mask: DataMap.MaskValue?, generic: String?)] = []
                for relation in reached.direct {
                    comments.append("\(rule(relation)): \(fate(relation))")
                    switch relation.action {
                    case .cascade:
                        sides.append((relation.column, nil, nil))
                    case .setNull where relation.nullable ?? (info.column(relation.column)?.isNotNull == false):
                        sides.append((relation.column, .null, nil))
                    case .setDefault where relation.value != nil:
                        sides.append((relation.column, relation.value!.maskValue, nil))
                    case .setDefault where graph.enforcedByDatabase == true:
                        continue
                    default:
                        sides.append((relation.column, nil, nil))
                        decide.append("""
                            \(rule(relation)): deleting the user is refused while such a row exists. \
                            Delete her rows with the account (as written), or keep them unlinked (mask \(relation.column) to null, \
                            if the column takes null)
                            """)
                    }
                }
                for generic in reached.generic {
                    comments.append("\(generic.origin ?? generic.table): a GenericRelation on the user model → deleted with her")
                    sides.append((generic.objectIDColumn, nil, "{column: \(generic.objectIDColumn), type: {column: \(generic.typeColumn), table: \(shown(generic.typeTable)), match: {app_label: \(generic.appLabel), model: \(generic.model)}}}"))
                }
                if sides.isEmpty { continue }
                if sides.count == 1 {
                    entry.append("  owner: \(sides[0].generic ?? sides[0].column)")
                    if let mask = sides[0].mask { entry.append("  erase: {mask: {\(sides[0].column): \(mask.shownInMap)}}") }
                } else {
                    entry.append("  owners:")
                    for side in sides {
                        if let generic = side.generic {
                            entry.append("    - \(generic)")
                        } else if let mask = side.mask {
                            entry.append("    - {column: \(side.column), erase: {mask: {\(side.column): \(mask.shownInMap)}}}")
                        } else {
                            entry.append("    - \(side.column)")
                        }
                    }
                }
            } else if let parent = parentOf[table] {
                comments.append("\(rule(parent)): hers through her \(parent.referencedTable) rows")
                entry.append("  owner: {via: \(parent.column), parent: \(parent.referencedTable)}")
                if parent.action.blocks {
                    decide.append("""
                        \(rule(parent)): deleting her \(parent.referencedTable) rows is refused while such a row exists. Delete \
                        them with hers (as written), or leave the table out of the map and add \
                        `{column: \(table).\(parent.column), set: null}` to \(parent.referencedTable)'s `cascade:` (if the column takes null)
                        """)
                }
            }
            if info.primaryKey.isEmpty {
                decide.append("\(table) has no primary key: list the columns that identify a row under `key:`")
            }
            // A reference of the table to itself (a reply to a comment): the purge deletes her rows
            // leaf first, and another user's row under hers either keeps it or goes.
            for relation in graph.relations where shown(relation.table) == table && shown(relation.referencedTable) == table && deletesRows(table, reached)
                && (graph.enforcedByDatabase != true || relation.action.blocks) {
                decide.append("""
                    \(rule(relation)) refers to the table itself: another user's row under one of hers (a reply) would \
                    hold hers back. Unlink such rows with `{column: \(table).\(relation.column), set: null}` in `cascade:` (if the \
                    column takes null), or keep her row someone answered, emptied: `erase: {delete_unless_referenced_by: \
                    [\(table).\(relation.column)], mask: {…}}`
                    """)
            }
            // Other users' rows hanging off the ones she loses: deleted or unlinked as the rules say.
            var items: [Item] = []
            if deletesRows(table, reached) {
                var seen: Set<String> = [table]
                var frontier = [table]
                while !frontier.isEmpty {
                    let target = frontier.removeFirst()
                    for relation in relations where relation.referencedTable == target && followed(relation) {
                        if target == table, parentOf[relation.table].map({ $0.column == relation.column && $0.referencedTable == table }) ?? false { continue }
                        switch relation.action {
                        case .cascade:
                            items.append(.delete(relation))
                            if seen.insert(relation.table).inserted { frontier.append(relation.table) }
                        case .setNull where relation.nullable ?? (catalog.table(name(relation.table))?.column(relation.column)?.isNotNull == false):
                            items.append(.set(relation, .null))
                        case .setDefault where relation.value != nil:
                            items.append(.set(relation, relation.value!.maskValue))
                        case .setNull where graph.enforcedByDatabase == true, .setDefault where graph.enforcedByDatabase == true:
                            continue
                        default:
                            items.append(.delete(relation))
                            if seen.insert(relation.table).inserted { frontier.append(relation.table) }
                            decide.append("""
                                \(rule(relation)), and it references \(target) rows the purge deletes: written to go with them \
                                (`cascade:`), or keep them unlinked with `{column: \(relation.table).\(relation.column), set: null}` in its \
                                place (if the column takes null)
                                """)
                        }
                    }
                }
            }
            if !items.isEmpty {
                for item in items {
                    switch item {
                    case .delete(let relation): comments.append("\(rule(relation)): other users' rows on hers go too")
                    case .set(let relation, _): comments.append("\(rule(relation)): other users' rows stay, unlinked")
                    }
                }
                let rendered = items.map { item -> String in
                    switch item {
                    case .delete(let relation): "\(relation.table).\(relation.column)"
                    case .set(let relation, let value): "{column: \(relation.table).\(relation.column), set: \(value.shownInMap)}"
                    }
                }
                entry.append("  cascade: [\(rendered.joined(separator: ", "))]")
            }
            entry += export(table, info)
            for problem in decide {
                decisions.append("\(table): \(problem)")
                entry.append("  decide: \(Self.quoted(problem))")
            }
            text += "\n" + comments.map { wrapped($0, indent: "  ") }.joined() + entry.map { "  " + $0 + "\n" }.joined()
            written += 1
        }
        if written == 0 { text += "  []\n" }
        for note in notes { text += "\n" + wrapped(note) }
        text += suspects(mapped: mapped.union(presetTables.keys).union([user]))
        return Result(yaml: text, tables: written, decisions: decisions)
    }

    private func isLifecycleOwn(_ table: String) -> Bool {
        let qualified = name(table)
        return qualified.schema == "lifecycle" || qualified.name.hasPrefix("lifecycle_")
    }

    private func deletesRows(_ table: String, _ reached: Reach) -> Bool {
        if reached.direct.isEmpty && reached.generic.isEmpty { return true }
        return reached.direct.contains { $0.action == .cascade || $0.action.blocks } || !reached.generic.isEmpty
    }

    /// The rule as the app writes it: `blog.Post.author on_delete=CASCADE`, or the foreign key
    /// with its ON DELETE.
    private func rule(_ relation: RelationGraph.Relation) -> String {
        if graph.enforcedByDatabase == true {
            return relation.origin ?? "\(relation.table).\(relation.column) → \(relation.referencedTable) (ON DELETE \(relation.action.spelled))"
        }
        return "\(relation.origin ?? "\(relation.table).\(relation.column)") on_delete=\(relation.action.spelled)"
    }

    private func fate(_ relation: RelationGraph.Relation) -> String {
        switch relation.action {
        case .cascade: "her rows are deleted with her"
        case .setNull: "the rows stay, the column emptied"
        case .setDefault: "the rows stay, the column set to its default"
        default: "a choice to make"
        }
    }

    /// The user table: deleted, as the app's rules delete it, exported without its password.
    private func subject(_ table: SchemaCatalog.Table, keyedLikeUser: [String]) -> String {
        let user = graph.user
        var lines = ["subject:", "  table: \(shown(table.name))", "  key: \(user.key)"]
        let lookup = user.lookup.filter { name in table.column(name).map { [.text, .integer, .other].contains($0.kind) } ?? false }
        if !lookup.isEmpty { lines.append("  lookup: [\(lookup.joined(separator: ", "))]") }
        // Addresses are typed in any case and mean one mailbox: named so, an email is found
        // whatever its case (two accounts that differ only by it are refused, not guessed).
        if lookup.contains("email"), table.column("email")?.kind == .text { lines.append("  ignore_case: [email]") }
        if let password = user.password, table.column(password) != nil {
            lines.append("  password: {column: \(password)}")
        } else if let holder = keyedLikeUser.compactMap({ catalog.table(name($0)) }).first(where: { passwordColumn(of: $0) != nil }), holder.primaryKey.count == 1 {
            // Supabase: the hash is GoTrue's, in auth.users, keyed by the same id.
            lines.append("  password: {table: \(shown(holder.name)), key: \(holder.primaryKey[0]), column: \(passwordColumn(of: holder)!)}")
        }
        if let email = user.email, table.column(email) != nil { lines.append("  email: \(email)") }
        let (exported, secret) = exportedColumns(table, leavingOut: [user.password].compactMap { $0 })
        lines.append("  export_file: user")
        lines.append("  columns: [\(exported.joined(separator: ", "))]")
        let timestamps = exported.filter { table.column($0).map(isMoment) ?? false }
        if !timestamps.isEmpty { lines.append("  timestamps: [\(timestamps.joined(separator: ", "))]") }
        let files = (graph.files[graph.user.table] ?? []).filter { table.column($0) != nil }
        if !files.isEmpty { lines.append("  blobs: [\(files.joined(separator: ", "))]") }
        lines.append("  erase: delete")
        var text = ""
        if !secret.isEmpty { text += wrapped("Left out of the export (secrets): \(secret.joined(separator: ", ")).") }
        return text + lines.map { $0 + "\n" }.joined()
    }

    private func passwordColumn(of table: SchemaCatalog.Table) -> String? {
        ["encrypted_password", "password_hash", "hashed_password", "password"].first { table.column($0)?.kind == .text }
    }

    /// A date or a moment, which the export writes as a date; a time of day is not one.
    private func isMoment(_ column: SchemaCatalog.Column) -> Bool {
        let declared = column.declaredType.lowercased()
        return column.kind == .timestamp && !(declared.hasPrefix("time") && !declared.hasPrefix("timestamp"))
    }

    private func export(_ table: String, _ info: SchemaCatalog.Table) -> [String] {
        let (exported, secret) = exportedColumns(info, leavingOut: [])
        var lines = ["  export_file: \(table.replacingOccurrences(of: ".", with: "_"))", "  columns: [\(exported.joined(separator: ", "))]"]
        let timestamps = exported.filter { info.column($0).map(isMoment) ?? false }
        if !timestamps.isEmpty { lines.append("  timestamps: [\(timestamps.joined(separator: ", "))]") }
        let files = (graph.files[table] ?? graph.files[info.name.name] ?? []).filter { info.column($0) != nil }
        if !files.isEmpty { lines.append("  blobs: [\(files.joined(separator: ", "))]") }
        if !secret.isEmpty { lines.append("  # left out of the export (secrets): \(secret.joined(separator: ", "))") }
        return lines
    }

    /// Columns that look like secrets (a password, a token, a key) stay out of the export.
    private func exportedColumns(_ table: SchemaCatalog.Table, leavingOut: [String]) -> (exported: [String], secret: [String]) {
        var exported: [String] = []
        var secret: [String] = []
        for column in table.columns where DataMap.isIdentifier(column.name) {
            let lower = column.name.lowercased()
            let looksSecret = !lower.hasSuffix("_id") && ["password", "secret", "token", "session_data", "private_key", "api_key", "salt", "otp", "recovery_code"].contains { lower.contains($0) }
            if leavingOut.contains(column.name) || looksSecret || column.kind == .bytes { secret.append(column.name) } else { exported.append(column.name) }
        }
        return (exported, secret)
    }

    /// Columns the rules cannot see: JSON that may hold her key, text that may name files.
    private func suspects(mapped: Set<String>) -> String {
        var json: [String] = []
        var files: [String] = []
        for table in catalog.tables.values.sorted(by: { $0.name < $1.name }) where !isLifecycleOwn(table.name.description) {
            for column in table.columns {
                if ["json", "jsonb"].contains(column.declaredType.lowercased()) { json.append("\(shown(table.name)).\(column.name)") }
                let lower = column.name.lowercased()
                if mapped.contains(shown(table.name)), column.kind == .text || column.kind == .other,
                   graph.files[shown(table.name)]?.contains(column.name) != true,
                   ["avatar", "photo", "image", "file", "path", "attachment", "picture", "upload", "storage_key"].contains(where: lower.contains) {
                    files.append("\(shown(table.name)).\(column.name)")
                }
            }
        }
        var text = ""
        if !json.isEmpty {
            text += "\n" + wrapped("""
                JSON columns no foreign key can see into: \(json.joined(separator: ", ")). If one holds the user's key (an \
                audit payload's actor_id), map it (`owner: {column: COLUMN, json: KEY}`) or ignore it with a reason; \
                `lifecycle map check` looks into their first rows and warns.
                """)
        }
        if !files.isEmpty {
            text += "\n" + wrapped("Columns that may hold file keys: \(files.joined(separator: ", ")). Add each that does to its table's `blobs:`, so the files go with the rows.")
        }
        return text
    }

    private func wrapped(_ text: String, indent: String = "") -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + word.count + 1 > 96 - indent.count {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines.map { "\(indent)# \($0)\n" }.joined()
    }

    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    private static func today() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date())
    }
}
