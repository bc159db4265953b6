import PostgresNIO

/// Lifecycle's schema is readable by lifecycle alone. It holds the lookup salt and digests
/// of purged users' values, and signed links waiting in the outbox; a database's default
/// privileges (Supabase grants its API roles whatever is created) would hand them to
/// `authenticated` as each table is made.
///
/// - `init` revokes every privilege on the schema, its tables, sequences and functions held
///   by PUBLIC or by a role that is neither the objects' owner nor one lifecycle's role
///   belongs to.
/// - Every other open (each command migrates the installation) revokes PUBLIC's, and
///   everything a role other than those holds on what that open's migrations created. A
///   grant an administrator made since `init` (to the role lifecycle's commands run as,
///   when `init` ran as the owner) stays: it is that administrator's choice.
///
/// What this role may not revoke stops the command with 77, naming the grant and the
/// statement the owner runs.
enum OwnSchemaPrivileges {
    /// Grants the product needs: GoTrue calls the access-token hook as supabase_auth_admin.
    static func isNeeded(kind: String, object: String, grantee: String, privilege: String) -> Bool {
        grantee == "supabase_auth_admin"
            && ((kind == "SCHEMA" && privilege == "USAGE")
                || (kind == "FUNCTION" && object == "lifecycle.custom_access_token_hook(jsonb)" && privilege == "EXECUTE"))
    }

    struct Grant: Equatable {
        var kind: String
        var object: String
        var grantee: String
        var privilege: String
        /// A column's privilege: revoked by naming the column.
        var column: String?

        var revoke: String {
            let target = column.map { "\(privilege) (\($0)) ON TABLE \(object)" } ?? "\(privilege) ON \(kind) \(object)"
            return "REVOKE \(target) FROM \(grantee)"
        }
    }

    /// PUBLIC's default privileges count too (a function's EXECUTE is PUBLIC's until revoked):
    /// an object with no ACL yet is read as its default.
    static func foreignGrants(_ tx: PostgresTransaction) throws -> [Grant] {
        let rows = try tx.query("""
            WITH RECURSIVE mine(role) AS (
                -- The roles this one belongs to, by membership alone: pg_has_role says yes to
                -- every role for a superuser.
                SELECT oid FROM pg_roles WHERE rolname = current_user
                UNION SELECT m.roleid FROM pg_auth_members m JOIN mine ON m.member = mine.role
            ), objects AS (
                SELECT 'SCHEMA' AS kind, quote_ident(n.nspname) AS object, n.nspacl AS acl, n.nspowner AS owner, 'n'::"char" AS type
                FROM pg_namespace n WHERE n.nspname = 'lifecycle'
                UNION ALL
                SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, 'lifecycle.' || quote_ident(c.relname), c.relacl, c.relowner,
                       CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char"
                FROM pg_class c WHERE c.relnamespace = 'lifecycle'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
                UNION ALL
                SELECT 'FUNCTION', p.oid::regprocedure::text, p.proacl, p.proowner, 'f'::"char"
                FROM pg_proc p WHERE p.pronamespace = 'lifecycle'::regnamespace
            ), columns AS (
                SELECT 'lifecycle.' || quote_ident(c.relname) AS object, quote_ident(a.attname) AS name, a.attacl AS acl, c.relowner AS owner
                FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                WHERE c.relnamespace = 'lifecycle'::regnamespace AND a.attacl IS NOT NULL AND a.attnum > 0 AND NOT a.attisdropped
            ), granted AS (
                SELECT o.kind, o.object, NULL::text AS column_name, o.owner, g.grantee, g.privilege_type
                FROM objects o, aclexplode(coalesce(o.acl, acldefault(o.type, o.owner))) g
                UNION ALL
                SELECT 'TABLE', c.object, c.name, c.owner, g.grantee, g.privilege_type
                FROM columns c, aclexplode(c.acl) g
            )
            SELECT kind::text, object::text, column_name,
                   CASE WHEN grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(grantee)) END::text, privilege_type::text
            FROM granted
            WHERE grantee <> owner AND grantee NOT IN (SELECT role FROM mine)
            ORDER BY 2, 4, 5
            """)
        return try rows.map { row in
            let (kind, object, column, grantee, privilege) = try row.decode((String, String, String?, String, String).self)
            return Grant(kind: kind, object: object, grantee: grantee, privilege: privilege, column: column)
        }.filter { !isNeeded(kind: $0.kind, object: $0.object, grantee: $0.grantee, privilege: $0.privilege) }
    }

    /// Lifecycle's objects as `foreignGrants` names them (the schema included), to tell
    /// what a run of migrations created.
    static func objects(_ tx: PostgresTransaction) throws -> Set<String> {
        guard try tx.query("SELECT to_regnamespace('lifecycle') IS NOT NULL").first?.decode(Bool.self) ?? false else { return [] }
        let rows = try tx.query("""
            SELECT 'lifecycle.' || quote_ident(c.relname) FROM pg_class c WHERE c.relnamespace = 'lifecycle'::regnamespace
            UNION ALL SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'lifecycle'::regnamespace
            UNION ALL SELECT 'lifecycle'
            """)
        return Set(try rows.map { try $0.decode(String.self) })
    }

    /// `existing`: the objects there before this run's migrations, whose grants to roles
    /// stay (PUBLIC's go everywhere); nil for `init`, which leaves none.
    static func lockDown(_ tx: PostgresTransaction, existing: Set<String>?) throws {
        func foreign() throws -> [Grant] {
            try foreignGrants(tx).filter { grant in
                grant.grantee == "PUBLIC" || existing.map { !$0.contains(grant.object) } ?? true
            }
        }
        let found = try foreign()
        guard !found.isEmpty else { return }
        // A role that does not own an object is told "no privileges could be revoked" as a
        // warning, not an error: what is left is read again below.
        for grant in found { try tx.execute(PostgresQuery(unsafeSQL: grant.revoke)) }
        let left = try foreign()
        guard !left.isEmpty else { return }
        let shown = left.prefix(5).map { "\($0.grantee) has \($0.privilege) on \($0.kind.lowercased()) \($0.object)\($0.column.map { " (column \($0))" } ?? "")" }
        throw PostgresStoreError.query("""
            lifecycle's schema holds secrets (the lookup salt, signed links in the outbox), and other roles may read it: \
            \(shown.joined(separator: "; "))\(left.count > 5 ? " (and \(left.count - 5) more)" : ""). This role cannot revoke \
            that; the objects' owner (or an administrator) runs: \(left.prefix(5).map { $0.revoke + ";" }.joined(separator: " ")) \
            then run the same command again
            """, sqlState: "42501")
    }
}
