/// How a caller names an account.
///
/// The app API serves the app's users, so a name there must mean one account whatever
/// other users choose as their usernames: the key exactly, or `COLUMN:VALUE` for one
/// lookup column of the map (`email:ada@example.com`). Operators type what they know (a
/// key, an email, a username) and are told which accounts an ambiguous name matched.
public struct AccountReference: Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    enum Addressing: Sendable, Equatable {
        /// The key, or `COLUMN:VALUE`; ambiguity is refused without naming accounts.
        case app
        /// `COLUMN:VALUE`, else the key or any lookup column; ambiguity names the matches.
        case `operator`
        /// Exactly this key, never parsed.
        case key
    }

    /// What the caller wrote.
    public let text: String
    let addressing: Addressing

    /// From the app API: `COLUMN:VALUE` when COLUMN is a lookup column of the map, else
    /// exactly the key. A value another user could choose never matches a key.
    public static func app(_ text: String) -> Self { .init(text: text, addressing: .app) }

    /// From an operator: `COLUMN:VALUE` as for the app, else the key or the value of any
    /// lookup column.
    public static func `operator`(_ text: String) -> Self { .init(text: text, addressing: .operator) }

    /// Exactly this key, for code that already holds one.
    public static func key(_ key: String) -> Self { .init(text: key, addressing: .key) }

    /// A literal is written by a programmer (tests, the demo), as an operator would type it.
    public init(stringLiteral value: String) { self.init(text: value, addressing: .operator) }

    private init(text: String, addressing: Addressing) {
        self.text = text
        self.addressing = addressing
    }

    public var description: String { text }

    /// A NUL byte or another control character: no key or lookup value holds one. Refused
    /// before any query: SQLite compares text only up to a NUL (`ada\0` would be `ada`),
    /// and PostgreSQL refuses it as a server error.
    public static func controlCharacterProblem(_ text: String) -> String? {
        guard let scalar = text.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) else { return nil }
        let code = String(scalar.value, radix: 16, uppercase: true)
        return "an account reference holds a control character (U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code)); keys and lookup values are printable text"
    }

    /// Whether a refusal may list the accounts the name matched: operators may see keys,
    /// an app's user may not see another user's.
    public var disclosesMatches: Bool { addressing == .operator }

    /// Where to look, given the columns the map lets accounts be looked up by.
    public enum Target: Sendable, Equatable {
        case key(String)
        case lookup(column: String, value: String)
        case keyOrAnyLookup(String)
    }

    public func target(lookupColumns: [String]) -> Target {
        if addressing == .key { return .key(text) }
        if let colon = text.firstIndex(of: ":") {
            let column = String(text[..<colon])
            if lookupColumns.contains(where: { $0.isExactly(column) }) {
                return .lookup(column: column, value: String(text[text.index(after: colon)...]))
            }
        }
        return addressing == .app ? .key(text) : .keyOrAnyLookup(text)
    }
}
