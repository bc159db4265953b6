import Foundation

/// The product's profile rules, applied wherever account data enters (import, and
/// anything an app backend passes to the library).
public enum ProfileRules {
    public static func name(_ raw: String, field: String) throws(ValidationFailure) -> String {
        let value = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...50).contains(value.count) else {
            throw ValidationFailure(field, "must be 1–50 characters after trimming (got \(value.count))")
        }
        let allowed = value.unicodeScalars.allSatisfy { scalar in
            scalar == " " || scalar == "-" || CharacterSet.letters.contains(scalar) || CharacterSet.nonBaseCharacters.contains(scalar)
        }
        guard allowed else {
            throw ValidationFailure(field, "may contain only letters, spaces and hyphens (got \(quoted(value)))")
        }
        return value
    }

    public static func displayName(_ raw: String) throws(ValidationFailure) -> String {
        let value = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...50).contains(value.count) else {
            throw ValidationFailure("display_name", "must be 1–50 characters after trimming (got \(value.count))")
        }
        return value
    }

    public static func bio(_ raw: String) throws(ValidationFailure) -> String {
        let value = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard value.count <= 150 else { throw ValidationFailure("bio", "must be at most 150 characters (got \(value.count))") }
        return value
    }

    /// `HH:mm:ss`, 24-hour.
    public static func timeOfDay(_ raw: String, field: String) throws(ValidationFailure) -> String {
        let parts = raw.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let hour = Int(parts[0]), let minute = Int(parts[1]), let second = Int(parts[2]),
              (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second)
        else {
            throw ValidationFailure(field, "must be a time of day as HH:mm:ss, e.g. 07:30:00 (got \(quoted(raw)))")
        }
        return raw
    }

    private static let knownZones = Set(TimeZone.knownTimeZoneIdentifiers)

    public static func timezone(_ raw: String) throws(ValidationFailure) -> String {
        guard knownZones.contains(raw) || raw == "UTC" else {
            throw ValidationFailure("timezone", "must be an IANA time zone name such as Europe/London (got \(quoted(raw)))")
        }
        return raw
    }

    public static func email(_ raw: String) throws(ValidationFailure) -> String {
        let value = raw.trimmingCharacters(in: .whitespaces)
        let parts = value.split(separator: "@", omittingEmptySubsequences: false)
        guard value.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
              !value.contains(where: { $0.isWhitespace })
        else {
            throw ValidationFailure("email", "must be an email address like ada@example.com (got \(quoted(raw)))")
        }
        return value
    }

    public static func identifier(_ raw: String, field: String) throws(ValidationFailure) -> String {
        guard BlobKey.isSafeSegment(raw) else {
            throw ValidationFailure(field, "must be 1–128 characters of letters, digits, '.', '_' or '-' (got \(quoted(raw)))")
        }
        return raw
    }

    static func quoted(_ value: String) -> String {
        let shown = value.count > 60 ? String(value.prefix(57)) + "…" : value
        return "'\(shown)'"
    }
}

public struct ValidationFailure: Error, CustomStringConvertible, Sendable {
    public let field: String
    public let reason: String

    public init(_ field: String, _ reason: String) {
        self.field = field
        self.reason = reason
    }

    public var description: String { "\(field): \(reason)" }
}
