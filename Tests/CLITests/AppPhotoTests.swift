import Foundation
import JobRunner
import Lifecycle
import Testing

/// The profile photo of an app whose map says where it lives (`profile_photo:`), through
/// the app API as a Settings screen uses it: upload, normalise, replace, a refused upload
/// that gives the last photo back, remove, then export and purge take what is left. On
/// the reference app and the Supabase example (a key in the user row) and the real Django
/// site (an ImageField of the profile row, "" for none), with the shipped maps (the
/// reference app and Django on both backends; Supabase's schemas exist on PostgreSQL only).
@Suite(.serialized)
struct AppPhotoTests {
    let app = AppPurgeTests()

    struct Place {
        var workspace: Workspace
        var account: String
        /// Her photo column's value, read directly.
        var current: () async throws -> String
        var empty: String
        /// The folder of the blob store the map's `profile_photo:` keeps photos in.
        var prefix = "avatars/"
    }

    /// The reference app is one more map (`profile_photo: {column: profile_photo_key, prefix:
    /// accounts/}`): the same journey, with photos an import gave and the worker rendered.
    @Test(arguments: Backend.allCases)
    func theReferenceAppsProfilePhotoTakesTheWholePhotoJourney(_ backend: Backend) async throws {
        let workspace = try await Workspace.make(backend)
        let fixture = try ImportFixture(lines: [
            // Not a photo the journey uploads: the same pixels render to the same name.
            ImportFixture.account(id: "ada", profilePhoto: "photos/avatar-alpha.png"),
            ImportFixture.account(id: "bob", profilePhoto: "photos/trail.jpg"),
        ])
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        let imported = try await workspace.run(["accounts", "import", fixture.path])
        try #require(imported.status == 0, "\(imported.stderr)")
        let rendered = try await workspace.run(["worker", "--once"])
        try #require(rendered.status == 0, "\(rendered.stderr)")
        let key = { (account: String) in
            try await self.app.rows(workspace, "SELECT profile_photo_key FROM accounts WHERE id = '\(account)'").joined()
        }
        let (previous, untouched) = (try await key("ada"), try await key("bob"))
        #expect(previous.hasPrefix("accounts/ada/v") && untouched.hasPrefix("accounts/bob/v"), "\(previous) \(untouched)")
        try await journey(
            Place(workspace: workspace, account: "ada", current: { try await key("ada") }, empty: "∅", prefix: "accounts/ada/"),
            previous: previous, untouched: untouched)
    }

    /// Supabase is PostgreSQL: its platform schemas (GoTrue's auth, Storage) exist there only.
    @Test
    func theSupabaseExamplesAvatarTakesTheWholePhotoJourney() async throws {
        let workspace = try await app.schemas.install(try DataMapCheckTests.AppSchema.supabase, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users"))
        try await AppPurgeTests.storeSupabaseFiles(workspace)
        let initialised = try await workspace.run(["init"])
        #expect(initialised.status == 0, "\(initialised.stderr)")
        let ada = AppPurgeTests.ada
        try await journey(Place(workspace: workspace, account: ada, current: {
            try await self.app.rows(workspace, "SELECT avatar_path FROM users WHERE id = '\(ada)'").joined()
        }, empty: "∅"), previous: "avatars/ada.jpg", untouched: "avatars/bob.jpg")
    }

    @Test(arguments: Backend.allCases)
    func theDjangoSitesProfileAvatarTakesTheWholePhotoJourney(_ backend: Backend) async throws {
        let (workspace, seeded) = try await DjangoSiteErasureTests().site(backend, map: try DjangoSiteErasureTests.map)
        let ada = String(try #require(seeded.users["ada"]))
        let avatar = "SELECT avatar FROM blog_profile WHERE user_id = "
        let previous = try await app.rows(workspace, avatar + ada).joined()
        let untouched = try await app.rows(workspace, avatar + String(try #require(seeded.users["bob"]))).joined()
        #expect(!previous.isEmpty && !untouched.isEmpty)
        try await journey(Place(workspace: workspace, account: ada, current: {
            try await self.app.rows(workspace, avatar + ada).joined()
        }, empty: ""), previous: previous, untouched: untouched)
    }

    /// Photos the app stored itself (the Django site's avatars, PNGs as uploaded) are
    /// normalised by `photos normalize --all` like uploads: each becomes the recipe's JPEG,
    /// the original goes, and a second run finds nothing left to do.
    @Test(arguments: Backend.allCases)
    func theDjangoSitesOwnAvatarsAreNormalisedInPlace(_ backend: Backend) async throws {
        let (workspace, seeded) = try await DjangoSiteErasureTests().site(backend, map: try DjangoSiteErasureTests.map)
        let avatars = "SELECT user_id, avatar FROM blog_profile WHERE avatar <> '' ORDER BY user_id"
        let before = try await app.rows(workspace, avatars)
        #expect(before.count >= 2, "\(before)")
        let originals = before.map { String($0.split(separator: "|")[1]) }
        var sides: [Int] = []
        for original in originals {
            let width = try await runTool("/usr/bin/vipsheader", ["-f", "width", workspace.blobs + "/" + original])
            let height = try await runTool("/usr/bin/vipsheader", ["-f", "height", workspace.blobs + "/" + original])
            sides.append(min(Int(width) ?? 0, Int(height) ?? 0, 1024))
        }
        let run = try await workspace.run(["photos", "normalize", "--all"])
        #expect(run.status == 0 && run.stdout.contains("normalised \(before.count), rejected 0"), "\(run.stdout) \(run.stderr)")
        let after = try await app.rows(workspace, avatars)
        #expect(after.count == before.count)
        for (index, row) in after.enumerated() {
            let parts = row.split(separator: "|").map(String.init)
            #expect(parts[0] == before[index].split(separator: "|").map(String.init)[0])
            #expect(parts[1].hasPrefix("avatars/\(parts[0])/v") && parts[1].hasSuffix(".jpg"), "\(row)")
            try await expectCleanSquareJPEG(atPath: workspace.blobs + "/" + parts[1], side: sides[index])
            #expect(!app.files(workspace).contains(originals[index]), "\(originals[index]) is left")
        }
        let again = try await workspace.run(["photos", "normalize", "--all"])
        #expect(again.status == 0 && again.stdout.contains("nothing to normalise"), "\(again.stdout)")

        // The app API reports a photo the app stored itself once its job rendered it, by the
        // stored file's name; once the app puts another file there, it reports nothing of it.
        let ada = String(try #require(seeded.users["ada"]))
        let adasOriginal = try #require(zip(before, originals).first { $0.0.hasPrefix(ada + "|") }?.1)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let place = Place(workspace: workspace, account: ada, current: { "" }, empty: "")
        let stored = try #require(adasOriginal.split(separator: "/").last.map(String.init))
        #expect(try await photoStatus(server, place) == [stored, "normalized"])
        try await workspace.execute("UPDATE blog_profile SET avatar = 'avatars/elsewhere.png' WHERE user_id = \(ada)")
        #expect(try await photoStatus(server, place) == [])
        #expect(await server.stop() == 0)
    }

    /// A photo column the export and purge would not take, or a row not found by her key,
    /// is refused at load, naming the fix; a map without `profile_photo:` refuses uploads
    /// and removals with what to add, before a byte is read.
    @Test func aPhotoColumnThePurgeWouldNotTakeIsRefused() async throws {
        var schema = try DataMapCheckTests.AppSchema.supabase
        let shipped = "profile_photo: {column: avatar_path, prefix: avatars/}"
        #expect(schema.map.contains(shipped))
        for (written, refusal) in [
            ("profile_photo: {column: bio}", "profile_photo: public.users.bio is not among the table's `blobs:`"),
            ("profile_photo: {table: journal_photos, column: storage_path}", "must be the user table or a mapped table with `owner: COLUMN`"),
            ("profile_photo: {column: avatar_path, prefix: ../up/}", "must be a folder of the blob store"),
            ("profile_photo: {column: avatar_path, empty: gone}", "null, or \"\" (Django's FileField)"),
        ] {
            schema.map = try DataMapCheckTests.AppSchema.supabase.map.replacingOccurrences(of: shipped, with: written)
            let workspace = try await app.schemas.install(schema, .postgres)
            let check = try await workspace.run(["map", "check"])
            #expect(check.status == 65 && check.stderr.contains(refusal), "\(written): \(check.stderr)")
        }
        schema.map = try DataMapCheckTests.AppSchema.supabase.map.replacingOccurrences(of: shipped, with: "")
        let workspace = try await app.schemas.install(schema, .postgres)
        try await app.seed(workspace, AppPurgeTests.supabaseSeed(auth: "auth.users"))
        #expect(try await workspace.run(["init"]).status == 0)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let upload = try await ServeTests.upload(server, repositoryRoot + "/Jobs/demo/photos/trail.jpg", account: AppPurgeTests.ada)
        #expect(upload.status == 409 && ServeTests.errorMessage(upload.json)?.contains("add `profile_photo: {column: COLUMN}`") == true, "\(upload.text)")
        let removal = try await ServeTests.api(server, "DELETE", "accounts/\(AppPurgeTests.ada)/photo")
        #expect(removal.status == 409 && ServeTests.errorMessage(removal.json)?.contains("Profile photos") == true, "\(removal.json)")
        #expect(await server.stop() == 0)
    }

    /// `GET /v1/accounts/{account}`'s `profile_photo`: its id, state and message, or nothing.
    func photoStatus(_ server: ServeTests.Server, _ place: Place) async throws -> [String] {
        let answer = try await ServeTests.api(server, "GET", "accounts/\(place.account)")
        try #require(answer.status == 200, "\(answer.json)")
        guard let photo = answer.json["profile_photo"] as? [String: Any] else { return [] }
        return [photo["photo_id"], photo["state"], photo["message"]].compactMap { $0 as? String }
    }

    /// `previous`: her avatar before; `untouched`: another user's, which nothing may touch.
    func journey(_ place: Place, previous: String, untouched: String) async throws {
        let workspace = place.workspace
        #expect(try await workspace.run(["map", "check"]).status == 0)
        let server = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_API_TOKEN": ServeTests.apiToken])
        let files = { self.app.files(workspace) }

        // Upload: her column names the upload at once; the job makes it the product's JPEG,
        // and the avatar it replaced goes.
        let accepted = try await ServeTests.upload(server, repositoryRoot + "/Jobs/demo/photos/portrait.heic", account: place.account)
        #expect(accepted.status == 202 && accepted.json["state"] as? String == "pending", "\(accepted.text)")
        let upload = try await place.current()
        #expect(upload.hasPrefix(place.prefix) && upload.contains("/upload-") && files().contains(upload), "\(upload)")
        let photoID = try #require(accepted.json["photo_id"] as? String)
        #expect(try await photoStatus(server, place) == [photoID, "pending"])
        let worker = try await workspace.run(["worker", "--once"])
        #expect(worker.status == 0, "\(worker.stdout) \(worker.stderr)")
        #expect(try await photoStatus(server, place) == [photoID, "normalized"])
        let rendered = try await place.current()
        #expect(rendered.hasPrefix(place.prefix) && rendered.hasSuffix(".jpg") && rendered != upload, "\(rendered)")
        try await expectCleanSquareJPEG(atPath: workspace.blobs + "/" + rendered, side: 1024)
        #expect(!files().contains(upload) && !files().contains(previous) && files().contains(untouched), "\(files().sorted())")

        // A photo only decoding finds broken: stored, refused by the job, and her last
        // photo is hers again; the broken upload is gone, and the audit says why.
        let broken = workspace.root + "/truncated.jpg"
        let whole = try Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/Jobs/demo/photos/trail.jpg"))
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: broken))
        let brokenAnswer = try await ServeTests.upload(server, broken, account: place.account)
        #expect(brokenAnswer.status == 202)
        let brokenUpload = try await place.current()
        #expect(brokenUpload != rendered)
        #expect(try await workspace.run(["worker", "--once"]).status == 0)
        #expect(try await place.current() == rendered)
        // The app hears why, in the product's words, as on the reference app.
        let brokenID = try #require(brokenAnswer.json["photo_id"] as? String)
        #expect(try await photoStatus(server, place) == [brokenID, "rejected", RefusedPhoto.unreadable])
        #expect(!files().contains(brokenUpload) && files().contains(rendered), "\(files().sorted())")
        let refusal = try await workspace.auditRows(of: place.account).first { $0.action == "photo.normalize" && $0.outcome != "normalized" }
        #expect(refusal?.outcome == "rejected" && refusal?.detail?.contains(RefusedPhoto.unreadable) == true, "\(String(describing: refusal))")

        // Remove Photo: the column empty at once, the file gone once its job has run; a
        // second removal changes nothing.
        let removed = try await ServeTests.api(server, "DELETE", "accounts/\(place.account)/photo")
        #expect(removed.status == 200 && removed.json["removed"] as? Bool == true, "\(removed.json)")
        #expect(try await place.current() == place.empty)
        #expect(try await photoStatus(server, place) == [], "a removed photo has no status")
        #expect(try await workspace.run(["worker", "--once"]).status == 0)
        #expect(!files().contains(rendered) && files().contains(untouched), "\(files().sorted())")
        let again = try await ServeTests.api(server, "DELETE", "accounts/\(place.account)/photo")
        #expect(again.status == 200 && again.json["removed"] as? Bool == false, "\(again.json)")
        #expect(try await ServeTests.api(server, "DELETE", "accounts/nobody/photo").status == 404)

        // A new one, then her export holds it and her purge deletes it.
        #expect(try await ServeTests.upload(server, repositoryRoot + "/Jobs/demo/photos/trail.jpg", account: place.account).status == 202)
        #expect(try await workspace.run(["worker", "--once"]).status == 0)
        let last = try await place.current()
        #expect(last.hasSuffix(".jpg") && files().contains(last), "\(last)")
        #expect(await server.stop() == 0)
        let (_, archive) = try await AppExportTests().export(workspace, place.account)
        let exported = (archive.manifest["files"] as? [[String: Any]] ?? []).compactMap { $0["blob_key"] as? String }
        #expect(exported.contains(last) && !exported.contains(untouched), "\(exported)")
        #expect(try await workspace.run(["delete", place.account, "--operator", "sam", "--reason", "t"]).status == 0)
        let purge = try await workspace.run(["purge"], environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 86_400))])
        #expect(purge.stdout.contains("1 purged"), "\(purge.stdout) \(purge.stderr)")
        #expect(!files().contains(last) && files().contains(untouched), "\(files().sorted())")
    }
}

