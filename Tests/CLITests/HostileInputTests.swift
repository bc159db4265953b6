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
    /// lifecycle's tables (the lookup salt, signed links in the outbox). PUBLIC's grants go
    /// on every open, other roles' on `init`; one the role lifecycle runs as cannot revoke
    /// stops it with 77, naming the grant and the statement that removes it.
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

        // Granted again by hand: PUBLIC's goes with the next command, a role's with the next `init`.
        _ = try psqlQuery(url, "GRANT USAGE ON SCHEMA lifecycle TO authenticated; GRANT SELECT ON lifecycle.outbox TO authenticated; GRANT SELECT (body) ON lifecycle.outbox TO PUBLIC")
        #expect(try readable() == "outbox")
        #expect(try await workspace.run(["jobs", "list"]).status == 0)
        #expect(try psqlQuery(url, "SELECT has_column_privilege('public', 'lifecycle.outbox', 'body', 'SELECT')").contains("f"))
        #expect(try readable() == "outbox")
        #expect(try await workspace.run(["init"]).status == 0)
        #expect(try readable() == "")

        // Lifecycle run by a role that does not own its tables cannot take a grant back: 77, named.
        let runner = "runner_" + UUID().uuidString.prefix(8).lowercased()
        _ = try psqlQuery(url, """
            CREATE ROLE \(runner) LOGIN PASSWORD 'runner-secret';
            GRANT USAGE ON SCHEMA public, lifecycle TO \(runner);
            GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public, lifecycle TO \(runner);
            GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public, lifecycle TO \(runner);
            GRANT SELECT (body) ON lifecycle.outbox TO PUBLIC;
            """)
        var asRunner = workspace
        asRunner.postgresURL = url.replacingOccurrences(of: #"postgres://[^@]+@"#, with: "postgres://\(runner):runner-secret@", options: .regularExpression)
        let refused = try await asRunner.run(["jobs", "list"])
        #expect(refused.status == 77, "\(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("PUBLIC has SELECT on table lifecycle.outbox (column body)"), "\(refused.stderr)")
        #expect(refused.stderr.contains("REVOKE SELECT (body) ON TABLE lifecycle.outbox FROM PUBLIC;"), "\(refused.stderr)")
    }

    /// Secrets that keep nobody out are refused before the server listens, with the command
    /// that makes a good one: a signing key of 32 spaces, a token of one character repeated,
    /// a signing key that is also a token (the app backend could sign deletion links), and a
    /// token file another user owns.
    @Test func weakCrossedAndForeignSecretsAreRefusedBeforeServing() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let serve = ["serve", "--listen", "127.0.0.1:0"]
        let spaces = try await workspace.run(serve, environment: ["LIFECYCLE_SIGNING_KEY": String(repeating: " ", count: 32)])
        #expect(spaces.status == 69 && spaces.stderr.contains("too weak to sign links"), "\(spaces.status) \(spaces.stderr)")
        #expect(spaces.stderr.contains("openssl rand -hex 32"))
        for variable in ["LIFECYCLE_API_TOKEN", "LIFECYCLE_OPS_TOKEN"] {
            let repeated = try await workspace.run(serve, environment: ["LIFECYCLE_SIGNING_KEY": ServeTests.signingKey, variable: String(repeating: "x", count: 48)])
            #expect(repeated.status == 64 && repeated.stderr.contains("token is too weak: it repeats a pattern of 1 character"), "\(repeated.stderr)")
            let crossed = try await workspace.run(serve, environment: ["LIFECYCLE_SIGNING_KEY": ServeTests.signingKey, variable: ServeTests.signingKey])
            #expect(crossed.status == 64 && crossed.stderr.contains("the signing key is also the"), "\(crossed.stderr)")
        }

        // Only root can hand a file to another user; elsewhere SecretStrength's own test covers the check.
        guard geteuid() == 0 else { return }
        let file = workspace.root + "/api-token"
        try Data(ServeTests.apiToken.utf8).write(to: URL(fileURLWithPath: file))
        #expect(chmod(file, 0o600) == 0 && chown(file, 65_534, 65_534) == 0)
        let foreign = try await workspace.run(serve, environment: ["LIFECYCLE_SIGNING_KEY": ServeTests.signingKey, "LIFECYCLE_API_TOKEN_FILE": file])
        #expect(foreign.status == 77 && foreign.stderr.contains("belongs to uid 65534"), "\(foreign.status) \(foreign.stderr)")
    }

    /// Posts `count` link requests for invented addresses from `source` (a loopback address
    /// of its own), each claiming to be forwarded for an invented client, over kept-alive
    /// connections from 8 threads; prints how many got each status, and one 429's
    /// Retry-After and sentence.
    static let flood = """
        import http.client, json, sys, threading, urllib.parse
        host, port, source, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
        statuses, lock, sample = {}, threading.Lock(), {}
        def run(part):
            connection = http.client.HTTPConnection(host, port, source_address=(source, 0), timeout=30)
            for n in range(part, count, 8):
                body = urllib.parse.urlencode({"email": f"invented-{n}@example.com"})
                connection.request("POST", "/account/delete", body, {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Forwarded-For": f"198.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"})
                response = connection.getresponse()
                text = response.read().decode()
                with lock:
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                    if response.status == 429 and not sample:
                        sample.update(retry_after=response.getheader("Retry-After"), text=text)
        threads = [threading.Thread(target=run, args=(part,)) for part in range(8)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        print(json.dumps({"statuses": {str(k): v for k, v in statuses.items()}, "sample": sample}))
        """

    static func flood(_ server: ServeTests.Server, from source: String, count: Int) async throws -> (statuses: [String: Int], sample: [String: String]) {
        let parts = server.base.split(separator: ":")
        let output = try await runTool("/usr/bin/python3", ["-c", Self.flood, String(parts[0]), String(parts[1]), source, "\(count)"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
        return (json["statuses"] as? [String: Int] ?? [:], json["sample"] as? [String: String] ?? [:])
    }

    /// One client inventing addresses silenced the page for everyone: the per-address limiter
    /// refused every new address once it held 10,000, behind the usual "we've sent" page.
    /// Now a client that floods is told to wait (429, Retry-After, a sentence), a header it
    /// writes itself does not make it another client, and 10,100 invented clients and
    /// addresses through a trusted proxy leave the page to the next real user: her link is
    /// mailed and audited.
    @Test func aFloodOfInventedAddressesLeavesThePageToRealUsersAndTheFlooderIsToldToWait() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(workspace, arguments: ["--trusted-proxy", "127.0.0.3"])

        let alone = try await Self.flood(server, from: "127.0.0.1", count: 200)
        #expect(alone.statuses == ["200": 30, "429": 170], "\(alone.statuses)")
        #expect(Int(alone.sample["retry_after"] ?? "") ?? 0 > 3_000, "\(alone.sample)")
        #expect(alone.sample["text"]?.contains("Too many deletion requests came from your network in the last hour. Try again in") == true)

        let proxied = try await Self.flood(server, from: "127.0.0.3", count: 10_100)
        let admitted = proxied.statuses["200"] ?? 0
        #expect(admitted + (proxied.statuses["503"] ?? 0) == 10_100 && admitted > 1_000, "\(proxied.statuses)")
        // Every request the page took is looked up and audited; none is dropped behind its answer.
        try await DeletionPageTests.settled(workspace, requests: 30 + admitted)

        let real = try await ServeTests.curl([
            "--interface", "127.0.0.2", "--data-urlencode", "email=ada@example.com", "http://\(server.base)/account/delete",
        ])
        #expect(real.status == 200 && real.text.contains("If an account uses that address"), "\(real.text)")
        let mailed = try await eventually(timeout: 30) {
            try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("outbox")) WHERE unique_key LIKE 'deletion-link:ada:%'") == 1
        }
        #expect(mailed)
        #expect(await server.stop() == 0)
        let sent = try await workspace.query("SELECT outcome FROM \(workspace.ownTable("audit_events")) WHERE action = 'deletion.web-link' AND account_id = 'ada'")
        #expect(sent == [["sent"]])
    }
}
