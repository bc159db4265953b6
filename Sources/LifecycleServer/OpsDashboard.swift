import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JobRunner
import Lifecycle
import LifecycleRuntime
import NIOCore

/// `/ops`: the operator's page, as Oban Web and River UI give theirs. Jobs by kind and
/// state, dead jobs with their errors and a retry button, paused kinds with pause and
/// resume, holds, the last purges with their receipts, export volume. Server-rendered
/// HTML with plain forms: no script, no build chain, usable from the keyboard and in a
/// terminal browser. Reached with the operator token (HTTP Basic, any user name) or, with
/// none configured, from this machine only. Actions are POSTs refused from other origins,
/// audited with the operator the page was given as.
struct OpsDashboard<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let access: OpsAccess

    func register(on router: Router<ServerContext>) {
        let ops = router.group("ops").add(middleware: OpsAccessMiddleware(access: access))
        ops.get("") { _, _ in try await self.page() }
        ops.get("jobs/:id") { _, context in try await self.jobPage(context) }
        ops.get("accounts") { request, _ in try await self.accountPage(request) }
        ops.post("jobs/:id/retry") { _, context in try await self.retry(context) }
        ops.post("kinds/:kind/pause") { request, context in try await self.pause(request, context) }
        ops.post("kinds/:kind/resume") { _, context in try await self.resume(context) }
    }

    // MARK: The page

    private func page() async throws -> Response {
        let store = services.store
        let now = services.clock.now()
        let counts = try await store.countByKindAndState()
        let paused = try await store.pausedKinds()
        let dead = try await store.jobs(matching: JobFilter(states: [.dead], limit: 100))
        let (holds, purges, volume) = try await store.read { tx in
            (try tx.openHolds(limit: 100), try tx.latestAuditEvents(action: DeletionAudit.purge, limit: 20), try tx.exportVolume())
        }
        let kinds = Set(services.registry.names).union(counts.keys.map(\.kind)).sorted()
        var html = HTMLPage(title: "lifecycle · operations")
        html.line("<p>As of \(h(ISO8601.format(now))). <a href=\"/ops\">Reload</a></p>")
        html.line(searchForm())

        html.section(
            id: "jobs", title: "Jobs by kind and state", caption: "Jobs by kind and state",
            columns: ["kind"] + JobState.allCases.map(\.rawValue) + ["paused"],
            rows: kinds.map { kind in
                let cells = JobState.allCases.map { "<td>\(counts[JobCountKey(kind: kind, state: $0)] ?? 0)</td>" }.joined()
                let pause = paused.first { $0.kind == kind }
                let action = pause == nil
                    ? form("/ops/kinds/\(path(kind))/pause", button: "Pause \(kind)", extra: "<label>reason <input name=\"reason\" maxlength=\"200\"></label>")
                    : form("/ops/kinds/\(path(kind))/resume", button: "Resume \(kind)")
                return "<tr id=\"kind-\(h(kind))\"><th scope=\"row\">\(h(kind))</th>\(cells)<td>\(pause.map { "paused by \(h($0.pausedBy))" } ?? "no") \(action)</td></tr>"
            },
            whenEmpty: "No job kind is registered.")

        html.section(
            id: "dead", title: "Dead jobs", caption: "Dead jobs, newest first",
            columns: ["job", "kind", "account", "attempts", "last error", "action"],
            rows: dead.map { job in
                "<tr id=\"job-\(job.id)\"><th scope=\"row\"><a href=\"/ops/jobs/\(job.id)\">#\(job.id)</a></th><td>\(h(job.kind))</td><td>\(h(JobAttention(job).account ?? "-"))</td>"
                    + "<td>\(job.attempt)/\(job.maxAttempts)</td><td>\(h(job.lastError ?? "-"))</td>"
                    + "<td>\(form("/ops/jobs/\(job.id)/retry", button: "Retry job #\(job.id)"))</td></tr>"
            },
            whenEmpty: "No dead job.")

        html.line("<h2 id=\"paused\">Paused kinds</h2>")
        if paused.isEmpty { html.line("<p>No kind is paused.</p>") } else {
            html.line("<ul>" + paused.map { pause in
                "<li>\(h(pause.kind)) since \(h(ISO8601.format(pause.pausedAt))) by \(h(pause.pausedBy))\(pause.reason.map { ": " + h($0) } ?? "")</li>"
            }.joined() + "</ul>")
        }

        html.section(
            id: "holds", title: "Holds", caption: "Accounts on hold", columns: ["account", "since", "by", "until", "reason"],
            rows: holds.map { hold in
                "<tr><th scope=\"row\">\(h(hold.account))</th><td>\(h(ISO8601.format(hold.heldAt)))</td><td>\(h(hold.heldBy))</td>"
                    + "<td>\(h(hold.until.map(ISO8601.format) ?? "lifted by hand"))</td><td>\(h(hold.reason))</td></tr>"
            },
            whenEmpty: "No account is on hold.")

        html.section(
            id: "purges", title: "Last purges", caption: "The last purges and their receipts", columns: ["account", "at", "receipt"],
            rows: purges.map { event in
                let account = event.accountID.map { "<a href=\"/ops/accounts?q=\(h(query($0)))\">\(h($0))</a>" } ?? "-"
                return "<tr><th scope=\"row\">\(account)</th><td>\(h(ISO8601.format(event.at)))</td><td>\(Self.receiptHTML(event.detailValue))</td></tr>"
            },
            whenEmpty: "No account purged yet.")

        html.section(
            id: "exports", title: "Exports", caption: "Exports by state", columns: ["state", "exports", "archive bytes"],
            rows: volume.map { "<tr><th scope=\"row\">\(h($0.state))</th><td>\($0.count)</td><td>\($0.bytes)</td></tr>" },
            whenEmpty: "No export yet.")
        return html.response()
    }

    // MARK: Actions

    private func retry(_ context: ServerContext) async throws -> Response {
        guard let id = context.parameters.get("id").flatMap(JobID.init) else { return HTMLPage.message(.notFound, "No such job.") }
        do {
            guard try await actions.retry(id) != nil else {
                return HTMLPage.message(.notFound, "No job #\(id).")
            }
        } catch let error as JobRunnerError {
            return HTMLPage.message(.conflict, error.message)
        }
        return Self.backToPage("#dead")
    }

    private func pause(_ request: Request, _ context: ServerContext) async throws -> Response {
        guard let kind = context.parameters.get("kind"), services.registry[kind] != nil else { return HTMLPage.message(.notFound, "No such job kind.") }
        let form = try await request.body.collect(upTo: 4_096)
        let reason = HTMLPages.formFields(String(buffer: form))["reason"].flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        _ = try await actions.pause(kind: kind, reason: reason)
        return Self.backToPage("#jobs")
    }

    private func resume(_ context: ServerContext) async throws -> Response {
        guard let kind = context.parameters.get("kind"), services.registry[kind] != nil else { return HTMLPage.message(.notFound, "No such job kind.") }
        _ = try await actions.resume(kind: kind)
        return Self.backToPage("#jobs")
    }

    /// The same actions as `jobs retry|pause|resume`, audited and logged the same way.
    private var actions: OperatorJobActions<Store> {
        OperatorJobActions(services: services, operatorName: access.operatorName, origin: "dashboard")
    }

    /// POST, then a redirect back: reloading the page repeats nothing.
    static func backToPage(_ anchor: String) -> Response {
        Response(status: .seeOther, headers: [.location: "/ops" + anchor, .cacheControl: "no-store"])
    }

    func form(_ action: String, button: String, extra: String = "") -> String {
        "<form method=\"post\" action=\"\(h(action))\">\(extra) <button type=\"submit\">\(h(button))</button></form>"
    }

    private func path(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? segment
    }
}

/// Text into HTML: every character that could open markup is escaped.
func h(_ text: String) -> String {
    var escaped = ""
    escaped.reserveCapacity(text.count)
    for character in text {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&#39;"
        default: escaped.append(character)
        }
    }
    return escaped
}

struct HTMLPage {
    private var body: [String] = []
    let title: String

    init(title: String) { self.title = title }

    mutating func line(_ html: String) { body.append(html) }

    /// What was added so far, to place inside another page.
    var bodyHTML: String { body.joined(separator: "\n") }

    /// A heading, then a table with a caption and column headers over `rows` (each a whole
    /// `<tr>`, already escaped), or a sentence saying there is nothing.
    mutating func section(id: String, title: String, caption: String, columns: [String], rows: [String], whenEmpty: String) {
        line("<h2 id=\"\(h(id))\">\(h(title))</h2>")
        guard !rows.isEmpty else { return line("<p>\(h(whenEmpty))</p>") }
        line("<table><caption>\(h(caption))</caption><thead><tr>" + columns.map { "<th scope=\"col\">\(h($0))</th>" }.joined() + "</tr></thead><tbody>")
        rows.forEach { line($0) }
        line("</tbody></table>")
    }

    func response(status: HTTPResponse.Status = .ok) -> Response {
        let document = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(h(title))</title>
            <style>body{font:15px/1.4 system-ui,sans-serif;margin:1.5em;max-width:80em}table{border-collapse:collapse;margin:.5em 0 1.5em}
            th,td{border:1px solid #999;padding:.25em .6em;text-align:left;vertical-align:top}caption{text-align:left;font-weight:600}
            form{display:inline}button{margin:.1em}code{font-size:13px}</style></head>
            <body><h1>\(h(title))</h1>
            \(body.joined(separator: "\n"))
            </body></html>

            """
        return HTMLPages.response(document, status: status)
    }

    static func message(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var page = HTMLPage(title: "lifecycle · operations")
        page.line("<p>\(h(text))</p><p><a href=\"/ops\">Back to the dashboard</a></p>")
        return page.response(status: status)
    }
}

/// Who may open `/ops`: with a token, whoever gives it as the HTTP Basic password (any
/// user name); without one, only clients on this machine, not through a proxy.
public struct OpsAccess: Sendable {
    private let key = SymmetricKey(size: .bits256)
    private let expected: HashedAuthenticationCode<SHA256>?
    /// What actions from the page are recorded as.
    public let operatorName: String

    public init?(token: String?, operatorName: String = "dashboard") {
        if let token {
            guard token.count >= 32 else { return nil }
            expected = HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: key)
        } else {
            expected = nil
        }
        self.operatorName = operatorName
    }

    func allows(authorization: String?, peer: SocketAddress?, host: String?, forwarded: Bool) -> Bool {
        guard let expected else {
            // A reverse proxy on this machine connects from loopback for everyone; what it
            // forwards is not from this machine, so without a token it is refused. The Host
            // must name loopback too: a page whose domain was made to resolve to 127.0.0.1
            // (DNS rebinding) reaches the port but not under this name.
            guard !forwarded, let address = peer?.ipAddress, let host, Self.isLoopbackHost(host) else { return false }
            return address == "127.0.0.1" || address == "::1" || address.hasPrefix("127.")
        }
        guard let authorization, authorization.hasPrefix("Basic "),
              let decoded = Data(base64Encoded: String(authorization.dropFirst("Basic ".count))),
              let colon = decoded.firstIndex(of: UInt8(ascii: ":")) else { return false }
        let password = decoded[decoded.index(after: colon)...]
        return HMAC<SHA256>.isValidAuthenticationCode(expected, authenticating: Data(password), using: key)
    }

    /// `127.0.0.1`, `localhost` or `[::1]`, with or without a port.
    static func isLoopbackHost(_ authority: String) -> Bool {
        var name = authority.lowercased()
        if name.hasPrefix("[") {
            guard let end = name.firstIndex(of: "]") else { return false }
            name = String(name[name.index(after: name.startIndex)..<end])
            return name == "::1"
        }
        if let colon = name.lastIndex(of: ":") { name = String(name[..<colon]) }
        return name == "localhost" || name == "127.0.0.1"
    }
}

struct OpsAccessMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let access: OpsAccess

    func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        let forwarded = ["Forwarded", "X-Forwarded-For", "X-Real-IP"].contains { request.headers[HTTPField.Name($0)!] != nil }
        guard access.allows(
            authorization: request.headers[.authorization], peer: context.remoteAddress, host: request.head.authority, forwarded: forwarded) else {
            var response = HTMLPage.message(.unauthorized, "The operations page needs the operator token (as the password), or a browser on this machine.")
            response.headers[.wwwAuthenticate] = "Basic realm=\"lifecycle operations\""
            return response
        }
        if request.method == .post, HTMLPages.isCrossSite(request) {
            return HTMLPage.message(.forbidden, "Actions are taken from the operations page itself.")
        }
        return try await next(request, context)
    }
}
