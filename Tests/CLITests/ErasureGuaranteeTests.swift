import ChildProcesses
import Foundation
import JobRunner
import Lifecycle
import PostgresTesting
import Testing

/// What a purge receipt promises (DESIGN.md, "Erasure guarantees"), on the social app of
/// the tests and on both backends: every reference to a row the purge erases is mapped or
/// deliberately ignored; nothing irreversible happens before the rows are gone, and a
/// refusal by the database leaves every row and every file in place, names the table and
/// the cause, and the purge goes through once the cause is gone; only a verification
/// read after erasure makes an account purged; a file another row still names stays.
@Suite(.serialized)
struct ErasureGuaranteeTests {
    let app = AppPurgeTests()

    func socialMap() throws -> String { try DataMapCheckTests.AppSchema.social.map }

    /// The social app with its map changed by `edit` and extra DDL, checked by `map check`.
    func check(_ backend: Backend, ddl: String = "", map edit: (String) -> String, arguments: [String] = []) async throws -> CommandResult {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += "\n" + ddl
        schema.map = edit(schema.map)
        let workspace = try await app.schemas.install(schema, backend)
        return try await workspace.run(["map", "check"] + arguments)
    }

    /// Rows of every app table of the social schema, as text, to compare before and after.
    func everything(_ workspace: Workspace) async throws -> [String] {
        var all: [String] = []
        for table in ["members", "statuses", "media", "media_variants", "favourites", "follows", "messages"] {
            all += try await app.rows(workspace, "SELECT * FROM \(table) ORDER BY 1, 2").map { "\(table): \($0)" }
        }
        return all
    }

    func receipt(_ workspace: Workspace, of key: String = "1") async throws -> String? {
        try await workspace.auditRows(of: key).first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail
    }

    /// An hour on, past any backoff a failed attempt set.
    static let later = ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(3_600))]
    static let muchLater = ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(86_400))]

    // MARK: - Coverage, column by column

    @Test(arguments: Backend.allCases)
    func aSecondOwnerColumnIsNamed(_ backend: Backend) async throws {
        let result = try await check(backend) {
            $0.replacingOccurrences(of: "    owners: [follower_id, followee_id]", with: "    owner: follower_id")
        }
        #expect(result.status == 65, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("follows.followee_id references"), "\(result.stderr)")
        #expect(result.stderr.contains("is mapped through another column"), "\(result.stderr)")
        #expect(result.stderr.contains("`owners:`"), "\(result.stderr)")
    }

    /// A kept (masked) user row still has other tables pointing at it: their rows would
    /// keep the user's data, whatever their ON DELETE says.
    @Test(arguments: Backend.allCases)
    func tablesReferencingAMaskedRowAreNamedWithTheLineToAdd(_ backend: Backend) async throws {
        let ddl = """
            CREATE TABLE logins (id integer PRIMARY KEY, member_id integer NOT NULL REFERENCES members(id) ON DELETE CASCADE, ip text);
            CREATE TABLE devices (id integer PRIMARY KEY, login_id integer NOT NULL REFERENCES logins(id) ON DELETE CASCADE, name text);
            """
        let masked = try await check(backend, ddl: ddl) {
            $0.replacingOccurrences(of: "  erase: delete\n\ntables:", with: """
                  erase:
                    mask: {handle: "deleted-{key}", email: "deleted-{key}@invalid", pw: null, avatar_key: null}

                tables:
                """)
        }
        #expect(masked.status == 65, "\(masked.stdout) \(masked.stderr)")
        #expect(masked.stderr.contains("logins.member_id references"), "\(masked.stderr)")
        #expect(masked.stderr.contains("keeps masked"), "\(masked.stderr)")
        #expect(masked.stderr.contains("- {table: logins, owner: member_id}"), "\(masked.stderr)")

        // Mapped, the logins go; the devices under them the database deletes itself.
        let mapped = try await check(backend, ddl: ddl) {
            $0.replacingOccurrences(of: "  erase: delete\n\ntables:", with: """
                  erase:
                    mask: {handle: "deleted-{key}", email: "deleted-{key}@invalid", pw: null, avatar_key: null}

                tables:
                  - table: logins
                    owner: member_id
                """)
        }
        #expect(mapped.status == 0, "\(mapped.stdout) \(mapped.stderr)")
        #expect(mapped.stdout.contains("deleted by the database:") && mapped.stdout.contains("devices.login_id"), "\(mapped.stdout)")
    }

    @Test(arguments: Backend.allCases)
    func anIgnoreThatWouldMakeThePurgeFailIsRefusedAndOneTheDatabaseHandlesIsNot(_ backend: Backend) async throws {
        let refused = try await check(backend) {
            $0.replacingOccurrences(of: "    cascade: [favourites.status_id]\n", with: "")
                .replacingOccurrences(of: """
                  - table: favourites
                    owner: member_id
                    export_file: favourites
                    columns: [status_id, created_at]
                    timestamps: [created_at]
                    order_by: [created_at, status_id]

                """, with: "") + "\nignore:\n  - table: favourites\n    reason: counted elsewhere\n"
        }
        #expect(refused.status == 65, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("favourites is ignored"), "\(refused.stderr)")
        #expect(refused.stderr.contains("would make every purge fail"), "\(refused.stderr)")

        let handled = try await check(backend, ddl: "CREATE TABLE bookmarks (member_id integer NOT NULL REFERENCES members(id) ON DELETE CASCADE, url text);") {
            $0 + "\nignore:\n  - table: bookmarks\n    reason: the database deletes them with the member\n"
        }
        #expect(handled.status == 0, "\(handled.stdout) \(handled.stderr)")
    }

    @Test(arguments: Backend.allCases)
    func columnsThatLookLikeTheUsersKeyAreWarnedWithTheLineToAdd(_ backend: Backend) async throws {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += """

            CREATE TABLE api_tokens (id integer PRIMARY KEY, user_id integer, token text);
            CREATE TABLE events (id integer PRIMARY KEY, payload json);
            """
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, #"INSERT INTO events (id, payload) VALUES (1, '{"actor_id": 1, "action": "login"}');"#)
        let result = try await workspace.run(["map", "check"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("warning: api_tokens.user_id"), "\(result.stderr)")
        #expect(result.stderr.contains("owner: user_id}"), "\(result.stderr)")
        #expect(result.stderr.contains("warning: events.payload"), "\(result.stderr)")
        #expect(result.stderr.contains("owner: {column: payload, json: actor_id}"), "\(result.stderr)")
        let strict = try await workspace.run(["map", "check", "--strict"])
        #expect(strict.status == 65, "\(strict.stderr)")
        let json = try await workspace.run(["map", "check", "--json"])
        #expect(json.stdout.contains(#""json_key":"actor_id""#), "\(json.stdout)")
    }

    // MARK: - Owners no foreign key can name

    static let ownersDDL = """
        CREATE TABLE events (id integer PRIMARY KEY, payload json, happened_at timestamp);
        CREATE TABLE content_types (id integer PRIMARY KEY, app_label varchar(100) NOT NULL, model varchar(100) NOT NULL);
        CREATE TABLE admin_log (
            id integer PRIMARY KEY,
            actor_id integer REFERENCES members(id),
            content_type_id integer REFERENCES content_types(id),
            object_id text,
            message text
        );
        """

    static let ownersMap = """

          - table: events
            owner: {column: payload, json: actor_id}

          - table: admin_log
            owners:
              - actor_id
              - column: object_id
                type: {column: content_type_id, table: content_types, match: {app_label: social, model: member}}
        """

    @Test(arguments: Backend.allCases)
    func rowsOwnedThroughAJSONPayloadAndAGenericRelationAreErased(_ backend: Backend) async throws {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += "\n" + Self.ownersDDL
        schema.map += Self.ownersMap
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, AppPurgeTests.socialSeed + """

            INSERT INTO events (id, payload, happened_at) VALUES
              (1, '{"actor_id": 1, "action": "login"}', '2025-01-01 00:00:00'),
              (2, '{"actor_id": "1", "action": "logout"}', '2025-01-02 00:00:00'),
              (3, '{"actor_id": 2, "action": "login"}', '2025-01-03 00:00:00'),
              (4, '{"actor_id": 11}', '2025-01-04 00:00:00'),
              (5, '[1, 2]', '2025-01-05 00:00:00'),
              (6, NULL, '2025-01-06 00:00:00');
            INSERT INTO content_types (id, app_label, model) VALUES (1, 'social', 'member'), (2, 'social', 'status');
            INSERT INTO admin_log (id, actor_id, content_type_id, object_id, message) VALUES
              (1, 2, 1, '1', 'bob edited ada'),
              (2, 2, 2, '1', 'bob edited a status whose id is 1'),
              (3, 1, 1, '2', 'ada edited bob'),
              (4, 2, 1, '3', 'bob edited cy');
            """)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in AppPurgeTests.socialFiles { _ = try await blobs.put(key: key, data: Data("file \(key)".utf8)) }
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.contains("payload->actor_id"), "\(check.stdout)")

        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(try await app.rows(workspace, "SELECT id FROM events ORDER BY id") == ["3", "4", "5", "6"])
        #expect(try await app.rows(workspace, "SELECT id FROM admin_log ORDER BY id") == ["2", "4"])
        let receipt = try #require(try await receipt(workspace))
        #expect(receipt.contains(#""events":{"after":0,"before":2,"deleted":2,"masked":0}"#), "\(receipt)")
        #expect(receipt.contains(#""admin_log":{"after":0,"before":2,"deleted":2,"masked":0}"#), "\(receipt)")
    }

    // MARK: - Reversible until sure

    /// A trigger that refuses deletes (Supabase Storage has one): the purge fails naming the
    /// table and the trigger's words, every row and every file stays, and once the trigger
    /// is gone the next attempt purges.
    @Test(arguments: Backend.allCases)
    func aTriggerThatRefusesDeletesLeavesEveryRowAndFileUntilItIsGone(_ backend: Backend) async throws {
        let workspace = try await app.installSocial(backend)
        let trigger = switch backend {
        case .sqlite: """
            CREATE TRIGGER no_deletes BEFORE DELETE ON statuses BEGIN SELECT RAISE(ABORT, 'statuses are kept forever'); END;
            """
        case .postgres: """
            CREATE FUNCTION no_deletes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'statuses are kept forever'; END $$;
            CREATE TRIGGER no_deletes BEFORE DELETE ON statuses FOR EACH ROW EXECUTE FUNCTION no_deletes();
            """
        }
        try await app.seed(workspace, trigger)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let before = try await everything(workspace)
        let files = app.files(workspace)

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 75, "\(purge.stdout) \(purge.stderr)")
        let said = purge.stdout + purge.stderr
        #expect(said.contains("the database refused deleting rows of statuses"), "\(said)")
        #expect(said.contains("statuses are kept forever"), "\(said)")
        #expect(try await everything(workspace) == before)
        #expect(app.files(workspace) == files)
        #expect(try await receipt(workspace) == nil)

        try await app.seed(workspace, "DROP TRIGGER no_deletes\(backend == .postgres ? " ON statuses" : "");")
        let again = try await workspace.run(["purge"], environment: Self.later)
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        #expect(again.stdout.contains("1 purged"), "\(again.stdout)")
        try await app.expectAdaPurged(workspace, catalog: try await app.appCatalog(workspace))
    }

    /// A login role that may read and change the app's and lifecycle's tables but does not
    /// bypass row level security, after `sql` (the policies) ran as the superuser; and the
    /// workspace as that role connects to it.
    func roleWithoutBypass(_ workspace: Workspace, then sql: String) async throws -> (workspace: Workspace, role: String) {
        let role = "lifecycle_" + UUID().uuidString.prefix(8).lowercased()
        try await app.seed(workspace, """
            CREATE ROLE \(role) LOGIN PASSWORD 'role-secret' NOBYPASSRLS;
            GRANT USAGE ON SCHEMA public, lifecycle TO \(role);
            GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public, lifecycle TO \(role);
            GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public, lifecycle TO \(role);
            \(sql)
            """)
        var asRole = workspace
        let url = try #require(workspace.postgresURL)
        asRole.postgresURL = url.replacingOccurrences(of: #"postgres://[^@]+@"#, with: "postgres://\(role):role-secret@", options: .regularExpression)
        asRole.initialisesOnFirstCommand = false
        return (asRole, role)
    }

    /// A role held back by row level security sees none of ada's rows: without the check a
    /// purge would delete nothing and report success.
    @Test
    func rowLevelSecurityThatHidesRowsIsRefusedUntilTheRoleBypassesIt() async throws {
        let workspace = try await app.installSocial(.postgres)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let (asRole, role) = try await roleWithoutBypass(workspace, then: """
            ALTER TABLE statuses ENABLE ROW LEVEL SECURITY;
            CREATE POLICY members_see_nothing ON statuses USING (false);
            """)
        let before = try await everything(workspace)
        let files = app.files(workspace)

        let check = try await asRole.run(["map", "check"])
        #expect(check.status == 77, "\(check.stdout) \(check.stderr)")
        #expect(check.stderr.contains("statuses has row level security"), "\(check.stderr)")
        #expect(check.stderr.contains("BYPASSRLS"), "\(check.stderr)")

        // A permanent cause, not a retry: 77, the account still pending (signing in restores
        // it), the job handed back with no attempt used, and a second run says the same.
        for _ in 1...2 {
            let purge = try await asRole.run(["purge"])
            #expect(purge.status == 77, "\(purge.stdout) \(purge.stderr)")
            #expect((purge.stdout + purge.stderr).contains("statuses has row level security"), "\(purge.stdout) \(purge.stderr)")
            #expect(try await everything(workspace) == before)
            #expect(app.files(workspace) == files)
            #expect(try await app.rows(workspace, "SELECT state FROM lifecycle.subjects WHERE subject_key = '1'") == ["pendingDeletion"])
            #expect(try await app.rows(workspace, "SELECT state, attempt FROM lifecycle.jobs WHERE kind = 'deletion.purge'") == ["queued|0"])
        }
        // Due since the request, and as overdue as the job of an account whose grace ended long ago.
        let waiting = try await asRole.run(["jobs", "check", "--overdue-after", "0"])
        #expect(waiting.status != 0 && (waiting.stdout + waiting.stderr).contains("row level security"), "\(waiting.status) \(waiting.stdout) \(waiting.stderr)")

        let export = try await asRole.run(["export", "bob", "--output", workspace.root + "/bob.zip"])
        #expect(export.status != 0, "an export under row level security handed out part of an account: \(export.stdout)")

        try await app.seed(workspace, "ALTER ROLE \(role) BYPASSRLS;")
        let again = try await asRole.run(["purge"], environment: Self.later)
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        try await app.expectAdaPurged(workspace, catalog: try await app.appCatalog(workspace))
    }

    /// A deletion asked of a role that row level security keeps from the user table is not
    /// "no account": the row may be there. 77, naming the table and what the role lacks; the
    /// account untouched.
    @Test
    func aDeletionByARoleThatCannotSeeTheUserTableIsRefusedNotNoAccount() async throws {
        let workspace = try await app.installSocial(.postgres)
        #expect(try await workspace.run(["accounts", "show", "cy"]).status == 0)
        let (asRole, _) = try await roleWithoutBypass(workspace, then: """
            ALTER TABLE members ENABLE ROW LEVEL SECURITY;
            CREATE POLICY only_cy ON members USING (handle = 'cy');
            """)
        let before = try await everything(workspace)

        let hidden = try await asRole.run(["delete", "bob", "--operator", "sam", "--reason", "test", "--immediately"])
        #expect(hidden.status == 77, "\(hidden.stdout) \(hidden.stderr)")
        #expect(hidden.stderr.contains("members has row level security") && !hidden.stderr.contains("no account with"), "\(hidden.stderr)")
        #expect(try await everything(workspace) == before)
        let shown = try await asRole.run(["accounts", "show", "bob"])
        #expect(shown.status == 77 && shown.stderr.contains("members has row level security"), "\(shown.stdout) \(shown.stderr)")
        // The account it can see is found as before.
        let seen = try await asRole.run(["accounts", "show", "cy", "--json"])
        #expect(seen.status == 0, "\(seen.stdout) \(seen.stderr)")
    }

    // MARK: - Verified

    /// The app writes a row for the user as the purge erases (here a trigger re-creating a
    /// note): the verification read finds it, the account stays purging, no receipt is
    /// written, and the purge goes through once the writer stops.
    @Test(arguments: Backend.allCases)
    func rowsWrittenAfterErasureFailTheVerificationInsteadOfRecordingPurged(_ backend: Backend) async throws {
        var schema = try DataMapCheckTests.AppSchema.social
        schema.ddl += "\nCREATE TABLE notes (id integer PRIMARY KEY, member_id integer, body text);\n"
        schema.map += "\n  - table: notes\n    owner: member_id\n"
        let workspace = try await app.schemas.install(schema, backend)
        try await app.seed(workspace, AppPurgeTests.socialSeed + "\nINSERT INTO notes (id, member_id, body) VALUES (1, 1, 'ada'), (2, 2, 'bob');")
        let writer = switch backend {
        case .sqlite: """
            CREATE TRIGGER again AFTER DELETE ON notes WHEN OLD.member_id = 1
            BEGIN INSERT INTO notes (id, member_id, body) VALUES ((SELECT MAX(id) + 1 FROM notes), 1, 'written back'); END;
            """
        case .postgres: """
            CREATE FUNCTION again() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO notes (id, member_id, body) VALUES ((SELECT MAX(id) + 1 FROM notes), 1, 'written back'); RETURN OLD; END $$;
            CREATE TRIGGER again AFTER DELETE ON notes FOR EACH ROW WHEN (OLD.member_id = 1) EXECUTE FUNCTION again();
            """
        }
        try await app.seed(workspace, writer)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)

        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 75, "\(purge.stdout) \(purge.stderr)")
        #expect((purge.stdout + purge.stderr).contains("verification found 1 row(s) of notes"), "\(purge.stdout) \(purge.stderr)")
        #expect(try await receipt(workspace) == nil)
        let state = backend == .postgres ? "lifecycle.subjects" : "lifecycle_subjects"
        #expect(try await app.rows(workspace, "SELECT state FROM \(state) WHERE subject_key = '1'") == ["purging"])

        try await app.seed(workspace, "DROP TRIGGER again\(backend == .postgres ? " ON notes" : "");")
        let again = try await workspace.run(["purge"], environment: Self.later)
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        #expect(try await app.rows(workspace, "SELECT member_id FROM notes ORDER BY id") == ["2"])
        let receipt = try #require(try await receipt(workspace))
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")
    }

    // MARK: - Contained

    /// Bob's row names ada's file: it stays, and the receipt says so.
    @Test(arguments: Backend.allCases)
    func aFileAnotherRowStillNamesIsKept(_ backend: Backend) async throws {
        let workspace = try await app.installSocial(backend)
        try await app.seed(workspace, "INSERT INTO media (id, status_id, file_key) VALUES (103, 14, 'media/100.jpg');")
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(app.files(workspace) == ["avatars/2.jpg", "media/100.jpg", "media/102.jpg", "media/102-s.jpg"])
        let receipt = try #require(try await receipt(workspace))
        #expect(receipt.contains(#""blobs":3,"#) && receipt.contains(#""blobs_kept":1"#), "\(receipt)")
    }

    // MARK: - The rehearsal

    struct Preview: Decodable {
        var account: String
        var erase: [String: PurgeCounts]?
        var refused: String?
    }

    struct Receipt: Decodable {
        struct Table: Decodable {
            var deleted: Int
            var masked: Int
        }
        var rows: [String: Table]
    }

    @Test(arguments: Backend.allCases)
    func theDryRunRehearsesAndReportsTheCountsThePurgeThenWrites(_ backend: Backend) async throws {
        let workspace = try await app.installSocial(backend)
        let catalog = try await app.appCatalog(workspace)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let before = try await everything(workspace)
        let dryRun = try await workspace.run(["purge", "--dry-run", "--json"])
        #expect(dryRun.status == 0, "\(dryRun.stderr)")
        let previews = try JSONDecoder().decode([Preview].self, from: Data(dryRun.stdout.utf8))
        let rehearsed = try #require(previews.first?.erase)
        #expect(try await everything(workspace) == before)

        let rehearsal = try await workspace.run(["map", "check", "--account", "ada@example.com"])
        #expect(rehearsal.status == 0, "\(rehearsal.stderr)")
        #expect(rehearsal.stdout.contains("statuses: 2 deleted, 1 masked"), "\(rehearsal.stdout)")
        #expect(try await everything(workspace) == before)

        #expect(try await workspace.run(["purge"]).stdout.contains("1 purged"))
        try await app.expectAdaPurged(workspace, catalog: catalog)
        let receipt = try JSONDecoder().decode(Receipt.self, from: Data(try #require(try await receipt(workspace)).utf8))
        let written = receipt.rows.mapValues { PurgeCounts(deleted: $0.deleted, masked: $0.masked) }
        #expect(written == rehearsed, "rehearsed \(rehearsed), purged \(written)")
    }

    @Test(arguments: Backend.allCases)
    func theDryRunNamesARefusalAndExits75(_ backend: Backend) async throws {
        let workspace = try await app.installSocial(backend)
        let trigger = switch backend {
        case .sqlite: "CREATE TRIGGER keep BEFORE UPDATE ON messages BEGIN SELECT RAISE(ABORT, 'messages are evidence'); END;"
        case .postgres: """
            CREATE FUNCTION keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'messages are evidence'; END $$;
            CREATE TRIGGER keep BEFORE UPDATE ON messages FOR EACH ROW EXECUTE FUNCTION keep();
            """
        }
        try await app.seed(workspace, trigger)
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let before = try await everything(workspace)
        let dryRun = try await workspace.run(["purge", "--dry-run"])
        #expect(dryRun.status == 75, "\(dryRun.stdout) \(dryRun.stderr)")
        #expect(dryRun.stdout.contains("would fail: the database refused masking rows of messages"), "\(dryRun.stdout)")
        #expect(dryRun.stdout.contains("messages are evidence"), "\(dryRun.stdout)")
        #expect(try await everything(workspace) == before)
    }
}

/// The product's app on Supabase's real `auth` schema (GoTrue's 70 migrations, reproduced in
/// Tests/Fixtures/supabase/platform.sql): a map that masks auth.users but maps nothing that
/// points at it is refused naming each table, and the shipped map leaves nothing of the user
/// in `auth`: identities, sessions, live refresh tokens, MFA factors and their challenges,
/// one-time tokens, flow state, passkeys, the audit log's payloads.
@Suite(.serialized)
struct SupabaseAuthErasureTests {
    let app = AppPurgeTests()
    static let ada = AppPurgeTests.ada
    static let bob = AppPurgeTests.bob

    static let authSeed = """
        INSERT INTO auth.identities (provider_id, user_id, identity_data, provider, created_at) VALUES
          ('\(ada)', '\(ada)', '{"sub": "\(ada)", "email": "ada@example.com"}', 'email', now()),
          ('\(bob)', '\(bob)', '{"sub": "\(bob)", "email": "bob@example.com"}', 'email', now());
        INSERT INTO auth.sessions (id, user_id, created_at, user_agent, ip) VALUES
          ('5e000000-0000-4000-8000-00000000000a', '\(ada)', now(), 'Safari', '192.0.2.1'),
          ('5e000000-0000-4000-8000-00000000000b', '\(bob)', now(), 'Firefox', '192.0.2.2');
        INSERT INTO auth.refresh_tokens (token, user_id, revoked, session_id, created_at) VALUES
          ('ada-revoked-token', '\(ada)', true, '5e000000-0000-4000-8000-00000000000a', now() - interval '1 day'),
          ('ada-live-token', '\(ada)', false, '5e000000-0000-4000-8000-00000000000a', now()),
          ('ada-legacy-token', '\(ada)', false, NULL, now()),
          ('bob-token', '\(bob)', false, '5e000000-0000-4000-8000-00000000000b', now());
        INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at, secret) VALUES
          ('fa000000-0000-4000-8000-00000000000a', '\(ada)', 'phone app', 'totp', 'verified', now(), now(), 'ADA-TOTP-SECRET'),
          ('fa000000-0000-4000-8000-00000000000b', '\(bob)', 'phone app', 'totp', 'verified', now(), now(), 'BOB-TOTP-SECRET');
        INSERT INTO auth.mfa_challenges (id, factor_id, created_at, ip_address) VALUES
          ('c4000000-0000-4000-8000-00000000000a', 'fa000000-0000-4000-8000-00000000000a', now(), '192.0.2.1');
        INSERT INTO auth.one_time_tokens (id, user_id, token_type, token_hash, relates_to) VALUES
          ('07000000-0000-4000-8000-00000000000a', '\(ada)', 'recovery_token', 'hash-a', 'ada@example.com');
        INSERT INTO auth.flow_state (id, user_id, provider_type, authentication_method, auth_code) VALUES
          ('f1000000-0000-4000-8000-00000000000a', '\(ada)', 'github', 'oauth', 'code-a');
        INSERT INTO auth.webauthn_credentials (user_id, credential_id, public_key, friendly_name) VALUES
          ('\(ada)', '\\x01', '\\x02', 'ada''s passkey');
        INSERT INTO auth.audit_log_entries (id, payload, created_at, ip_address) VALUES
          ('a0000000-0000-4000-8000-00000000000a', '{"actor_id": "\(ada)", "actor_username": "ada@example.com", "action": "login"}', now(), '192.0.2.1'),
          ('a0000000-0000-4000-8000-00000000000b', '{"actor_id": "\(bob)", "actor_username": "bob@example.com", "action": "login"}', now(), '192.0.2.2');
        """

    /// Every auth table that names a user, with how to find ada's rows in it.
    static let adasAuthRows = [
        "auth.identities WHERE user_id = '\(ada)'", "auth.sessions WHERE user_id = '\(ada)'",
        "auth.refresh_tokens WHERE user_id = '\(ada)'", "auth.mfa_factors WHERE user_id = '\(ada)'",
        "auth.mfa_challenges WHERE factor_id = 'fa000000-0000-4000-8000-00000000000a'", "auth.one_time_tokens WHERE user_id = '\(ada)'",
        "auth.flow_state WHERE user_id = '\(ada)'", "auth.webauthn_credentials WHERE user_id = '\(ada)'",
        "auth.audit_log_entries WHERE payload::text LIKE '%ada@example.com%'", "auth.users WHERE email = 'ada@example.com'",
        "storage.objects WHERE owner_id = '\(ada)'",
    ]

    @Test
    func aMapThatMasksAuthUsersButMapsNothingPointingAtItIsRefusedNamingEachTable() async throws {
        var schema = try DataMapCheckTests.AppSchema.supabase
        // The map as it was before this check existed: auth.users masked, nothing under it.
        schema.map = schema.map.replacingOccurrences(of: "include: [supabase]\n", with: "").replacingOccurrences(of: "\ntables:\n", with: """

            tables:
              - table: auth.users
                owner: id
                erase: {mask: {email: "deleted-{key}@users.invalid", encrypted_password: ""}}

            """)
        let workspace = try await app.schemas.install(schema, .postgres)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 65, "\(check.stdout) \(check.stderr)")
        for column in ["auth.identities.user_id", "auth.sessions.user_id", "auth.mfa_factors.user_id", "auth.one_time_tokens.user_id",
                       "auth.webauthn_credentials.user_id", "auth.oauth_consents.user_id"] {
            #expect(check.stderr.contains("\(column) references auth.users, whose rows the purge keeps masked"), "\(column): \(check.stderr)")
        }
    }

    /// Storage's objects as Storage writes them: owner and owner_id both the user's id.
    static let storageSeed = """
        INSERT INTO storage.buckets (id, name) VALUES ('media', 'media');
        INSERT INTO storage.objects (bucket_id, name, owner, owner_id, metadata) VALUES
          ('media', 'avatars/ada.jpg', '\(ada)', '\(ada)', '{"size": 8, "mimetype": "image/jpeg"}'),
          ('media', 'journal/ada/run.jpg', '\(ada)', '\(ada)', '{"size": 19, "mimetype": "image/jpeg"}'),
          ('media', 'avatars/bob.jpg', '\(bob)', '\(bob)', '{"size": 8, "mimetype": "image/jpeg"}');
        """

    /// What names ada, or a row only she has: her id, email, hash and secrets, her session
    /// and TOTP factor (their rows name no user), her files and words.
    static let adasMarks = [
        ada, "ada@example.com", "$2b$04$417W2BL6", "ADA-TOTP-SECRET", "ada-live-token", "ada-revoked-token", "ada-legacy-token", "hash-a", "code-a",
        "5e000000-0000-4000-8000-00000000000a", "fa000000-0000-4000-8000-00000000000a", "avatars/ada", "journal/ada", "tempo run",
    ]

    /// Every row of every table of the platform's schemas and the app's, as PostgreSQL
    /// prints it, prefixed with its table.
    func everyRow(_ workspace: Workspace) async throws -> [String] {
        let tables = try await app.rows(workspace, """
            SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables
            WHERE table_schema IN ('auth', 'storage', 'public') AND table_type = 'BASE TABLE' ORDER BY 1
            """)
        #expect(tables.count > 20, "\(tables)")
        var rows: [String] = []
        for table in tables {
            rows += try await app.rows(workspace, "SELECT t::text FROM \(table) t").map { "\(table) \($0)" }
        }
        return rows
    }

    @Test
    func theShippedMapLeavesNothingOfTheUserInAuthStorageOrTheAppAndEveryOtherRowAsItWas() async throws {
        let workspace = try await app.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + Self.authSeed + "\n" + Self.storageSeed)
        for query in Self.adasAuthRows {
            #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM \(query)") != ["0"], "\(query) holds nothing to erase")
        }
        // Storage's guard is there: SQL cannot delete an object without the setting.
        let guarded = try await workspace.run(["map", "check", "--account", "ada@example.com"])
        #expect(guarded.status == 0, "\(guarded.stdout) \(guarded.stderr)")
        #expect(guarded.stdout.contains("storage.objects"), "\(guarded.stdout)")
        let before = try await everyRow(workspace)
        func isAdas(_ row: String) -> Bool { Self.adasMarks.contains { row.contains($0) } }
        #expect(before.filter(isAdas).count >= 20, "\(before.filter(isAdas))")

        let right = try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: "hunter2")
        #expect(right.status == 0, "\(right.stderr)")
        let purge = try await workspace.run(["purge"], environment: ErasureGuaranteeTests.muchLater.merging(
            ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))]) { $1 })
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        for query in Self.adasAuthRows {
            #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM \(query)") == ["0"], "\(query)")
        }
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth.audit_log_entries WHERE payload IS NULL") == ["1"])

        let after = try await everyRow(workspace)
        // What names her now is the two tombstones the maps keep (the profile and auth.users),
        // with nothing but her id and the masked address.
        let left = after.filter(isAdas)
        #expect(left.count == 2 && left.allSatisfy { $0.hasPrefix("auth.users (,\(Self.ada),") || $0.hasPrefix("public.users (\(Self.ada),") }, "\(left)")
        for mark in Self.adasMarks.dropFirst() {
            #expect(!left.contains { $0.contains(mark) }, "\(mark) in \(left)")
        }
        // Every other row, bob's and the platform's, byte for byte; and nothing new but the
        // emptied audit entry.
        let othersBefore = Set(before.filter { !isAdas($0) })
        let othersAfter = Set(after.filter { !isAdas($0) })
        #expect(othersBefore.subtracting(othersAfter).isEmpty, "\(othersBefore.subtracting(othersAfter))")
        let new = othersAfter.subtracting(othersBefore)
        #expect(new.count == 1 && new.allSatisfy { $0.hasPrefix("auth.audit_log_entries (,a0000000-0000-4000-8000-00000000000a,") }, "\(new)")

        let receipt = try #require(try await workspace.auditRows(of: Self.ada).first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        // Its sessions and refresh tokens went when deletion was asked for (the preset's on_deletion).
        #expect(receipt.contains(#""auth.identities":{"after":0,"before":1,"deleted":1,"masked":0}"#), "\(receipt)")
        #expect(receipt.contains(#""storage.objects":{"after":0,"before":2,"deleted":2,"masked":0}"#), "\(receipt)")
        #expect(!receipt.contains("auth.refresh_tokens"), "\(receipt)")
        #expect(receipt.contains(#""auth.audit_log_entries":{"after":0,"before":1,"deleted":0,"masked":1}"#), "\(receipt)")
    }

    @Test
    func storagesDeleteGuardStillRefusesWhatTheMapDoesNotSetItFor() async throws {
        var schema = try DataMapCheckTests.AppSchema.supabase
        // The preset's entry, as a map would write it without the setting.
        schema.map = schema.map.replacingOccurrences(of: "\ntables:\n", with: """

            tables:
              - table: storage.objects
                owners: [owner_id, owner]

            """)
        let workspace = try await app.schemas.install(schema, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + Self.authSeed + "\n" + Self.storageSeed)
        #expect(try await workspace.run(["init"]).status == 0)
        let rehearsal = try await workspace.run(["map", "check", "--account", "ada@example.com"])
        #expect(rehearsal.status == 75, "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect((rehearsal.stdout + rehearsal.stderr).contains("storage.objects"), "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect((rehearsal.stdout + rehearsal.stderr).contains("Direct deletion from storage tables is not allowed"), "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM storage.objects") == ["3"])
    }
}

extension SupabaseAuthErasureTests {
    /// GoTrue's access token hook event (supabase.com/docs/guides/auth/auth-hooks/custom-access-token-hook).
    static func hookEvent(_ user: String, method: String) -> String {
        """
        {"user_id": "\(user)", "authentication_method": "\(method)",
         "claims": {"aud": "authenticated", "sub": "\(user)", "role": "authenticated", "aal": "aal1", "session_id": "5e000000-0000-4000-8000-0000000000ff", "is_anonymous": false}}
        """
    }

    @Test
    func deletionSignsTheUserOutOfGoTrueAndSigningInAgainRestoresThroughTheHook() async throws {
        let workspace = try await app.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + Self.authSeed)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout.contains("presets: supabase") && check.stdout.contains("on deletion request: remove the rows of auth.sessions by user_id"), "\(check.stdout)")
        let bobs = """
            SELECT (SELECT string_agg(id::text, ',') FROM auth.sessions WHERE user_id = '\(Self.bob)') || '|' ||
                   (SELECT string_agg(token || revoked::text, ',') FROM auth.refresh_tokens WHERE user_id = '\(Self.bob)')
            """
        let bobsBefore = try await app.rows(workspace, bobs)
        let adasUser = "SELECT email, encrypted_password FROM auth.users WHERE id = '\(Self.ada)'"
        let adasUserBefore = try await app.rows(workspace, adasUser)

        let request = try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: "hunter2")
        #expect(request.status == 0, "\(request.stderr)")
        // Sessions are counted as sessions: her one, not the refresh tokens that went with it
        // (by the session's cascade) nor those removed besides (the legacy one, the one-time link).
        #expect(request.stdout.contains("1 session(s) signed out, 2 token(s) revoked"), "\(request.stdout)")
        // No session to refresh, no refresh token to trade, no one-time link to follow;
        // signing in again stays possible (the identity and the password are there).
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth.sessions WHERE user_id = '\(Self.ada)'") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth.refresh_tokens WHERE user_id = '\(Self.ada)' AND NOT revoked") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth.one_time_tokens WHERE user_id = '\(Self.ada)'") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth.identities WHERE user_id = '\(Self.ada)'") == ["1"])
        #expect(try await app.rows(workspace, adasUser) == adasUserBefore)
        #expect(try await app.rows(workspace, bobs) == bobsBefore)
        let state = "SELECT state FROM lifecycle.subjects WHERE subject_key = '\(Self.ada)'"
        #expect(try await app.rows(workspace, state) == ["pendingDeletion"])

        // A token refresh is not a sign-in: nothing changes, and the claims pass through.
        let refresh = try await app.rows(workspace, "SELECT lifecycle.custom_access_token_hook('\(Self.hookEvent(Self.ada, method: "token_refresh"))'::jsonb)->'claims'->>'sub'")
        #expect(refresh == [Self.ada])
        #expect(try await app.rows(workspace, state) == ["pendingDeletion"])

        // A sign-in with the password, as GoTrue calls the hook (its own role), restores.
        let url = workspace.database, event = Self.hookEvent(Self.ada, method: "password")
        let signIn = try await onThreadOfItsOwn {
            try psqlQuery(url, "SET ROLE supabase_auth_admin; SELECT lifecycle.custom_access_token_hook('\(event)'::jsonb)->'claims'->>'role'")
        }
        #expect(signIn.split(separator: "\n").last == "authenticated", "\(signIn)")
        #expect(try await app.rows(workspace, state) == ["active"])
        #expect(try await app.rows(workspace, "SELECT state FROM lifecycle.jobs WHERE unique_key = 'purge:\(Self.ada)'") == ["cancelled"])
        let restored = try await workspace.auditRows(of: Self.ada).last
        #expect(restored?.action == "deletion.restore" && restored?.actor == "sign-in" && restored?.outcome == "restored")
        #expect(try await workspace.run(["accounts", "show", "ada@example.com"]).stdout.contains("active"))

        // Past the purge date (here: moved there) a sign-in gets no token and restores nothing.
        #expect(try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: "hunter2").status == 0)
        try await app.seed(workspace, "UPDATE lifecycle.subjects SET purge_after = now() - interval '1 minute' WHERE subject_key = '\(Self.ada)';")
        let late = try await app.rows(workspace, "SELECT lifecycle.custom_access_token_hook('\(Self.hookEvent(Self.ada, method: "password"))'::jsonb)->'error'->>'http_code'")
        #expect(late == ["403"])
        #expect(try await app.rows(workspace, state) == ["pendingDeletion"])
        // Someone with no deletion pending signs in as ever.
        let bob = try await app.rows(workspace, "SELECT lifecycle.custom_access_token_hook('\(Self.hookEvent(Self.bob, method: "password"))'::jsonb)->'claims'->>'sub'")
        #expect(bob == [Self.bob])
    }
}

/// A purge of an app's account killed (SIGKILL) just after each of its steps, then run
/// again: the end state and the receipt are those of a purge never interrupted.
@Suite(.serialized)
struct AppPurgeStepBoundaryKillTests {
    let app = AppPurgeTests()

    @Test(arguments: Backend.allCases)
    func killedAfterEachStepThenRerunEndsAsAPurgeNeverInterrupted(_ backend: Backend) async throws {
        // One row and one file per batch, with pauses: each step outlasts the poll between
        // the boundary and the kill, so the kill lands before the next step is done. Only the
        // first and last steps record themselves done (the two between run in every attempt),
        // so each boundary is told by what the step leaves: the account purging, the user
        // row gone, every recorded file settled.
        let policy = "deletion:\n  purge_row_batch: 1\n  purge_blob_batch: 1\n  batch_pause_milliseconds: 300\n"
        var landed: [String] = []
        for (boundary, step) in ["lock-and-mark", "erase-rows", "delete-files"].enumerated() {
            let workspace = try await app.installSocial(backend, policy: policy)
            let catalog = try await app.appCatalog(workspace)
            #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
            let subjects = workspace.ownTable("subjects"), files = workspace.ownTable("purge_files")
            let reached = [
                "SELECT COUNT(*) FROM \(subjects) WHERE subject_key = '1' AND state = 'purging'",
                "SELECT COUNT(*) FROM \(subjects) WHERE subject_key = '1' AND state = 'purging' AND NOT EXISTS (SELECT 1 FROM members WHERE id = 1)",
                """
                SELECT COUNT(*) FROM \(subjects) WHERE subject_key = '1' AND state = 'purging'
                AND EXISTS (SELECT 1 FROM \(files) WHERE subject_key = '1') AND NOT EXISTS (SELECT 1 FROM \(files) WHERE subject_key = '1' AND state = 'pending')
                """,
            ][boundary]
            let (process, _, _) = try workspace.process(["purge"])
            let killed = await killProcess(process, when: { try workspace.integerNow(reached) == 1 }, timeout: 600)
            await process.exited()
            guard killed else {
                // Only `verify` is left after delete-files, one transaction: the purge may end
                // between two polls. It must then have ended as a whole purge does.
                #expect(boundary == 2, "the kill never found the purge after \(step)")
                #expect(process.terminationReason == .exit && process.terminationStatus == 0)
                try await app.expectAdaPurged(workspace, catalog: catalog)
                continue
            }
            #expect(process.terminationReason == .uncaughtSignal)
            // Landed mid-work: the account still purging, not yet verified.
            let state = try await app.rows(workspace, "SELECT state FROM \(subjects) WHERE subject_key = '1'")
            if state == ["purging"] { landed.append(step) }
            #expect(boundary == 2 || state == ["purging"])
            // Nothing irreversible before the rows are gone: a file of ada's is missing only
            // once none of her rows is left.
            if boundary == 0 || !Set(AppPurgeTests.socialFiles).isSubset(of: app.files(workspace)) {
                let left = try await app.rows(workspace, "SELECT (SELECT COUNT(*) FROM members WHERE id = 1) + (SELECT COUNT(*) FROM statuses WHERE member_id = 1)")
                #expect(boundary == 0 ? left != ["0"] : left == ["0"], "after \(step): \(left)")
            }
            if boundary == 0 { #expect(Set(AppPurgeTests.socialFiles).isSubset(of: app.files(workspace))) }

            try "deletion:\n  purge_row_batch: 1\n".write(toFile: workspace.jobsDirectory + "/policies/deletion.yaml", atomically: true, encoding: .utf8)
            let rerun = try await workspace.run(["purge"], environment: ErasureGuaranteeTests.later)
            #expect(rerun.status == 0, "\(rerun.stdout) \(rerun.stderr)")
            try await app.expectAdaPurged(workspace, catalog: catalog)
        }
        // After the two long steps the kill always lands before the account is verified;
        // after delete-files only `verify` is left, one transaction, which may win the race.
        #expect(landed.starts(with: ["lock-and-mark", "erase-rows"]), "kills that landed mid-purge: \(landed)")
    }
}

/// A real Django 5.2 + django-allauth site (Jobs/examples/django: its tables made by
/// Django's own `migrate`, its users, sessions, admin log, allauth rows and FileField files
/// by Django's own code), mapped by the example's own map, on both backends. Django declares every foreign key without an
/// ON DELETE action (it cascades in Python), so an `ignore:` of the admin log with the user
/// row deleted would fail every purge: refused at load. Mapped whole, the user goes.
@Suite(.serialized)
struct DjangoSiteErasureTests {
    let app = AppPurgeTests()

    struct Seeded: Decodable {
        struct File: Decodable {
            var name: String
            var owner: String
        }
        var users: [String: Int]
        var files: [File]
        var sessions: [String: String]
    }

    func site(_ backend: Backend, map: String) async throws -> (Workspace, Seeded) {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("django-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        try map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        let output = try await runTool(repositoryRoot + "/Jobs/examples/django/build.sh", [workspace.database, workspace.blobs])
        return (workspace, try JSONDecoder().decode(Seeded.self, from: Data(output.utf8)))
    }

    static var map: String { get throws { try String(contentsOfFile: repositoryRoot + "/Jobs/examples/django/account-data.yaml", encoding: .utf8) } }

    @Test(arguments: Backend.allCases)
    func anIgnoredAdminLogThatWouldFailEveryPurgeIsRefused(_ backend: Backend) async throws {
        // The map's own ignore wins over the preset's entry for the table.
        let map = try Self.map + "\nignore:\n  - table: django_admin_log\n    reason: staff actions, kept for the site's own audit\n"
        let (workspace, _) = try await site(backend, map: map)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 65, "\(check.stdout) \(check.stderr)")
        #expect(check.stderr.contains("django_admin_log is ignored"), "\(check.stderr)")
        #expect(check.stderr.contains("would make every purge fail"), "\(check.stderr)")
    }

    @Test(arguments: Backend.allCases)
    func aUserOfARealDjangoSiteIsPurgedWholeAndVerified(_ backend: Backend) async throws {
        let (workspace, seeded) = try await site(backend, map: try Self.map)
        let ada = try #require(seeded.users["ada"])
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stderr)")
        let adaFiles = Set(seeded.files.filter { $0.owner == "ada" }.map(\.name))
        let others = Set(seeded.files.filter { $0.owner != "ada" }.map(\.name))
        #expect(!adaFiles.isEmpty && adaFiles.isSubset(of: app.files(workspace)))
        let before = try await everyRow(workspace)

        let wrong = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "battery staple")
        #expect(wrong.status == 77, "\(wrong.stderr)")
        let right = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse")
        #expect(right.status == 0, "\(right.stderr)")
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.status == 0, "\(purge.stdout) \(purge.stderr)")
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout)")

        for query in [
            "auth_user WHERE id = \(ada)", "account_emailaddress WHERE user_id = \(ada)", "socialaccount_socialaccount WHERE user_id = \(ada)",
            "blog_post WHERE author_id = \(ada)", "blog_comment WHERE author_id = \(ada)", "blog_profile WHERE user_id = \(ada)",
            "blog_follow WHERE follower_id = \(ada) OR followee_id = \(ada)", "django_admin_log WHERE user_id = \(ada)",
            "blog_message WHERE sender_id = \(ada) OR recipient_id = \(ada)",
            "django_admin_log WHERE object_id = '\(ada)' AND content_type_id = (SELECT id FROM django_content_type WHERE app_label = 'auth' AND model = 'user')",
        ] {
            #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM \(query)") == ["0"], "\(query)")
        }
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM socialaccount_socialtoken") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth_user") == ["2"])
        // No file of ada's is left; every file of the others is, but the attachment on bob's
        // comment under ada's post, which went with the post.
        let left = app.files(workspace)
        #expect(adaFiles.isDisjoint(with: left), "\(adaFiles.intersection(left))")
        #expect(others.subtracting(left).count <= 1, "\(others.subtracting(left))")
        let receipt = try #require(try await workspace.auditRows(of: String(ada)).first { $0.action == "account.purge" && $0.outcome == "purged" }?.detail)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")

        // Every row left is a row that was there, byte for byte (the user row goes, so
        // nothing is masked), and the rows gone are the receipt's and ada's one session.
        let after = try await everyRow(workspace)
        #expect(after.subtracting(before).isEmpty, "\(after.subtracting(before))")
        struct Total: Decodable { var rows_total: Int }
        let total = try JSONDecoder().decode(Total.self, from: Data(receipt.utf8)).rows_total
        #expect(before.subtracting(after).count == total + 1, "\(before.subtracting(after))")
        #expect(before.subtracting(after).filter { $0.hasPrefix("django_session ") }.count == 1)
    }

    /// Every row of the site's tables (Django's, allauth's, the blog's; lifecycle's own
    /// left out), prefixed with its table, as the database prints it.
    func everyRow(_ workspace: Workspace) async throws -> Set<String> {
        let tables = switch workspace.backend {
        case .sqlite: try await app.rows(workspace, """
            SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'lifecycle\\_%' ESCAPE '\\'
            AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name
            """)
        case .postgres: try await app.rows(workspace, """
            SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1
            """)
        }
        #expect(tables.contains("blog_message") && tables.contains("django_session") && tables.count > 20, "\(tables)")
        var rows = Set<String>()
        for table in tables {
            for row in try await app.rows(workspace, "SELECT * FROM \(table)") {
                #expect(rows.insert("\(table) \(row)").inserted, "\(table) holds two rows alike: \(row)")
            }
        }
        return rows
    }
}

extension DjangoSiteErasureTests {
    /// One of the site's management commands (Jobs/examples/django/manage.sh), with the
    /// environment the sign-in receiver reads.
    func manage(_ workspace: Workspace, _ arguments: [String], environment: [String: String] = [:]) async throws -> String {
        try await runTool("/usr/bin/env", environment.map { "\($0.key)=\($0.value)" } + [
            repositoryRoot + "/Jobs/examples/django/manage.sh", workspace.database, workspace.blobs,
        ] + arguments)
    }

    /// Django itself decides: a deletion request signs the user out (the session backend's
    /// rows, found by decoding them), a sign-in during the grace period restores through the
    /// documented receiver calling `lifecycle serve`, and the purge leaves the site's schema
    /// as its migrations say.
    @Test(arguments: Backend.allCases)
    func aDjangoUserIsSignedOutByDeletionAndSigningInAgainRestores(_ backend: Backend) async throws {
        let (workspace, seeded) = try await site(backend, map: try Self.map)
        let (ada, bob) = (try #require(seeded.users["ada"]), try #require(seeded.users["bob"]))
        let (adasSession, bobsSession) = (try #require(seeded.sessions["ada"]), try #require(seeded.sessions["bob"]))
        #expect(try await manage(workspace, ["whoami", adasSession]) == String(ada))
        let check = try await workspace.run(["map", "check"])
        #expect(check.stdout.contains("on deletion request: remove the rows of django_session by session_data (django-signed)->_auth_user_id"), "\(check.stdout)")

        let request = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse")
        #expect(request.status == 0, "\(request.stderr)")
        #expect(request.stdout.contains("1 session(s) signed out"), "\(request.stdout)")
        #expect(try await manage(workspace, ["whoami", adasSession]) == "anonymous")
        #expect(try await manage(workspace, ["whoami", bobsSession]) == String(bob))

        // Signing in during the grace period: Django lets ada in, and its receiver restores.
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let session = try await manage(workspace, ["signin", "ada", "correct horse"], environment: [
            "LIFECYCLE_API_URL": "http://" + server.base, "LIFECYCLE_API_TOKEN": ServeTests.apiToken,
        ])
        #expect(await server.stop() == 0)
        #expect(try await manage(workspace, ["whoami", session]) == String(ada))
        let shown = try await workspace.run(["accounts", "show", "ada", "--json"])
        #expect(shown.stdout.contains(#""state":"active""#), "\(shown.stdout)")
        #expect(try await workspace.auditRows(of: String(ada)).last?.action == "deletion.restore")

        // Asked again, and purged: the new session goes too, and the schema is as migrated.
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse").status == 0)
        #expect(try await manage(workspace, ["whoami", session]) == "anonymous")
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(try await manage(workspace, ["whoami", bobsSession]) == String(bob))
        _ = try await manage(workspace, ["makemigrations", "--check", "--dry-run"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth_user WHERE id = \(ada)") == ["0"])
    }
}

extension DjangoSiteErasureTests {
    /// A management command's whole outcome, for the ones expected to fail.
    func manageOutcome(_ workspace: Workspace, _ arguments: [String], environment: [String: String] = [:]) async throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = environment.map { "\($0.key)=\($0.value)" } + [
            repositoryRoot + "/Jobs/examples/django/manage.sh", workspace.database, workspace.blobs,
        ] + arguments
        var inherited = ProcessInfo.processInfo.environment
        for name in ["LIFECYCLE_API_URL", "LIFECYCLE_API_TOKEN"] { inherited.removeValue(forKey: name) }
        process.environment = inherited
        let (out, err) = (workspace.root + "/manage-\(UUID().uuidString).out", workspace.root + "/manage-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        await process.exited()
        return CommandResult(
            status: process.terminationStatus, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// The example's documented receiver on a real sign-in (authenticate, login, the signal)
    /// with `serve` running: an active user signs in and nothing is restored; a pending one
    /// is restored; one whose purge is under way is refused by the receiver, and once purged
    /// by Django itself (her user row is gone); unconfigured, a sign-in fails loudly and
    /// Django's check framework says why.
    @Test(arguments: Backend.allCases)
    func theDocumentedReceiverRestoresOnlyAPendingUserAndRefusesOneBeingPurged(_ backend: Backend) async throws {
        let (workspace, seeded) = try await site(backend, map: try Self.map)
        let (ada, bob) = (try #require(seeded.users["ada"]), try #require(seeded.users["bob"]))
        // Django's login saves a fresh empty session before the signal; a refused sign-in must
        // leave none that authenticates anyone.
        func signedInBySessionsSince(_ before: Set<String>) async throws -> [String] {
            var signedIn: [String] = []
            for row in try await workspace.query("SELECT session_key FROM django_session") {
                guard let key = row[0], !before.contains(key) else { continue }
                let who = try await manage(workspace, ["whoami", key])
                if who != "anonymous" { signedIn.append(who) }
            }
            return signedIn
        }
        func sessionKeys() async throws -> Set<String> { Set(try await workspace.query("SELECT session_key FROM django_session").compactMap { $0[0] }) }
        try await workspace.ensureInitialised()
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let api = ["LIFECYCLE_API_URL": "http://" + server.base, "LIFECYCLE_API_TOKEN": ServeTests.apiToken]

        // bob is active: the API answers 409 not_pending in its error object, and he is in.
        let bobIn = try await manageOutcome(workspace, ["signin", "bob", "battery staple"], environment: api)
        #expect(bobIn.status == 0, "\(bobIn.stderr) \(server.diagnosis)")
        #expect(try await manage(workspace, ["whoami", bobIn.stdout.trimmingCharacters(in: .whitespacesAndNewlines)]) == String(bob))
        // Asked, and refused as nothing to restore: audited so, never as restored.
        let bobsRestores = try await workspace.auditRows(of: String(bob)).filter { $0.action == "deletion.restore" }
        #expect(bobsRestores.map(\.outcome) == ["refused"], "\(bobsRestores)")
        #expect(try await workspace.run(["accounts", "show", "bob", "--json"]).stdout.contains(#""state":"active""#))

        // ada pending: restored by signing in.
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse").status == 0)
        let adaIn = try await manageOutcome(workspace, ["signin", "ada", "correct horse"], environment: api)
        #expect(adaIn.status == 0, "\(adaIn.stderr)")
        #expect(try await workspace.run(["accounts", "show", "ada", "--json"]).stdout.contains(#""state":"active""#))
        #expect(try await workspace.auditRows(of: String(ada)).last?.action == "deletion.restore")

        // Her purge under way (as one killed after it marked her leaves it): refused, no session.
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse").status == 0)
        try await workspace.execute("UPDATE \(workspace.ownTable("subjects")) SET state = 'purging' WHERE subject_key = '\(ada)'")
        let before = try await sessionKeys()
        let purging = try await manageOutcome(workspace, ["signin", "ada", "correct horse"], environment: api)
        #expect(purging.status == 1, "\(purging.stdout) \(purging.stderr)")
        #expect(purging.stderr.contains("sign-in failed: lifecycle answered 409"), "\(purging.stderr)")
        #expect(try await signedInBySessionsSince(before).isEmpty)
        #expect(try await workspace.run(["accounts", "show", "ada", "--json"]).stdout.contains(#""state":"purging""#))

        // Purged: Django has no such user any more and refuses her itself.
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        let purged = try await manageOutcome(workspace, ["signin", "ada", "correct horse"], environment: api)
        #expect(purged.status == 1 && purged.stderr.contains("sign-in refused"), "\(purged.stderr)")
        #expect(await server.stop() == 0)

        // Unconfigured: the sign-in fails naming what to set, and no session is saved.
        let sessionsBefore = try await sessionKeys()
        let unset = try await manageOutcome(workspace, ["signin", "bob", "battery staple"])
        #expect(unset.status == 1, "\(unset.stdout) \(unset.stderr)")
        #expect(unset.stderr.contains("LIFECYCLE_API_URL and LIFECYCLE_API_TOKEN not set"), "\(unset.stderr)")
        #expect(try await signedInBySessionsSince(sessionsBefore).isEmpty)
        let check = try await manageOutcome(workspace, ["check", "--fail-level", "WARNING"])
        #expect(check.status != 0 && check.stderr.contains("lifecycle.W001"), "\(check.stdout) \(check.stderr)")
        #expect(try await manageOutcome(workspace, ["check", "--fail-level", "WARNING"], environment: api).status == 0)
    }
}

extension DjangoSiteErasureTests {
    /// A deletion request signs the user out through lifecycle's index of `django_session`
    /// (whose rows name their user only encoded), not by decoding the table: built by
    /// `init`, fed by the sign-ins the receiver reports. A session whose key a password
    /// change renewed (Django's `update_session_auth_hash`, no sign-in signal) is not in it
    /// yet; the next purge sweep decodes it and signs it out. An index entry wrong about a
    /// row (bob's session filed under ada) removes nothing: the row is decoded first.
    @Test(arguments: Backend.allCases)
    func aDeletionRequestSignsOutThroughTheIndexAndTheSweepFindsWhatNoSignInReported(_ backend: Backend) async throws {
        let (workspace, seeded) = try await site(backend, map: try Self.map)
        let (ada, bob) = (try #require(seeded.users["ada"]), try #require(seeded.users["bob"]))
        let (seededSession, bobsSession) = (try #require(seeded.sessions["ada"]), try #require(seeded.sessions["bob"]))
        let sessions = try await workspace.int("SELECT COUNT(*) FROM django_session")
        struct Initialised: Decodable { var session_rows_indexed: Int? }
        let initialised = try await workspace.run(["init", "--json"])
        #expect(initialised.status == 0, "\(initialised.stderr)")
        #expect(try JSONDecoder().decode(Initialised.self, from: Data(initialised.stdout.utf8)).session_rows_indexed == sessions, "\(initialised.stdout)")

        struct Sweep: Decodable { var sweep: Report; struct Report: Decodable { var session_rows_indexed: Int?; var sessions_signed_out: Int? } }
        let first = try await workspace.run(["purge", "--json"])
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
        let swept = try JSONDecoder().decode(Sweep.self, from: Data(first.stdout.utf8)).sweep
        #expect(swept.session_rows_indexed == 0 && swept.sessions_signed_out == 0, "a row decoded once is not decoded again: \(first.stdout)")

        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let api = ["LIFECYCLE_API_URL": "http://" + server.base, "LIFECYCLE_API_TOKEN": ServeTests.apiToken]
        let reported = try await manage(workspace, ["signin", "ada", "correct horse"], environment: api)
        let beforeChange = try await manage(workspace, ["signin", "ada", "correct horse"], environment: api)
        #expect(await server.stop() == 0)
        let renewed = try await manage(workspace, ["shell", "-c", """
            from django.contrib.auth import get_user_model, update_session_auth_hash
            from django.contrib.sessions.backends.db import SessionStore
            from django.http import HttpRequest
            request = HttpRequest()
            request.session = SessionStore("\(beforeChange)")
            request.user = get_user_model().objects.get(pk=\(ada))
            update_session_auth_hash(request, request.user)
            request.session.save()
            print(request.session.session_key)
            """]).split(separator: "\n").last.map(String.init) ?? ""
        #expect(renewed != beforeChange && renewed.count == 32, "\(renewed)")
        for session in [seededSession, reported, renewed] { #expect(try await manage(workspace, ["whoami", session]) == String(ada)) }
        let own = workspace.ownTable("encoded_owners")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(own) WHERE row_key = '\(reported)' AND owner_key = '\(ada)'") == 1)
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(own) WHERE row_key = '\(renewed)'") == 0)
        try await workspace.execute("UPDATE \(own) SET owner_key = '\(ada)' WHERE row_key = '\(bobsSession)'")

        let request = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse")
        #expect(request.status == 0, "\(request.stderr)")
        #expect(request.stdout.contains("2 session(s) signed out"), "\(request.stdout)")
        #expect(try await manage(workspace, ["whoami", seededSession]) == "anonymous")
        #expect(try await manage(workspace, ["whoami", reported]) == "anonymous")
        #expect(try await manage(workspace, ["whoami", bobsSession]) == String(bob))
        #expect(try await manage(workspace, ["whoami", renewed]) == String(ada), "not in the index until the sweep")

        let sweep = try await workspace.run(["purge"])
        #expect(sweep.stdout.contains("1 session(s) of accounts pending deletion signed out"), "\(sweep.stdout) \(sweep.stderr)")
        #expect(try await manage(workspace, ["whoami", renewed]) == "anonymous")
        #expect(try await manage(workspace, ["whoami", bobsSession]) == String(bob))
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(own) WHERE owner_key = '\(ada)'") == 0, "rows gone are forgotten")
    }
}

/// Storage keys as real apps write them (Supabase Storage object names with spaces and
/// accents), exported and purged on both backends; an NFC and an NFD spelling of one name
/// are two files of two accounts, each kept apart; a row naming one of lifecycle's own
/// files (another account's export archive) neither exports nor deletes it.
@Suite(.serialized)
struct RealStorageKeyTests {
    let app = AppPurgeTests()
    let exports = AppExportTests()

    static let nfc = "media/\u{E9}t\u{E9} 2025/photo 1.jpg"
    static let nfd = "media/e\u{301}te\u{301} 2025/photo 1.jpg"

    @Test(arguments: Backend.allCases)
    func keysWithSpacesAndAccentsAreExportedAndPurgedAndLifecyclesOwnFilesAreNeverFollowed(_ backend: Backend) async throws {
        let workspace = try await app.installSocial(backend)
        let avatar = "avatars/Ada Lovelace – portrait.jpg"
        // bob's archive, as lifecycle keeps it: a row of ada's names it.
        let bobsArchive = "accounts/2/exports/e-1.zip"
        try await app.seed(workspace, """
            UPDATE members SET avatar_key = '\(avatar)' WHERE id = 1;
            INSERT INTO media (id, status_id, file_key) VALUES (103, 10, '\(Self.nfc)'), (104, 14, '\(Self.nfd)'), (105, 11, '\(bobsArchive)');
            """)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in [avatar, Self.nfc, Self.nfd, bobsArchive] { _ = try await blobs.put(key: key, data: Data("file \(key)".utf8)) }
        // Swift's String compares canonically (NFC equals NFD): the tests compare bytes.
        func bytes(_ keys: some Sequence<String>) -> Set<[UInt8]> { Set(keys.map { Array($0.utf8) }) }
        func stored() -> Set<[UInt8]> {
            let all = FileManager.default.enumerator(atPath: workspace.blobs)?.allObjects.compactMap { $0 as? String } ?? []
            return bytes(all.filter { path in
                (try? FileManager.default.attributesOfItem(atPath: workspace.blobs + "/" + path)[.type] as? FileAttributeType) == .typeRegular
            })
        }
        #expect(stored().isSuperset(of: bytes([Self.nfc, Self.nfd])))

        let (_, archive) = try await exports.export(workspace, "ada@example.com")
        let manifest = try #require(archive.manifest["files"] as? [[String: Any]])
        let exported = bytes(manifest.compactMap { $0["blob_key"] as? String })
        #expect(exported.isSuperset(of: bytes([avatar, Self.nfc])), "\(manifest)")
        #expect(exported.isDisjoint(with: bytes([Self.nfd, bobsArchive])), "\(manifest)")
        #expect(archive.files.keys.contains("files/members/2025/01/01/Ada Lovelace – portrait.jpg"), "\(archive.files.keys)")

        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "test", "--immediately"]).status == 0)
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0 && purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        let left = stored()
        #expect(left.isDisjoint(with: bytes([avatar, Self.nfc])), "\(left)")
        #expect(left.isSuperset(of: bytes([Self.nfd, bobsArchive])), "\(left)")
    }
}
