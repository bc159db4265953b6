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
}
