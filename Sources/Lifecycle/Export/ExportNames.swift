import Archiving
import Crypto
import Foundation

/// Names inside the archive and keys in the blob store. Names are built from ids the
/// database holds, which other systems wrote: every id goes through `segment` so no
/// name can climb out of the archive root, whatever the id contains.
enum ExportNames {
    /// The stem of an app export's user-row files when the map names none.
    static let appSubjectFile = "account"

    /// `accounts/<id>/exports/<export-id>.<zip|tar.gz>` in the export store: under the account's
    /// prefix there, which its purge deletes (and in the blob store for archives made before).
    /// An app's key that cannot name a storage folder (an email) is hashed, as purge expects.
    static func archiveKey(accountID: String, exportID: String, format: ArchiveFormat) -> String {
        BlobKey.accountPrefix(BlobKey.segment(forID: accountID)) + "exports/\(exportID).\(format.fileExtension)"
    }

    /// Where the archive waits until it is verified; one per export, so a rerun overwrites it.
    static func temporaryKey(accountID: String, exportID: String, format: ArchiveFormat) -> String {
        BlobKey.accountPrefix(BlobKey.segment(forID: accountID)) + "exports/\(exportID).partial.\(format.fileExtension)"
    }

    /// `export-<account>-<UTC timestamp>`, the one folder every entry sits in.
    static func rootFolder(accountID: String, cutoff: Date) -> String {
        "export-\(segment(accountID, fallback: "account"))-\(ExportTime.compact(cutoff))"
    }

    /// `photos/YYYY/MM/DD/<photo-id>.<ext>`, dated by when the photo was taken (else
    /// uploaded) in the account's own time zone, as the user would file it.
    static func photoPath(_ photo: PhotoRecord, timeZone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let day = calendar.dateComponents([.year, .month, .day], from: photo.takenAt ?? photo.createdAt)
        let date = String(format: "%04d/%02d/%02d", day.year ?? 1970, day.month ?? 1, day.day ?? 1)
        let fileExtension = ContentSniffer.fileExtension(for: photo.contentType)
        return "photos/\(date)/\(segment(photo.id, fallback: "photo")).\(fileExtension)"
    }

    /// One path component made from an id: letters of any script, digits, emoji and
    /// punctuation pass; separators, control and direction-override characters become
    /// `_`, leading and trailing dots and spaces go. A changed id gets a short hash of
    /// the original appended, so two ids never share a name.
    static func segment(_ raw: String, fallback: String) -> String {
        var cleaned = String.UnicodeScalarView()
        for scalar in raw.unicodeScalars {
            switch scalar {
            case "/", "\\", ":", "*", "?", "\"", "<", ">", "|":
                cleaned.append("_")
            default:
                switch scalar.properties.generalCategory {
                case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                    cleaned.append("_")
                default:
                    cleaned.append(scalar)
                }
            }
        }
        var text = String(cleaned)
        while let first = text.first, first == "." || first == " " { text.removeFirst() }
        while let last = text.last, last == "." || last == " " { text.removeLast() }
        // Room for the hash, the extension and the 255-byte component limit.
        while text.utf8.count > 120 { text.removeLast() }
        let digest = FileDigest.hex(SHA256.hash(data: Data(raw.utf8)))
        if text.isEmpty { text = fallback }
        if !text.isExactly(raw) { text += "-" + digest.prefix(8) }
        guard ArchiveWriter.isSafeEntryName(text), !text.contains("/") else {
            return "\(fallback)-\(digest.prefix(16))"
        }
        return text
    }
}
