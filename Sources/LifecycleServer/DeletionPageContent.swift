import Foundation
import JobRunner
import Lifecycle

/// What the app stores' rule asks the deletion page to say on its first screen (Google
/// Play: the app's or developer's name as on the listing, the steps, which data is deleted,
/// which is kept and for how long), derived from the data map and the policies so it cannot
/// drift from what the purge does, and worded by a template in the Jobs folder.
///
/// `Jobs/policies/deletion-page.yaml`, section `deletion_page`: `app_name`, `developer`
/// (as on the store listing) and `template` (default `pages/account-delete.html`, relative
/// to the Jobs folder; without the file the English wording built in here is used). The
/// template's placeholders: `{{app_name}}`, `{{developer}}`, `{{grace_days}}` (text, escaped
/// here), `{{deleted}}`, `{{kept}}`, `{{parts}}` (lists made here) and `{{form}}` (the
/// address form; added at the end when the template leaves it out).
struct DeletionPageContent: Sendable {
    var appName: String?
    var developer: String?
    var graceDays: Int
    var deleted: [String]
    var kept: [String]
    var parts: [String]
    var template: String

    static let sectionName = "deletion_page"
    static let defaultTemplatePath = "pages/account-delete.html"

    /// The wording `Jobs/pages/account-delete.html` ships with (DocsTests keeps the two equal).
    static let builtInTemplate = """
        <p>This page deletes your {{app_name}} account and its data, without the app. {{developer}}</p>
        <h2>How it works</h2>
        <ol>
        <li>Enter the email address of your account below.</li>
        <li>Open the link we email to that address. It works once, for 30 minutes.</li>
        <li>Confirm on the page the link opens.</li>
        </ol>
        <p>For {{grace_days}} days after you confirm, signing in again cancels the deletion. After that, it cannot be undone.</p>
        <h2>What is deleted</h2>
        {{deleted}}
        <h2>What is kept, and for how long</h2>
        {{kept}}
        {{parts}}
        {{form}}
        """

    /// Reads the settings and the template; nil values where the policy names none.
    static func load<Store: LifecycleStore>(services: LifecycleServices<Store>, data: AppData) throws -> DeletionPageContent {
        let section = try services.policies.section(sectionName)
        try section.requireOnly(["app_name", "developer", "template"])
        let path = try section.string("template", default: defaultTemplatePath) ?? defaultTemplatePath
        let file = (path as NSString).isAbsolutePath ? path : (services.jobsDirectory as NSString).appendingPathComponent(path)
        var template = builtInTemplate
        if FileManager.default.fileExists(atPath: file) {
            guard let data = FileManager.default.contents(atPath: file), data.count <= 64 * 1_024,
                  let text = String(data: data, encoding: .utf8) else {
                throw LifecycleError(.badConfiguration, "\(file): the deletion page's template must be UTF-8 text of at most 64 KiB")
            }
            template = text
        }
        let graceDays = try DeletionPolicy(policies: services.policies).graceDays
        return DeletionPageContent(
            appName: try section.string("app_name", default: nil).flatMap { $0.isEmpty ? nil : $0 },
            developer: try section.string("developer", default: nil).flatMap { $0.isEmpty ? nil : $0 },
            graceDays: graceDays, deleted: deletedItems(data), kept: keptItems(data, graceDays: graceDays),
            parts: data.plan.parts.map(\.label), template: template)
    }

    /// "journal_entries" → "Journal entries": the map's names, as a person reads them.
    static func readable(_ name: String) -> String {
        let words = name.replacingOccurrences(of: "_", with: " ").replacingOccurrences(of: "-", with: " ")
            .split(separator: " ").joined(separator: " ")
        return words.prefix(1).uppercased() + words.dropFirst()
    }

    private static func name(_ table: DataMap.Table) -> String { readable(table.exportFile ?? table.name.name) }

    static func deletedItems(_ data: AppData) -> [String] {
        let map = data.map
        var items = ["Your account: " + (map.subject.columns.isEmpty ? "its sign-in details" : map.subject.columns.map(readable).joined(separator: ", ").lowercased())]
        var seen = Set<String>()
        for table in map.tables where table.erase == .delete && !sharedAndKept(table) {
            let name = Self.name(table)
            if seen.insert(name.lowercased()).inserted { items.append(name) }
        }
        let files = !map.subject.blobs.isEmpty || !map.subject.blobPrefixes.isEmpty || map.tables.contains { !$0.blobs.isEmpty || !$0.fileKey.isEmpty }
        if files { items.append("The files they name (photos, uploads), and the exports of your data") }
        items.append("Everything you signed in with: sessions and tokens end when you confirm")
        return items
    }

    /// A table of rows two people share whose other side keeps them (masked on hers).
    private static func sharedAndKept(_ table: DataMap.Table) -> Bool {
        guard case .sides(let sides) = table.ownership else { return false }
        return sides.contains { $0.erase.mask != nil }
    }

    static func keptItems(_ data: AppData, graceDays: Int) -> [String] {
        let map = data.map
        var items = ["Everything above, for \(graceDays) days after you confirm, so that signing in again can still cancel the deletion; then it is deleted at the next nightly run."]
        for table in map.tables {
            // A row two people share (a message): her side is emptied, the other person keeps it.
            if case .sides(let sides) = table.ownership {
                let removed = sides.compactMap { $0.erase.mask }.flatMap { $0.map { readable($0.column).lowercased() } }
                if sharedAndKept(table) {
                    items.append("\(name(table)) you share with someone stay theirs, without \(removed.joined(separator: ", ")).")
                }
                continue
            }
            guard let mask = table.erase.mask else { continue }
            let removed = mask.map { readable($0.column).lowercased() }.joined(separator: ", ")
            let when: String
            if case .deleteUnlessReferenced = table.erase { when = " that other people's content refers to" } else { when = "" }
            items.append("\(name(table))\(when) stay, without \(removed), for as long as the service keeps them.")
        }
        if map.subject.erase.mask != nil {
            items.append("A record that the account existed and was deleted, with what identified you removed, kept for as long as the service keeps its records.")
        }
        if !map.residue.allow.isEmpty {
            let columns = map.residue.allow.map { readable($0.column).lowercased() }.joined(separator: ", ")
            items.append("\(readable(columns)): \(map.residue.reason ?? "kept by the service").")
        }
        items.append("A receipt of the deletion (what was removed and when, none of your content), kept as the record that it was done.")
        return items
    }

    /// The page's body: the template with its placeholders filled, each text escaped.
    func render(form: String) -> String {
        func list(_ items: [String]) -> String { "<ul>\n" + items.map { "<li>\(h($0))</li>" }.joined(separator: "\n") + "\n</ul>" }
        let partsText = parts.isEmpty ? "" : "<h2>Or delete only some of your data</h2>\n<p>The confirmation page also lets you delete only:</p>\n" + list(parts)
        let developerText = developer.map { "It is run by \($0)." } ?? ""
        var body = template
        if !body.contains("{{form}}") { body += "\n{{form}}" }
        for (placeholder, value) in [
            ("{{app_name}}", h(appName ?? "")), ("{{developer}}", h(developerText)), ("{{grace_days}}", "\(graceDays)"),
            ("{{deleted}}", list(deleted)), ("{{kept}}", list(kept)), ("{{parts}}", partsText), ("{{form}}", form),
        ] {
            body = body.replacingOccurrences(of: placeholder, with: value)
        }
        // "your  account" where no name is configured.
        return body.replacingOccurrences(of: "your  account", with: "your account")
    }
}
