import Crypto
import Foundation

/// Download links: `<base>/<export-id>?expires=<unix seconds>&sig=<hex HMAC-SHA256>`.
/// The signature covers the export id and the expiry, so neither can be changed
/// without the key; the link carries no personal data. Links are deterministic, so
/// signing again (after a crash, or to show the link in `--wait`) gives the same one.
public struct LinkSigner: Sendable {
    private let key: SymmetricKey

    public init(key: Data) {
        self.key = SymmetricKey(data: key)
    }

    /// Whether `secret` is this signer's key: a token equal to it would let whoever holds
    /// the token (the app backend) sign deletion and download links.
    public func isKey(_ secret: Data) -> Bool {
        key.withUnsafeBytes { Data($0) } == secret
    }

    public func link(base: String, exportID: String, expiresAt: Date) -> String {
        let expires = Self.unixSeconds(expiresAt)
        return "\(base)/\(exportID)?expires=\(expires)&sig=\(signature(exportID: exportID, expires: expires))"
    }

    public enum Verdict: Sendable, Equatable {
        case valid(exportID: String, expiresAt: Date)
        case expired(exportID: String, expiresAt: Date)
        /// Not a link this key signed, or altered since: the reason says which part is wrong.
        case invalid(reason: String)
    }

    /// Checks the signature first: an altered expiry must read as invalid, never as expired.
    public func verify(_ link: String, now: Date) -> Verdict {
        guard let components = URLComponents(string: link.trimmingCharacters(in: .whitespacesAndNewlines)),
              components.scheme != nil else {
            return .invalid(reason: "not a URL")
        }
        let exportID = (components.path as NSString).lastPathComponent
        guard !exportID.isEmpty, exportID != "/", BlobKey.isSafeSegment(exportID) else {
            return .invalid(reason: "the link names no export")
        }
        let items = components.queryItems ?? []
        func single(_ name: String) -> String? {
            let matches = items.filter { $0.name == name }
            return matches.count == 1 ? matches[0].value : nil
        }
        guard let expiresText = single("expires"), let expires = Int64(expiresText), expires > 0 else {
            return .invalid(reason: "the link has no valid 'expires' parameter")
        }
        guard let signatureText = single("sig"), let signature = Self.bytes(fromHex: signatureText) else {
            return .invalid(reason: "the link has no valid 'sig' parameter")
        }
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Self.message(exportID, expires), using: key) else {
            return .invalid(reason: "the signature does not match (the link was altered or signed with another key)")
        }
        let expiresAt = Date(timeIntervalSince1970: TimeInterval(expires))
        return now < expiresAt ? .valid(exportID: exportID, expiresAt: expiresAt) : .expired(exportID: exportID, expiresAt: expiresAt)
    }

    func signature(exportID: String, expires: Int64) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Self.message(exportID, expires), using: key)
        return FileDigest.hex(code)
    }

    /// Versioned and newline-separated, so no other message this key might sign collides with a link.
    private static func message(_ exportID: String, _ expires: Int64) -> Data {
        Data("lifecycle-export-link/v1\n\(exportID)\n\(expires)".utf8)
    }

    /// A deletion confirmation link's signature (the web deletion page): the account,
    /// when the link was sent and where, under its own versioned message, so neither an export
    /// link's signature nor the page's form token can stand in for it.
    /// The address it was sent to is signed too (it is not in the link): once the
    /// account's address changes, the links sent to the old one are void.
    public func deletionLinkSignature(account: String, issued: Int64, recipient: String) -> String {
        let message = "lifecycle-deletion-link/v2\n\(account)\n\(issued)\n\(recipient)"
        return FileDigest.hex(HMAC<SHA256>.authenticationCode(for: Data(message.utf8), using: key))
    }

    /// The confirmation form's token, bound to the link it was served for: a form posted
    /// from another site has the link at best, never this.
    public func deletionFormToken(linkSignature: String) -> String {
        FileDigest.hex(HMAC<SHA256>.authenticationCode(for: Data("lifecycle-deletion-form/v1\n\(linkSignature)".utf8), using: key))
    }

    /// Compares two hex signatures in constant time.
    public static func sameSignature(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    static func unixSeconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }

    private static func bytes(fromHex text: String) -> Data? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var data = Data(capacity: 32)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
