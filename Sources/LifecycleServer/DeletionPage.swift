import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Lifecycle
import Metrics
import NIOCore
import Synchronization

/// `/account/delete`: the web page an app publishes in its store listing so that users can
/// delete their account without the app. Server-rendered HTML with forms, no script:
///
/// 1. `GET /account/delete` asks for the email address; `POST` answers the same sentence
///    whether or not an account has it, and sends the account's address a single-use
///    confirmation link (`WebDeletion`).
/// 2. `GET /account/delete/confirm?account&issued&sig` shows the product's warning and a
///    form whose token is bound to the link; `POST` requests deletion with the 30-day grace
///    period and shows the product's answer.
///
/// Forms posted from another site are refused (the browser's `Sec-Fetch-Site` and
/// `Origin`, and the confirmation form's token). Requests for links are limited per client
/// and per address here (in this process), and per account in the audit (across
/// processes). A request the page cannot take is told so, with when to try again (429 or
/// 503 and `Retry-After`), counted (`lifecycle_deletion_page_refused_total{reason}`) and
/// logged: never answered "we've sent an email" with no email sent.
struct DeletionPage<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    /// Who may ask for a link to an address: a mistyped address asked again, not a mail bomb.
    let perAddress = SlidingLimiter(perHour: 5)
    /// Who may ask at all: a household or an office behind one address, not a flood.
    let perClient = SlidingLimiter(perHour: 30)
    /// The data map and catalog, read once for every request.
    let cache = AppDataCache()
    /// Link requests being looked up and mailed after their answer went out.
    let working = BoundedWork(running: 16, waiting: 1_024, startDelay: 50...250)
    /// The public origin of the links (`export.link_base_url`): behind a proxy that does not
    /// pass the Host on, a browser's `Origin` is that, not the Host serve sees.
    let publicOrigin: String?
    let trustedProxies: TrustedProxies

    init(services: LifecycleServices<Store>, trustedProxies: TrustedProxies = .none) {
        self.services = services
        self.trustedProxies = trustedProxies
        publicOrigin = (try? ExportSettings(policies: services.policies)).map { WebDeletionOrigin.of($0.linkBaseURL) }
    }

    static var sentText: String {
        "If an account uses that address, we've sent it an email with a link to confirm the deletion. The link works once, for 30 minutes."
    }

    func register(on router: Router<ServerContext>) {
        router.get("/account/delete") { _, _ in try await self.askPage() }
        router.post("/account/delete") { request, context in try await self.requestLink(request, context) }
        router.get("/account/delete/confirm") { request, _ in try await self.confirmPage(request) }
        router.post("/account/delete/confirm") { request, _ in try await self.confirm(request) }
        router.get("/account/delete/kept") { _, _ in
            var page = AccountPage(title: "Your account is kept")
            page.line("<p role=\"status\">Nothing was deleted. Your account is as it was.</p>")
            return page.response()
        }
    }

    /// Per request (the policy files and the link key are read afresh); the map and the
    /// catalog come from `cache`.
    private func web() async throws -> WebDeletion<Store> { try await WebDeletion(services: services, cache: cache) }

    // MARK: Pages

    /// The first page: whose account, the steps, what goes and what stays (the store's
    /// rule, DeletionPageContent), then the address form.
    func askPage(status: HTTPResponse.Status = .ok, note: String? = nil) async throws -> Response {
        let content = try DeletionPageContent.load(services: services, data: try await cache.appData(services))
        var page = AccountPage(title: "Delete your account")
        if let note { page.line("<p role=\"alert\">\(h(note))</p>") }
        page.line(content.render(form: """
            <h2>Delete your account</h2>
            <form method="post" action="/account/delete">
            <p><label for="email">Email address</label><br>
            <input id="email" name="email" type="email" autocomplete="email" required maxlength="320" autofocus></p>
            <p><button type="submit">Send me a confirmation link</button></p>
            </form>
            """))
        return page.response(status: status)
    }

    private func requestLink(_ request: Request, _ context: ServerContext) async throws -> Response {
        if let refusal = Self.crossSite(request, publicOrigin: publicOrigin) { return refusal }
        let client = trustedProxies.client(peer: context.remoteAddress?.ipAddress, forwardedFor: request.headers[HTTPField.Name("X-Forwarded-For")!])
        if case .limited(let retryAfter) = perClient.admit(client) {
            return refused(.tooManyRequests, reason: "client", retryAfter: retryAfter, """
                Too many deletion requests came from your network in the last hour. Try again in \(Self.minutes(retryAfter)).
                """)
        }
        let form = try await Self.form(request)
        guard let address = form["email"]?.trimmingCharacters(in: .whitespacesAndNewlines), address.contains("@"), address.utf8.count <= 320 else {
            return try await askPage(status: .badRequest, note: "Enter the email address of your account, like name@example.com.")
        }
        // Whether or not an account has the address: saying so tells nothing of which.
        if case .limited(let retryAfter) = perAddress.admit(address.lowercased()) {
            return refused(.tooManyRequests, reason: "address", retryAfter: retryAfter, """
                Several confirmation links were asked for this address in the last hour. Use the newest email, or try again in \(Self.minutes(retryAfter)).
                """)
        }
        // Looked up and mailed after the answer: how long the page takes says nothing of
        // whether an account has the address.
        let (web, logger) = (try await web(), services.logger)
        let started = working.start {
            do {
                if let message = try await web.requestLink(address: address) { try await web.deliver(message) }
            } catch {
                logger.warning("deletion link not sent, or not delivered (it then waits in the outbox)", metadata: ["error": "\(error)"])
            }
        }
        guard started else {
            return refused(.serviceUnavailable, reason: "busy", retryAfter: 60, "The page is busy right now. Nothing was sent; try again in a minute.")
        }
        var page = AccountPage(title: "Check your email")
        page.line("<p role=\"status\">\(h(Self.sentText))</p>")
        return page.response()
    }

    /// A request the page does not take, said as it is, counted and logged with its cause.
    private func refused(_ status: HTTPResponse.Status, reason: String, retryAfter: Int, _ text: String) -> Response {
        Counter(label: "lifecycle_deletion_page_refused_total", dimensions: [("reason", reason)]).increment()
        services.logger.notice("deletion link request refused", metadata: ["reason": "\(reason)", "status": "\(status.code)", "retry_after": "\(retryAfter)"])
        var response = AccountPage.message(status, text, askAgain: false)
        response.headers[.retryAfter] = "\(retryAfter)"
        return response
    }

    static func minutes(_ seconds: Int) -> String {
        let minutes = max(1, (seconds + 59) / 60)
        return minutes == 1 ? "a minute" : "\(minutes) minutes"
    }

    private func confirmPage(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        let (account, issued, signature) = (query["account"].map(String.init), query["issued"].map(String.init), query["sig"].map(String.init))
        let web = try await web()
        let check = try await web.check(account: account, issued: issued, signature: signature)
        guard case .valid = check, let account, let issued, let signature else { return Self.linkRefused(check) }
        var page = AccountPage(title: "Delete your account?")
        page.line("<p role=\"alert\"><strong>\(h(WebDeletion<Store>.warning))</strong></p>")
        page.line("<p>You'll have 30 days to change your mind by signing in again.</p>")
        page.line("""
            <form method="post" action="/account/delete/confirm">
            <input type="hidden" name="account" value="\(h(account))">
            <input type="hidden" name="issued" value="\(h(issued))">
            <input type="hidden" name="sig" value="\(h(signature))">
            <input type="hidden" name="form_token" value="\(h(web.formToken(signature: signature)))">
            <p><button type="submit">Delete my account</button></p>
            </form>
            <p><a href="/account/delete/kept">Keep my account</a></p>
            """)
        if !web.parts.isEmpty {
            let boxes = web.parts.map { part in
                "<p><input type=\"checkbox\" id=\"part-\(h(part.name))\" name=\"part-\(h(part.name))\" value=\"yes\"> <label for=\"part-\(h(part.name))\">\(h(part.label))</label></p>"
            }
            page.line("""
                <h2>Or delete only some of your data</h2>
                <form method="post" action="/account/delete/confirm">
                <input type="hidden" name="account" value="\(h(account))">
                <input type="hidden" name="issued" value="\(h(issued))">
                <input type="hidden" name="sig" value="\(h(signature))">
                <input type="hidden" name="form_token" value="\(h(web.formToken(signature: signature)))">
                <input type="hidden" name="scope" value="parts">
                <fieldset><legend>Delete only what you tick; your account stays open. This cannot be undone.</legend>
                \(boxes.joined(separator: "\n"))
                </fieldset>
                <p><button type="submit">Delete only what I ticked</button></p>
                </form>
                """)
        }
        return page.response()
    }

    /// The form's ticked parts, in the map's order; nil when one is not a part.
    static func tickedParts(_ form: [String: String], offered: [DataMap.Part]) -> [String]? {
        let ticked = Set(form.keys.filter { $0.hasPrefix("part-") }.map { String($0.dropFirst(5)) })
        guard ticked.isSubset(of: Set(offered.map(\.name))) else { return nil }
        return offered.map(\.name).filter(ticked.contains)
    }

    private func confirm(_ request: Request) async throws -> Response {
        if let refusal = Self.crossSite(request, publicOrigin: publicOrigin) { return refusal }
        let form = try await Self.form(request)
        let web = try await web()
        if form["scope"] == "parts" { return try await confirmParts(form, web: web) }
        return try await answer(title: "Account deleted") {
            try await web.confirm(account: form["account"], issued: form["issued"], signature: form["sig"], formToken: form["form_token"])
        } message: { $0.message }
    }

    private func confirmParts(_ form: [String: String], web: WebDeletion<Store>) async throws -> Response {
        guard let parts = Self.tickedParts(form, offered: web.parts) else {
            return AccountPage.message(.badRequest, "The form named data this page does not offer. Open the link in the email again.")
        }
        guard !parts.isEmpty else {
            return AccountPage.message(.badRequest, "Tick what to delete, or go back and keep everything. Nothing was deleted.")
        }
        return try await answer(title: "Your data is being deleted") {
            try await web.confirmParts(
                account: form["account"], issued: form["issued"], signature: form["sig"], formToken: form["form_token"], parts: parts)
        } message: { $0.message }
    }

    /// A confirmation's page: the product's answer, or why the link or the request was refused.
    private func answer<Result>(
        title: String, _ confirming: () async throws -> (WebDeletion<Store>.LinkCheck, Result?), message: (Result) -> String
    ) async throws -> Response {
        let (check, result): (WebDeletion<Store>.LinkCheck, Result?)
        do {
            (check, result) = try await confirming()
        } catch is ConfirmationForged {
            return AccountPage.message(.forbidden, "This confirmation did not come from the confirmation page. Open the link in the email again.")
        } catch let error as LifecycleError where error.category == .noSuchAccount {
            return Self.linkRefused(.invalid)
        } catch let error as LifecycleError where error.category != .internalError {
            // Purged already, scheduled for deletion, on hold, a part deletion under way:
            // what the account's owner may read.
            return AccountPage.message(Self.status(of: error), error.forApp?.message ?? error.message)
        }
        guard let result else { return Self.linkRefused(check) }
        var page = AccountPage(title: title)
        page.line("<p role=\"status\">\(h(message(result)))</p>")
        return page.response()
    }

    /// A refusal's status, as the API gives it: busy and down are not conflicts.
    static func status(of error: LifecycleError) -> HTTPResponse.Status {
        switch error.category {
        case .tryLater: .tooManyRequests
        case .unavailable: .serviceUnavailable
        default: .conflict
        }
    }

    static func linkRefused(_ check: WebDeletion<Store>.LinkCheck) -> Response {
        switch check {
        case .expired:
            AccountPage.message(.gone, "This link has expired. Ask for a new one on the account deletion page.", askAgain: true)
        case .used:
            AccountPage.message(.gone, "This link has already been used. If you still want to delete your account, ask for a new one.", askAgain: true)
        case .invalid, .valid:
            AccountPage.message(.forbidden, "This link is not valid. Copy the whole link from the email, or ask for a new one.", askAgain: true)
        }
    }

    // MARK: Plumbing

    static func crossSite(_ request: Request, publicOrigin: String?) -> Response? {
        HTMLPages.isCrossSite(request, publicOrigin: publicOrigin) ? AccountPage.message(.forbidden, "Forms are sent from this site's own pages.") : nil
    }

    /// An `application/x-www-form-urlencoded` body of at most 8 KiB.
    static func form(_ request: Request) async throws -> [String: String] {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: 8_192)
        } catch {
            throw HTTPError(.badRequest, message: "the form is larger than 8 KiB or ended early")
        }
        return HTMLPages.formFields(String(buffer: buffer))
    }
}

/// The deletion page's frame: the product's plain page, readable without styles or script.
struct AccountPage {
    private var body: [String] = []
    let title: String

    init(title: String) { self.title = title }

    mutating func line(_ html: String) { body.append(html) }

    func response(status: HTTPResponse.Status = .ok) -> Response {
        let document = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(h(title))</title>
            <style>body{font:16px/1.5 system-ui,sans-serif;margin:2em auto;max-width:36em;padding:0 1em}
            input{font:inherit;padding:.4em;width:100%;box-sizing:border-box}button{font:inherit;padding:.5em 1em}
            :focus{outline:3px solid #1a5fb4;outline-offset:2px}</style></head>
            <body><main><h1>\(h(title))</h1>
            \(body.joined(separator: "\n"))
            </main></body></html>

            """
        return HTMLPages.response(document, status: status)
    }

    static func message(_ status: HTTPResponse.Status, _ text: String, askAgain: Bool = false) -> Response {
        var page = AccountPage(title: "Delete your account")
        page.line("<p role=\"alert\">\(h(text))</p>")
        if askAgain { page.line("<p><a href=\"/account/delete\">Ask for a new link</a></p>") }
        return page.response(status: status)
    }
}

