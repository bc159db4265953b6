extension ArchiveWriter {
    /// Longest single path component most file systems accept when the archive is extracted.
    static let maxComponentBytes = 255
    /// Longest whole name; below PATH_MAX so extraction into a short directory still works.
    static let maxNameBytes = 4095

    /// Whether `name` is acceptable as an entry name: a relative path of non-empty
    /// components separated by `/`, none of them `.` or `..` (nor ending in a dot or a
    /// space), with no backslash, no control character (NUL included) and no
    /// bidirectional-override character; at most 255 bytes per component and 4095 in all.
    ///
    /// Callers build names from sanitised ids; this is the last line of defence
    /// against an archive that would write outside the extraction directory or show
    /// a misleading name.
    public static func isSafeEntryName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maxNameBytes else { return false }
        for scalar in name.unicodeScalars where !isAllowed(scalar) {
            return false
        }
        // omittingEmptySubsequences: false keeps "", so "/a", "a//b" and "a/" fail below.
        for component in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if component.isEmpty || component.count > maxComponentBytes { return false }
            // Covers "." and ".." too. Windows drops trailing dots and spaces, so there
            // "... " or ".. " would become "..".
            if component.last == UInt8(ascii: ".") || component.last == UInt8(ascii: " ") { return false }
        }
        return true
    }

    private static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == "\\" { return false }
        // Cc covers NUL, the rest of C0, DEL and C1.
        if scalar.properties.generalCategory == .control { return false }
        switch scalar.value {
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069:
            // Direction marks and overrides can make "gpj.exe" display as "exe.jpg".
            return false
        default:
            return true
        }
    }
}
