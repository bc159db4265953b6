/// The coded image items a HEIF file declares, read from its `meta` box.
///
/// HEIC and AVIF share one container; only the item types say which codec
/// the pixels need. The `ftyp` brands are the writer's claim, and libvips'
/// `heif-compression` field repeats that claim, so neither stops an AVIF
/// relabelled as HEIC from reaching the AV1 decoder. This reads the item
/// table itself (ISO/IEC 14496-12 `meta` → `iinf` → `infe`).
enum HEIFItems {
    /// Item types of pictures coded by some codec, as opposed to derived
    /// images (`grid`, `iovl`, `iden`) and metadata (`Exif`, `mime`).
    static let codedImageTypes: Set<String> = ["hvc1", "av01", "avc1", "jpeg", "j2k1", "vvc1", "unci", "evc1"]

    /// The coded image item types declared, or nil when the item table
    /// cannot be found within `bytes`.
    static func codedTypes(in bytes: UnsafeRawBufferPointer) -> Set<String>? {
        guard let meta = children(of: bytes, in: 0..<bytes.count).first(where: { $0.type == "meta" }) else {
            return nil
        }
        // meta is a FullBox: version and flags come before its children.
        guard meta.body.count >= 4,
              let iinf = children(of: bytes, in: meta.body.dropFirst(4)).first(where: { $0.type == "iinf" }),
              iinf.body.count >= 4
        else { return nil }
        let version = bytes[iinf.body.lowerBound]
        let entriesStart = iinf.body.lowerBound + 4 + (version == 0 ? 2 : 4)
        guard entriesStart <= iinf.body.upperBound else { return nil }

        var types = Set<String>()
        for entry in children(of: bytes, in: entriesStart..<iinf.body.upperBound) where entry.type == "infe" {
            let body = entry.body
            guard body.count >= 4 else { return nil }
            let entryVersion = bytes[body.lowerBound]
            // Versions 0 and 1 predate item types and describe no pictures.
            guard entryVersion >= 2 else { continue }
            let typeOffset = body.lowerBound + 4 + (entryVersion == 2 ? 2 : 4) + 2
            guard typeOffset + 4 <= body.upperBound else { return nil }
            let type = String(decoding: bytes[typeOffset..<typeOffset + 4], as: Unicode.ASCII.self)
            if codedImageTypes.contains(type) { types.insert(type) }
        }
        return types
    }

    private struct Box {
        var type: String
        var body: Range<Int>
    }

    /// The boxes laid end to end in `range`, stopping at the first one that
    /// does not fit (a truncated file still yields the boxes before it).
    private static func children(of bytes: UnsafeRawBufferPointer, in range: Range<Int>) -> [Box] {
        var boxes: [Box] = []
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound, boxes.count < 1024 {
            var size = readUInt(bytes, at: offset, width: 4)
            let type = String(decoding: bytes[offset + 4..<offset + 8], as: Unicode.ASCII.self)
            var header = 8
            if size == 1 {
                guard offset + 16 <= range.upperBound else { break }
                size = readUInt(bytes, at: offset + 8, width: 8)
                header = 16
            } else if size == 0 {
                size = range.upperBound - offset
            }
            guard size >= header, size <= range.upperBound - offset else { break }
            boxes.append(Box(type: type, body: offset + header..<offset + size))
            offset += size
        }
        return boxes
    }

    private static func readUInt(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> Int {
        bytes[offset..<offset + width].reduce(0) { ($0 << 8) | Int($1) } & Int.max
    }
}
