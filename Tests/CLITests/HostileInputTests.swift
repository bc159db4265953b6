import Foundation
import JobRunner
import Testing

/// Issue 54: input an attacker chooses, against a real `lifecycle serve` on both backends.
@Suite(.serialized)
struct HostileInputTests {
    /// A NUL byte in an account reference named `ada` on SQLite (which compares text up to
    /// the NUL) and was a server error on PostgreSQL, reachable without a token from the
    /// public confirmation page. Every control character is refused before any query: 400
    /// from the API, a refused link on the page, no link mailed.
    @Test(arguments: Backend.allCases)
    func controlCharactersInAReferenceAreRefusedBeforeAnyQuery(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(
            workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken, "LIFECYCLE_SIGNING_KEY": ServeTests.signingKey])
        #expect(try await ServeTests.api(server, "GET", "accounts/ada").status == 200)
        for reference in ["ada%00", "ada%00x", "ada%0A", "ada%1B%5B2J", "%C2%85ada"] {
            let answer = try await ServeTests.api(server, "GET", "accounts/" + reference)
            #expect(answer.status == 400 && ServeTests.errorCode(answer.json) == "bad_request", "\(reference): \(answer.status) \(answer.json)")
            #expect(ServeTests.errorMessage(answer.json)?.contains("control character") == true, "\(answer.json)")
            let deletion = try await ServeTests.api(server, "POST", "accounts/\(reference)/deletion", body: #"{"password": "x"}"#)
            #expect(deletion.status == 400, "\(reference): \(deletion.json)")
        }
        let session = try await ServeTests.api(server, "POST", "accounts/ada/restore", body: #"{"session_key": "abc\u0000def"}"#)
        #expect(session.status == 400 && ServeTests.errorMessage(session.json)?.contains("session_key") == true, "\(session.json)")

        // The public pages, without any token: a refused link, never a server error.
        let signature = String(repeating: "0", count: 64)
        let confirm = try await ServeTests.curl(["http://\(server.base)/account/delete/confirm?account=ada%00&issued=1&sig=\(signature)"])
        #expect(confirm.status != 500 && confirm.status >= 400 && confirm.status < 500, "\(confirm.text)")
        // Encoded here: an argument to curl cannot hold a NUL byte itself.
        let posted = try await ServeTests.curl([
            "-X", "POST", "--data-raw", "account=ada%00&issued=1&sig=\(signature)&form_token=\(signature)", "http://\(server.base)/account/delete/confirm",
        ])
        #expect(posted.status != 500 && posted.status >= 400 && posted.status < 500, "\(posted.text)")
        let request = try await ServeTests.curl(["-X", "POST", "--data-raw", "email=ada%40example.com%00", "http://\(server.base)/account/delete"])
        #expect(request.status == 200, "\(request.text)")
        try await DeletionPageTests.settled(workspace, requests: 1)
        #expect(await server.stop() == 0)
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("outbox")) WHERE unique_key LIKE 'deletion-link:%'") == 0)
        #expect(try await workspace.state(of: "ada") == "active")
        let audited = try await workspace.query("SELECT outcome FROM \(workspace.ownTable("audit_events")) WHERE action = 'deletion.web-link'")
        #expect(audited == [["unknown-address"]])
    }

    /// Every HTML page, the public ones and the operations page, refuses to be framed by
    /// another site (a decoy over the deletion button) in both the old and the new header.
    @Test func noPageCanBeFramedByAnotherSite() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_SIGNING_KEY": ServeTests.signingKey])
        let base = "http://\(server.base)"
        let pages = [
            try await ServeTests.curl([base + "/account/delete"]),
            try await ServeTests.curl([base + "/account/delete/confirm?account=ada&issued=1&sig=" + String(repeating: "0", count: 64)]),
            try await ServeTests.curl([base + "/account/delete/kept"]),
            try await DeletionPageTests.post(base + "/account/delete", [("email", "ada@example.com")]),
            try await ServeTests.curl([base + "/ops"]),
        ]
        #expect(await server.stop() == 0)
        for page in pages {
            #expect(page.text.contains("text/html"), "\(page.text)")
            #expect(page.text.contains("X-Frame-Options: DENY") && page.text.contains("frame-ancestors 'none'"), "\(page.text)")
            #expect(page.text.contains("Referrer-Policy: same-origin"), "\(page.text)")
        }
    }

    /// A database whose default privileges grant `authenticated` (Supabase's role for every
    /// signed-in user) whatever lifecycle's role creates: after `init` it can read none of
    /// lifecycle's tables (the lookup salt, signed links in the outbox). A grant made later
    /// is revoked when lifecycle next opens the installation; one the role lifecycle runs as
    /// cannot revoke stops it with 77, naming the grant and the statement that removes it.
    @Test func rolesTheDatabaseGrantsByDefaultCannotReadLifecyclesTables() async throws {
        var workspace = try await Workspace.make(.postgres)
        workspace.initialisesOnFirstCommand = false
        let url = try #require(workspace.postgresURL)
        let reader = "reader_" + UUID().uuidString.prefix(8).lowercased()
        _ = try psqlQuery(url, """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'authenticated') THEN CREATE ROLE authenticated NOLOGIN; END IF;
            END $$;
            CREATE ROLE \(reader) LOGIN PASSWORD 'reader-secret' IN ROLE authenticated;
            ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO authenticated;
            ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO authenticated;
            ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT ON SEQUENCES TO authenticated;
            ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO authenticated;
            """)
        let asReader = url.replacingOccurrences(of: #"postgres://[^@]+@"#, with: "postgres://\(reader):reader-secret@", options: .regularExpression)
        let initialised = try await workspace.run(["init"])
        #expect(initialised.status == 0, "\(initialised.stderr)")

        func readable() throws -> String {
            try psqlQuery(url, """
                SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_class c
                WHERE c.relnamespace = 'lifecycle'::regnamespace AND c.relkind = 'r' AND has_table_privilege('authenticated', c.oid, 'SELECT')
                """).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try readable() == "")
        #expect(try psqlQuery(url, "SELECT has_schema_privilege('authenticated', 'lifecycle', 'USAGE')").contains("f"))
        #expect(throws: (any Error).self, "authenticated read the outbox") { try psqlQuery(asReader, "SELECT count(*) FROM lifecycle.outbox") }
        #expect(throws: (any Error).self) { try psqlQuery(asReader, "SELECT lifecycle.restore_on_sign_in('ada')") }

        // Granted again by hand: the next command takes it back.
        _ = try psqlQuery(url, "GRANT USAGE ON SCHEMA lifecycle TO authenticated; GRANT SELECT ON lifecycle.outbox TO authenticated; GRANT SELECT (body) ON lifecycle.outbox TO PUBLIC")
        #expect(try readable() == "outbox")
        #expect(try await workspace.run(["jobs", "list"]).status == 0)
        #expect(try readable() == "")
        #expect(try psqlQuery(url, "SELECT has_column_privilege('public', 'lifecycle.outbox', 'body', 'SELECT')").contains("f"))

        // Lifecycle run by a role that does not own its tables cannot take a grant back: 77, named.
        let runner = "runner_" + UUID().uuidString.prefix(8).lowercased()
        _ = try psqlQuery(url, """
            CREATE ROLE \(runner) LOGIN PASSWORD 'runner-secret';
            GRANT USAGE ON SCHEMA public, lifecycle TO \(runner);
            GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public, lifecycle TO \(runner);
            GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public, lifecycle TO \(runner);
            GRANT SELECT ON lifecycle.outbox TO authenticated;
            """)
        var asRunner = workspace
        asRunner.postgresURL = url.replacingOccurrences(of: #"postgres://[^@]+@"#, with: "postgres://\(runner):runner-secret@", options: .regularExpression)
        let refused = try await asRunner.run(["jobs", "list"])
        #expect(refused.status == 77, "\(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("authenticated has SELECT on table lifecycle.outbox"), "\(refused.stderr)")
        #expect(refused.stderr.contains("REVOKE SELECT ON TABLE lifecycle.outbox FROM authenticated;"), "\(refused.stderr)")
    }
}
