import ChildProcesses
import Foundation
import JobRunner
@testable import LifecycleServer
import Testing

/// The web deletion page (`/account/delete`), the store listing's link: the address asked
/// for, the same answer whether or not an account has it, a single-use signed link through
/// the outbox, the product's warning, and the deletion with its grace period; refused when
/// forged, expired or used again.
@Suite(.serialized)
struct DeletionPageTests {
    static let serve = ["LIFECYCLE_SIGNING_KEY": ServeTests.signingKey]

    /// The confirmation links in the outbox, oldest first, moved onto the test server (the
    /// link's origin is the policy's link_base_url).
    static func links(_ workspace: Workspace, to server: ServeTests.Server, account: String) async throws -> [String] {
        let bodies = try await workspace.query(
            "SELECT body FROM \(workspace.ownTable("outbox")) WHERE unique_key LIKE ? ORDER BY id", [.text("deletion-link:\(account):%")])
        return bodies.compactMap { row in
            guard let body = row.first ?? nil, let line = body.split(separator: "\n").first(where: { $0.contains("/account/delete/confirm?") }),
                  let path = line.range(of: "/account/delete/confirm?") else { return nil }
            return "http://\(server.base)" + line[path.lowerBound...]
        }
    }

    /// Waits until the page has audited `count` link requests in all: each is looked up and
    /// mailed after its answer went out, and audited once whatever it found.
    static func settled(_ workspace: Workspace, requests count: Int) async throws {
        let done = try await eventually(timeout: 30) {
            try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("audit_events")) WHERE action = 'deletion.web-link'") >= count
        }
        #expect(done, "the page did not handle \(count) link request(s)")
    }

    static func form(_ html: String, _ name: String) -> String? {
        guard let range = html.range(of: "name=\"\(name)\" value=\"") else { return nil }
        let rest = html[range.upperBound...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }

    static func post(_ url: String, _ fields: [(String, String)], headers: [String] = []) async throws -> (status: Int, text: String) {
        var arguments = ["-X", "POST"]
        for header in headers { arguments += ["-H", header] }
        for (name, value) in fields { arguments += ["--data-urlencode", "\(name)=\(value)"] }
        return try await ServeTests.curl(arguments + [url])
    }

    static func body(_ answer: (status: Int, text: String)) -> String {
        guard let start = answer.text.range(of: "<!doctype html>") else { return answer.text }
        return String(answer.text[start.lowerBound...])
    }

    @Test func aLinkIsSentOnlyToAnAccountsAddressAndTheSameAnswerGoesToEveryone() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada"), DeletionLines.account(id: "bob")], into: workspace)
        let server = try await ServeTests.Server.start(workspace)
        let page = "http://\(server.base)/account/delete"

        let asked = try await ServeTests.curl([page])
        #expect(asked.status == 200 && asked.text.contains("<label for=\"email\">Email address</label>"), "\(asked.text)")
        #expect(asked.text.contains("Content-Security-Policy: default-src 'none'"))

        let known = try await Self.post(page, [("email", "ada@example.com")])
        let unknown = try await Self.post(page, [("email", "nobody@example.com")])
        #expect(known.status == 200 && unknown.status == 200)
        #expect(Self.body(known) == Self.body(unknown), "the answer tells the two apart")
        #expect(Self.body(known).contains("If an account uses that address"))
        try await Self.settled(workspace, requests: 2)
        #expect(try await Self.links(workspace, to: server, account: "ada").count == 1)
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("outbox")) WHERE unique_key LIKE 'deletion-link:%'") == 1)
        let mail = try #require(try await workspace.string(
            "SELECT recipient FROM \(workspace.ownTable("outbox")) WHERE unique_key LIKE 'deletion-link:ada:%'"))
        #expect(mail == "ada@example.com")
        #expect(try await Self.post(page, [("email", "not an address")]).status == 400)

        // The audit has each request, the address only as a keyed hash.
        let audit = try await workspace.run(["audit", "ada", "--json"])
        #expect(audit.stdout.contains("deletion.web-link") && audit.stdout.contains("address_digest"), "\(audit.stdout)")
        let events = try await workspace.query("SELECT outcome, detail FROM \(workspace.ownTable("audit_events")) WHERE action = 'deletion.web-link' ORDER BY id")
        // Each request's work starts 50-250 ms after its answer, so the two may be audited in either order.
        #expect(events.map { $0[0] ?? "" }.sorted() == ["sent", "unknown-address"])
        #expect(!events.contains { ($0[1] ?? "").contains("example.com") })

        // Per account: three links an hour, then nothing more is sent (the answer is the same).
        for count in 3...6 {
            #expect(Self.body(try await Self.post(page, [("email", "bob@example.com")])) == Self.body(known))
            try await Self.settled(workspace, requests: count)
        }
        #expect(try await Self.links(workspace, to: server, account: "bob").count == 3)
        let limited = try await workspace.query(
            "SELECT outcome FROM \(workspace.ownTable("audit_events")) WHERE action = 'deletion.web-link' AND account_id = 'bob' ORDER BY id")
        #expect(limited.map { $0[0] ?? "" } == ["sent", "sent", "sent", "rate-limited"])
        #expect(await server.stop() == 0)
    }

    @Test func theLinkDeletesWithTheGracePeriodOnceAndNeverFromAForgedForm() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada"), DeletionLines.account(id: "bob")], into: workspace)
        let server = try await ServeTests.Server.start(workspace)
        let page = "http://\(server.base)/account/delete"
        _ = try await Self.post(page, [("email", "ada@example.com")])
        try await Self.settled(workspace, requests: 1)
        let link = try #require(try await Self.links(workspace, to: server, account: "ada").first)

        let shown = try await ServeTests.curl([link])
        #expect(shown.status == 200, "\(shown.text)")
        #expect(shown.text.contains("This will permanently delete all your entries, photos, and data. This action cannot be undone."))
        let fields = try ["account", "issued", "sig", "form_token"].map { ($0, try #require(Self.form(shown.text, $0))) }
        let confirm = page + "/confirm"

        // Forged: no form token, a wrong one, another site's form, an altered link.
        #expect(try await Self.post(confirm, Array(fields.dropLast())).status == 403)
        #expect(try await Self.post(confirm, Array(fields.dropLast()) + [("form_token", String(repeating: "0", count: 64))]).status == 403)
        #expect(try await Self.post(confirm, fields, headers: ["Origin: https://evil.example"]).status == 403)
        #expect(try await Self.post(confirm, [("account", "bob")] + Array(fields.dropFirst())).status == 403)
        #expect(try await workspace.run(["accounts", "show", "ada"]).stdout.contains("active"))

        let done = try await Self.post(confirm, fields)
        #expect(done.status == 200 && done.text.contains("Your account has been deleted. You have 30 days to recover it by signing in again."), "\(done.text)")
        let state = try await workspace.run(["accounts", "show", "ada", "--json"])
        #expect(state.stdout.contains(#""state":"pendingDeletion""#), "\(state.stdout)")
        let request = try await workspace.query(
            "SELECT actor, detail FROM \(workspace.ownTable("audit_events")) WHERE action = 'deletion.request' AND account_id = 'ada'")
        #expect(request.count == 1 && request[0][0] == "user:email-link" && (request[0][1] ?? "").contains("purge_job"), "\(request)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM sessions WHERE account_id = 'ada' AND revoked_at IS NULL") == 0)

        // Used: the page and the form both refuse it, and nothing more is recorded.
        let again = try await ServeTests.curl([link])
        #expect(again.status == 410 && again.text.contains("already been used"), "\(again.text)")
        #expect(try await Self.post(confirm, fields).status == 410)
        // Restored by signing in again, the old link stays void.
        #expect(try await workspace.run(["restore", "ada"]).status == 0)
        #expect(try await ServeTests.curl([link]).status == 410)
        #expect(await server.stop() == 0)

        // Expired: bob's link, opened 31 minutes on.
        let first = try await ServeTests.Server.start(workspace)
        _ = try await Self.post("http://\(first.base)/account/delete", [("email", "bob@example.com")])
        try await Self.settled(workspace, requests: 2)
        #expect(await first.stop() == 0)
        let later = try await ServeTests.Server.start(workspace, environment: ["LIFECYCLE_NOW": ISO8601.format(Date().addingTimeInterval(31 * 60))])
        let bobs = try #require(try await Self.links(workspace, to: later, account: "bob").first)
        let expired = try await ServeTests.curl([bobs])
        #expect(expired.status == 410 && expired.text.contains("expired"), "\(expired.text)")
        #expect(await later.stop() == 0)
        #expect(try await workspace.run(["accounts", "show", "bob"]).stdout.contains("active"))
    }

    /// From the store link to the confirmation with the keyboard alone, in Chromium.
    /// Issue 54: the first page says what Google Play's account-deletion rule asks of it, as
    /// a phone shows it (headless Chromium's text, and its screenshot read back by OCR): the
    /// app and developer as configured in Jobs/, the steps, what is deleted and what is kept
    /// for how long, from the data map and the policies.
    @Test func theFirstPageNamesTheAppTheStepsAndWhatGoesAndWhatStaysAsAPhoneShowsIt() async throws {
        let python = repositoryRoot + "/.build-tools/venv/bin/python"
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(workspace)
        let shot = workspace.root + "/deletion-page.png"
        let run = try await SurfaceTests.shell(
            "'\(python)' '\(repositoryRoot)/Tests/CLITests/Browser/page_shot.py' /usr/bin/chromium 'http://\(server.base)/account/delete' '\(shot)'",
            in: workspace.root)
        #expect(await server.stop() == 0)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr.suffix(3_000))")
        let text = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: String])["text"] ?? ""
        for said in [
            "This page deletes your Lifecycle Journal account and its data, without the app. It is run by AccountLifecycle.",
            "Enter the email address of your account below.", "Open the link we email to that address. It works once, for 30 minutes.",
            "For 30 days after you confirm, signing in again cancels the deletion.",
            "What is deleted", "Journal entries", "Photos", "The files they name",
            "What is kept, and for how long", "Everything above, for 30 days after you confirm",
            "A receipt of the deletion (what was removed and when, none of your content)",
            "Or delete only some of your data", "Email address", "Send me a confirmation link",
        ] {
            #expect(text.contains(said), "'\(said)' is not on the page: \(text)")
        }
        let png = try #require(FileManager.default.contents(atPath: shot))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 20_000)
        let seen = try await runTool("/usr/bin/tesseract", [shot, "-", "--psm", "3"])
        for words in ["Lifecycle Journal", "How it works", "What is deleted", "What is kept", "30 days"] {
            #expect(seen.contains(words), "the screenshot does not show '\(words)': \(seen.prefix(2_000))")
        }
    }

    /// The template shipped in Jobs/ is the wording built in for a Jobs folder without one.
    @Test func theShippedTemplateIsTheWordingBuiltIn() throws {
        let shipped = try String(contentsOfFile: repositoryRoot + "/Jobs/pages/account-delete.html", encoding: .utf8)
        #expect(shipped == DeletionPageContent.builtInTemplate + "\n")
    }

    /// On an app's own database the lists are its data map's (a post others replied to stays
    /// emptied; what the map's residue allows, with its reason), and the wording is the
    /// installation's own template, here in German, with the page's placeholders filled.
    @Test func anAppsPageListsItsMapsRulesInItsOwnTemplate() async throws {
        let workspace = try await AppPurgeTests().installSocial(.sqlite)
        try FileManager.default.createDirectory(atPath: workspace.jobsDirectory + "/policies", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: workspace.jobsDirectory + "/pages", withIntermediateDirectories: true)
        try """
            deletion_page:
              app_name: Plauderei
              developer: Beispiel GmbH
              template: pages/konto-loeschen.html
            """.write(toFile: workspace.jobsDirectory + "/policies/deletion-page.yaml", atomically: true, encoding: .utf8)
        try """
            <p>Hier löschen Sie Ihr {{app_name}}-Konto. {{developer}}</p>
            <p>Nach {{grace_days}} Tagen ist es endgültig.</p>
            <h2>Was gelöscht wird</h2>
            {{deleted}}
            <h2>Was bleibt</h2>
            {{kept}}
            {{form}}
            """.write(toFile: workspace.jobsDirectory + "/pages/konto-loeschen.html", atomically: true, encoding: .utf8)
        let map = workspace.jobsDirectory + "/account-data.yaml"
        try (try String(contentsOfFile: map, encoding: .utf8) + "\nresidue:\n  allow: [messages.body]\n  reason: the other person's copy of a conversation\n")
            .write(toFile: map, atomically: true, encoding: .utf8)
        try await workspace.ensureInitialised()
        let server = try await ServeTests.Server.start(workspace)
        let page = try await ServeTests.curl(["http://\(server.base)/account/delete"])
        #expect(await server.stop() == 0)
        let html = Self.body(page)
        #expect(page.status == 200, "\(page.text)")
        for said in [
            "Hier löschen Sie Ihr Plauderei-Konto. It is run by Beispiel GmbH.", "Nach 30 Tagen ist es endgültig.",
            "<li>Favourites</li>", "<li>Follows</li>",
            "<li>Statuses that other people&#39;s content refers to stay, without member id, body, for as long as the service keeps them.</li>",
            "<li>Messages you share with someone stay theirs, without sender id, recipient id.</li>",
            "<li>Body: the other person&#39;s copy of a conversation.</li>", "<label for=\"email\">Email address</label>",
        ] {
            #expect(html.contains(said), "'\(said)' is not on the page: \(html)")
        }
        #expect(!html.contains("{{"), "a placeholder was left: \(html)")
    }

    @Test func aUserDeletesTheirAccountWithTheKeyboardAloneInABrowser() async throws {
        let python = repositoryRoot + "/.build-tools/venv/bin/python"
        #expect(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), "chromium is missing: run make (it installs it)")
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(workspace)
        let script = repositoryRoot + "/Tests/CLITests/Browser/delete_account.py"
        struct Asked: Decodable { var focus_after_load: String; var focus_after_tab: String; var text: String }
        struct Confirmed: Decodable { var before: String; var focus_after_load: String; var focus_after_tab: String; var text: String }

        let ask = try await SurfaceTests.shell(
            "'\(python)' '\(script)' /usr/bin/chromium ask 'http://\(server.base)/account/delete' ada@example.com", in: workspace.root)
        #expect(ask.status == 0, "\(ask.stdout)\(ask.stderr.suffix(3_000))")
        let asked = try JSONDecoder().decode(Asked.self, from: Data(ask.stdout.utf8))
        #expect(asked.focus_after_load == "input: Email address", "\(asked.focus_after_load)")
        #expect(asked.focus_after_tab == "button: Send me a confirmation link", "\(asked.focus_after_tab)")
        #expect(asked.text.contains("If an account uses that address"), "\(asked.text)")
        try await Self.settled(workspace, requests: 1)

        let link = try #require(try await Self.links(workspace, to: server, account: "ada").first)
        let confirm = try await SurfaceTests.shell("'\(python)' '\(script)' /usr/bin/chromium confirm '\(link)'", in: workspace.root)
        #expect(confirm.status == 0, "\(confirm.stdout)\(confirm.stderr.suffix(3_000))")
        let confirmed = try JSONDecoder().decode(Confirmed.self, from: Data(confirm.stdout.utf8))
        #expect(confirmed.before.contains("This action cannot be undone."), "\(confirmed.before)")
        #expect(confirmed.focus_after_tab == "button: Delete my account", "\(confirmed.focus_after_tab)")
        #expect(confirmed.text.contains("Your account has been deleted. You have 30 days to recover it by signing in again."), "\(confirmed.text)")
        #expect(try await workspace.run(["accounts", "show", "ada"]).stdout.contains("pendingDeletion"))
        #expect(await server.stop() == 0)
    }

    /// The same page, keyboard only, deletes the photos alone: the account stays open and
    /// active, its photos and their files go, and the audit holds the verified receipt.
    @Test func aUserDeletesOnlyTheirPhotosWithTheKeyboardAloneInABrowser() async throws {
        let python = repositoryRoot + "/.build-tools/venv/bin/python"
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada", entries: 2)], into: workspace)
        let server = try await ServeTests.Server.start(workspace)
        let script = repositoryRoot + "/Tests/CLITests/Browser/delete_account.py"
        #expect(try await Self.post("http://\(server.base)/account/delete", [("email", "ada@example.com")]).status == 200)
        try await Self.settled(workspace, requests: 1)
        let link = try #require(try await Self.links(workspace, to: server, account: "ada").first)

        struct Chose: Decodable { var before: String; var stops: [String]; var ticked: Bool; var text: String }
        let run = try await SurfaceTests.shell("'\(python)' '\(script)' /usr/bin/chromium part '\(link)' Photos", in: workspace.root)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr.suffix(3_000))")
        let chose = try JSONDecoder().decode(Chose.self, from: Data(run.stdout.utf8))
        #expect(chose.before.contains("Or delete only some of your data") && chose.ticked, "\(chose)")
        #expect(chose.stops.first == "button: Delete my account", "\(chose.stops)")
        #expect(chose.text.contains("We're deleting: Photos (the profile photo and every journal photo). This cannot be undone. Your account stays open."), "\(chose.text)")
        // The link is used up: it deletes nothing more, whichever form sends it.
        let again = try await ServeTests.curl([link])
        #expect(again.status == 410 && again.text.contains("already been used"), "\(again.text)")
        #expect(await server.stop() == 0)

        let worker = try await workspace.run(["worker", "--once", "--kind", "deletion.erase-parts"])
        #expect(worker.status == 0, "\(worker.stderr)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM photos WHERE account_id = 'ada'") == 0)
        #expect(try await workspace.int("SELECT COUNT(*) FROM journal_entries WHERE account_id = 'ada'") == 2)
        #expect(PartDeletionTests.files(workspace, of: "ada").isEmpty)
        #expect(try await workspace.run(["accounts", "show", "ada"]).stdout.contains("state: active"))
        let receipt = try #require(try await PartDeletionTests.receipts(workspace, of: "ada").first)
        #expect(receipt.parts == ["photos"] && receipt.rows["photos"]?.deleted == 2 && receipt.blobs == 3 && receipt.verification.result == "verified", "\(receipt)")
        let actor = try await workspace.auditRows(of: "ada").first { $0.action == "deletion.part" }?.actor
        #expect(actor == "user:email-link")
    }

    /// A partial form must name parts the page offers, at least one, with the page's token.
    @Test func aPartialConfirmationNamesOfferedPartsAndCarriesThePagesToken() async throws {
        let workspace = try Workspace()
        try await DeletionLines.importAccounts([DeletionLines.account(id: "ada")], into: workspace)
        let server = try await ServeTests.Server.start(workspace)
        let page = "http://\(server.base)/account/delete"
        #expect(try await Self.post(page, [("email", "ada@example.com")]).status == 200)
        try await Self.settled(workspace, requests: 1)
        let link = try #require(try await Self.links(workspace, to: server, account: "ada").first)
        let shown = try await ServeTests.curl([link])
        let fields = try ["account", "issued", "sig", "form_token"].map { ($0, try #require(Self.form(shown.text, $0))) }
        let scope = [("scope", "parts")]
        let none = try await Self.post(page + "/confirm", fields + scope)
        #expect(none.status == 400 && none.text.contains("Tick what to delete"), "\(none.text)")
        let stranger = try await Self.post(page + "/confirm", fields + scope + [("part-accounts", "yes")])
        #expect(stranger.status == 400 && stranger.text.contains("does not offer"), "\(stranger.text)")
        let forged = try await Self.post(page + "/confirm", fields.filter { $0.0 != "form_token" } + [("form_token", String(repeating: "0", count: 64))] + scope + [("part-photos", "yes")])
        #expect(forged.status == 403, "\(forged.text)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = 'deletion.erase-parts'") == 0)
        let done = try await Self.post(page + "/confirm", fields + scope + [("part-journal", "yes")])
        #expect(done.status == 200 && done.text.contains("deleting: Journal entries (with their photos). This cannot be undone."), "\(done.text)")
        let reused = try await Self.post(page + "/confirm", fields + scope + [("part-photos", "yes")])
        #expect(reused.status == 410, "\(reused.text)")
        #expect(try await workspace.int("SELECT COUNT(*) FROM \(workspace.ownTable("jobs")) WHERE kind = 'deletion.erase-parts'") == 1)
        #expect(await server.stop() == 0)
    }

    /// On an app's own database (the Django example, both backends): the address is found
    /// in the map's email column whatever the case it is typed in (`ignore_case:`), the link
    /// goes to the address as stored, and confirming signs the user out of Django.
    @Test(arguments: Backend.allCases)
    func aDjangoUserDeletesTheirAccountFromTheWebPage(_ backend: Backend) async throws {
        let django = DjangoSiteErasureTests()
        let (workspace, seeded) = try await django.site(backend, map: try DjangoSiteErasureTests.map)
        let ada = try #require(seeded.users["ada"])
        let session = try #require(seeded.sessions["ada"])
        #expect(try await workspace.run(["init"]).status == 0)
        let server = try await ServeTests.Server.start(workspace)
        let page = "http://\(server.base)/account/delete"
        #expect(try await Self.post(page, [("email", "Ada@EXAMPLE.com")]).status == 200)
        try await Self.settled(workspace, requests: 1)
        let recipient = try await workspace.string("SELECT recipient FROM \(workspace.ownTable("outbox")) WHERE unique_key LIKE 'deletion-link:\(ada):%'")
        #expect(recipient == "ada@example.com")
        let link = try #require(try await Self.links(workspace, to: server, account: String(ada)).first)
        let shown = try await ServeTests.curl([link])
        let fields = try ["account", "issued", "sig", "form_token"].map { ($0, try #require(Self.form(shown.text, $0))) }
        let done = try await Self.post(page + "/confirm", fields)
        #expect(done.status == 200 && done.text.contains("You have 30 days to recover it by signing in again."), "\(done.text)")
        #expect(await server.stop() == 0)
        #expect(try await django.manage(workspace, ["whoami", session]) == "anonymous")
        let shownState = try await workspace.run(["accounts", "show", "ada", "--json"])
        #expect(shownState.stdout.contains(#""state":"pendingDeletion""#), "\(shownState.stdout)")
    }
}
