import Archiving
import Foundation

/// Values an app keeps encoded in one column, that name the user only once decoded: no SQL
/// can find those rows, so lifecycle reads each row and decodes it (`encoding:` on an
/// `on_deletion: remove:` owner). Decoding is for finding the user's rows, never for
/// trusting them: a signature is not checked, and anything that does not decode names no one.
public enum ValueEncoding: String, Sendable, CaseIterable {
    /// Django's `django.core.signing` (what its database session backend writes in
    /// `django_session.session_data`): `BASE64:TIMESTAMP:SIGNATURE`, the payload JSON,
    /// zlib-compressed when the base64 starts with '.'. Sessions written before Django 3.1
    /// (base64 of `HASH:JSON`) are read too.
    case djangoSigned = "django-signed"

    /// Session data is small; anything claiming to inflate past this is not a session.
    static let inflatedLimit = 1 << 20

    /// The JSON value the encoded text holds, or nil.
    public func decode(_ text: String) -> Any? {
        switch self {
        case .djangoSigned:
            let payload = String(text.prefix { $0 != ":" })
            if text.contains(":") {
                let compressed = payload.hasPrefix(".")
                guard var bytes = Self.base64URL(compressed ? String(payload.dropFirst()) : payload) else { return nil }
                if compressed {
                    guard let inflated = Zlib.inflate(bytes, limit: Self.inflatedLimit) else { return nil }
                    bytes = inflated
                }
                return try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
            }
            // Before Django 3.1: base64 of "HASH:JSON".
            guard let legacy = Data(base64Encoded: text), let colon = legacy.firstIndex(of: UInt8(ascii: ":")) else { return nil }
            return try? JSONSerialization.jsonObject(with: legacy[legacy.index(after: colon)...], options: [.fragmentsAllowed])
        }
    }

    /// The value at `path` of the decoded object, as text (a number as its digits), or nil.
    public func value(in text: String, at path: [String]) -> String? {
        var node = decode(text)
        for key in path { node = (node as? [String: Any])?[key] }
        if let text = node as? String { return text }
        return (node as? NSNumber)?.stringValue
    }

    private static func base64URL(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }
}
