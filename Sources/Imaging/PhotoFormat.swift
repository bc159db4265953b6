import Foundation

/// The input formats the product accepts, recognised by content.
///
/// File names and client-supplied MIME types are never consulted: both are
/// under the uploader's control, the leading bytes are what the decoder sees.
public enum PhotoFormat: String, Sendable, Hashable, CaseIterable {
    case jpeg
    case png
    case heic

    /// Recognises `data` by its leading bytes, or returns nil.
    public init?(sniffing data: Data) {
        let format = data.withUnsafeBytes { PhotoFormat.sniff(UnsafeRawBufferPointer($0)) }
        guard let format else { return nil }
        self = format
    }

    /// The libvips loader class (`vips_foreign_find_load_buffer` names
    /// classes, not nicknames: this is jpegload_buffer, pngload_buffer,
    /// heifload_buffer) that must claim the bytes. libvips would happily pick
    /// another loader for content we did not sniff (GIF, WebP and TIFF are
    /// "trusted" and stay enabled under `vips_block_untrusted_set`), so the
    /// two opinions are required to agree.
    var vipsLoader: String {
        switch self {
        case .jpeg: "VipsForeignLoadJpegBuffer"
        case .png: "VipsForeignLoadPngBuffer"
        case .heic: "VipsForeignLoadHeifBuffer"
        }
    }

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> PhotoFormat? {
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if bytes.starts(with: pngSignature) { return .png }
        if let brands = isoMediaBrands(bytes) {
            // AVIF files list `mif1`/`miaf` among their compatible brands
            // just as HEIC files do, so an AV1 brand anywhere disqualifies.
            if brands.contains(where: avifBrands.contains) { return nil }
            if brands.contains(where: heicBrands.contains) { return .heic }
        }
        return nil
    }

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let heicBrands: Set<String> = ["heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1"]
    static let avifBrands: Set<String> = ["avif", "avis"]

    /// Major and compatible brands of a leading ISO-BMFF `ftyp` box.
    static func isoMediaBrands(_ bytes: UnsafeRawBufferPointer) -> [String]? {
        guard bytes.count >= 16, fourCC(bytes, at: 4) == "ftyp" else { return nil }
        let declared = bytes[0..<4].reduce(0) { $0 << 8 | Int($1) }
        guard declared >= 16 else { return nil }
        let end = min(declared, bytes.count, 4096)
        var brands = [fourCC(bytes, at: 8)]
        var offset = 16
        while offset + 4 <= end {
            brands.append(fourCC(bytes, at: offset))
            offset += 4
        }
        return brands
    }

    private static func fourCC(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> String {
        String(decoding: bytes[offset..<offset + 4], as: Unicode.ASCII.self)
    }

    /// A short name for what the bytes look like, for operators reading a
    /// refusal: "GIF", "WebP", "ISO-BMFF brands avif,mif1,miaf", …
    static func describeContent(_ bytes: UnsafeRawBufferPointer) -> String {
        func has(_ prefix: String, at offset: Int = 0) -> Bool {
            let p = Array(prefix.utf8)
            return bytes.count >= offset + p.count && bytes[offset..<offset + p.count].elementsEqual(p)
        }
        if bytes.isEmpty { return "empty input" }
        if has("GIF87a") || has("GIF89a") { return "GIF" }
        if has("RIFF") && has("WEBP", at: 8) { return "WebP" }
        if has("II*\u{0}") || has("MM\u{0}*") { return "TIFF" }
        if has("%PDF") { return "PDF" }
        if has("BM") { return "BMP" }
        if let brands = isoMediaBrands(bytes) {
            return "ISO-BMFF brands \(brands.joined(separator: ","))"
        }
        let head = bytes.prefix(512)
        let text = String(decoding: head, as: UTF8.self).lowercased()
        if text.contains("<svg") { return "SVG" }
        let leading = bytes.prefix(8).map { String(format: "%02X", $0) }.joined(separator: " ")
        return "unrecognised content starting \(leading)"
    }
}
