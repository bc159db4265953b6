import Foundation
import JobRunner
import Lifecycle
import Testing

/// Supabase as GoTrue and Storage really leave it, on the schemas reproduced from their own
/// migrations (Tests/Fixtures/supabase/platform.sql): admin audit entries that name the user
/// only in `payload.traits` (GoTrue's admin API writes them with actor `service_role`, whose
/// id is the nil uuid), a flow linking an identity to her account, Storage objects with
/// spaces and accents in their names. After the purge no row of `auth`, `storage` or
/// `public` holds her id, address or phone but the two tombstones' id and masked address,
/// and every row that did not name her is as it was, byte for byte.
@Suite(.serialized)
struct SupabaseAsItIsTests {
    let app = AppPurgeTests()
    static let ada = AppPurgeTests.ada
    static let bob = AppPurgeTests.bob
    static let adaPhone = "447700900123"
    static let bobPhone = "447700900456"
    /// GoTrue's actor for the service_role key: a user without an id.
    static let serviceRole = "00000000-0000-0000-0000-000000000000"

    static func adminEntry(_ id: String, action: String, traits: String) -> String {
        """
        ('\(id)', '{"action": "\(action)", "actor_id": "\(serviceRole)", "actor_username": "service_role", "actor_via_sso": false, "log_type": "team", "traits": \(traits)}', now(), '')
        """
    }

    /// What GoTrue writes beyond `SupabaseAuthErasureTests.authSeed`: the dashboard creating,
    /// inviting, modifying both users and updating ada's factor; a manual linking flow to
    /// each account (GoTrue leaves user_id null until the callback); objects in Storage.
    static let platformSeed = """
        UPDATE auth.users SET phone = '\(adaPhone)' WHERE id = '\(ada)';
        UPDATE auth.users SET phone = '\(bobPhone)' WHERE id = '\(bob)';
        INSERT INTO auth.audit_log_entries (id, payload, created_at, ip_address) VALUES
          \(adminEntry("ad000000-0000-4000-8000-00000000000a", action: "user_signedup",
                       traits: #"{"provider": "email", "user_email": "ada@example.com", "user_id": "\#(ada)", "user_phone": "\#(adaPhone)"}"#)),
          \(adminEntry("ad000000-0000-4000-8000-00000000000b", action: "user_invited",
                       traits: #"{"user_email": "ada@example.com", "user_id": "\#(ada)"}"#)),
          \(adminEntry("ad000000-0000-4000-8000-00000000000c", action: "user_modified",
                       traits: #"{"user_email": "ada@example.com", "user_id": "\#(ada)", "user_phone": "\#(adaPhone)"}"#)),
          \(adminEntry("ad000000-0000-4000-8000-00000000000d", action: "factor_updated",
                       traits: #"{"factor_id": "fa000000-0000-4000-8000-00000000000a", "factor_type": "totp", "user_id": "\#(ada)"}"#)),
          \(adminEntry("ad000000-0000-4000-8000-00000000000e", action: "user_modified",
                       traits: #"{"user_email": "bob@example.com", "user_id": "\#(bob)", "user_phone": "\#(bobPhone)"}"#)),
          \(adminEntry("ad000000-0000-4000-8000-00000000000f", action: "user_invited",
                       traits: #"{"user_email": "bob@example.com", "user_id": "\#(bob)"}"#));
        INSERT INTO auth.flow_state (id, user_id, provider_type, authentication_method, referrer, linking_target_id, created_at) VALUES
          ('f1000000-0000-4000-8000-0000000000a1', NULL, 'google', 'oauth', 'https://app.example.com/settings', '\(ada)', now()),
          ('f1000000-0000-4000-8000-0000000000b1', NULL, 'google', 'oauth', 'https://app.example.com/settings', '\(bob)', now());
        INSERT INTO storage.buckets (id, name) VALUES ('avatars', 'avatars');
        INSERT INTO storage.objects (bucket_id, name, owner, owner_id, metadata) VALUES
          ('avatars', '\(ada)/Été à Paris.jpg', '\(ada)', '\(ada)', '{"size": 11, "mimetype": "image/jpeg"}'),
          ('avatars', '\(ada)/my old photo.png', '\(ada)', '\(ada)', '{"size": 12, "mimetype": "image/png"}'),
          ('avatars', '\(bob)/Ça va.jpg', '\(bob)', '\(bob)', '{"size": 9, "mimetype": "image/jpeg"}');
        """

    /// Every row of `auth`, `storage` and `public`, as `row_to_json` prints it, with its table.
    func everyRow(_ workspace: Workspace) async throws -> [(table: String, json: String)] {
        let tables = try await app.rows(workspace, """
            SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables
            WHERE table_schema IN ('auth', 'storage', 'public') AND table_type = 'BASE TABLE' ORDER BY 1
            """)
        #expect(tables.count > 20, "\(tables)")
        var rows: [(String, String)] = []
        for table in tables {
            rows += try await app.rows(workspace, "SELECT row_to_json(t)::text FROM \(table) t ORDER BY 1").map { (table, $0) }
        }
        return rows
    }

    /// The columns (`table.column`, JSON at any depth flattened into the column) of a row
    /// whose value holds one of ada's identifiers, with the value.
    static func adasColumns(_ row: (table: String, json: String)) throws -> [(column: String, value: String)] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(row.json.utf8)) as? [String: Any])
        let marks = [ada, "ada@example.com", adaPhone]
        return object.compactMap { column, value in
            let text: String
            if let string = value as? String { text = string }
            else if value is NSNull { return nil }
            else { text = String(decoding: try! JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]), as: UTF8.self) }
            return marks.contains { text.lowercased().contains($0) } ? ("\(row.table).\(column)", text) : nil
        }
    }

    @Test
    func adminAuditEntriesLinkingFlowsAndStorageObjectsLeaveNothingOfHerAndEveryOtherRowAsItWas() async throws {
        let workspace = try await app.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + SupabaseAuthErasureTests.authSeed + "\n" + Self.platformSeed)
        try await AppPurgeTests.storeSupabaseFiles(workspace)
        let before = try await everyRow(workspace)
        let hitsBefore = Set(try before.flatMap { try Self.adasColumns($0).map(\.column) })
        // Where GoTrue and Storage keep her, each a place the purge has to reach.
        for column in ["auth.audit_log_entries.payload", "auth.flow_state.linking_target_id", "auth.flow_state.user_id",
                       "auth.users.phone", "storage.objects.name", "storage.objects.owner_id", "storage.objects.owner"] {
            #expect(hitsBefore.contains(column), "\(column) holds nothing of ada: \(hitsBefore.sorted())")
        }
        let adminEntries = try await app.rows(workspace, """
            SELECT COUNT(*) FROM auth.audit_log_entries WHERE payload->>'actor_username' = 'service_role' AND payload->'traits'->>'user_id' = '\(Self.ada)'
            """)
        #expect(adminEntries == ["4"])

        // The rehearsal finds the admin entries and the linking flow as the purge will.
        let rehearsal = try await workspace.run(["map", "check", "--account", "ada@example.com"])
        #expect(rehearsal.status == 0, "\(rehearsal.stdout) \(rehearsal.stderr)")

        let right = try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: "hunter2")
        #expect(right.status == 0, "\(right.stderr)")
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")

        let after = try await everyRow(workspace)
        // Her id, address and phone are left only in the tombstones' id and masked address.
        let tombstoneAddress = "deleted-\(Self.ada)@users.invalid"
        for row in after {
            for hit in try Self.adasColumns(row) {
                let allowed = ["public.users.id", "auth.users.id"].contains(hit.column) && hit.value == Self.ada
                    || ["public.users.email", "auth.users.email"].contains(hit.column) && hit.value == tombstoneAddress
                #expect(allowed, "\(hit.column) = \(hit.value) in \(row.json)")
            }
        }
        #expect(after.filter { !(try! Self.adasColumns($0)).isEmpty }.count == 2)

        // Every row that named someone else, or no one, is as it was; what is new is only her
        // emptied audit entries (the entry stays: when, not who).
        // Hers too: rows that name only her rows (a journal photo, a factor's challenge).
        let hersBefore = Set(try before.filter { !(try Self.adasColumns($0)).isEmpty }.map(\.json))
        let namesHer = { (row: (table: String, json: String)) in
            hersBefore.contains(row.json) || SupabaseAuthErasureTests.adasMarks.contains { row.json.contains($0) } || !(try! Self.adasColumns(row)).isEmpty
        }
        let othersBefore = Set(before.filter { !namesHer($0) }.map { "\($0.table) \($0.json)" })
        let othersAfter = Set(after.filter { !namesHer($0) }.map { "\($0.table) \($0.json)" })
        #expect(othersBefore.subtracting(othersAfter).isEmpty, "\(othersBefore.subtracting(othersAfter))")
        let emptied = othersAfter.subtracting(othersBefore)
        #expect(emptied.count == 5 && emptied.allSatisfy { $0.hasPrefix("auth.audit_log_entries ") && $0.contains(#""payload":null"#) }, "\(emptied)")
        let flows = try await app.rows(workspace, "SELECT id::text FROM auth.flow_state ORDER BY id")
        #expect(flows == ["f1000000-0000-4000-8000-0000000000b1"], "\(flows)")
        #expect(try await app.rows(workspace, "SELECT name FROM storage.objects") == ["\(Self.bob)/Ça va.jpg"])

        let receipt = try #require(try await workspace.auditRows(of: Self.ada).first { $0.action == "account.purge" }?.detail)
        #expect(receipt.contains(#""auth.audit_log_entries":{"after":0,"before":5,"deleted":0,"masked":5}"#), "\(receipt)")
        #expect(receipt.contains(#""auth.flow_state":{"after":0,"before":2,"deleted":2,"masked":0}"#), "\(receipt)")
        #expect(receipt.contains(#""storage.objects":{"after":0,"before":2,"deleted":2,"masked":0}"#), "\(receipt)")
    }

    /// Her export holds what Supabase keeps about her: her account's phone and address, her
    /// sign-in methods, her sessions with their devices and addresses, her MFA factors and
    /// her sign-in history; never a token, a password hash or a factor's secret, and
    /// nothing of bob's.
    @Test
    func herExportHoldsWhatGoTrueKeepsAboutHerWithoutATokenOrASecret() async throws {
        let workspace = try await app.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + SupabaseAuthErasureTests.authSeed + "\n" + Self.platformSeed)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        for key in ["avatars/ada.jpg", "journal/ada/run.jpg"] { _ = try await blobs.put(key: key, data: Data(key.utf8)) }
        let (_, archive) = try await AppExportTests().export(workspace, "ada@example.com")
        #expect(archive.rows("auth_user").count == 1 && archive.rows("auth_user")[0].contains("email=ada@example.com"), "\(archive.rows("auth_user"))")
        #expect(archive.rows("auth_identities").count == 1 && archive.rows("auth_identities")[0].contains("provider=email"), "\(archive.rows("auth_identities"))")
        let sessions = archive.rows("auth_sessions")
        #expect(sessions.count == 1 && sessions[0].contains("user_agent=Safari") && sessions[0].contains("ip=192.0.2.1"), "\(sessions)")
        let factors = archive.rows("auth_mfa_factors")
        #expect(factors.count == 1 && factors[0].contains("friendly_name=phone app") && !factors[0].contains("secret"), "\(factors)")
        let history = archive.rows("auth_sign_in_history")
        #expect(!history.isEmpty && history.allSatisfy { !$0.contains(Self.bob) } && history.contains { $0.contains("login") }, "\(history)")
        let everything = archive.tables.description
        for secret in ["ADA-TOTP-SECRET", "ada-live-token", "ada-revoked-token", "hash-a", "encrypted_password", "code-a", "BOB-TOTP-SECRET", "bob@example.com"] {
            #expect(!everything.contains(secret), "\(secret) is in her export")
        }
    }

    /// Storage's objects are files: with LIFECYCLE_BLOBS holding one folder per bucket, each
    /// of her objects' files (`bucket_id/name`: spaces, accents, an upload no row of the app
    /// names) goes with its row; bob's, and a file of hers no object row records, stay.
    @Test
    func storageObjectsAreAFileCatalogWhoseFilesGoWithTheirRows() async throws {
        let workspace = try await app.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        // One object of hers has no file in the store: its row goes, and no file is counted for it.
        let unstored = "INSERT INTO storage.objects (bucket_id, name, owner, owner_id) VALUES ('avatars', '\(Self.ada)/never stored.jpg', '\(Self.ada)', '\(Self.ada)');"
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + SupabaseAuthErasureTests.authSeed + "\n" + Self.platformSeed + "\n" + unstored)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        let hers = ["avatars/\(Self.ada)/Été à Paris.jpg", "avatars/\(Self.ada)/my old photo.png"]
        let others = ["avatars/\(Self.bob)/Ça va.jpg", "avatars/ada-notes.txt"]
        for key in ["avatars/ada.jpg", "avatars/bob.jpg", "journal/ada/run.jpg", "journal/bob/ride.jpg"] + hers + others {
            _ = try await blobs.put(key: key, data: Data(key.utf8))
        }
        // Her export holds her objects' files the store has, beside the files her app rows name.
        let (_, archive) = try await AppExportTests().export(workspace, "ada@example.com")
        #expect(Set(archive.files.keys) == [
            "files/users/2025/01/01/ada.jpg", "files/journal_photos/2025/03/01/run.jpg",
            "files/storage.objects/Été à Paris.jpg", "files/storage.objects/my old photo.png",
        ], "\(archive.files)")
        #expect(archive.files["files/storage.objects/my old photo.png"] == hers[1])

        #expect(try await workspace.run(["delete", "ada@example.com", "--password-stdin"], stdin: "hunter2").status == 0)
        let rehearsal = try await workspace.run(["purge", "--dry-run", "--json"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        // Her two app files and her two objects' files the store has; the object with no file counts none.
        #expect(rehearsal.status == 0 && rehearsal.stdout.contains(#""blobs":4"#), "\(rehearsal.stdout) \(rehearsal.stderr)")
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")

        #expect(app.files(workspace) == Set(["avatars/bob.jpg", "journal/bob/ride.jpg"] + others), "\(app.files(workspace).sorted())")
        for key in others { #expect(try await blobs.readAll(key: key) == Data(key.utf8), "\(key)") }
        #expect(try await app.rows(workspace, "SELECT bucket_id || '/' || name FROM storage.objects") == ["avatars/\(Self.bob)/Ça va.jpg"])
        let receipt = try #require(try await workspace.auditRows(of: Self.ada).first { $0.action == "account.purge" }?.detail)
        // Her two app files, her two objects' files and her export archive.
        #expect(receipt.contains(#""blobs":5"#) && receipt.contains(#""storage.objects":{"after":0,"before":3,"deleted":3,"masked":0}"#), "\(receipt)")
    }

    /// A part of the account made of her Storage objects: deleting it takes their files too,
    /// and nothing else of hers or anyone's.
    @Test
    func aPartOfStorageObjectsTakesTheirFiles() async throws {
        var schema = try DataMapCheckTests.AppSchema.supabase
        schema.map += "\nparts:\n  - name: uploads\n    label: Uploads\n    tables: [storage.objects]\n"
        let workspace = try await app.schemas.install(schema, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + SupabaseAuthErasureTests.authSeed + "\n" + Self.platformSeed)
        let blobs = try FileSystemBlobStore(root: workspace.blobs)
        let kept = ["avatars/ada.jpg", "journal/ada/run.jpg", "avatars/\(Self.bob)/Ça va.jpg"]
        for key in kept + ["avatars/\(Self.ada)/Été à Paris.jpg", "avatars/\(Self.ada)/my old photo.png"] {
            _ = try await blobs.put(key: key, data: Data(key.utf8))
        }
        #expect(try await workspace.run(["init"]).status == 0)
        let asked = try await workspace.run(["delete", "ada@example.com", "--part", "uploads", "--operator", "sam", "--reason", "ticket 7"])
        #expect(asked.status == 0, "\(asked.stdout) \(asked.stderr)")
        let worker = try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"])
        #expect(worker.status == 0 && (worker.stdout + worker.stderr).contains("1 succeeded"), "\(worker.stdout) \(worker.stderr)")
        #expect(app.files(workspace) == Set(kept), "\(app.files(workspace).sorted())")
        #expect(try await app.rows(workspace, "SELECT bucket_id || '/' || name FROM storage.objects") == ["avatars/\(Self.bob)/Ça va.jpg"])
        #expect(try await app.rows(workspace, "SELECT COUNT(*) FROM journal_entries WHERE user_id = '\(Self.ada)'") == ["1"])
    }

    /// A project on a GoTrue release before flow_state.linking_target_id (2026) and
    /// sessions.user_agent (2024) keeps the preset: the flows go by user_id, the export of
    /// sessions holds the other columns, and `map check` says what was left out.
    @Test
    func anOlderGoTrueWithoutLinkingTargetsKeepsThePresetAndSaysWhatIsLeftOut() async throws {
        var schema = try DataMapCheckTests.AppSchema.supabase
        schema.ddl += "\nALTER TABLE auth.flow_state DROP COLUMN linking_target_id;\nALTER TABLE auth.sessions DROP COLUMN user_agent;\n"
        let workspace = try await app.schemas.install(schema, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users") + "\n" + SupabaseAuthErasureTests.authSeed
            .replacingOccurrences(of: "(id, user_id, created_at, user_agent, ip)", with: "(id, user_id, created_at, ip)")
            .replacingOccurrences(of: "now(), 'Safari', ", with: "now(), ").replacingOccurrences(of: "now(), 'Firefox', ", with: "now(), "))
        #expect(try await workspace.run(["init"]).status == 0)
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout.contains("left out (not in this database): auth.flow_state.linking_target_id (preset supabase)"), "\(check.stdout)")
        #expect(check.stdout.contains("left out (not in this database): auth.sessions.user_agent from the export (preset supabase)"), "\(check.stdout)")
        #expect(check.stdout.contains("a file catalog: each row is the file bucket_id / name, deleted with it"), "\(check.stdout)")
        let rehearsal = try await workspace.run(["map", "check", "--account", "ada@example.com"])
        #expect(rehearsal.status == 0, "\(rehearsal.stdout) \(rehearsal.stderr)")
        #expect(rehearsal.stdout.contains("auth.flow_state"), "\(rehearsal.stdout)")
    }
}
