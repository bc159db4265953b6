import Foundation
import JobRunner

/// Deleting an account from the web, outside the app (the app stores' rule): the user
/// gives their email address, lifecycle sends the account's address a confirmation link,
/// and the link's page requests deletion with the grace period, sign-out and audit of the
/// in-app request. What a visitor learns is the same whether or not an account has the
/// address; the audit keeps a keyed hash of the address, never the address.
///
/// The link is signed with the installation's link key, names the account and when it was
/// sent, lasts `linkLifetime`, and is single-use: a deletion requested (or a restore) since
/// it was sent voids it, so no table of issued links is needed.
public struct WebDeletion<Store: LifecycleStore>: Sendable {
    public static var linkLifetime: TimeInterval { 30 * 60 }
    /// Links sent to one account in an hour; more requests are audited and send nothing.
    public static var linksPerAccountPerHour: Int { 3 }

    public static var mailSubject: String { "Confirm the deletion of your account" }
    /// The product's warning and its answer (DESIGN.md, "User-facing messages").
    public static var warning: String { "This will permanently delete all your entries, photos, and data. This action cannot be undone." }

    let services: LifecycleServices<Store>
    let signer: LinkSigner
    let deletion: DeletionService<Store>
    let directory: AccountDirectory<Store>
    /// Where the page is served, as the export links are: `link_base_url` without its path.
    let pageBase: String
    /// What the confirmation page also offers to delete alone (the data map's `parts:`).
    public let parts: [DataMap.Part]

    /// `cache` keeps the data map and catalog between requests (a server builds this per request).
    public init(services: LifecycleServices<Store>, cache: AppDataCache = AppDataCache()) async throws {
        self.services = services
        signer = try services.linkSigner()
        directory = try await services.directory(cache: cache)
        deletion = try DeletionService(services: services, directory: directory)
        pageBase = WebDeletionOrigin.of(try ExportSettings(policies: services.policies).linkBaseURL)
        parts = try await cache.appData(services).plan.parts
    }


    /// The column a visitor's address is looked up in: the data map's `email:` column when
    /// it is also a lookup column.
    var addressColumn: String? {
        let subject = directory.data.plan.subject
        guard let column = subject.email, subject.lookup.contains(column) else { return nil }
        return column
    }

    // MARK: The request

    /// Sends a confirmation link to the account that has `address`, if one does and it is
    /// active and under the hourly limit; the outbox message it wrote (delivered through
    /// `deliver`), or nil. Every outcome is audited with the address's keyed hash.
    public func requestLink(address typed: String) async throws -> OutboxMessage? {
        let address = typed.trimmingCharacters(in: .whitespacesAndNewlines)
        // An address with a control character in it is no account's: `find` refuses it, and
        // it is audited as an unknown address, as it is answered.
        guard !address.isEmpty, address.utf8.count <= 320 else { return nil }
        let now = services.clock.now()
        let (directory, signer, pageBase, column) = (self.directory, self.signer, self.pageBase, addressColumn)
        return try await services.store.write { tx -> OutboxMessage? in
            let digest = LookupDigest.digest(address, salt: try tx.lookupSalt())
            func audit(_ account: String?, _ outcome: String) throws {
                try tx.recordAudit(AuditEvent(
                    at: now, actor: "web", action: DeletionAudit.webLink, accountID: account, outcome: outcome,
                    detail: ["address_digest": .string(digest)]))
            }
            guard let column, let id = try? directory.find(.app("\(column):\(address)"), in: tx),
                  let entry = try directory.entry(id: id, in: tx, locking: true, now: now) else {
                try audit(nil, "unknown-address")
                return nil
            }
            guard entry.state == .active else {
                try audit(id, "not-active")
                return nil
            }
            let recent = try tx.auditTimes(accountID: id, action: DeletionAudit.webLink, outcome: "sent", since: now.addingTimeInterval(-3_600))
            guard recent.count < Self.linksPerAccountPerHour else {
                try audit(id, "rate-limited")
                return nil
            }
            guard let recipient = try directory.email(id: id, in: tx), !recipient.isEmpty else {
                try audit(id, "no-address")
                return nil
            }
            let issued = LinkSigner.unixSeconds(now)
            let signature = signer.deletionLinkSignature(account: id, issued: issued, recipient: recipient)
            let link = Self.link(base: pageBase, account: id, issued: issued, signature: signature)
            let message = try tx.insertOutboxMessage(OutboxMessage(
                uniqueKey: "deletion-link:\(id):\(issued):\(UUID().uuidString.prefix(8).lowercased())", accountID: id, recipient: recipient, subject: Self.mailSubject,
                body: Self.mailBody(link: link, expiresAt: Date(timeIntervalSince1970: TimeInterval(issued) + Self.linkLifetime)),
                createdAt: now))
            try audit(id, "sent")
            return message
        }
    }

    static func link(base: String, account: String, issued: Int64, signature: String) -> String {
        var components = URLComponents(string: base + "/account/delete/confirm") ?? URLComponents()
        components.queryItems = [
            URLQueryItem(name: "account", value: account), URLQueryItem(name: "issued", value: String(issued)),
            URLQueryItem(name: "sig", value: signature),
        ]
        // `+` and `&` in a key would read as a space and a new parameter.
        components.percentEncodedQuery = components.percentEncodedQuery?
            .replacingOccurrences(of: "+", with: "%2B")
        return components.string ?? base
    }

    static func mailBody(link: String, expiresAt: Date) -> String {
        [
            "Hello,",
            "",
            "Someone, hopefully you, asked to delete the account that uses this email address.",
            "To confirm, open this link:",
            "",
            link,
            "",
            "The link works once, until \(ExportTime.iso8601(expiresAt)) (UTC). After you confirm you have 30 days",
            "to change your mind by signing in again. If you did not ask for this, ignore this email:",
            "nothing happens to your account.",
            "",
        ].joined(separator: "\n")
    }

    /// Hands the message to the policy's sendmail command; without one it waits in the
    /// outbox for the app, as the export notification does.
    public func deliver(_ message: OutboxMessage) async throws {
        let settings = try ExportSettings(policies: services.policies)
        guard !settings.sendmailCommand.isEmpty, let id = message.id, message.recipient != nil else { return }
        try await SendmailDelivery(command: settings.sendmailCommand).deliver(message, id: id, recordingIn: services.store, at: services.clock.now())
    }

    // MARK: The link

    public enum LinkCheck: Sendable, Equatable {
        case valid(account: String, issued: Date)
        /// Past its 30 minutes.
        case expired
        /// A deletion was requested (or the account restored) since it was sent.
        case used
        /// Not a link this installation signed, or altered since.
        case invalid
    }

    public func check(account: String?, issued: String?, signature: String?) async throws -> LinkCheck {
        guard let account, !account.isEmpty, account.utf8.count <= 320, AccountReference.controlCharacterProblem(account) == nil,
              let issued, let seconds = Int64(issued),
              let signature, signature.utf8.count == 64 else {
            return .invalid
        }
        let sent = Date(timeIntervalSince1970: TimeInterval(seconds))
        let directory = self.directory
        let (recipient, used) = try await services.store.read { tx in
            (try directory.email(id: account, in: tx), try DeletionService<Store>.linkUsed(accountID: account, since: sent, in: tx))
        }
        guard let recipient, LinkSigner.sameSignature(signer.deletionLinkSignature(account: account, issued: seconds, recipient: recipient), signature) else {
            return .invalid
        }
        guard services.clock.now().timeIntervalSince(sent) <= Self.linkLifetime else { return .expired }
        return used ? .used : .valid(account: account, issued: sent)
    }

    /// The token the confirmation form carries, bound to its link.
    public func formToken(signature: String) -> String { signer.deletionFormToken(linkSignature: signature) }

    /// The confirmation: the link checked again, and the form's token, then the request.
    public func confirm(account: String?, issued: String?, signature: String?, formToken: String?) async throws -> (LinkCheck, DeletionRequestResult?) {
        try await confirmed(account: account, issued: issued, signature: signature, formToken: formToken) { id, sent in
            try await deletion.requestDeletionConfirmedByEmail(accountID: id, linkIssuedAt: sent)
        }
    }

    /// The confirmation of deleting only `parts` (the account stays open): the same checks,
    /// and the link is used up as by a deletion.
    public func confirmParts(
        account: String?, issued: String?, signature: String?, formToken: String?, parts names: [String]
    ) async throws -> (LinkCheck, PartDeletionResult?) {
        try await confirmed(account: account, issued: issued, signature: signature, formToken: formToken) { id, sent in
            try await deletion.requestPartDeletionConfirmedByEmail(accountID: id, parts: names, linkIssuedAt: sent)
        }
    }

    /// `request` once the link and the form's token hold; nil with why the link does not.
    private func confirmed<Result>(
        account: String?, issued: String?, signature: String?, formToken: String?,
        request: (_ account: String, _ linkIssuedAt: Date) async throws -> Result
    ) async throws -> (LinkCheck, Result?) {
        let check = try await check(account: account, issued: issued, signature: signature)
        guard case .valid(let id, let sent) = check else { return (check, nil) }
        guard let signature, let formToken, LinkSigner.sameSignature(self.formToken(signature: signature), formToken) else {
            throw ConfirmationForged()
        }
        do {
            return (check, try await request(id, sent))
        } catch is ConfirmationLinkUsed {
            // Another confirmation with this link committed first.
            return (.used, nil)
        }
    }
}

/// The confirmation form came without the token of the page served for its link (a form
/// posted from elsewhere).
public struct ConfirmationForged: Error, CustomStringConvertible {
    public var description: String { "the confirmation did not come from the confirmation page" }
}

/// A deletion was requested or restored since the confirmation link was sent.
public struct ConfirmationLinkUsed: Error, CustomStringConvertible {
    public var description: String { "this confirmation link has been used already" }
}

public enum WebDeletionOrigin {
    /// `https://example.com/exports` → `https://example.com`: where the page is, as a
    /// browser names it in `Origin`.
    public static func of(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.path = ""
        components.query = nil
        components.fragment = nil
        return components.string ?? url
    }
}
