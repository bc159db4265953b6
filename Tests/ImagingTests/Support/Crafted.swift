import CArchive
import Foundation

/// Byte-level inputs no encoder would write: headers that lie, foreign
/// formats' minimal files, noise.
enum Crafted {
    /// A structurally valid PNG (signature, IHDR and IDAT with correct CRCs)
    /// whose header declares `width`×`height` RGB pixels it does not
    /// contain. A decoder that trusts the header allocates for the claim.
    static func pngClaiming(width: Int, height: Int) -> Data {
        var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var ihdr = Data()
        ihdr.append(bigEndian: UInt32(width))
        ihdr.append(bigEndian: UInt32(height))
        ihdr.append(contentsOf: [8, 2, 0, 0, 0]) // 8-bit, truecolour, deflate, no filter, no interlace
        png.append(chunk: "IHDR", ihdr)
        // A complete, empty zlib stream: the header parses, the pixels never come.
        png.append(chunk: "IDAT", Data([0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01]))
        png.append(chunk: "IEND", Data())
        return png
    }

    /// An ISO-BMFF `ftyp` box with the given brands and nothing after it.
    static func ftyp(major: String, compatible: [String]) -> Data {
        var box = Data()
        box.append(bigEndian: UInt32(16 + 4 * compatible.count))
        box.append(Data("ftyp".utf8))
        box.append(Data(major.utf8))
        box.append(bigEndian: UInt32(0))
        for brand in compatible { box.append(Data(brand.utf8)) }
        return box
    }

    /// The smallest GIF: 1×1, one colour.
    static let gif = Data([
        0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0xFF, 0xFF, 0xFF,
        0x00, 0x00, 0x00, 0x2C, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44,
        0x01, 0x00, 0x3B,
    ])

    static let svg = Data("""
        <?xml version="1.0" encoding="UTF-8"?>
        <svg xmlns="http://www.w3.org/2000/svg" width="400" height="400">
          <rect width="400" height="400" fill="red"/>
        </svg>
        """.utf8)

    /// A one-page PDF; only its leading bytes matter to a refusal by content.
    static let pdf = Data("""
        %PDF-1.4
        1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj
        2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj
        3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >> endobj
        trailer << /Root 1 0 R >>
        %%EOF
        """.utf8)

    static let text = Data("Dear team, please find my profile photo attached.\n".utf8)

    /// Reproducible noise (SplitMix64), so a failure can be replayed.
    static func noise(count: Int, seed: UInt64) -> Data {
        var state = seed
        var data = Data(capacity: count)
        while data.count < count {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            withUnsafeBytes(of: z) { data.append(contentsOf: $0.prefix(count - data.count)) }
        }
        return data
    }

    /// zlib's CRC-32, the checksum every PNG chunk carries.
    static func crc32(_ bytes: Data) -> UInt32 {
        bytes.withUnsafeBytes { buffer in
            UInt32(CArchive.crc32(0, buffer.bindMemory(to: Bytef.self).baseAddress, uInt(buffer.count)))
        }
    }
}

extension Data {
    mutating func append(bigEndian value: UInt32) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }

    mutating func append(chunk type: String, _ body: Data) {
        append(bigEndian: UInt32(body.count))
        let typed = Data(type.utf8) + body
        append(typed)
        append(bigEndian: Crafted.crc32(typed))
    }
}

extension Crafted {
    /// A 1×1 24-bit Windows bitmap.
    static let bmp: Data = {
        var bmp = Data("BM".utf8)
        func le32(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
        func le16(_ v: UInt16) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
        bmp += le32(58) + le32(0) + le32(54)                       // file size, reserved, pixel offset
        bmp += le32(40) + le32(1) + le32(1) + le16(1) + le16(24)   // BITMAPINFOHEADER, 1×1, 24 bpp
        bmp += le32(0) + le32(4) + le32(2835) + le32(2835) + le32(0) + le32(0)
        bmp += [0x00, 0x00, 0xFF, 0x00]                            // one red pixel, padded row
        return bmp
    }()
}
