import Foundation

/// Byte surgery on real files: the tests take what an encoder wrote and
/// change one field, so everything else about the input stays genuine.
enum Containers {
    struct Missing: Error, CustomStringConvertible {
        let what: String
        var description: String { "fixture has no \(what)" }
    }

    // MARK: - JPEG

    /// Rewrites the size in the first baseline frame header (FFC0), found by
    /// its fixed prefix for 8-bit, 3-component frames as `vips` writes them.
    static func jpeg(_ data: Data, declaringWidth width: Int, height: Int) throws -> Data {
        var bytes = [UInt8](data)
        let sof: [UInt8] = [0xFF, 0xC0, 0x00, 0x11, 0x08]
        guard let at = firstIndex(of: sof, in: bytes) else { throw Missing(what: "8-bit 3-component SOF0") }
        bytes[at + 5] = UInt8(height >> 8)
        bytes[at + 6] = UInt8(height & 0xFF)
        bytes[at + 7] = UInt8(width >> 8)
        bytes[at + 8] = UInt8(width & 0xFF)
        return Data(bytes)
    }

    // MARK: - PNG

    struct Chunk {
        var type: String
        var body: Data
    }

    /// The chunks after the signature, without their CRCs.
    static func pngChunks(_ data: Data) throws -> [Chunk] {
        let bytes = [UInt8](data)
        guard bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { throw Missing(what: "PNG signature") }
        var chunks: [Chunk] = []
        var offset = 8
        while offset + 12 <= bytes.count {
            let length = Int(uint32(bytes, at: offset))
            guard offset + 12 + length <= bytes.count else { throw Missing(what: "complete chunk at \(offset)") }
            let type = String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)
            chunks.append(Chunk(type: type, body: Data(bytes[offset + 8..<offset + 8 + length])))
            offset += 12 + length
        }
        return chunks
    }

    /// A PNG of `chunks`, each with a fresh CRC.
    static func png(_ chunks: [Chunk]) -> Data {
        var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        for chunk in chunks { png.append(chunk: chunk.type, chunk.body) }
        return png
    }

    // MARK: - HEIF

    /// Rewrites every `ispe` (image spatial extent) property: the primary
    /// and any hidden tiles alike.
    static func heif(_ data: Data, declaringWidth width: Int, height: Int) throws -> Data {
        var bytes = [UInt8](data)
        let marker = Array("ispe".utf8)
        var found = 0
        var from = 0
        while let at = firstIndex(of: marker, in: bytes, from: from) {
            // type, version/flags, then 32-bit width and height
            let field = at + 8
            for (i, value) in [width, height].enumerated() {
                for byte in 0..<4 { bytes[field + 4 * i + byte] = UInt8((value >> (24 - 8 * byte)) & 0xFF) }
            }
            found += 1
            from = at + 4
        }
        guard found > 0 else { throw Missing(what: "ispe box") }
        return Data(bytes)
    }

    /// Rewrites the primary item ID of a version-0 `pitm` box.
    static func heif(_ data: Data, primaryItem item: Int) throws -> Data {
        var bytes = [UInt8](data)
        guard let at = firstIndex(of: Array("pitm".utf8), in: bytes), bytes[at + 4] == 0 else {
            throw Missing(what: "version 0 pitm box")
        }
        bytes[at + 8] = UInt8(item >> 8)
        bytes[at + 9] = UInt8(item & 0xFF)
        return Data(bytes)
    }

    /// The primary item ID a `pitm` box names.
    static func heifPrimaryItem(_ data: Data) throws -> Int {
        let bytes = [UInt8](data)
        guard let at = firstIndex(of: Array("pitm".utf8), in: bytes), bytes[at + 4] == 0 else {
            throw Missing(what: "version 0 pitm box")
        }
        return Int(bytes[at + 8]) << 8 | Int(bytes[at + 9])
    }

    /// One ISO-BMFF box: 32-bit size, type, body.
    static func box(_ type: String, _ body: Data = Data()) -> Data {
        var box = Data()
        box.append(bigEndian: UInt32(8 + body.count))
        box.append(Data(type.utf8))
        box.append(body)
        return box
    }

    /// A FullBox: version and 24-bit flags lead the body.
    static func fullBox(_ type: String, version: UInt8 = 0, flags: UInt32 = 0, _ body: Data = Data()) -> Data {
        var head = Data([version])
        head.append(contentsOf: [UInt8(flags >> 16 & 0xFF), UInt8(flags >> 8 & 0xFF), UInt8(flags & 0xFF)])
        return box(type, head + body)
    }

    // MARK: - Helpers

    static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func firstIndex(of needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for i in start...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if haystack[i..<i + needle.count].elementsEqual(needle) { return i }
        }
        return nil
    }
}
