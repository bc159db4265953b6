import Foundation
import Testing

/// The app API's refusals as the app backend reads them, against a real `lifecycle serve`:
/// every error is `{"error": {"code", "message"}}`, its advice is for the app (never a
/// command or an option of the CLI), and a purged account and an unknown path answer the
/// same whichever database the installation serves (Sources/LifecycleServer/openapi.yaml).
@Suite(.serialized)
struct APIErrorTests {
    enum Database: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case reference, app
        var testDescription: String { rawValue }
        /// Who is purged, and who is kept. In the app's schema mallory's username is "ada"
        /// (AccountAddressingTests), so the CLI could not name ada by "ada".
        var purged: String { self == .reference ? "ada" : "mallory" }
        var kept: String { self == .reference ? "bob" : "ada" }
    }

    /// What an operator would type: never in an answer to the app.
    static func expectNoCommandLineAdvice(_ message: String?, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = message ?? ""
        #expect(!text.isEmpty, sourceLocation: sourceLocation)
        for advice in ["--", "`", "lifecycle ", "LIFECYCLE_"] {
            #expect(!text.contains(advice), "'\(advice)' in: \(text)", sourceLocation: sourceLocation)
        }
    }

    /// One account purged, one active: the reference schema keeps a tombstone, an app's own
    /// database keeps nothing of the purged account.
    static func installationWithAPurgedAccount(_ database: Database) async throws -> Workspace {
        let workspace: Workspace
        switch database {
        case .reference:
            workspace = try Workspace()
            try await DeletionLines.importAccounts(
                [DeletionLines.account(id: "ada", pendingSince: DeletionLines.past), DeletionLines.account(id: "bob")], into: workspace)
        case .app:
            workspace = try await AccountAddressingTests().install(.sqlite)
            let deletion = try await workspace.run(["delete", database.purged, "--operator", "sam", "--reason", "ticket 7", "--immediately"])
            #expect(deletion.status == 0, "\(deletion.stderr)")
        }
        let purge = try await workspace.run(["purge"])
        #expect(purge.status == 0, "\(purge.stdout)\(purge.stderr)")
        switch database {
        case .reference: #expect(try await workspace.state(of: "ada") == "purged", "the reference schema keeps a tombstone")
        case .app: #expect(try await workspace.int("SELECT COUNT(*) FROM users WHERE id = 'mallory'") == 0)
        }
        return workspace
    }

    @Test(arguments: Database.allCases)
    func aPurgedAccountIsNotFoundOnEveryKindOfDatabase(_ database: Database) async throws {
        let workspace = try await Self.installationWithAPurgedAccount(database)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let kept = try await ServeTests.api(server, "GET", "accounts/" + database.kept)
        #expect(kept.status == 200 && kept.json["state"] as? String == "active", "\(kept.json)")

        let gone = "accounts/" + database.purged
        let calls: [(method: String, path: String, body: String?)] = [
            ("GET", gone, nil), ("GET", gone + "/exports", nil), ("POST", gone + "/exports", nil),
            ("GET", gone + "/part-deletions", nil), ("POST", gone + "/restore", nil),
            ("POST", gone + "/deletion", "{\"password\": \"\(DeletionLines.password)\"}"),
        ]
        for call in calls {
            let answer = try await ServeTests.api(server, call.method, call.path, body: call.body)
            #expect(answer.status == 404, "\(call.method) \(call.path): \(answer.status) \(answer.json)")
            #expect(ServeTests.errorCode(answer.json) == "no_such_account", "\(call.method) \(call.path): \(answer.json)")
            #expect(answer.json["state"] == nil && answer.headers["content-type"] == "application/json")
        }
        #expect(await server.stop() == 0)
    }

    @Test func refusalsTellTheAppWhatItCanDoNotWhatAnOperatorTypes() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts(
            [DeletionLines.account(id: "ada"), DeletionLines.account(id: "bob"), DeletionLines.account(id: "cy")], into: workspace)
        try await workspace.execute("UPDATE accounts SET password_hash = 'not a hash anything checks' WHERE id = 'cy'")
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let password = "{\"password\": \"\(DeletionLines.password)\"}"

        // An export of an account scheduled for deletion: the CLI says --allow-pending --operator.
        #expect(try await ServeTests.api(server, "POST", "accounts/ada/deletion", body: password).status == 202)
        let pending = try await ServeTests.api(server, "POST", "accounts/ada/exports")
        #expect(pending.status == 403 && ServeTests.errorCode(pending.json) == "pending_deletion", "\(pending.json)")
        Self.expectNoCommandLineAdvice(ServeTests.errorMessage(pending.json))
        #expect(ServeTests.errorMessage(pending.json)?.contains("restored") == true, "\(pending.json)")

        // A second part deletion while one is under way: the CLI says `lifecycle jobs show N`.
        let parts = "{\"password\": \"\(DeletionLines.password)\", \"parts\": [\"photos\"]}"
        #expect(try await ServeTests.api(server, "POST", "accounts/bob/part-deletions", body: parts).status == 202)
        let twice = try await ServeTests.api(server, "POST", "accounts/bob/part-deletions", body: parts)
        #expect(twice.status == 409 && ServeTests.errorCode(twice.json) == "part_deletion_under_way", "\(twice.json)")
        Self.expectNoCommandLineAdvice(ServeTests.errorMessage(twice.json))

        // A stored hash nothing can check: the CLI says `lifecycle accounts set-password` or `--operator`.
        let unverifiable = try await ServeTests.api(server, "POST", "accounts/cy/deletion", body: password)
        #expect(unverifiable.status == 409 && ServeTests.errorCode(unverifiable.json) == "password_unverifiable", "\(unverifiable.json)")
        Self.expectNoCommandLineAdvice(ServeTests.errorMessage(unverifiable.json))
        #expect(await server.stop() == 0)

        // The server's own trouble (its signing key file became readable by others): the app
        // may ask again later; the cause, with the operator's remedy, is in the log under the request's id.
        let keyFile = workspace.root + "/signing.key"
        #expect(FileManager.default.createFile(atPath: keyFile, contents: Data(ServeTests.signingKey.utf8), attributes: [.posixPermissions: 0o600]))
        let keyless = try await ServeTests.Server.start(
            workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken, "LIFECYCLE_SIGNING_KEY": "", "LIFECYCLE_SIGNING_KEY_FILE": keyFile])
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile)
        let export = try await ServeTests.api(keyless, "POST", "accounts/bob/exports")
        #expect(export.status == 503 && ServeTests.errorCode(export.json) == "unavailable", "\(export.json)")
        Self.expectNoCommandLineAdvice(ServeTests.errorMessage(export.json))
        let id = try #require((export.json["error"] as? [String: Any])?["request_id"] as? String)
        #expect(export.headers["x-request-id"] == id)
        #expect(await keyless.stop() == 0)
        let log = try String(contentsOfFile: keyless.errorLog, encoding: .utf8)
        #expect(log.split(separator: "\n").contains { $0.contains(id) && $0.contains(keyFile) }, "\(log.suffix(2_000))")
    }

    /// A policy file the request's command cannot read is the installation's trouble, not a
    /// refusal of the request: the app hears 503, the operator's log names the file and key.
    @Test func aBrokenPolicyFileIsTheServersTroubleNotTheRequests() async throws {
        let jobs = try DeletionLines.jobsDirectory(deletion: ["grace_dayz: 30"])
        let workspace = try await Workspace.make(.sqlite, jobsDirectory: jobs)
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let deletion = try await ServeTests.api(server, "POST", "accounts/ada/deletion", body: "{\"password\": \"\(DeletionLines.password)\"}")
        #expect(deletion.status == 503 && ServeTests.errorCode(deletion.json) == "unavailable", "\(deletion.json)")
        Self.expectNoCommandLineAdvice(ServeTests.errorMessage(deletion.json))
        #expect(ServeTests.errorMessage(deletion.json)?.contains("grace_dayz") == false)
        let id = try #require((deletion.json["error"] as? [String: Any])?["request_id"] as? String)
        #expect(await server.stop() == 0)
        let log = try String(contentsOfFile: server.errorLog, encoding: .utf8)
        #expect(log.split(separator: "\n").contains { $0.contains(id) && $0.contains("grace_dayz") }, "\(log.suffix(2_000))")
        #expect(try await workspace.state(of: "ada") == "active")
    }

    /// A row edited by hand into something lifecycle cannot read is the operator's to
    /// correct: the app hears 503 with the request's id, never the table and column the CLI
    /// names.
    @Test func aRowEditedByHandIsTheServersTroubleNotTheRequests() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada"), DeletionLines.account(id: "bob")], into: workspace)
        // Lifecycle's record of bob's deletion, which every answer about him reads.
        try await workspace.execute("""
            INSERT INTO \(workspace.ownTable("subjects")) (subject_key, state, deletion_requested_at, purge_after, updated_at)
            VALUES ('bob', 'pendingDeletion', 'frozen', 'frozen', '2026-01-01 00:00:00.000')
            """)
        try await workspace.execute("""
            INSERT INTO accounts (id, email, password_hash, state, created_at, updated_at)
            SELECT 'ada lovelace', 'lovelace@example.com', password_hash, state, created_at, updated_at FROM accounts WHERE id = 'ada'
            """)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let unreadable = try await ServeTests.api(server, "GET", "accounts/bob")
        #expect(unreadable.status == 503 && ServeTests.errorCode(unreadable.json) == "unavailable", "\(unreadable.json)")
        Self.expectNoCommandLineAdvice(ServeTests.errorMessage(unreadable.json))
        #expect(ServeTests.errorMessage(unreadable.json)?.contains("frozen") == false, "\(unreadable.json)")
        let id = try #require((unreadable.json["error"] as? [String: Any])?["request_id"] as? String)

        // An id no storage folder can be named after is exported all the same: its archive's
        // folder is the id's hash, as for any app's key that cannot name one.
        let unnamable = try await ServeTests.api(server, "POST", "accounts/ada%20lovelace/exports")
        #expect(unnamable.status == 202, "\(unnamable.json)")
        #expect(await server.stop() == 0)
        let log = try String(contentsOfFile: server.errorLog, encoding: .utf8)
        #expect(log.split(separator: "\n").contains { $0.contains(id) && $0.contains("frozen") }, "\(log.suffix(2_000))")
    }

    @Test func anUnknownPathAnswersWithTheAPIsJSONError() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let bearer = ["Authorization": "Bearer \(ServeTests.apiToken)"]
        let asked: [(method: String, path: String)] = [
            ("GET", "/nothing-here"), ("GET", "/v1/accounts"), ("GET", "/v1/accounts/ada/nothing"),
            // A path the API serves, with a method it does not take: Hummingbird tells the two apart no more.
            ("DELETE", "/v1/accounts/ada"), ("GET", "/v1/accounts/ada/restore"),
        ]
        for (method, path) in asked {
            let answer = try await ServeTests.request("http://\(server.base)\(path)", method: method, headers: bearer)
            #expect(answer.status == 404, "\(method) \(path): \(answer.status)")
            #expect(answer.header("Content-Type") == "application/json", "\(method) \(path)")
            let json = (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:]
            #expect(ServeTests.errorCode(json) == "not_found", "\(method) \(path): \(String(decoding: answer.body, as: UTF8.self))")
            #expect(ServeTests.errorMessage(json)?.contains(path) == true)
        }
        // A route's own 404 keeps its meaning: an unknown account is not an unknown path.
        let nobody = try await ServeTests.api(server, "GET", "accounts/nobody")
        #expect(nobody.status == 404 && ServeTests.errorCode(nobody.json) == "no_such_account")
        #expect(await server.stop() == 0)

        // Without an API token /v1 is not served: its paths are unknown paths.
        let plain = try await ServeTests.Server.start(workspace)
        let unserved = try await ServeTests.api(plain, "GET", "accounts/ada")
        #expect(unserved.status == 404 && ServeTests.errorCode(unserved.json) == "not_found", "\(unserved.json)")
        #expect(await plain.stop() == 0)
    }
}
