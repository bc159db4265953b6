import Foundation

/// Names the metadata blocks a JPEG, PNG or HEIC carries, so the tour can show what
/// normalisation removed. For showing only: tests check outputs with exiftool and
/// vipsheader, independent readers.
public enum MetadataBlocks {
    public static func names(in data: Data) -> [String] {
        let bytes = [UInt8](data)
        var found: [String] = []
        func add(_ name: String) { if !found.contains(name) { found.append(name) } }
        if bytes.starts(with: [0xFF, 0xD8]) {
            jpeg(bytes, add)
        } else if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) {
            png(bytes, add)
        } else if bytes.count > 12, Array(bytes[4..<8]) == Array("ftyp".utf8) {
            heif(bytes, add)
        }
        return found
    }

    private static func uint(_ bytes: [UInt8], _ offset: Int, _ width: Int, littleEndian: Bool = false) -> Int {
        guard offset >= 0, offset + width <= bytes.count else { return 0 }
        let slice = bytes[offset..<offset + width]
        return (littleEndian ? slice.reversed() : Array(slice)).reduce(0) { $0 << 8 | Int($1) }
    }

    private static func text(_ bytes: [UInt8], _ range: Range<Int>) -> String {
        String(decoding: bytes[max(0, range.lowerBound)..<min(bytes.count, range.upperBound)], as: UTF8.self)
    }

    private static func jpeg(_ bytes: [UInt8], _ add: (String) -> Void) {
        var offset = 2
        while offset + 4 <= bytes.count, bytes[offset] == 0xFF {
            let marker = bytes[offset + 1]
            if marker == 0xDA || marker == 0xD9 { break }  // Image data follows: no more headers.
            let length = uint(bytes, offset + 2, 2)
            let body = offset + 4
            switch marker {
            case 0xE1 where text(bytes, body..<body + 6) == "Exif\0\0":
                add(exifHasGPS(bytes, tiff: body + 6) ? "EXIF with GPS" : "EXIF")
            case 0xE1 where text(bytes, body..<body + 28) == "http://ns.adobe.com/xap/1.0/": add("XMP")
            case 0xE2 where text(bytes, body..<body + 11) == "ICC_PROFILE": add("ICC profile")
            case 0xED: add("IPTC")
            case 0xFE: add("comment")
            default: break
            }
            offset += 2 + max(length, 2)
        }
    }

    /// Whether IFD0 of a TIFF structure links a GPS IFD (tag 0x8825).
    private static func exifHasGPS(_ bytes: [UInt8], tiff: Int) -> Bool {
        let little = text(bytes, tiff..<tiff + 2) == "II"
        let ifd = tiff + uint(bytes, tiff + 4, 4, littleEndian: little)
        let count = uint(bytes, ifd, 2, littleEndian: little)
        return (0..<min(count, 512)).contains { uint(bytes, ifd + 2 + $0 * 12, 2, littleEndian: little) == 0x8825 }
    }

    private static func png(_ bytes: [UInt8], _ add: (String) -> Void) {
        var offset = 8
        while offset + 8 <= bytes.count {
            let length = uint(bytes, offset, 4)
            switch text(bytes, offset + 4..<offset + 8) {
            case "eXIf": add("EXIF")
            case "iCCP": add("ICC profile")
            case "iTXt" where text(bytes, offset + 8..<offset + 25) == "XML:com.adobe.xmp": add("XMP")
            case "tEXt", "zTXt", "iTXt": add("text chunks")
            case "IEND": return
            default: break
            }
            offset += 12 + length
        }
    }

    /// HEIF keeps EXIF and XMP as items (`infe` types `Exif` and `mime`) and an ICC
    /// profile as a `colr` property.
    private static func heif(_ bytes: [UInt8], _ add: (String) -> Void) {
        func boxes(_ range: Range<Int>) -> [(type: String, body: Range<Int>)] {
            var result: [(String, Range<Int>)] = []
            var offset = range.lowerBound
            while offset + 8 <= range.upperBound {
                let size = uint(bytes, offset, 4)
                guard size >= 8, offset + size <= range.upperBound else { break }
                result.append((text(bytes, offset + 4..<offset + 8), offset + 8..<offset + size))
                offset += size
            }
            return result
        }
        guard let meta = boxes(0..<bytes.count).first(where: { $0.type == "meta" }) else { return }
        for box in boxes(meta.body.lowerBound + 4..<meta.body.upperBound) {
            if box.type == "iinf" {
                let entries = box.body.lowerBound + 4 + (bytes[box.body.lowerBound] == 0 ? 2 : 4)
                for entry in boxes(entries..<box.body.upperBound) where entry.type == "infe" && bytes[entry.body.lowerBound] >= 2 {
                    let idWidth = bytes[entry.body.lowerBound] == 2 ? 2 : 4
                    switch text(bytes, entry.body.lowerBound + 4 + idWidth + 2..<entry.body.lowerBound + 8 + idWidth + 2) {
                    case "Exif": add("EXIF")
                    case "mime": add("XMP")
                    default: break
                    }
                }
            } else if box.type == "iprp", let ipco = boxes(box.body).first(where: { $0.type == "ipco" }) {
                for property in boxes(ipco.body) where property.type == "colr" {
                    let colour = text(bytes, property.body.lowerBound..<property.body.lowerBound + 4)
                    if colour == "prof" || colour == "rICC" { add("ICC profile") }
                }
            }
        }
    }
}
