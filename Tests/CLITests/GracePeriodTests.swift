import Foundation
import JobRunner
import Lifecycle
import Testing

/// What requesting deletion does in the app during the grace period (`on_deletion:` in
/// the map, and the presets' own): the user's sessions and tokens go in the request's
/// transaction, values the map names are set, and a restore puts those values back
/// without bringing a session back.
@Suite(.serialized)
struct GracePeriodTests {
    let app = AppPurgeTests()

    /// The social app with sign-in sessions and a public profile of its own.
    static let schema = DataMapCheckTests.AppSchema(
        ddl: try! DataMapCheckTests.AppSchema.social.ddl + """

            CREATE TABLE member_sessions (
                id varchar(40) PRIMARY KEY,
                member_id integer NOT NULL REFERENCES members(id),
                created_at timestamp NOT NULL
            );
            CREATE TABLE profiles (
                member_id integer PRIMARY KEY REFERENCES members(id),
                bio text,
                listed boolean NOT NULL,
                shown_since timestamp
            );
            """,
        map: try! DataMapCheckTests.AppSchema.social.map.replacingOccurrences(of: "\ntables:\n", with: """

            tables:
              - table: member_sessions
                owner: member_id
              - table: profiles
                owner: member_id

            """) + """

            on_deletion:
              remove:
                - table: member_sessions
                  owner: member_id
              set:
                - table: profiles
                  owner: member_id
                  values: {bio: null, listed: false, shown_since: null}
            """)

    static let seed = AppPurgeTests.socialSeed + """

        INSERT INTO member_sessions (id, member_id, created_at) VALUES
          ('s-ada-phone', 1, '2025-05-01 00:00:00'), ('s-ada-laptop', 1, '2025-05-02 00:00:00'), ('s-bob', 2, '2025-05-03 00:00:00');
        INSERT INTO profiles (member_id, bio, listed, shown_since) VALUES
          (1, 'Runs at dawn', true, '2025-01-05 10:00:00'), (2, 'Swims', true, '2025-01-06 11:00:00');
        """

    /// Bob's sessions and profile, which nothing of ada's deletion may touch.
    static let bobs = """
        SELECT id || ' ' || CAST(created_at AS text) FROM member_sessions WHERE member_id = 2
        UNION ALL SELECT bio || ' ' || CAST(listed AS text) || ' ' || CAST(shown_since AS text) FROM profiles WHERE member_id = 2
        """

    @Test(arguments: Backend.allCases)
    func deletionSignsTheUserOutAndHidesWhatTheMapSaysAndARestorePutsItBack(_ backend: Backend) async throws {
        let workspace = try await app.schemas.install(Self.schema, backend)
        try await app.seed(workspace, Self.seed)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout.contains("on deletion request: remove the rows of member_sessions by member_id"), "\(check.stdout)")
        let profile = "SELECT bio, listed, shown_since FROM profiles WHERE member_id = 1"
        let adasProfile = try await app.rows(workspace, profile)
        let bobs = try await app.rows(workspace, Self.bobs)

        let request = try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "asked by mail"])
        #expect(request.status == 0, "\(request.stderr)")
        #expect(request.stdout.contains("2 session(s) signed out"), "\(request.stdout)")
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM member_sessions WHERE member_id = 1") == ["0"])
        #expect(try await app.rows(workspace, profile) != adasProfile)
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM profiles WHERE member_id = 1 AND bio IS NULL AND shown_since IS NULL AND NOT listed") == ["1"])

        let restore = try await workspace.run(["restore", "ada"])
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try await app.rows(workspace, profile) == adasProfile)
        // A session removed stays removed: the user signs in afresh.
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM member_sessions WHERE member_id = 1") == ["0"])
        #expect(try await app.rows(workspace, Self.bobs) == bobs)
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM \(workspace.backend == .sqlite ? "lifecycle_grace_values" : "lifecycle.grace_values")") == ["0"])

        // Asked again and purged: the kept values go when the purge starts, with the rest.
        #expect(try await workspace.run(["delete", "ada", "--operator", "sam", "--reason", "asked again"]).status == 0)
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM \(workspace.backend == .sqlite ? "lifecycle_grace_values" : "lifecycle.grace_values")") != ["0"])
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM \(workspace.backend == .sqlite ? "lifecycle_grace_values" : "lifecycle.grace_values")") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM profiles WHERE member_id = 1") == ["0"])
    }

    @Test
    func anOnDeletionEntryTheDatabaseCannotTakeIsRefusedNamingIt() async throws {
        var schema = Self.schema
        schema.map = schema.map.replacingOccurrences(of: "values: {bio: null, listed: false, shown_since: null}", with: "values: {bio: null, hidden: true}")
        let workspace = try await app.schemas.install(schema, .sqlite)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 65)
        #expect(check.stderr.contains("account-data.yaml:") && check.stderr.contains("'hidden' is not a column of main.profiles"), "\(check.stderr)")

        // A column the account is found by (here its email, a lookup column) stays as it is.
        var finder = Self.schema
        finder.map += "\n    - table: members\n      owner: id\n      values: {email: \"hidden@example.invalid\"}\n"
        let found = try await app.schemas.install(finder, .sqlite)
        let refused = try await found.run(["map", "check"])
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("on_deletion: set: cannot change members.email"), "\(refused.stderr)")
    }
}
