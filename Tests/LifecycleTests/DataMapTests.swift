import Foundation
@testable import Lifecycle
import Testing

/// The format-2 data map as a file: shapes, and refusals that name file, line and key.
struct DataMapParserTests {
    static let minimal = """
        version: 2
        subject:
          table: users
          key: id
        tables:
          - table: posts
            owner: user_id
        """

    @Test func theShippedReferenceMapIsFormatTwo() throws {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        let map = try DataMap(jobsDirectory: url.path + "/Jobs")
        #expect(map.subject.table == .init(name: "accounts"))
        #expect(map.subject.lookup == ["email"])
        #expect(map.table(.init(name: "photos"))?.blobs == ["blob_key"])
        #expect(map.table(.init(name: "journal_entries"))?.cascade == [.init(table: .init(name: "photos"), column: "entry_id")])
        #expect(map.tables.compactMap(\.exportFile).contains("journal_entries"))
        #expect(map.table(.init(name: "sessions"))?.exportFile == nil, "sign-in sessions are credentials, never exported")
    }

    @Test func everyOwnershipAndEraseFormParses() throws {
        let map = try DataMap(yaml: """
            version: 2
            subject:
              table: auth.users
              key: id
              lookup: [email, username]
              password: {table: auth.secrets, key: user_id, column: hash}
              erase: {mask: {email: "gone-{key}@invalid", name: null, age: 0, ratio: 0.5, active: false, note: "x"}}
            tables:
              - table: posts
                owner: user_id
                key: [user_id, slug]
                order_by: [created_at, slug]
                erase: {delete_unless_referenced_by: [replies.post_id, public.likes.post_id], mask: {body: null}}
                cascade: [likes.post_id]
              - table: media
                owner: {via: post_id, parent: posts}
              - table: follows
                owners: [a_id, b_id]
              - table: messages
                owners: [{column: from_id, erase: {mask: {from_id: null}}}, to_id]
            ignore:
              - {table: audit, reason: kept for the law}
            """, source: "m.yaml")
        #expect(map.subject.table == .init(schema: "auth", name: "users"))
        #expect(map.subject.password == .init(table: .init(schema: "auth", name: "secrets"), key: "user_id", column: "hash"))
        let mask = try #require(map.subject.erase.mask)
        #expect(mask.map(\.column) == ["email", "name", "age", "ratio", "active", "note"])
        #expect(mask.map(\.value) == [.template("gone-{key}@invalid"), .null, .integer(0), .real(0.5), .boolean(false), .text("x")])
        #expect(mask[0].value.resolved(key: "42") == .text("gone-42@invalid"))
        let posts = try #require(map.table(.init(name: "posts")))
        #expect(posts.key == ["user_id", "slug"])
        #expect(posts.orderBy == ["created_at", "slug"])
        #expect(posts.erase == .deleteUnlessReferenced(
            by: [.init(table: .init(name: "replies"), column: "post_id"), .init(table: .init(schema: "public", name: "likes"), column: "post_id")],
            mask: [("body", .null)]))
        #expect(map.table(.init(name: "media"))?.ownership == .parent(via: "post_id", parent: .init(name: "posts")))
        #expect(map.table(.init(name: "follows"))?.ownership == .sides([.init(column: "a_id", erase: .delete), .init(column: "b_id", erase: .delete)]))
        #expect(map.table(.init(name: "messages"))?.ownership == .sides([
            .init(column: "from_id", erase: .mask([("from_id", .null)])), .init(column: "to_id", erase: .delete),
        ]))
        #expect(map.ignored.map(\.description) == ["audit"] && map.ignored.map(\.reason) == ["kept for the law"])
    }

    @Test(arguments: [
        // An unknown key at every level, named with its line.
        ("version: 2\nsubject: {table: users, key: id}\ntables: []\ncolour: red\n", "m.yaml:4: colour: unknown key 'colour'"),
        ("version: 2\nsubject:\n  table: users\n  key: id\n  lookups: [email]\ntables: []\n", "m.yaml:5: subject.lookups: unknown key 'lookups'"),
        ("version: 2\nsubject: {table: users, key: id, password: {colum: pw}}\ntables: []\n", "subject.password.colum: unknown key 'colum'"),
        ("version: 2\nsubject: {table: users, key: id, password: {column: pw, set: bcrypt}}\ntables: []\n", "`set:` names the hash format `accounts set-password` writes, and the app reads: argon2id"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: user_id\n    exprt_file: posts\n", "m.yaml:6: tables[0].exprt_file: unknown key 'exprt_file'"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: {via: a, parent: b, extra: c}\n", "tables[0].owner.extra: unknown key 'extra'"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: a\n    erase: {mask: {x: 1}, keep: true}\n", "tables[0].erase.keep: unknown key 'keep'"),
        ("version: 2\nsubject: {table: users, key: id}\ntables: []\nignore:\n  - {table: t, reason: r, why: w}\n", "ignore[0].why: unknown key 'why'"),
        // Wrongly typed values.
        ("version: 2\nsubject: {table: users, key: [id]}\ntables: []\n", "subject.key: must be text"),
        ("version: 2\nsubject: {table: users, key: id, lookup: email}\ntables: []\n", "subject.lookup: must be a list"),
        ("version: 2\nsubject: {table: users, key: id}\ntables: {posts: x}\n", "tables: must be a list"),
        ("version: two\nsubject: {table: users, key: id}\ntables: []\n", "version: must be a whole number"),
        ("version: 3\nsubject: {table: users, key: id}\ntables: []\n", "version: must be 2"),
        // Shapes that cannot work.
        ("tables:\n  - table: photos\n", "this is a format 1 data map"),
        ("version: 2\ntables: []\n", "`subject:` (the user table) is required"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n", "m.yaml:4: tables[0]: needs `owner: COLUMN`"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: a\n    owners: [b, c]\n", "has both `owner:` and `owners:`"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owners: [a]\n", "at least two"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: a\n    export_file: posts\n", "lists its `columns:`"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: \"posts; DROP TABLE users\"\n    owner: a\n", "is not a table name"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: a\n    export_file: ../x\n    columns: [id]\n", "must be letters, digits"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: a\n  - table: posts\n    owner: b\n", "m.yaml:6: table posts is listed twice (first at line 4)"),
        ("version: 2\nsubject: {table: users, key: id, erase: {delete_unless_referenced_by: [a.b], mask: {x: 1}}}\ntables: []\n", "use `delete` or `{mask: {…}}`"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: a\n    erase: forget\n", "tables[0].erase: must be `delete`"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: posts\n    owner: a\n    erase: {mask: {}}\n", "names no column"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - table: p\n    owner: a\nignore:\n  - {table: p, reason: r}\n", "both mapped and ignored"),
        ("version: 2\nsubject: {table: users, key: id}\ntables: []\nignore:\n  - {table: t, reason: \"  \"}\n", "must say why"),
        ("version: 2\nsubject: {table: users, key: id, lookup: [username], ignore_case: [email]}\ntables: []\n",
         "subject.ignore_case: 'email' is not a lookup column (`lookup:` is username)"),
        ("version: 2\nsubject: {table: users, key: id, ignore_case: [email]}\ntables: []\n", "(the subject has no `lookup:` columns)"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - {table: p, owner: a, erase_settings: {session_replication_role: replica}}\n",
         "`session_replication_role` is not a namespaced setting"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - {table: p, owner: a, erase_settings: {storage.allow: [x]}}\n", "is one scalar"),
        // What a row records of its file describes one of the table's file columns, with a column.
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - {table: p, owner: a, blobs: [f], recorded: {g: {sha256: s}}}\n",
         "tables[0].recorded.g: 'g' is not one of this table's `blobs:` columns"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - {table: p, owner: a, blobs: [f], recorded: {f: {}}}\n", "recorded.f: names no column"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - {table: p, owner: a, blobs: [f], recorded: {f: {md5: m}}}\n", "recorded.f.md5: unknown key 'md5'"),
        ("version: 2\nsubject: {table: users, key: id, timezone: [tz]}\ntables: []\n", "subject.timezone: must be text"),
        // A README line is one line in the user's words, for a file the table is exported to.
        ("version: 2\nsubject: {table: users, key: id, description: \"your\\u202Eprofile\"}\ntables: []\n", "subject.description: says in one line"),
        ("version: 2\nsubject: {table: users, key: id}\ntables:\n  - {table: p, owner: a, description: your posts}\n", "give it an `export_file:` too"),
    ])
    func aMalformedMapIsRefusedNamingLineAndKey(_ yaml: String, _ expected: String) {
        let error = #expect(throws: LifecycleError.self) { try DataMap(yaml: yaml, source: "m.yaml") }
        #expect(error?.category == .badInput)
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
    }
}

/// The map against a catalog: every table, column and foreign key accounted for.
struct DataMapPlanTests {
    typealias Name = DataMap.TableName

    static func column(_ name: String, _ kind: SchemaCatalog.ColumnKind = .integer, notNull: Bool = false) -> SchemaCatalog.Column {
        .init(name: name, declaredType: "\(kind)", kind: kind, isNotNull: notNull)
    }

    static func key(_ table: String, _ column: String, _ target: String, _ targetColumn: String = "id", onDelete: SchemaCatalog.DeleteAction = .noAction) -> SchemaCatalog.ForeignKey {
        .init(table: .init(schema: "main", name: table), columns: [column], referencedTable: .init(schema: "main", name: target), referencedColumns: [targetColumn], onDelete: onDelete)
    }

    static func table(_ name: String, _ columns: [SchemaCatalog.Column], key: [String] = ["id"]) -> SchemaCatalog.Table {
        .init(name: .init(schema: "main", name: name), columns: columns, primaryKey: key)
    }

    static let blog = SchemaCatalog(defaultSchema: "main", tables: [
        table("users", [column("id"), column("email", .text, notNull: true), column("name", .text)]),
        table("posts", [column("id"), column("user_id"), column("body", .text), column("created_at", .timestamp)]),
        table("comments", [column("id"), column("post_id"), column("user_id"), column("body", .text)]),
        table("likes", [column("user_id"), column("post_id")], key: ["user_id", "post_id"]),
    ], foreignKeys: [
        key("posts", "user_id", "users"), key("comments", "post_id", "posts"), key("comments", "user_id", "users"),
        key("likes", "user_id", "users"), key("likes", "post_id", "posts"),
    ])

    static func plan(_ tables: String, subject: String = "{table: users, key: id}", catalog: SchemaCatalog = blog) throws -> DataMapPlan {
        try DataMapPlan(map: DataMap(yaml: "version: 2\nsubject: \(subject)\ntables:\n\(tables)", source: "m.yaml"), catalog: catalog)
    }

    static let goodTables = """
          - {table: posts, owner: user_id, cascade: [comments.post_id, likes.post_id]}
          - {table: comments, owner: user_id}
          - {table: likes, owner: user_id}
        """

    /// Django's FileField is NOT NULL and keeps "" for "no file": a kept row's file column
    /// masked to "" is accepted, any other text is refused, and null is refused as NOT NULL.
    @Test func aKeptRowsFileColumnMaskedToTheEmptyTextNamesNoFile() throws {
        let catalog = SchemaCatalog(defaultSchema: "main", tables: [
            Self.table("users", [Self.column("id"), Self.column("avatar", .text, notNull: true)]),
        ], foreignKeys: [])
        let subject = { (mask: String) in "{table: users, key: id, blobs: [avatar], erase: {mask: {avatar: \(mask)}}}" }
        _ = try DataMapPlan(map: DataMap(yaml: "version: 2\nsubject: \(subject("\"\""))\n", source: "m.yaml"), catalog: catalog)
        for (mask, refusal) in [("\"gone.jpg\"", "is masked to a value that is not \"no file\""), ("null", "(a file column: \"\", which names no file)")] {
            #expect(throws: LifecycleError.self) { try DataMapPlan(map: DataMap(yaml: "version: 2\nsubject: \(subject(mask))\n", source: "m.yaml"), catalog: catalog) }
            do {
                _ = try DataMapPlan(map: DataMap(yaml: "version: 2\nsubject: \(subject(mask))\n", source: "m.yaml"), catalog: catalog)
            } catch let error as LifecycleError {
                #expect(error.message.contains(refusal), "\(error.message)")
            }
        }
    }

    /// A platform's delete guard is lifted for the erasure's transactions only, on PostgreSQL;
    /// SQLite has no settings, and two tables cannot want one setting two ways.
    @Test func eraseSettingsAreCollectedOnceAndRefusedWhereTheDatabaseHasNone() throws {
        let tables = """
              - {table: posts, owner: user_id, cascade: [comments.post_id, likes.post_id], erase_settings: {app.allow_delete: "true"}}
              - {table: comments, owner: user_id, erase_settings: {app.allow_delete: "true"}}
              - {table: likes, owner: user_id}
            """
        let postgres = SchemaCatalog(defaultSchema: "main", tables: Array(Self.blog.tables.values), foreignKeys: Self.blog.foreignKeys, hasTransactionSettings: true)
        #expect(try Self.plan(tables, catalog: postgres).eraseSettings == [.init(name: "app.allow_delete", value: "true")])
        let sqlite = #expect(throws: LifecycleError.self) { try Self.plan(tables) }
        #expect(sqlite?.message.contains("m.yaml:4: erase_settings are PostgreSQL settings") == true, "\(sqlite?.message ?? "")")
        let clash = #expect(throws: LifecycleError.self) {
            try Self.plan(tables.replacingOccurrences(of: "comments, owner: user_id, erase_settings: {app.allow_delete: \"true\"}", with: "comments, owner: user_id, erase_settings: {app.allow_delete: \"no\"}"), catalog: postgres)
        }
        #expect(clash?.message.contains("app.allow_delete is 'true' here and something else") == true, "\(clash?.message ?? "")")
    }

    @Test func theEraseOrderComesFromTheForeignKeysNotTheFile() throws {
        let plan = try Self.plan(Self.goodTables)
        let order = plan.tables.map(\.table.name.name)
        #expect(order.firstIndex(of: "comments")! < order.firstIndex(of: "posts")!)
        #expect(order.firstIndex(of: "likes")! < order.firstIndex(of: "posts")!)
        #expect(plan.subjectKeyKind == .integer)
        #expect(plan.plan(for: .init(name: "likes"))?.key == ["user_id", "post_id"])
    }

    @Test(arguments: [
        ("  - {table: posts, owner: author_id}\n", "owner 'author_id' is not a column of main.posts"),
        ("  - {table: post, owner: user_id}\n", "table post does not exist in the database"),
        ("  - {table: posts, owner: user_id, cascade: [comments.post_id, likes.post_id]}\n  - {table: comments, owner: user_id}\n",
         "likes.user_id references users, whose rows the purge deletes (main.likes.user_id → main.users.id), but likes is not in the map"),
        ("  - {table: posts, owner: user_id, cascade: [likes.post_id]}\n  - {table: comments, owner: user_id}\n  - {table: likes, owner: user_id}\n",
         "comments.post_id references posts, whose rows the purge deletes (main.posts.user_id → main.users.id, then main.comments.post_id → main.posts.id): add `{column: comments.post_id, set: null}` to posts's `cascade:`"),
        ("  - {table: posts, owner: user_id, cascade: [comments.post_id, likes.post_id], erase: {mask: {user_id: null}}}\n  - {table: comments, owner: user_id}\n  - {table: likes, owner: user_id}\n",
         ""),
        ("  - {table: posts, owner: user_id, cascade: [comments.body]}\n  - {table: comments, owner: user_id}\n  - {table: likes, owner: user_id}\n",
         "cascade: main.comments.body has no foreign key to main.posts"),
        ("  - {table: posts, owner: user_id, blobs: [body], recorded: {body: {bytes: created_at}}, cascade: [comments.post_id, likes.post_id]}\n  - {table: comments, owner: user_id}\n  - {table: likes, owner: user_id}\n",
         "recorded.body.bytes: main.posts.created_at is timestamp; it must hold the size in bytes, an integer"),
        ("  - {table: posts, owner: user_id, blobs: [body], recorded: {body: {sha256: digest}}, cascade: [comments.post_id, likes.post_id]}\n  - {table: comments, owner: user_id}\n  - {table: likes, owner: user_id}\n",
         "recorded column 'digest' is not a column of main.posts"),
    ])
    func aMapThatDoesNotFitTheDatabaseIsRefused(_ tables: String, _ expected: String) throws {
        if expected.isEmpty {
            // The control: masking posts (never deleting them) needs no cascade for other users' rows.
            _ = try Self.plan(tables, subject: "{table: users, key: id, erase: {mask: {name: null}}}")
            return
        }
        let error = #expect(throws: LifecycleError.self) { try Self.plan(tables) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
    }

    /// Her time zone is text the export reads; a column of another type is refused at load.
    @Test func theTimezoneColumnMustHoldText() throws {
        let error = #expect(throws: LifecycleError.self) { try Self.plan(Self.goodTables, subject: "{table: users, key: id, timezone: id}") }
        #expect(error?.message.contains("timezone column main.users.id is integer; it must hold text") == true, "\(error?.message ?? "no error")")
        let plan = try Self.plan(Self.goodTables, subject: "{table: users, key: id, timezone: name}")
        #expect(plan.subject.timeZone == "name")
    }

    /// Rows owned through a parent find themselves through the parent's rows: they are
    /// erased first even where no foreign key says so, or the parent's erase would orphan them.
    @Test func aTableOwnedThroughAParentGoesFirstWithoutAForeignKey() throws {
        let catalog = SchemaCatalog(defaultSchema: "main", tables: Self.blog.tables.values.map { $0 } + [
            Self.table("attachments", [Self.column("id"), Self.column("post_id"), Self.column("file", .text)]),
        ], foreignKeys: Self.blog.foreignKeys)
        let plan = try Self.plan("""
              - {table: posts, owner: user_id, cascade: [comments.post_id, likes.post_id]}
              - {table: attachments, owner: {via: post_id, parent: posts}}
              - {table: comments, owner: user_id}
              - {table: likes, owner: user_id}
            """, catalog: catalog)
        let order = plan.tables.map(\.table.name.name)
        #expect(order.firstIndex(of: "attachments")! < order.firstIndex(of: "posts")!, "\(order)")
    }

    /// Other accounts' rows pointing at the user row: deleting it must neither fail on them
    /// nor, through ON DELETE CASCADE, take those accounts with it.
    @Test(arguments: [SchemaCatalog.DeleteAction.noAction, .cascade])
    func aUserTableReferencingItselfIsRefusedUnlessTheDatabaseUnlinks(_ action: SchemaCatalog.DeleteAction) throws {
        let tables = Self.blog.tables.values.map { table -> SchemaCatalog.Table in
            var table = table
            if table.name.name == "users" { table.columns.append(Self.column("invited_by")) }
            return table
        }
        func catalog(_ action: SchemaCatalog.DeleteAction) -> SchemaCatalog {
            SchemaCatalog(defaultSchema: "main", tables: tables, foreignKeys: Self.blog.foreignKeys + [Self.key("users", "invited_by", "users", onDelete: action)])
        }
        let error = #expect(throws: LifecycleError.self) { try Self.plan(Self.goodTables, catalog: catalog(action)) }
        #expect(error?.message.contains("main.users.invited_by → main.users.id lets other accounts' rows point at this one") == true, "\(error?.message ?? "")")
        _ = try Self.plan(Self.goodTables, catalog: catalog(.setNull))
    }

    @Test func ignoringTheCaseOfALookupColumnIsForTextOnly() throws {
        let catalog = SchemaCatalog(defaultSchema: "main", tables: Array(Self.blog.tables.values) + [
            Self.table("members", [Self.column("id"), Self.column("email", .text), Self.column("badge")]),
        ], foreignKeys: Self.blog.foreignKeys)
        let plan = try Self.plan(Self.goodTables, subject: "{table: users, key: id, lookup: [email], ignore_case: [email]}")
        #expect(plan.subject.ignoreCase == ["email"])
        let error = #expect(throws: LifecycleError.self) {
            try DataMapPlan(map: DataMap(yaml: "version: 2\nsubject: {table: members, key: id, lookup: [email, badge], ignore_case: [badge]}\n", source: "m.yaml"), catalog: catalog)
        }
        #expect(error?.message.contains("ignore_case column main.members.badge is integer, not a text type; only text has a case to ignore") == true, "\(error?.message ?? "")")
    }

    @Test func maskingANotNullColumnToNullIsRefusedAtLoad() {
        let error = #expect(throws: LifecycleError.self) {
            try Self.plan(Self.goodTables, subject: "{table: users, key: id, erase: {mask: {email: null}}}")
        }
        #expect(error?.message.contains("main.users.email is NOT NULL, so masking it to null would fail every purge") == true)
    }

    @Test func aKeptRowThatStillPointsAtADeletedUserIsRefused() {
        let error = #expect(throws: LifecycleError.self) {
            try Self.plan("""
                  - {table: posts, owner: user_id, cascade: [likes.post_id], erase: {delete_unless_referenced_by: [comments.post_id], mask: {body: null}}}
                  - {table: comments, owner: user_id}
                  - {table: likes, owner: user_id}
                """, subject: "{table: users, key: id, erase: delete}")
        }
        #expect(error?.message.contains("posts rows are kept (masked) but main.posts.user_id → main.users.id still points at rows erasure deletes") == true,
                "\(error?.message ?? "")")
    }

    /// Every wrong entry in one run (tables and `on_deletion:` alike), not one per `map check`.
    @Test func everyWrongEntryIsNamedAtOnce() {
        let error = #expect(throws: LifecycleError.self) {
            try Self.plan("""
                  - {table: posts, owner: author_id}
                  - {table: comments, owner: user_id, columns: [text]}
                  - {table: likes, owner: user_id}
                on_deletion:
                  remove:
                    - {table: sessions, owner: user_id}
                    - {table: likes, owner: liker_id}
                """)
        }
        let message = error?.message ?? ""
        #expect(message.contains("3 problems in the map"), "\(message)")
        #expect(message.contains("2 problems in `on_deletion:`"), "\(message)")
        #expect(message.contains("on_deletion table main.sessions does not exist") && message.contains("'liker_id' is not a column of main.likes"), "\(message)")

        let parts = #expect(throws: LifecycleError.self) {
            try Self.plan(Self.goodTables + "\n" + """
                parts:
                  - {name: a, label: A, tables: [users]}
                  - {name: b, label: B, tables: [nosuch]}
                """)
        }
        #expect(parts?.message.contains("2 problems in `parts:`") == true, "\(parts?.message ?? "")")
        #expect(message.contains("owner 'author_id' is not a column of main.posts") && message.contains("'text' is not a column of main.comments"), "\(message)")
    }

    @Test func aCycleNoOrderCanSatisfyIsNamed() {
        let catalog = SchemaCatalog(defaultSchema: "main", tables: [
            Self.table("users", [Self.column("id")]),
            Self.table("a", [Self.column("id"), Self.column("user_id"), Self.column("b_id")]),
            Self.table("b", [Self.column("id"), Self.column("user_id"), Self.column("a_id")]),
        ], foreignKeys: [
            Self.key("a", "user_id", "users"), Self.key("b", "user_id", "users"), Self.key("a", "b_id", "b"), Self.key("b", "a_id", "a"),
        ])
        let tables = "  - {table: a, owner: user_id, cascade: [b.a_id, a.b_id]}\n  - {table: b, owner: user_id, cascade: [a.b_id, b.a_id]}\n"
        let error = #expect(throws: LifecycleError.self) { try Self.plan(tables, catalog: catalog) }
        #expect(error?.message.contains("tables main.a, main.b reference each other in a cycle") == true, "\(error?.message ?? "")")
        // The same cycle, once the database deletes one side's references itself, has an order.
        var keys = catalog.foreignKeys
        keys[3].onDelete = .setNull
        let handled = SchemaCatalog(defaultSchema: "main", tables: Array(catalog.tables.values), foreignKeys: keys)
        let plan = try? Self.plan("  - {table: a, owner: user_id}\n  - {table: b, owner: user_id, cascade: [a.b_id]}\n", catalog: handled)
        #expect(plan?.tables.map(\.table.name.name) == ["a", "b"])
    }

    // MARK: Parts a user may delete and keep the account

    static func partsPlan(_ parts: String, tables: String = goodTables, catalog: SchemaCatalog = blog) throws -> DataMapPlan {
        try DataMapPlan(map: DataMap(yaml: "version: 2\nsubject: {table: users, key: id}\ntables:\n\(tables)\nparts:\n\(parts)", source: "m.yaml"), catalog: catalog)
    }

    /// A part's plan erases its tables only (the cascades of others' rows with them) and
    /// touches the user row only where the part names columns of it.
    @Test func aPartsPlanErasesItsTablesAndTheUserRowOnlyWhereItSays() throws {
        let plan = try Self.partsPlan("  - {name: posts, label: Posts, tables: [posts]}\n  - {name: likes, label: Likes, tables: [likes]}\n")
        #expect(plan.parts.map(\.name) == ["posts", "likes"])
        let posts = try plan.restricted(to: ["posts"])
        #expect(posts.tables.map(\.table.name.name) == ["posts"])
        #expect(posts.tables.first?.cascades.map(\.table.name).sorted() == ["comments", "likes"])
        #expect(!posts.erasesUserRow && plan.erasesUserRow)
        #expect(try plan.restricted(to: ["likes", "posts", "likes"]).tables.map(\.table.name.name) == ["likes", "posts"])
        let unknown = #expect(throws: LifecycleError.self) { try plan.restricted(to: ["photos"]) }
        #expect(unknown?.message == "there is no part 'photos' (the data map declares: posts, likes)", "\(unknown?.message ?? "")")
    }

    @Test(arguments: [
        ("  - {name: me, label: Me, tables: [users]}\n", "part 'me': users is the user table"),
        ("  - {name: p, label: P, tables: [post]}\n", "part 'p': post is not a table mapped under `tables:`"),
        ("  - {name: p, label: P, tables: [posts], user_columns: {email: null}}\n", "main.users.email is NOT NULL, so masking it to null"),
        ("  - {name: p, label: P, tables: [posts], user_columns: {id: 0}}\n", "main.users.id is part of the key"),
        ("  - {name: 'a b', label: P, tables: [posts]}\n", "'a b' must be letters, digits, '_' or '-'"),
        ("  - {name: p, tables: [posts]}\n", "`label:` is required"),
        ("  - {name: p, label: P, tables: []}\n", "lists the mapped tables whose rows the part deletes"),
        ("  - {name: p, label: P, tables: [posts]}\n  - {name: p, label: Q, tables: [likes]}\n", "part 'p' is declared twice"),
        ("  - {name: p, label: P, tables: [posts], user_columns: {name: null}}\n  - {name: q, label: Q, tables: [likes], user_columns: {name: x}}\n",
         "part 'q' sets name of the user row, and part 'p' sets it to something else"),
    ])
    func aPartThatCannotBeDeletedAloneIsRefusedAtLoad(_ parts: String, _ expected: String) {
        let error = #expect(throws: LifecycleError.self) { try Self.partsPlan(parts) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
    }

    /// Deleting a part's rows must not fail on a reference the part leaves behind: a mapped
    /// table it does not name pointing at them. (A user-row reference with a foreign key is
    /// refused by the whole map's order unless the database unlinks it.)
    @Test func aReferenceIntoAPartFromARowItKeepsIsRefusedUntilThePartCoversIt() throws {
        let catalog = SchemaCatalog(defaultSchema: "main", tables: Self.blog.tables.values.map { $0 } + [
            Self.table("attachments", [Self.column("id"), Self.column("post_id"), Self.column("file", .text)]),
        ], foreignKeys: Self.blog.foreignKeys + [Self.key("attachments", "post_id", "posts")])
        let tables = Self.goodTables + "\n  - {table: attachments, owner: {via: post_id, parent: posts}}"
        let attachments = #expect(throws: LifecycleError.self) {
            try Self.partsPlan("  - {name: p, label: P, tables: [posts]}\n", tables: tables, catalog: catalog)
        }
        #expect(attachments?.message.contains("m.yaml:9: part 'p' deletes rows of posts, through which attachments is owned") == true,
                "\(attachments?.message ?? "no error")")
        // Owned through posts, with no foreign key at all: left out, its rows would be found by nothing.
        let unkeyed = SchemaCatalog(defaultSchema: "main", tables: Array(catalog.tables.values), foreignKeys: Self.blog.foreignKeys)
        let orphaned = #expect(throws: LifecycleError.self) {
            try Self.partsPlan("  - {name: p, label: P, tables: [posts]}\n", tables: tables, catalog: unkeyed)
        }
        #expect(orphaned?.message.contains("through which attachments is owned (`owner: {via, parent}`)") == true, "\(orphaned?.message ?? "no error")")
        // Deleted by the database with the posts: its rows and files would go uncounted.
        let cascading = SchemaCatalog(defaultSchema: "main", tables: Array(catalog.tables.values),
                                      foreignKeys: Self.blog.foreignKeys + [Self.key("attachments", "post_id", "posts", onDelete: .cascade)])
        let unseen = #expect(throws: LifecycleError.self) {
            try Self.partsPlan("  - {name: p, label: P, tables: [posts]}\n", tables: tables, catalog: cascading)
        }
        #expect(unseen?.message.contains("the database deletes rows of attachments with them") == true, "\(unseen?.message ?? "no error")")
        let plan = try Self.partsPlan("  - {name: p, label: P, tables: [posts, attachments]}\n  - {name: a, label: A, tables: [attachments]}\n", tables: tables, catalog: catalog)
        #expect(try plan.restricted(to: ["p"]).tables.map(\.table.name.name) == ["attachments", "posts"])
        #expect(try plan.restricted(to: ["a"]).tables.map(\.table.name.name) == ["attachments"])
    }
}

/// Django's signed session data, as `django.core.signing.dumps` writes it (made with
/// Django 5.2): the user's id found inside, compressed or not; anything else names no one.
struct EncodedValueTests {
    static let compressed = ".eJyrVopPLC3JiC8tTi2Kz0xRslIyMVLSQRZMSkzOTs0DyVQAJfLyS1KBzMpRQDRQqgUAF_WgqA:1xXSfn:B76R0KYMhj0M7NCP_eGdy6RBYtRxHqQ-oBEZWp1I3sE"
    static let plain = "eyJfYXV0aF91c2VyX2lkIjoiNyJ9:1xXSfn:K68LLOBYA54JpPAl1zPCHQV1PoCasc-a1lq5bB9j0PA"

    @Test func djangoSessionDataNamesItsUserCompressedOrNot() {
        #expect(ValueEncoding.djangoSigned.value(in: Self.compressed, at: ["_auth_user_id"]) == "42")
        #expect(ValueEncoding.djangoSigned.value(in: Self.plain, at: ["_auth_user_id"]) == "7")
        #expect(ValueEncoding.djangoSigned.value(in: Self.plain, at: ["_auth_user_backend"]) == nil)
    }

    @Test func dataThatDoesNotDecodeNamesNoOne() {
        for hostile in ["", ":", ".:x:y", ".AAAA:x:y", "not base64!:x:y", String(Self.compressed.dropLast(60)), "e30", "W10:1:2"] {
            #expect(ValueEncoding.djangoSigned.value(in: hostile, at: ["_auth_user_id"]) == nil, "\(hostile)")
        }
    }
}
