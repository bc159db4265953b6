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

    /// The extension a file of this media type is opened by (`image/heic` → `heic`), for
    /// types that are documents or media only: a type another user may have written into a
    /// row (`text/html`, `application/x-msdownload`) never makes an exported file one a
    /// click runs or renders. nil for any other type.
    static func fileExtension(contentType: String) -> String? {
        let type = contentType.split(separator: ";", omittingEmptySubsequences: false).first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        } ?? ""
        return safeExtensions[type]
    }

    private static let safeExtensions: [String: String] = [
        "image/jpeg": "jpg", "image/png": "png", "image/gif": "gif", "image/webp": "webp", "image/heic": "heic",
        "image/heif": "heif", "image/avif": "avif", "image/tiff": "tiff", "image/bmp": "bmp",
        "application/pdf": "pdf", "text/plain": "txt", "text/csv": "csv",
        "video/mp4": "mp4", "video/quicktime": "mov", "video/webm": "webm",
        "audio/mpeg": "mp3", "audio/mp4": "m4a", "audio/ogg": "ogg", "audio/wav": "wav", "audio/webm": "weba",
    ]

    /// The spellings of one file type's extension (`jpg`: also `jpeg`).
    static func extensions(meaning ext: String) -> Set<String> {
        switch ext {
        case "jpg": ["jpg", "jpeg", "jpe"]
        case "heic", "heif": ["heic", "heif"]
        case "tiff": ["tiff", "tif"]
        case "txt": ["txt", "text"]
        default: [ext]
        }
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
