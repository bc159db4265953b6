import Foundation

/// Path arithmetic on text. Foundation's `deletingLastPathComponent` traps (SIGILL) on a
/// one-character relative path such as `b` — what `--blobs b` or `--database d` give —
/// so every path an operator or a row supplies goes through this instead.
public enum PathText {
    /// The path without its last component: "" for a bare name, "/" for a file at the root,
    /// trailing slashes ignored, as `deletingLastPathComponent` answers where it works.
    /// By bytes: a name may begin with a combining accent, which as a `Character` would
    /// swallow the '/' before it.
    public static func parent(_ path: String) -> String {
        let slash = UInt8(ascii: "/")
        var text = path.utf8[...]
        while text.count > 1, text.last == slash { text = text.dropLast() }
        guard let index = text.lastIndex(of: slash) else { return "" }
        if index == text.startIndex { return "/" }
        var parent = text[..<index]
        while parent.count > 1, parent.last == slash { parent = parent.dropLast() }
        return String(decoding: parent, as: UTF8.self)
    }
}
