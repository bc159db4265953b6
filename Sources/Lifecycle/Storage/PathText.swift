import Foundation

/// Path arithmetic on text. Foundation's `deletingLastPathComponent` traps (SIGILL) on a
/// one-character relative path such as `b` — what `--blobs b` or `--database d` give —
/// so every path an operator or a row supplies goes through this instead.
public enum PathText {
    /// The path without its last component: "" for a bare name, "/" for a file at the root,
    /// trailing slashes ignored, as `deletingLastPathComponent` answers where it works.
    public static func parent(_ path: String) -> String {
        var text = Substring(path)
        while text.count > 1, text.hasSuffix("/") { text = text.dropLast() }
        guard let slash = text.lastIndex(of: "/") else { return "" }
        if slash == text.startIndex { return "/" }
        var parent = text[..<slash]
        while parent.count > 1, parent.hasSuffix("/") { parent = parent.dropLast() }
        return String(parent)
    }
}
