import Crypto
import Foundation
import JobRunner

/// What lets `lifecycle audit` find a purged account by the email (or other lookup value)
/// it had, without keeping that value: the purge records a keyed hash of each lookup value
/// under the installation's own secret, made when the installation was created. Someone
/// holding the database without the secret cannot test guesses offline against a table
/// of well-known addresses, as they could against a plain hash.
extension OwnStateTransaction {
    /// The installation's secret for lookup digests.
    public func lookupSalt() throws -> String {
        guard let salt = try select("SELECT value FROM \(table: .settings) WHERE name = 'lookup_salt'", from: .settings, .text).first else {
            throw LifecycleError(.badConfiguration, "the installation has no lookup_salt in lifecycle's settings table; run `lifecycle migrate`")
        }
        return try salt.text(0)
    }

    public func recordLookupDigests(_ digests: [String], key: String) throws {
        for batch in Self.distinctBatches(digests) {
            try change("""
                INSERT INTO \(table: .lookupDigests) (digest, subject_key) VALUES \(generated: OwnSQL.rows(batch) { [.text($0), .text(key)] })
                ON CONFLICT DO NOTHING
                """)
        }
    }

    /// The keys of purged accounts that had a lookup value with this digest.
    public func subjectKeys(lookupDigest: String) throws -> [String] {
        try select(
            "SELECT subject_key FROM \(table: .lookupDigests) WHERE digest = \(lookupDigest) ORDER BY subject_key", from: .lookupDigests, .text
        ).map { try $0.text(0) }
    }
}

public enum LookupDigest {
    /// HMAC-SHA256 of the value as an operator would type it: trimmed, case folded (an
    /// email's case does not make it another address).
    public static func digest(_ value: String, salt: String) -> String {
        let normalised = value.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let code = HMAC<SHA256>.authenticationCode(for: Data(normalised.utf8), using: SymmetricKey(data: Data(salt.utf8)))
        return FileDigest.hex(code)
    }

    /// Called by the purge in the transaction that erases the account, before its values go.
    public static func record(values: [String?], key: String, in tx: some OwnStateTransaction) throws {
        let present = values.compactMap { $0 }.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        guard !present.isEmpty else { return }
        let salt = try tx.lookupSalt()
        try tx.recordLookupDigests(Array(Set(present.map { digest($0, salt: salt) })).sorted(), key: key)
    }
}

/// Everything recorded about one account: `lifecycle audit`.
public struct AuditReport: Sendable, Encodable {
    public enum FoundBy: String, Sendable, Encodable {
        /// Its key (id), or a lookup column of a row that still exists (`reference` in JSON:
        /// how the operator named it).
        case accountName = "reference"
        /// The salted hash of a lookup value the purge recorded.
        case purgedLookup = "purged_lookup"
    }

    public var account: String
    public var foundBy: FoundBy
    /// Nil when lifecycle never recorded a state for it and its row is gone.
    public var state: AccountState?
    public var purgedAt: Date?
    public var holds: [AccountHold]
    public var events: [AuditEvent.Output]

    enum CodingKeys: String, CodingKey {
        case account, foundBy = "found_by", state, purgedAt = "purged_at", holds, events
    }
}

public struct AuditTrail<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    public let directory: AccountDirectory<Store>

    public init(services: LifecycleServices<Store>, directory: AccountDirectory<Store>) {
        self.services = services
        self.directory = directory
    }

    /// The account named by its key, a lookup column, or (once purged) a lookup value it had.
    /// Exit 67 (`noSuchAccount`) when nothing was ever recorded under that name.
    public func report(for reference: AccountReference) async throws -> AuditReport {
        let directory = self.directory
        let now = services.clock.now()
        return try await services.store.read { tx in
            var foundBy = AuditReport.FoundBy.accountName
            var key = try directory.find(reference, in: tx)
            if key == nil {
                var value = reference.text
                if case .lookup(_, let named) = reference.target(lookupColumns: directory.lookupColumns) { value = named }
                let keys = try tx.subjectKeys(lookupDigest: LookupDigest.digest(value, salt: try tx.lookupSalt()))
                guard keys.count <= 1 else {
                    throw LifecycleError(.badInput, "'\(reference)' was a lookup value of more than one purged account (\(keys.joined(separator: ", "))); name one by its key")
                }
                if let found = keys.first {
                    key = found
                    foundBy = .purgedLookup
                }
            }
            // An app account purged by a map that erases the user row leaves only its key.
            let id = key ?? reference.text
            let entry = try directory.entry(id: id, in: tx, locking: false, now: now)
            let events = try tx.auditEvents(accountID: id)
            let holds = try tx.holds(key: id)
            guard key != nil || entry != nil || !events.isEmpty else { throw LifecycleError.noSuchAccount(reference) }
            return AuditReport(
                account: id, foundBy: foundBy, state: entry?.state, purgedAt: entry?.purgedAt, holds: holds, events: events.map(\.output))
        }
    }
}
