import Foundation
import JobRunner
import Testing

/// The example Django site with the API token libraries real Django backends sign in with
/// (djangorestframework-simplejwt with its blacklist app, django-rest-knox), migrated for
/// real from PyPI on both backends (Tests/CLITests/DjangoTokens: a settings module over the
/// example's and two management commands). Tokens are issued by the libraries' own APIs,
/// and the libraries themselves say whether a token still works: simplejwt signs a user out
/// only by blacklisting her outstanding tokens, so removing them would leave her refresh
/// token working, and knox knows a token only while its row is there.
@Suite(.serialized)
struct DjangoTokenTests {
    let app = AppPurgeTests()

    struct Issued: Decodable {
        var id: Int
        var refresh: String
        var knox: String
        var blacklisted_refresh: String
    }

    /// What the libraries answered: 200 when the token works, 401 when refused.
    struct Answer: Decodable {
        var refresh: Int
        var refresh_detail: String
        var refresh_gave_access: Bool
        var knox: Int
        var knox_user: Int?
    }

    static let presets = "include: [django, django-allauth, django-rest-framework-simplejwt, django-rest-knox]"

    static var map: String {
        get throws {
            let example = try DjangoSiteErasureTests.map
            precondition(example.contains("include: [django, django-allauth]\n"), "the example map's include line changed")
            return example.replacingOccurrences(of: "include: [django, django-allauth]\n", with: presets + "\n")
        }
    }

    /// One of Django's commands (`migrate`, the site's `seed_accounts`, the test app's
    /// `issue_tokens` and `try_tokens`) on the workspace's database.
    func django(_ workspace: Workspace, _ arguments: [String], environment: [String: String] = [:]) async throws -> String {
        try await runTool("/usr/bin/env", environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } + [
            "PYTHONPATH=\(repositoryRoot)/Jobs/examples/django:\(repositoryRoot)/Tests/CLITests/DjangoTokens",
            "DJANGO_SETTINGS_MODULE=token_site.settings", "PYTHONDONTWRITEBYTECODE=1",
            "LIFECYCLE_DJANGO_DB=\(workspace.database)", "LIFECYCLE_DJANGO_MEDIA=\(workspace.blobs)",
            repositoryRoot + "/.build-tools/venv/bin/python", "-m", "django",
        ] + arguments)
    }

    /// The site migrated, seeded (ada, bob, cy), and tokens issued to ada and bob.
    func site(_ backend: Backend, map: String) async throws -> (Workspace, [String: Issued]) {
        let jobs = FileManager.default.temporaryDirectory.appendingPathComponent("django-tokens-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        try map.write(toFile: jobs + "/account-data.yaml", atomically: true, encoding: .utf8)
        let workspace = try await Workspace.make(backend, jobsDirectory: jobs)
        try FileManager.default.createDirectory(atPath: workspace.blobs, withIntermediateDirectories: true)
        _ = try await django(workspace, ["migrate", "--noinput"])
        _ = try await django(workspace, ["seed_accounts"])
        let issued = try await django(workspace, ["issue_tokens", "ada", "bob"])
        return (workspace, try JSONDecoder().decode([String: Issued].self, from: Data(issued.utf8)))
    }

    func tryTokens(_ workspace: Workspace, _ issued: Issued) async throws -> Answer {
        try JSONDecoder().decode(Answer.self, from: Data(try await django(workspace, ["try_tokens", issued.refresh, issued.knox]).utf8))
    }

    @Test(arguments: Backend.allCases)
    func aDeletionRequestBlacklistsHerTokensAndThePurgeLeavesNoneOfThem(_ backend: Backend) async throws {
        let (workspace, issued) = try await site(backend, map: try Self.map)
        let (ada, bob) = (try #require(issued["ada"]), try #require(issued["bob"]))
        let before = try await tryTokens(workspace, ada)
        #expect(before.refresh == 200 && before.refresh_gave_access && before.knox == 200 && before.knox_user == ada.id, "\(before)")

        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout.contains("insert a row into token_blacklist_blacklistedtoken for each row of token_blacklist_outstandingtoken"), "\(check.stdout)")
        #expect(check.stdout.contains("remove the rows of knox_authtoken by user_id"), "\(check.stdout)")

        // ada already has a blacklisted token (signed out once): the request neither fails on
        // it nor blacklists it twice.
        let adasOutstanding = try await app.rows(workspace, "SELECT id FROM token_blacklist_outstandingtoken WHERE user_id = \(ada.id) ORDER BY id")
        #expect(adasOutstanding.count == 2)
        let blacklistedBefore = try await app.rows(workspace, "SELECT token_id, blacklisted_at FROM token_blacklist_blacklistedtoken ORDER BY token_id")
        let request = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse")
        #expect(request.status == 0, "\(request.stdout) \(request.stderr)")
        // Her Django session; her knox token removed and the one outstanding token not yet blacklisted.
        #expect(request.stdout.contains("1 session(s) signed out, 2 token(s) revoked"), "\(request.stdout)")

        // The libraries themselves refuse her tokens; bob's still work.
        let during = try await tryTokens(workspace, ada)
        #expect(during.refresh == 401 && during.refresh_detail == "Token is blacklisted" && !during.refresh_gave_access, "\(during)")
        #expect(during.knox == 401 && during.knox_user == nil, "\(during)")
        let bobs = try await tryTokens(workspace, bob)
        #expect(bobs.refresh == 200 && bobs.refresh_gave_access && bobs.knox == 200 && bobs.knox_user == bob.id, "\(bobs)")
        // One blacklist row per outstanding token of hers; the ones there before untouched.
        let blacklisted = try await app.rows(workspace, "SELECT token_id, blacklisted_at FROM token_blacklist_blacklistedtoken ORDER BY token_id")
        #expect(Set(blacklistedBefore).isSubset(of: Set(blacklisted)), "\(blacklistedBefore) \(blacklisted)")
        let adasBlacklisted = try await app.rows(workspace, """
            SELECT b.token_id FROM token_blacklist_blacklistedtoken b JOIN token_blacklist_outstandingtoken o ON o.id = b.token_id \
            WHERE o.user_id = \(ada.id) ORDER BY b.token_id
            """)
        #expect(adasBlacklisted == adasOutstanding, "\(adasBlacklisted) \(adasOutstanding)")
        #expect(blacklisted.count == blacklistedBefore.count + 1)
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM knox_authtoken WHERE user_id = \(ada.id)") == ["0"])

        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.status == 0, "\(purge.stdout) \(purge.stderr)")
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout)")
        let ids = adasOutstanding.joined(separator: ", ")
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM token_blacklist_outstandingtoken WHERE user_id = \(ada.id) OR id IN (\(ids))") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM token_blacklist_blacklistedtoken WHERE token_id IN (\(ids))") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM knox_authtoken WHERE user_id = \(ada.id)") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM auth_user WHERE id = \(ada.id)") == ["0"])
        let receipt = try #require(try await workspace.auditRows(of: String(ada.id)).first { $0.action == "account.purge" }?.detail)
        #expect(receipt.contains(#""result":"verified","rows_left":0"#), "\(receipt)")
        // Her knox token went with the request; the purge erased (and counted) the rest.
        #expect(receipt.contains(#""token_blacklist_blacklistedtoken":{"after":0,"before":2,"deleted":2"#), "\(receipt)")
        #expect(receipt.contains(#""token_blacklist_outstandingtoken":{"after":0,"before":2,"deleted":2"#), "\(receipt)")
        // bob's tokens, his blacklisted one included, are as they were.
        let after = try await tryTokens(workspace, bob)
        #expect(after.refresh == 200 && after.knox == 200 && after.knox_user == bob.id, "\(after)")
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM token_blacklist_outstandingtoken WHERE user_id = \(bob.id)") == ["2"])
        #expect(try await app.rows(workspace, """
            SELECT COUNT(*) FROM token_blacklist_blacklistedtoken b JOIN token_blacklist_outstandingtoken o ON o.id = b.token_id \
            WHERE o.user_id = \(bob.id)
            """) == ["1"])
    }

    /// Removing simplejwt's outstanding tokens on a deletion request, without the blacklist
    /// rows that reference them, would make the request of every user with a blacklisted
    /// token fail on the foreign key: refused by `map check`, naming the line to add. With
    /// it, the request goes through; it does not sign her out, which is why the preset
    /// blacklists instead.
    @Test(arguments: Backend.allCases)
    func removingOutstandingTokensWithoutTheirBlacklistRowsIsRefusedByMapCheck(_ backend: Backend) async throws {
        let removal = "\non_deletion:\n  remove:\n    - table: token_blacklist_outstandingtoken\n      owner: user_id\n"
        let (workspace, issued) = try await site(backend, map: try Self.map + removal)
        let ada = try #require(issued["ada"])
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 65, "\(check.stdout) \(check.stderr)")
        #expect(check.stderr.contains("on_deletion removes rows of token_blacklist_outstandingtoken"), "\(check.stderr)")
        #expect(check.stderr.contains("token_blacklist_blacklistedtoken.token_id →"), "\(check.stderr)")
        #expect(check.stderr.contains(
            "`- {table: token_blacklist_blacklistedtoken, owner: {via: token_id, parent: token_blacklist_outstandingtoken}}`"), "\(check.stderr)")

        let covered = try Self.map + removal
            + "    - table: token_blacklist_blacklistedtoken\n      owner: {via: token_id, parent: token_blacklist_outstandingtoken}\n"
        try covered.write(toFile: workspace.jobsDirectory + "/account-data.yaml", atomically: true, encoding: .utf8)
        let passes = try await workspace.run(["map", "check"])
        #expect(passes.status == 0, "\(passes.stdout) \(passes.stderr)")
        #expect(passes.stdout.contains("remove the rows of token_blacklist_blacklistedtoken by token_id → token_blacklist_outstandingtoken (removed first)"), "\(passes.stdout)")
        let request = try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse")
        #expect(request.status == 0, "\(request.stdout) \(request.stderr)")
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM token_blacklist_outstandingtoken WHERE user_id = \(ada.id)") == ["0"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM token_blacklist_blacklistedtoken") == ["1"])
        // Her refresh token no longer names an outstanding token, so no blacklist row can
        // name it: simplejwt lets it refresh. Signing out is blacklisting (the preset's way).
        let answer = try await tryTokens(workspace, ada)
        #expect(answer.refresh == 200 && answer.knox == 401, "\(answer)")
    }

    /// simplejwt's sign-in (TokenObtainPairView) checks the password without login(), so
    /// the session receiver never runs: the example's serializer asks lifecycle before any
    /// token exists. A pending user signing in for tokens is restored and gets them; one
    /// whose purge is under way, or a site without the API settings, gets 401 and no token,
    /// not even an outstanding row.
    @Test(arguments: Backend.allCases)
    func signingInForTokensRestoresAPendingUserAndARefusedOneGetsNoToken(_ backend: Backend) async throws {
        let (workspace, issued) = try await site(backend, map: try Self.map)
        let ada = try #require(issued["ada"])
        struct Obtained: Decodable { var status: Int; var detail: String; var refresh: Bool }
        func obtain(_ environment: [String: String]) async throws -> Obtained {
            try JSONDecoder().decode(Obtained.self, from: Data(try await django(workspace, ["obtain_tokens", "ada", "correct horse"], environment: environment).utf8))
        }
        func outstanding() async throws -> [String] {
            try await app.rows(workspace, "SELECT COUNT(*) FROM token_blacklist_outstandingtoken WHERE user_id = \(ada.id)")
        }
        try await workspace.ensureInitialised()
        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse").status == 0)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let api = ["LIFECYCLE_API_URL": "http://" + server.base, "LIFECYCLE_API_TOKEN": ServeTests.apiToken]

        let issuedBefore = try await outstanding()
        let pending = try await obtain(api)
        #expect(pending.status == 200 && pending.refresh, "\(pending) \(server.diagnosis)")
        #expect(try await workspace.run(["accounts", "show", "ada", "--json"]).stdout.contains(#""state":"active""#))
        #expect(try await workspace.auditRows(of: String(ada.id)).last?.action == "deletion.restore")
        #expect(try await outstanding() != issuedBefore, "the new refresh token is recorded")

        #expect(try await workspace.run(["delete", "ada", "--password-stdin"], stdin: "correct horse").status == 0)
        try await workspace.execute("UPDATE \(workspace.ownTable("subjects")) SET state = 'purging' WHERE subject_key = '\(ada.id)'")
        let refusedBefore = try await outstanding()
        let purging = try await obtain(api)
        #expect(purging.status == 401 && !purging.refresh && purging.detail.contains("sign-in refused: lifecycle answered 409"), "\(purging)")
        #expect(try await outstanding() == refusedBefore, "no token is made for a refused sign-in")
        #expect(await server.stop() == 0)

        let unset = try await obtain(["LIFECYCLE_API_URL": "", "LIFECYCLE_API_TOKEN": ""])
        #expect(unset.status == 401 && unset.detail.contains("LIFECYCLE_API_URL and LIFECYCLE_API_TOKEN not set"), "\(unset)")
        #expect(try await outstanding() == refusedBefore)
    }
}
