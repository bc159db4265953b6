import Foundation

/// One `Range: bytes=…` header against a file of `size` bytes (RFC 9110 §14).
public enum ByteRange: Equatable, Sendable {
    /// No range, an unusable one, or several: the whole file (a server may ignore a
    /// Range it does not serve, and multipart answers help no download manager here).
    case whole
    /// The part to send, both ends included.
    case part(ClosedRange<Int>)
    /// A well-formed range that starts past the end: 416.
    case unsatisfiable

    public static func parse(_ header: String?, size: Int) -> ByteRange {
        guard let header else { return .whole }
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else { return .whole }
        let spec = trimmed.dropFirst("bytes=".count)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        guard first.allSatisfy(\.isASCIIDigit), last.allSatisfy(\.isASCIIDigit), first.count <= 18, last.count <= 18 else { return .whole }
        if first.isEmpty {
            // A suffix: the last N bytes (all of a shorter file).
            guard let suffix = Int(last), suffix > 0 else { return last.isEmpty ? .whole : .unsatisfiable }
            guard size > 0 else { return .unsatisfiable }
            return .part(max(0, size - suffix)...(size - 1))
        }
        guard let start = Int(first) else { return .whole }
        guard start < size else { return .unsatisfiable }
        guard !last.isEmpty else { return .part(start...(size - 1)) }
        guard let end = Int(last), end >= start else { return .whole }
        return .part(start...min(end, size - 1))
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
