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
        try TextRules.requireNoControls(value, field: "display_name", allowingLineBreaks: false)
        return value
    }

    public static func bio(_ raw: String) throws(ValidationFailure) -> String {
        let value = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard value.count <= 150 else { throw ValidationFailure("bio", "must be at most 150 characters (got \(value.count))") }
        try TextRules.requireNoControls(value, field: "bio", allowingLineBreaks: true)
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

    /// Exactly one mailbox, as an RFC 5322 addr-spec in dot-atom form (RFC 6532 allows
    /// UTF-8 letters in it): no display name, no comma, no quotes or brackets, no
    /// whitespace. A `To:` header built from it can name only this one recipient.
    public static func email(_ raw: String) throws(ValidationFailure) -> String {
        let value = raw.trimmingCharacters(in: .whitespaces)
        func refuse(_ why: String) -> ValidationFailure {
            ValidationFailure("email", "must be one email address like ada@example.com; \(why) (got \(quoted(raw)))")
        }
        guard value.utf8.count <= 254 else { throw refuse("it is longer than 254 bytes") }
        let parts = value.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw refuse(parts.count < 2 ? "it has no '@'" : "it has more than one '@'") }
        let (local, domain) = (parts[0], parts[1])
        guard (1...64).contains(local.utf8.count) else { throw refuse("the part before '@' must be 1–64 bytes") }
        for atom in local.split(separator: ".", omittingEmptySubsequences: false) {
            guard !atom.isEmpty else { throw refuse("a '.' may not start or end the part before '@', nor follow another '.'") }
            if let bad = atom.unicodeScalars.first(where: { !isAtomText($0) }) {
                throw refuse("'\(TextRules.escapingControls(String(bad)))' is not allowed in an address")
            }
        }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { throw refuse("the domain needs a dot, as in example.com") }
        for label in labels {
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-",
                  label.unicodeScalars.allSatisfy({ isDomainText($0) })
            else { throw refuse("'\(TextRules.escapingControls(String(label)))' is not a domain name label") }
        }
        return value
    }

    /// RFC 5322 atext, plus RFC 6532's non-ASCII letters, digits and marks.
    private static func isAtomText(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII {
            return CharacterSet.alphanumerics.contains(scalar) || "!#$%&'*+-/=?^_`{|}~".unicodeScalars.contains(scalar)
        }
        return isInternationalLetter(scalar)
    }

    private static func isDomainText(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "-" }
        return isInternationalLetter(scalar)
    }

    private static func isInternationalLetter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
             .nonspacingMark, .spacingMark, .enclosingMark, .decimalNumber, .letterNumber, .otherNumber:
            return true
        default:
            return false
        }
    }

    public static func identifier(_ raw: String, field: String) throws(ValidationFailure) -> String {
        guard BlobKey.isSafeSegment(raw) else {
            throw ValidationFailure(field, "must be 1–128 characters of letters, digits, '.', '_' or '-' (got \(quoted(raw)))")
        }
        return raw
    }

    /// A value shown back in an error message: shortened, control characters escaped, so
    /// a refused value can never start a new line in the output or a log.
    static func quoted(_ value: String) -> String {
        let shown = value.count > 60 ? String(value.prefix(57)) + "…" : value
        return "'\(TextRules.escapingControls(shown))'"
    }
}

/// Control characters in user text. A NUL cut SQLite's copy of a text short (the rest
/// was lost without an error) and PostgreSQL refuses it; a line break in a one-line
/// value could add a line to a mail or a log. Such text is refused, never altered.
public enum TextRules {
    /// Refuses every control character (Unicode category Cc: C0, DEL, C1). With
    /// `allowingLineBreaks`, tab, line feed and carriage return are kept, as free text
    /// typed by a user holds them (CRLF from Windows, a lone CR from older systems).
    public static func requireNoControls(_ text: String, field: String, allowingLineBreaks: Bool) throws(ValidationFailure) {
        for (position, scalar) in text.unicodeScalars.enumerated() where scalar.properties.generalCategory == .control {
            if allowingLineBreaks, scalar == "\t" || scalar == "\n" || scalar == "\r" { continue }
            throw refusal(scalar, at: position, field: field, allowingLineBreaks: allowingLineBreaks)
        }
    }

    private static func refusal(_ scalar: Unicode.Scalar, at position: Int, field: String, allowingLineBreaks: Bool) -> ValidationFailure {
        let allowed = allowingLineBreaks ? "only tab and line breaks are allowed here" : "this field must be a single line of text"
        return ValidationFailure(field, "contains the control character \(codePoint(scalar)) at character \(position + 1); \(allowed)")
    }

    private static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// `text` with every control character written as an escape (`\n`, `\r`, `\t`,
    /// `\u{1B}`), for messages and text log lines.
    public static func escapingControls(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return text }
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.properties.generalCategory == .control {
                    result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
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
