import Yams

/// YAML files read by every command (the policy files, the account data map), typed as
/// Yams's default resolver types them, without its regular expressions.
///
/// Yams gives a plain scalar its type (bool, int, float, null, timestamp) by matching it
/// against seven NSRegularExpressions. Compiling them starts ICU's regex engine, and
/// with the matching that cost about 3 ms of the 6 ms every process spent reading
/// Jobs/policies (measured with perf on `photos normalize-file`, whose whole fixed cost
/// the benchmark holds against vipsthumbnail's ~70 ms). Here the document is composed
/// with Yams's rule-free resolver, and each untagged plain scalar is then given the tag
/// that the default rules would give it, by `implicitTag(of:)`: the same seven patterns,
/// matched by hand. `YAMLDocumentTests` holds the two to the same answer on every
/// rule's edge and on thousands of generated scalars. (A timestamp value still compiles
/// one regular expression, Yams's own, when it is turned into a `Date`.)
///
/// Where it differs from `Yams.compose`, on purpose: two keys of one mapping with the same
/// text are refused whatever their quoting or tags (Yams let `1:` and `"1":` stand side by
/// side, and a dictionary of them kept one at random), and a `<<` key tagged `!` or `!!str`
/// merges like a plain one.
public enum YAMLDocument {
    /// Two keys of one mapping with the same text.
    public struct DuplicateKey: Error, CustomStringConvertible {
        public var key: String
        public var line: Int?
        public var description: String {
            "\(line.map { "line \($0): " } ?? "")the key '\(key)' appears more than once in the same mapping"
        }
    }

    /// The document in `text` (Yams refuses a text of several) as a node tree whose scalars carry their resolved tags.
    public static func compose(_ text: String) throws -> Node? {
        // One constructor for every tag of the document (Yams's `Constructor.default` builds
        // a new one, with its three type tables, each time it is read), and the encoding
        // named (Yams's default reads the whole environment on every call).
        let constructor = Constructor.default
        // An anchor (`&name`) lets one node appear in several places, sharing one tag object,
        // which the parser's duplicate check may settle as a key before it is read as a
        // value. No file of ours has one; a document that might is read Yams's own way.
        if text.utf8.contains(UInt8(ascii: "&")) {
            return try Yams.compose(yaml: text, .default, constructor, .utf8)
        }
        guard let root = try Yams.compose(yaml: text, .basic, constructor, .utf8) else { return nil }
        return try typed(root, constructor)
    }

    /// The document in `text` as Swift values (`[String: Any]`, `Int`, `Bool`, …), as `Yams.load` gives them.
    public static func load(_ text: String) throws -> Any? {
        try compose(text)?.any
    }

    private static func typed(_ node: Node, _ constructor: Constructor) throws -> Node {
        switch node {
        case .scalar(let scalar):
            // An explicit tag (`!!str 5`) or a quoted scalar already says what it is.
            guard scalar.style == .plain || scalar.style == .any, scalar.tag.description.isEmpty else { return node }
            return .scalar(Node.Scalar(scalar.string, Tag(implicitTag(of: scalar.string), .basic, constructor), scalar.style, scalar.mark))
        case .mapping(let mapping):
            var texts = Set<String>()
            for case .scalar(let key) in mapping.keys where !texts.insert(key.string).inserted {
                throw DuplicateKey(key: key.string, line: key.mark?.line)
            }
            let pairs = try mapping.map { (typedKey($0.key, constructor), try typed($0.value, constructor)) }
            return .mapping(Node.Mapping(pairs, mapping.tag, mapping.style, mapping.mark))
        case .sequence(let sequence):
            return .sequence(Node.Sequence(try sequence.map { try typed($0, constructor) }, sequence.tag, sequence.style, sequence.mark))
        case .alias:
            return node
        }
    }

    /// A mapping key's tag was settled while parsing: the check for duplicate keys hashes
    /// each key, which resolves its tag (to `str`, by the rule-free resolver) for good, and
    /// a plain key cannot be told from a `!!str` one any more. A key's type matters to
    /// Yams for the merge key `<<` alone (every key becomes its text in a dictionary), so a
    /// `<<` that is not quoted is made a merge key again.
    private static func typedKey(_ key: Node, _ constructor: Constructor) -> Node {
        guard case .scalar(let scalar) = key, scalar.style == .plain || scalar.style == .any, scalar.string == "<<" else { return key }
        return .scalar(Node.Scalar(scalar.string, Tag(.merge, .basic, constructor), scalar.style, scalar.mark))
    }

    /// The tag `Resolver.default` gives an untagged plain scalar: its rules in its order
    /// (bool, int, float, merge, null, timestamp, value), each pattern anchored at both ends.
    /// For a scalar as the parser gives it, which never ends in a line break (ICU's `$`
    /// would also match before one).
    public static func implicitTag(of text: String) -> Tag.Name {
        let bytes = Array(text.utf8)
        if booleans.contains(text) { return .bool }
        if isInteger(bytes) { return .int }
        if isFloat(bytes) { return .float }
        if text == "<<" { return .merge }
        if nulls.contains(text) { return .null }
        if isTimestamp(bytes) { return .timestamp }
        if text == "=" { return .value }
        return .str
    }

    private static let booleans: Set<String> = [
        "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
        "on", "On", "ON", "off", "Off", "OFF",
    ]
    private static let nulls: Set<String> = ["~", "null", "Null", "NULL", ""]

    /// A cursor over a scalar's bytes; every pattern here is ASCII, so no multi-byte
    /// character can match any part of one.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }
        var next: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func take(_ byte: UInt8) -> Bool {
            guard next == byte else { return false }
            index += 1
            return true
        }

        mutating func take(where accepts: (UInt8) -> Bool) -> Bool {
            guard let byte = next, accepts(byte) else { return false }
            index += 1
            return true
        }

        /// Takes bytes while `accepts` holds; how many were taken.
        @discardableResult
        mutating func takeRun(where accepts: (UInt8) -> Bool) -> Int {
            let start = index
            while let byte = next, accepts(byte) { index += 1 }
            return index - start
        }

        mutating func takeSign() { _ = take(where: { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") }) }

        mutating func take(oneOf words: [String]) -> Bool {
            for word in words where bytes[index...].starts(with: word.utf8) {
                index += word.utf8.count
                return true
            }
            return false
        }

        /// `(?::[0-5]?[0-9])+`: one or more `:` groups of one digit or two (the first 0–5).
        /// A group's digits run to the next non-digit, so the pattern's backtracking can
        /// only end where this ends.
        mutating func takeSexagesimalGroups() -> Bool {
            var groups = 0
            while next == UInt8(ascii: ":") {
                let colon = index
                index += 1
                let start = index
                let count = takeRun(where: isDigit)
                guard count == 1 || (count == 2 && bytes[start] <= UInt8(ascii: "5")) else {
                    index = colon
                    return false
                }
                groups += 1
            }
            return groups > 0
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    private static func isDigitOrUnderscore(_ byte: UInt8) -> Bool { isDigit(byte) || byte == UInt8(ascii: "_") }

    /// `[-+]?0b[0-1_]+ | [-+]?0o?[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+ | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+`
    private static func isInteger(_ bytes: [UInt8]) -> Bool {
        var sign = Scanner(bytes)
        sign.takeSign()
        let body = sign.index
        func whole(_ match: (inout Scanner) -> Bool) -> Bool {
            var scanner = Scanner(bytes)
            scanner.index = body
            return match(&scanner) && scanner.atEnd
        }
        let underscore = UInt8(ascii: "_")
        let binary: (UInt8) -> Bool = { $0 == UInt8(ascii: "0") || $0 == UInt8(ascii: "1") || $0 == underscore }
        let octal: (UInt8) -> Bool = { ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "7")) || $0 == underscore }
        let hexadecimal: (UInt8) -> Bool = { isDigit($0) || $0 == underscore || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0 | 0x20) }
        let nonZero: (UInt8) -> Bool = { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") }
        func decimal(_ scanner: inout Scanner) -> Bool {
            guard scanner.take(where: nonZero) else { return false }
            scanner.takeRun(where: isDigitOrUnderscore)
            return true
        }
        return whole { $0.take(UInt8(ascii: "0")) && $0.take(UInt8(ascii: "b")) && $0.takeRun(where: binary) > 0 }
            // `0o?[0-7_]+`: an "o" is never an octal digit, so taking it when present is the only way to match.
            || whole { $0.take(UInt8(ascii: "0")) && ($0.take(UInt8(ascii: "o")) || true) && $0.takeRun(where: octal) > 0 }
            || whole { $0.take(UInt8(ascii: "0")) }
            || whole { decimal(&$0) }
            || whole { $0.take(UInt8(ascii: "0")) && $0.take(UInt8(ascii: "x")) && $0.takeRun(where: hexadecimal) > 0 }
            || whole { decimal(&$0) && $0.takeSexagesimalGroups() }
    }

    /// `[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)? | \.[0-9_]+(?:[eE][-+][0-9]+)?
    /// | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]* | [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)`
    private static func isFloat(_ bytes: [UInt8]) -> Bool {
        func whole(_ match: (inout Scanner) -> Bool) -> Bool {
            var scanner = Scanner(bytes)
            return match(&scanner) && scanner.atEnd
        }
        let dot = UInt8(ascii: ".")
        func exponent(_ scanner: inout Scanner, signRequired: Bool) -> Bool {
            guard scanner.take(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) else { return true }
            let signed = scanner.take(where: { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") })
            return (signed || !signRequired) && scanner.takeRun(where: isDigit) > 0
        }
        return whole {
            $0.takeSign()
            guard $0.take(where: isDigit) else { return false }
            $0.takeRun(where: isDigitOrUnderscore)
            if $0.take(dot) { $0.takeRun(where: isDigitOrUnderscore) }
            return exponent(&$0, signRequired: false)
        }
            || whole { $0.take(dot) && $0.takeRun(where: isDigitOrUnderscore) > 0 && exponent(&$0, signRequired: true) }
            || whole {
                $0.takeSign()
                guard $0.take(where: isDigit) else { return false }
                $0.takeRun(where: isDigitOrUnderscore)
                guard $0.takeSexagesimalGroups(), $0.take(dot) else { return false }
                $0.takeRun(where: isDigitOrUnderscore)
                return true
            }
            || whole {
                $0.takeSign()
                return $0.take(dot) && $0.take(oneOf: ["inf", "Inf", "INF"])
            }
            || whole { $0.take(dot) && $0.take(oneOf: ["nan", "NaN", "NAN"]) }
    }

    /// `[0-9]{4}-[0-9]{2}-[0-9]{2} | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}
    /// (?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?`
    private static func isTimestamp(_ bytes: [UInt8]) -> Bool {
        var scanner = Scanner(bytes)
        func digits(_ range: ClosedRange<Int>) -> Bool { range.contains(scanner.takeRun(where: isDigit)) }
        let dash = UInt8(ascii: "-"), colon = UInt8(ascii: ":")
        guard digits(4...4), scanner.take(dash) else { return false }
        let monthStart = scanner.index
        guard digits(1...2), scanner.take(dash) else { return false }
        let dayStart = scanner.index
        guard digits(1...2) else { return false }
        if scanner.atEnd {
            // The date alone needs two digits for the month and for the day.
            return dayStart - monthStart == 3 && scanner.index - dayStart == 2
        }
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard scanner.take(where: { $0 == UInt8(ascii: "T") || $0 == UInt8(ascii: "t") }) || scanner.takeRun(where: blank) > 0 else { return false }
        guard digits(1...2), scanner.take(colon), digits(2...2), scanner.take(colon), digits(2...2) else { return false }
        if scanner.take(UInt8(ascii: ".")) { scanner.takeRun(where: isDigit) }
        if scanner.atEnd { return true }
        scanner.takeRun(where: blank)
        if scanner.take(UInt8(ascii: "Z")) { return scanner.atEnd }
        guard scanner.take(where: { $0 == dash || $0 == UInt8(ascii: "+") }), digits(1...2) else { return false }
        if scanner.take(colon) { guard digits(2...2) else { return false } }
        return scanner.atEnd
    }
}
