/// Text that is equal, hashed and ordered by its UTF-8 bytes.
///
/// Swift's `String` compares by canonical equivalence: an NFC and an NFD spelling of
/// "é" are equal, share a `Set` slot and a dictionary key. The databases and S3 keep
/// them apart (two usernames, two accounts, two files), so account keys, lookup values
/// and storage keys are collected and compared as this instead.
public struct ExactText: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let text: String

    public init(_ text: String) { self.text = text }

    public var description: String { text }

    public static func == (left: Self, right: Self) -> Bool { left.text.utf8.elementsEqual(right.text.utf8) }

    public func hash(into hasher: inout Hasher) {
        for byte in text.utf8 { hasher.combine(byte) }
        hasher.combine(text.utf8.count)
    }

    /// Byte order, as S3 lists keys and as `COLLATE "C"` / SQLite's BINARY sort text.
    public static func < (left: Self, right: Self) -> Bool { left.text.utf8.lexicographicallyPrecedes(right.text.utf8) }
}

extension String {
    /// Equal as bytes, not by canonical equivalence (see `ExactText`).
    public func isExactly(_ other: String) -> Bool { utf8.elementsEqual(other.utf8) }

    /// Whether the UTF-8 bytes begin with those of `prefix`. Unlike `hasPrefix`, this holds
    /// when the prefix ends in the middle of a character ("a/" before a combining accent),
    /// as a key prefix does for S3 and the file system.
    public func hasExactPrefix(_ prefix: String) -> Bool { utf8.starts(with: prefix.utf8) }

    /// The text after the first `count` UTF-8 bytes (a prefix `hasExactPrefix` matched).
    public func droppingExactPrefix(_ prefix: String) -> String {
        String(decoding: utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }
}

extension String {
    /// In double quotes, with control characters, quotes and backslashes escaped and every
    /// other scalar as it is (`debugDescription` may escape a combining accent), so a
    /// message shows which of two spellings it means and cannot move a cursor.
    public var quotedExactly: String {
        var out = "\""
        for scalar in unicodeScalars {
            if scalar.isControlCharacter {
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else if scalar == "\"" || scalar == "\\" {
                out += "\\" + String(scalar)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

extension Unicode.Scalar {
    /// C0, DEL and C1.
    var isControlCharacter: Bool { value < 0x20 || (0x7F...0x9F).contains(value) }
}
