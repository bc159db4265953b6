import Foundation
import Testing

/// How an account is named in an app's own database: the app API by its key exactly or
/// `COLUMN:VALUE`, operators by anything that names one account. Keys and lookup values
/// are bytes: an NFC and an NFD spelling are two accounts.
@Suite(.serialized)
struct AccountAddressingTests {
    /// Text keys, and lookup columns without UNIQUE: a username another user could pick.
    static let schema = DataMapCheckTests.AppSchema(ddl: """
        CREATE TABLE users (
            id text PRIMARY KEY,
            username text NOT NULL,
            email text NOT NULL,
            pw text,
            created_at timestamp NOT NULL
        );
        """, map: """
        version: 2
        subject:
          table: users
          key: id
          lookup: [username, email]
          password: {column: pw}
          email: email
          columns: [id, username, email, created_at]
          timestamps: [created_at]
          erase: delete
        """)

    /// mallory chose ada's key as her username; the twins share an email; "José" is a key
    /// in NFC and another account's key in NFD, and "Zoë" a username in both forms.
    static let users: [(key: String, username: String, email: String)] = [
        ("ada", "ada-l", "ada@example.com"),
        ("mallory", "ada", "mallory@example.com"),
        ("twin-1", "twin-one", "twins@example.com"),
        ("twin-2", "twin-two", "twins@example.com"),
        ("jos\u{E9}", "jose-nfc", "jose-nfc@example.com"),
        ("jose\u{301}", "jos\u{E9}", "jose-nfd@example.com"),
        ("zoe-nfc", "zo\u{EB}", "zoe-nfc@example.com"),
        ("zoe-nfd", "zoe\u{308}", "zoe-nfd@example.com"),
    ]

    func install(_ backend: Backend) async throws -> Workspace {
        let workspace = try await DataMapCheckTests().install(Self.schema, backend)
        let rows = Self.users.map { "('\($0.key)', '\($0.username)', '\($0.email)', NULL, '2025-01-01 00:00:00')" }
        try await AppPurgeTests().seed(workspace, "INSERT INTO users (id, username, email, pw, created_at) VALUES \(rows.joined(separator: ", "));")
        try await workspace.ensureInitialised()
        return workspace
    }

    /// `accounts show REFERENCE --json`: its exit status, the key it found, and its stderr.
    static func show(_ reference: String, in workspace: Workspace) async throws -> (status: Int32, key: String?, stderr: String) {
        let result = try await workspace.run(["accounts", "show", reference, "--json"])
        let json = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any]
        return (result.status, json?["key"] as? String, result.stderr)
    }

    func path(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? text }

    @Test(arguments: Backend.allCases)
    func theAppAPINamesAnAccountByItsKeyOrOneLookupColumn(_ backend: Backend) async throws {
        let workspace = try await install(backend)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        func account(_ reference: String) async throws -> (status: Int, json: [String: Any]) {
            let answer = try await ServeTests.api(server, "GET", "accounts/" + path(reference))
            return (answer.status, answer.json)
        }

        // mallory's username does not make ada ambiguous: the API takes ada's key as a key.
        let ada = try await account("ada")
        #expect(ada.status == 200 && ada.json["account"] as? String == "ada", "\(ada.json)")
        let exports = try await ServeTests.api(server, "GET", "accounts/ada/exports")
        #expect(exports.status == 200 && exports.json["account"] as? String == "ada", "\(exports.json)")
        #expect(try await account("username:ada").json["account"] as? String == "mallory")
        #expect(try await account("email:ada@example.com").json["account"] as? String == "ada")
        #expect(try await account("email%3Aada@example.com").status == 404, "an encoded colon is decoded once, not twice")
        #expect(try await account("email:mallory@example.com").json["account"] as? String == "mallory")
        // Without `ignore_case:` an address is its bytes: another case names nobody.
        #expect(try await account("email:ADA@example.com").status == 404)
        // A lookup value alone is not a key, and an unknown column is part of a key.
        #expect(try await account("ada@example.com").status == 404)
        #expect(try await account("phone:ada").status == 404)

        // A lookup that matches two accounts is refused without naming either.
        let twins = try await account("email:twins@example.com")
        #expect(twins.status == 409 && ServeTests.errorCode(twins.json) == "refused", "\(twins.json)")
        let message = try #require(ServeTests.errorMessage(twins.json))
        #expect(!message.contains("twin-1") && !message.contains("twin-2"), "\(message)")

        // Exact bytes: each spelling of José is its own key, of Zoë its own username.
        #expect((try await account("jose\u{301}").json["account"] as? String)?.utf8.elementsEqual("jose\u{301}".utf8) == true)
        #expect((try await account("jos\u{E9}").json["account"] as? String)?.utf8.elementsEqual("jos\u{E9}".utf8) == true)
        #expect(try await account("username:zo\u{EB}").json["account"] as? String == "zoe-nfc")
        #expect(try await account("username:zoe\u{308}").json["account"] as? String == "zoe-nfd")
        #expect(await server.stop() == 0)
    }

    /// `ignore_case: [email]`: an address typed in any case finds its account, for the
    /// operator, the app API and deletion alike, once its exact bytes name nobody; the
    /// username stays exact.
    @Test(arguments: Backend.allCases)
    func anEmailMarkedIgnoreCaseIsFoundWhateverItsCase(_ backend: Backend) async throws {
        var schema = Self.schema
        schema.map = schema.map.replacingOccurrences(of: "  lookup: [username, email]\n", with: "  lookup: [username, email]\n  ignore_case: [email]\n")
        let workspace = try await DataMapCheckTests().install(schema, backend)
        try await AppPurgeTests().seed(workspace, """
            INSERT INTO users (id, username, email, pw, created_at) VALUES
                ('ada', 'ada-l', 'Ada@Example.com', NULL, '2025-01-01 00:00:00'),
                ('bob', 'Bob', 'bob@example.com', NULL, '2025-01-01 00:00:00'),
                ('bob-twin', 'bob-twin', 'BOB@example.com', NULL, '2025-01-01 00:00:00');
            """)
        try await workspace.ensureInitialised()
        func show(_ reference: String) async throws -> (status: Int32, key: String?, stderr: String) {
            try await Self.show(reference, in: workspace)
        }
        #expect(try await show("ada@example.com").key == "ada")
        #expect(try await show("email:ADA@EXAMPLE.COM").key == "ada")
        // bob and bob-twin differ only by case: each finds their own as stored, any other spelling is refused.
        #expect(try await show("email:bob@example.com").key == "bob")
        #expect(try await show("BOB@example.com").key == "bob-twin")
        let twins = try await show("email:Bob@Example.com")
        #expect(twins.status == 65 && twins.stderr.contains("\"bob\"") && twins.stderr.contains("\"bob-twin\""), "\(twins.stderr)")
        #expect(try await show("username:bob").status == 67, "the username is not in ignore_case")
        #expect(try await show("username:Bob").key == "bob")

        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let found = try await ServeTests.api(server, "GET", "accounts/" + path("email:aDa@example.COM"))
        #expect(found.status == 200 && found.json["account"] as? String == "ada", "\(found.json)")
        #expect(await server.stop() == 0)

        let deleted = try await workspace.run(["delete", "email:ADA@example.com", "--operator", "sam", "--reason", "ticket", "--immediately"])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(try await workspace.run(["accounts", "show", "ada", "--json"]).stdout.contains(#""state":"pendingDeletion""#))
    }

    @Test(arguments: Backend.allCases)
    func operatorsNameAnAccountByAnythingThatNamesOnlyIt(_ backend: Backend) async throws {
        let workspace = try await install(backend)
        func show(_ reference: String) async throws -> (status: Int32, key: String?, stderr: String) {
            try await Self.show(reference, in: workspace)
        }
        #expect(try await show("mallory@example.com").key == "mallory")
        #expect(try await show("email:ada@example.com").key == "ada")
        #expect(try await show("username:ada").key == "mallory")
        // "ada" is ada's key and mallory's username: refused, naming both for the operator.
        let ambiguous = try await show("ada")
        #expect(ambiguous.status == 65 && ambiguous.stderr.contains("\"ada\"") && ambiguous.stderr.contains("\"mallory\""), "\(ambiguous.stderr)")
        let twins = try await show("twins@example.com")
        #expect(twins.status == 65 && twins.stderr.contains("twin-1") && twins.stderr.contains("twin-2"), "\(twins.stderr)")

        // "José" in NFC is one account's key and the other's username: two accounts, though
        // Swift's String calls their keys equal.
        let jose = try await show("jos\u{E9}")
        #expect(jose.status == 65, "\(jose.stderr)")
        #expect(jose.stderr.unicodeScalars.contains("\u{E9}") && jose.stderr.unicodeScalars.contains("\u{301}"), "both keys named: \(jose.stderr)")
        #expect(try await show("jose\u{301}").key?.utf8.elementsEqual("jose\u{301}".utf8) == true)
        #expect(try await show("zo\u{EB}").key == "zoe-nfc")
        #expect(try await show("zoe\u{308}").key == "zoe-nfd")
    }
}
