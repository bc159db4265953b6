import Foundation
@testable import Lifecycle
import Testing

/// `on_deletion:` checked at load as the purge is: a deletion request never fails on a
/// foreign key into the rows it removes, and an `insert:` never on a column it leaves out.
/// The schema is simplejwt's blacklist (as Django migrates it: no ON DELETE action) and a
/// sessions table whose tokens the database deletes with it.
struct OnDeletionCheckTests {
    typealias T = DataMapPlanTests

    static let catalog = SchemaCatalog(defaultSchema: "main", tables: [
        T.table("users", [T.column("id")]),
        T.table("outstanding", [T.column("id"), T.column("user_id"), T.column("jti", .text, notNull: true)]),
        T.table("blacklisted", [
            .init(name: "id", declaredType: "integer", kind: .integer, isNotNull: true, hasDefault: true),
            T.column("token_id", notNull: true), T.column("blacklisted_at", .timestamp, notNull: true),
        ]),
        T.table("sessions", [T.column("id"), T.column("user_id")]),
        T.table("session_tokens", [T.column("id"), T.column("session_id")]),
        T.table("token_uses", [T.column("id"), T.column("token_id")]),
        T.table("revocations", [T.column("id"), T.column("token_id"), T.column("session_id"), T.column("reason", .text)]),
    ], foreignKeys: [
        T.key("revocations", "token_id", "outstanding"), T.key("revocations", "session_id", "sessions", onDelete: .setNull),
        T.key("outstanding", "user_id", "users"), T.key("blacklisted", "token_id", "outstanding"),
        T.key("sessions", "user_id", "users"), T.key("session_tokens", "session_id", "sessions", onDelete: .cascade),
        T.key("token_uses", "token_id", "session_tokens"),
    ])

    static let mapped = """
          - {table: outstanding, owner: user_id}
          - {table: blacklisted, owner: {via: token_id, parent: outstanding}}
          - {table: sessions, owner: user_id}
          - {table: session_tokens, owner: {via: session_id, parent: sessions}}
          - {table: token_uses, owner: {via: token_id, parent: session_tokens}}
          - {table: revocations, owner: {via: token_id, parent: outstanding}}
        """

    static func plan(_ onDeletion: String) throws -> DataMapPlan {
        try DataMapPlan(map: DataMap(yaml: "version: 2\nsubject: {table: users, key: id}\ntables:\n\(mapped)\non_deletion:\n\(onDeletion)", source: "m.yaml"), catalog: catalog)
    }

    func refusal(_ onDeletion: String) -> String {
        do {
            _ = try Self.plan(onDeletion)
            return "accepted"
        } catch {
            return "\(error)"
        }
    }

    @Test func aRemovalWithRowsReferencingItIsRefusedNamingTheLineToAdd() {
        let message = refusal("  remove:\n    - {table: outstanding, owner: user_id}\n")
        #expect(message.contains("m.yaml:12: on_deletion removes rows of outstanding"), "\(message)")
        #expect(message.contains("main.blacklisted.token_id → main.outstanding.id (ON DELETE NO ACTION)"), "\(message)")
        #expect(message.contains("`- {table: blacklisted, owner: {via: token_id, parent: outstanding}}`"), "\(message)")
    }

    @Test func theDatabasesOwnCascadeIsFollowedToTheRowsItDeletes() throws {
        // Sessions' tokens go with them (ON DELETE CASCADE); what references the tokens does not.
        let message = refusal("  remove:\n    - {table: sessions, owner: user_id}\n")
        #expect(message.contains("on_deletion removes rows of session_tokens"), "\(message)")
        #expect(message.contains("main.session_tokens.session_id → main.sessions.id, then main.token_uses.token_id → main.session_tokens.id"), "\(message)")
        let plan = try Self.plan("""
              remove:
                - {table: sessions, owner: user_id}
                - {table: token_uses, owner: {via: token_id, parent: session_tokens}}
                - {table: session_tokens, owner: {via: session_id, parent: sessions}}
            """)
        // Children first, whatever order the map lists them in.
        #expect(plan.onDeletion.remove.map(\.table.name) == ["token_uses", "session_tokens", "sessions"])
        let sql = DataMapSQL(plan: plan, dialect: .sqlite).graceRemove(plan.onDeletion.remove[0], key: "7")
        #expect(sql.sql.contains(#""token_id" IN (SELECT g0."id" FROM "session_tokens" g0 WHERE g0."session_id" IN (SELECT g1."id" FROM "sessions" g1 WHERE (g1."user_id" = ?1)))"#), "\(sql.sql)")
    }

    @Test(arguments: [
        ("  remove:\n    - {table: blacklisted, owner: {via: token_id, parent: outstanding}}\n", "which no `remove:` entry removes"),
        ("  remove:\n    - {table: blacklisted, owner: {via: token_id}}\n", "`via:` goes with `parent: TABLE`"),
        ("  insert:\n    - {table: blacklisted, for_each: {table: outstanding, owner: user_id}, link: token_id}\n",
         "blacklisted.blacklisted_at is NOT NULL and has no default"),
        ("  insert:\n    - {table: blacklisted, for_each: {table: sessions, owner: user_id}, link: token_id, now: [blacklisted_at]}\n",
         "blacklisted.token_id has no foreign key to sessions"),
        ("  insert:\n    - {table: blacklisted, for_each: {table: outstanding, owner: user_id}, link: token_id, now: [token_id]}\n",
         "sets column 'token_id' twice"),
        ("  insert:\n    - {table: revocations, for_each: {table: outstanding, owner: user_id}, link: token_id, values: {session_id: 3}}\n",
         "revocations.session_id is a foreign key (main.revocations.session_id → main.sessions.id): leave it out, or set it to null"),
        ("  insert:\n    - {table: revocations, for_each: {table: outstanding, owner: user_id}, link: token_id, values: {session_id: null, reason: gone}}\n",
         "accepted"),
        ("  insert:\n    - {table: blacklisted, for_each: {table: outstanding, owner: user_id}, link: token_id, now: [blacklisted_at]}\n"
            + "  remove:\n    - {table: outstanding, owner: user_id}\n    - {table: blacklisted, owner: {via: token_id, parent: outstanding}}\n",
         "names table blacklisted twice"),
    ])
    func eachEntryIsCheckedSayingWhatToWrite(_ onDeletion: String, _ expected: String) {
        let message = refusal(onDeletion)
        #expect(message.contains(expected), "\(message)")
    }

    /// A role that may not insert into the table would fail every deletion request there.
    @Test func theRoleMustBeAllowedToInsertWhereARequestInserts() throws {
        let plan = try Self.plan("  insert:\n    - {table: blacklisted, for_each: {table: outstanding, owner: user_id}, link: token_id, now: [blacklisted_at]}\n")
        var access = Dictionary(uniqueKeysWithValues: plan.touchedTables.map { ($0.table, SchemaCatalog.Access.full) })
        #expect(plan.accessProblems(access).isEmpty)
        access[.init(schema: "main", name: "blacklisted")] = .init(rowSecurity: false, select: true, update: true, delete: true, insert: false)
        #expect(plan.accessProblems(access) == ["blacklisted: this role lacks INSERT: GRANT INSERT ON main.blacklisted TO the role lifecycle connects as"])
        access[.init(schema: "main", name: "outstanding")] = .init(rowSecurity: false, select: true, update: true, delete: true, insert: false)
        #expect(plan.accessProblems(access).count == 1, "only the table inserted into needs INSERT")
    }

    @Test func anInsertAddsOneRowPerOwnedRowNotLinkedYetInEitherDialect() throws {
        let plan = try Self.plan("  insert:\n    - {table: blacklisted, for_each: {table: outstanding, owner: user_id}, link: token_id, now: [blacklisted_at]}\n")
        let insertion = try #require(plan.onDeletion.insert.first)
        #expect(insertion.linkedColumn == "id" && insertion.table == .init(schema: "main", name: "blacklisted"))
        let sqlite = DataMapSQL(plan: plan, dialect: .sqlite).graceInsert(insertion, key: "7")
        #expect(sqlite.sql == #"""
            INSERT INTO "blacklisted" ("token_id", "blacklisted_at") SELECT s."id", strftime('%Y-%m-%d %H:%M:%f', 'now') \#
            FROM "outstanding" s WHERE (s."user_id" = ?1) \#
            AND NOT EXISTS (SELECT 1 FROM "blacklisted" x WHERE x."token_id" = s."id") ON CONFLICT DO NOTHING
            """#, "\(sqlite.sql)")
        #expect(sqlite.bindings == [.integer(7)])
        let postgres = DataMapSQL(plan: plan, dialect: .postgres).graceInsert(insertion, key: "7")
        #expect(postgres.sql.contains(#"SELECT s."id", CURRENT_TIMESTAMP FROM "main"."outstanding" s WHERE (s."user_id" = CAST($1 AS integer)) AND NOT EXISTS"#), "\(postgres.sql)")
    }
}
