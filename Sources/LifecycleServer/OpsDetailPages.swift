import Foundation
import HTTPTypes
import Hummingbird
import JobRunner
import Lifecycle
import LifecycleRuntime

/// What `/ops` shows of one thing: a receipt as a table (not JSON running off the page), a
/// job with its steps, attempts, error and its account's audit, and an account found by its
/// key or a lookup value (an email) with its state, holds, jobs and audit.
extension OpsDashboard {
    /// A purge's or a part deletion's receipt: per table what was deleted, masked and left;
    /// the files deleted, kept (and why) and refused; what the verification and the residue
    /// scan read. Anything else the receipt holds is listed as it is.
    static func receiptHTML(_ receipt: JSONValue?) -> String {
        guard case .object(let fields)? = receipt else { return "-" }
        var html = ""
        if case .object(let rows)? = fields["rows"] {
            let lines = rows.sorted { $0.key < $1.key }.map { table, counts -> String in
                switch counts {
                case .object(let count):
                    return "<tr><th scope=\"row\">\(h(table))</th><td>\(number(count["deleted"]))</td><td>\(number(count["masked"]))</td><td>\(number(count["after"]))</td></tr>"
                default:
                    return "<tr><th scope=\"row\">\(h(table))</th><td>\(number(counts))</td><td>-</td><td>-</td></tr>"
                }
            }
            html += "<table><thead><tr><th scope=\"col\">table</th><th scope=\"col\">deleted</th><th scope=\"col\">masked</th><th scope=\"col\">left</th></tr></thead><tbody>"
                + lines.joined() + "</tbody></table>"
        }
        var facts: [String] = []
        if let total = fields["rows_total"] { facts.append("rows: \(number(total))") }
        if let blobs = fields["blobs"] { facts.append("files deleted: \(number(blobs)) (\(number(fields["blob_bytes"])) bytes)") }
        if let kept = fields["blobs_kept"], kept != .number(0) { facts.append("files kept because a row that stays names them: \(number(kept))") }
        if let unnamed = fields["blobs_unnamed"] { facts.append("files found in the user's folders that no row named: \(number(unnamed))") }
        if case .object(let refused)? = fields["blobs_refused"] {
            var links: [String] = []
            if case .array(let values)? = refused["links"] { links = values.compactMap { if case .string(let text) = $0 { text } else { nil } } }
            facts.append("files kept because their path crosses a symbolic link: \(number(refused["files"])) (links: \(h(links.joined(separator: ", "))))")
        }
        if case .object(let verification)? = fields["verification"] {
            facts.append("verification: \(text(verification["result"])), \(number(verification["rows_left"])) row(s) left in \(number(verification["tables_checked"])) table(s)")
        }
        if case .object(let residue)? = fields["residue"] {
            facts.append("residue scan: \(number(residue["tables_scanned"])) table(s), \(number(residue["columns_scanned"])) column(s), \(number(residue["rows_scanned"])) row(s) read, \(number(residue["found"])) found")
        }
        if !facts.isEmpty { html += "<ul>" + facts.map { "<li>\($0)</li>" }.joined() + "</ul>" }
        return html.isEmpty ? "<code>\(h((try? JobJSON.encode(receipt)) ?? "-"))</code>" : html
    }

    private static func number(_ value: JSONValue?) -> String {
        switch value {
        case .number(let number)?: number.rounded() == number && abs(number) < 1e15 ? "\(Int64(number))" : "\(number)"
        case nil: "-"
        case let other?: h((try? JobJSON.encode(other)) ?? "-")
        }
    }

    private static func text(_ value: JSONValue?) -> String {
        if case .string(let text)? = value { return h(text) }
        return number(value)
    }

    func auditTable(_ events: [AuditEvent], id: String) -> String {
        var page = HTMLPage(title: "")
        page.section(
            id: id, title: "Audit", caption: "The account's audit, newest first", columns: ["at", "actor", "action", "outcome", "detail"],
            rows: events.sorted { $0.at > $1.at }.prefix(200).map { event in
                let detail = event.action == DeletionAudit.purge || event.action == DeletionAudit.partDeletion
                    ? Self.receiptHTML(event.detailValue)
                    : "<code>\(h(event.detailValue.flatMap { try? JobJSON.encode($0) } ?? "-"))</code>"
                return "<tr><th scope=\"row\">\(h(ISO8601.format(event.at)))</th><td>\(h(event.actor))</td><td>\(h(event.action))</td>"
                    + "<td>\(h(event.outcome))</td><td>\(detail)</td></tr>"
            },
            whenEmpty: "Nothing audited for this account.")
        return page.bodyHTML
    }

    /// `/ops/jobs/:id`: the job, its steps (finished and still to run) and its account's audit.
    func jobPage(_ context: ServerContext) async throws -> Response {
        guard let id = context.parameters.get("id").flatMap(JobID.init), let job = try await services.store.job(id: id) else {
            return HTMLPage.message(.notFound, "No such job.")
        }
        let steps = try await services.store.steps(of: id)
        let done = Set(steps.map(\.step))
        let pending = services.registry[job.kind]?.steps.map(\.name).filter { !done.contains($0) } ?? []
        let account = JobAttention(job).account
        var events: [AuditEvent] = []
        if let account { events = try await services.store.read { tx in try tx.auditEvents(accountID: account) } }
        var html = HTMLPage(title: "lifecycle · job #\(id)")
        html.line("<p><a href=\"/ops\">Operations</a></p>")
        html.line("""
            <dl>
            <dt>kind</dt><dd>\(h(job.kind))</dd>
            <dt>state</dt><dd>\(h(job.state.rawValue))\(job.cancelRequested ? " (cancel requested)" : "")</dd>
            <dt>attempts</dt><dd>\(job.attempt) of \(job.maxAttempts)</dd>
            <dt>account</dt><dd>\(account.map { "<a href=\"/ops/accounts?q=\(h(query($0)))\">\(h($0))</a>" } ?? "-")</dd>
            <dt>runs at</dt><dd>\(h(ISO8601.format(job.runAt)))</dd>
            <dt>created</dt><dd>\(h(ISO8601.format(job.createdAt)))</dd>
            <dt>finished</dt><dd>\(h(job.finishedAt.map(ISO8601.format) ?? "-"))</dd>
            <dt>last error</dt><dd>\(h(job.lastError ?? "-"))</dd>
            </dl>
            """)
        if job.state == .dead || job.state == .cancelled { html.line(form("/ops/jobs/\(job.id)/retry", button: "Retry job #\(job.id)")) }
        html.section(
            id: "steps", title: "Steps", caption: "Its steps, in order", columns: ["step", "finished", "output"],
            rows: steps.map { step in
                let output = step.output.flatMap { text in (try? JobJSON.decode(JSONValue.self, from: text)).map(Self.receiptHTML) ?? "<code>\(h(text))</code>" } ?? "-"
                return "<tr><th scope=\"row\">\(h(step.step))</th><td>\(h(ISO8601.format(step.finishedAt)))</td><td>\(output)</td></tr>"
            } + pending.map { "<tr><th scope=\"row\">\(h($0))</th><td>not yet</td><td>-</td></tr>" },
            whenEmpty: "This kind has no steps.")
        if account != nil { html.line(auditTable(events, id: "audit")) }
        return html.response()
    }

    /// `/ops/accounts?q=`: an account by its key or a lookup value, as `accounts show` finds it.
    func accountPage(_ request: Request) async throws -> Response {
        let typed = String((request.uri.queryParameters["q"].map(String.init) ?? "").prefix(320)).trimmingCharacters(in: .whitespaces)
        var html = HTMLPage(title: "lifecycle · account")
        html.line("<p><a href=\"/ops\">Operations</a></p>")
        html.line(searchForm(typed))
        guard !typed.isEmpty else { return html.response() }
        let directory = try await services.directory()
        let now = services.clock.now()
        let found: (key: String, entry: AccountDirectory<Store>.Entry?, holds: [AccountHold], events: [AuditEvent])?
        do {
            found = try await services.store.read { tx in
                guard let key = try directory.find(.operator(typed), in: tx) ?? tx.subject(key: typed)?.key else { return nil }
                return (key, try directory.entry(id: key, in: tx, locking: false, now: now), try tx.holds(key: key), try tx.auditEvents(accountID: key))
            }
        } catch let error as LifecycleError where error.category == .badInput || error.category == .noSuchAccount {
            html.line("<p role=\"alert\">\(h(error.message))</p>")
            return html.response(status: .badRequest)
        }
        guard let found else {
            html.line("<p role=\"status\">No account is \(h(typed)), by its key or a lookup value.</p>")
            return html.response(status: .notFound)
        }
        var jobs: [JobRecord] = []
        for key in [DeletionJobs.purgeKey(accountID: found.key), DeletionJobs.partKey(accountID: found.key), ExportJobs.uniqueKey(accountID: found.key)] {
            jobs += try await services.store.jobs(matching: JobFilter(uniqueKey: key, limit: 20))
        }
        html.line("<h2>Account \(h(found.key))</h2>")
        html.line("<p>state: \(h(found.entry.map { "\($0.state)" } ?? "purged"))\(found.entry?.purgeAfter.map { ", purge after \(h(ISO8601.format($0)))" } ?? "")</p>")
        html.section(
            id: "holds", title: "Holds", caption: "Its holds", columns: ["since", "by", "until", "reason"],
            rows: found.holds.map { hold in
                "<tr><th scope=\"row\">\(h(ISO8601.format(hold.heldAt)))</th><td>\(h(hold.heldBy))</td><td>\(h(hold.until.map(ISO8601.format) ?? "lifted by hand"))</td><td>\(h(hold.reason))</td></tr>"
            },
            whenEmpty: "No hold.")
        html.section(
            id: "jobs", title: "Jobs", caption: "Its jobs", columns: ["job", "kind", "state", "attempts", "last error"],
            rows: jobs.sorted { $0.id > $1.id }.map { job in
                "<tr><th scope=\"row\"><a href=\"/ops/jobs/\(job.id)\">#\(job.id)</a></th><td>\(h(job.kind))</td><td>\(h(job.state.rawValue))</td>"
                    + "<td>\(job.attempt)/\(job.maxAttempts)</td><td>\(h(job.lastError ?? "-"))</td></tr>"
            },
            whenEmpty: "No job.")
        html.line(auditTable(found.events, id: "audit"))
        return html.response()
    }

    func searchForm(_ typed: String = "") -> String {
        """
        <form method="get" action="/ops/accounts" role="search"><label for="q">Account (key, email or another lookup value)</label> \
        <input id="q" name="q" value="\(h(typed))" maxlength="320"> <button type="submit">Find</button></form>
        """
    }

    func query(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }
}
