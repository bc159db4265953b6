/// What a HEIF file's `meta` box says about its pictures, read without
/// libheif (ISO/IEC 14496-12 boxes, ISO/IEC 23008-12 items).
///
/// HEIC and AVIF share one container; only the item types say which codec
/// the pixels need. The `ftyp` brands are the writer's claim, and libvips'
/// `heif-compression` field repeats that claim, so neither stops an AVIF
/// relabelled as HEIC from reaching the AV1 decoder. This reads the item
/// table itself (`meta` → `iinf` → `infe`).
///
/// It also finds the picture libvips will decode, the primary item (`pitm`),
/// and the size it declares (`iprp` → `ipco` properties, `ipma`
/// associations → the primary's `ispe`). libheif refuses sizes beyond its own
/// security limit while reading the header, so without this an oversized
/// HEIC would only ever be reported as unreadable, never as too large.
///
/// Everything is hostile input: every offset is checked against its box,
/// each container yields at most `maxBoxesPerContainer` children, nesting is
/// fixed (no recursion) and nothing is allocated in proportion to a declared
/// size or count.
enum HEIFItems {
    /// Item types of pictures coded by some codec, as opposed to derived
    /// images (`grid`, `iovl`, `iden`) and metadata (`Exif`, `mime`).
    static let codedImageTypes: Set<String> = ["hvc1", "av01", "avc1", "jpeg", "j2k1", "vvc1", "unci", "evc1"]

    /// Far more boxes than any container of a real photo holds (a 16384²
    /// HEIC in 256² tiles declares about 4,100 items), few enough that a
    /// file of empty boxes cannot keep the walk busy.
    static let maxBoxesPerContainer = 65_536

    /// The primary picture of a HEIF still image.
    struct Primary: Equatable {
        var itemID: UInt32
        var width: Int
        var height: Int
        /// Coded image item types anywhere in the file (`hvc1`, `av01`, …).
        var codedTypes: Set<String>
    }

    static let sequenceRefusal = PhotoRejection.unsupportedType(
        "HEIF image sequence (a moov track with no primary still image): image sequences are not supported")

    /// Finds the primary item and its declared size. Refusals, in the order
    /// checked: an image sequence, i.e. a `moov` track and no primary item
    /// (unsupported); no item table (corrupt); pictures coded by anything but
    /// HEVC (unsupported); then a primary item that is missing, unknown or
    /// has no `ispe` (corrupt).
    static func primary(in bytes: UnsafeRawBufferPointer) throws(PhotoRejection) -> Primary {
        var meta: Range<Int>?
        var hasMovie = false
        for box in Boxes(bytes, 0..<bytes.count) {
            if box.type == "meta", meta == nil { meta = box.body }
            if box.type == "moov" { hasMovie = true }
        }
        // meta is a FullBox: version and flags come before its children.
        guard let meta, meta.count >= 4 else {
            throw hasMovie ? sequenceRefusal : .corrupt("HEIF item table (meta/iinf) missing or truncated")
        }

        var itemInfo: Range<Int>?
        var primaryBox: Range<Int>?
        var properties: Range<Int>?
        for box in Boxes(bytes, meta.dropFirst(4)) {
            switch box.type {
            case "iinf" where itemInfo == nil: itemInfo = box.body
            case "pitm" where primaryBox == nil: primaryBox = box.body
            case "iprp" where properties == nil: properties = box.body
            default: break
            }
        }

        // A pitm that is there but cut short counts as absent: either way
        // there is no primary to decode.
        var primaryID: UInt32?
        if let primaryBox, primaryBox.count >= 4 {
            let idWidth = bytes[primaryBox.lowerBound] == 0 ? 2 : 4
            if primaryBox.count >= 4 + idWidth {
                primaryID = UInt32(readUInt(bytes, at: primaryBox.lowerBound + 4, width: idWidth))
            }
        }

        // A sequence may still carry a meta box (a handler, metadata items)
        // but without a primary item it holds no still image to take.
        if primaryID == nil && hasMovie { throw sequenceRefusal }

        guard let itemInfo, let items = itemTable(in: bytes, itemInfo, lookingFor: primaryID) else {
            throw .corrupt("HEIF item table (meta/iinf) missing or truncated")
        }
        guard !items.codedTypes.isEmpty else {
            throw .corrupt("HEIF container declares no coded image")
        }
        guard items.codedTypes == ["hvc1"] else {
            throw .unsupportedType(
                "HEIF container holds \(items.codedTypes.sorted().joined(separator: ",")) images, only hvc1 (HEVC) is HEIC")
        }
        guard let primaryID else {
            throw .corrupt("HEIF declares no readable primary item (meta/pitm)")
        }
        guard items.containsPrimary else {
            throw .corrupt("HEIF primary item \(primaryID) is not in the item table (meta/iinf)")
        }
        guard let properties, let size = imageSize(of: primaryID, in: bytes, properties) else {
            throw .corrupt("HEIF primary item \(primaryID) has no readable image size property (iprp/ipco/ispe)")
        }
        guard size.width > 0, size.height > 0 else {
            throw .corrupt("HEIF primary item \(primaryID) declares an empty \(size.width)×\(size.height) image")
        }
        return Primary(itemID: primaryID, width: size.width, height: size.height, codedTypes: items.codedTypes)
    }

    // MARK: - Item table

    private struct ItemTable {
        var codedTypes: Set<String> = []
        var containsPrimary = false
    }

    /// One pass over the `infe` entries of an `iinf` body; nil when an entry
    /// is cut short.
    private static func itemTable(
        in bytes: UnsafeRawBufferPointer, _ itemInfo: Range<Int>, lookingFor primaryID: UInt32?
    ) -> ItemTable? {
        // iinf is a FullBox; version 0 counts its entries in 16 bits, later
        // versions in 32. The count is not needed: the boxes end the list.
        guard itemInfo.count >= 4 else { return nil }
        let start = itemInfo.lowerBound + 4 + (bytes[itemInfo.lowerBound] == 0 ? 2 : 4)
        guard start <= itemInfo.upperBound else { return nil }

        var table = ItemTable()
        for entry in Boxes(bytes, start..<itemInfo.upperBound) where entry.type == "infe" {
            let body = entry.body
            guard body.count >= 4 else { return nil }
            let version = bytes[body.lowerBound]
            // Versions 0 and 1 predate item types and describe no pictures.
            guard version >= 2 else { continue }
            let idWidth = version == 2 ? 2 : 4
            let typeOffset = body.lowerBound + 4 + idWidth + 2
            guard typeOffset + 4 <= body.upperBound else { return nil }
            let type = fourCC(bytes, at: typeOffset)
            // Only the eight known codes are kept: the set stays tiny however
            // many items the file declares.
            if codedImageTypes.contains(type) { table.codedTypes.insert(type) }
            if UInt32(readUInt(bytes, at: body.lowerBound + 4, width: idWidth)) == primaryID {
                table.containsPrimary = true
            }
        }
        return table
    }

    // MARK: - Properties

    /// The `ispe` of `item`: of the properties `ipma` associates with it,
    /// the first that is an `ispe`, as libheif picks it.
    private static func imageSize(
        of item: UInt32, in bytes: UnsafeRawBufferPointer, _ properties: Range<Int>
    ) -> (width: Int, height: Int)? {
        var container: Range<Int>?
        for box in Boxes(bytes, properties) where box.type == "ipco" {
            container = box.body
            break
        }
        guard let container else { return nil }

        // 1-based property indices associated with `item`, in order. Several
        // ipma boxes are allowed (one per version/flags pair) but an item
        // has one entry in one of them, of at most 255 associations.
        var indices: [Int] = []
        for box in Boxes(bytes, properties) where box.type == "ipma" {
            guard let found = associationIndices(of: item, in: bytes, box.body) else { return nil }
            if !found.isEmpty {
                indices = found
                break
            }
        }
        guard !indices.isEmpty else { return nil }

        // One pass over ipco: each ispe child is ranked by where the item's
        // association list names it; the earliest wins.
        var best: (rank: Int, width: Int, height: Int)?
        var index = 0
        for box in Boxes(bytes, container) {
            index += 1
            guard box.type == "ispe", let rank = indices.firstIndex(of: index) else { continue }
            if let best, best.rank < rank { continue }
            // FullBox header, then 32-bit width and height.
            guard box.body.count >= 12 else { return nil }
            let width = readUInt(bytes, at: box.body.lowerBound + 4, width: 4)
            let height = readUInt(bytes, at: box.body.lowerBound + 8, width: 4)
            best = (rank, width, height)
        }
        return best.map { ($0.width, $0.height) }
    }

    /// The property indices one `ipma` body associates with `item`: empty
    /// when the item has no entry there, nil when the box is truncated.
    private static func associationIndices(
        of item: UInt32, in bytes: UnsafeRawBufferPointer, _ body: Range<Int>
    ) -> [Int]? {
        guard body.count >= 8 else { return nil }
        let version = bytes[body.lowerBound]
        let wideIndices = bytes[body.lowerBound + 3] & 1 == 1
        let idWidth = version < 1 ? 2 : 4
        let associationWidth = wideIndices ? 2 : 1
        let entryCount = readUInt(bytes, at: body.lowerBound + 4, width: 4)
        var offset = body.lowerBound + 8
        // Each entry takes at least idWidth + 1 bytes, so the box's own size
        // ends the loop long before a lying entry count could.
        var seen = 0
        while seen < entryCount {
            guard offset + idWidth + 1 <= body.upperBound else { return nil }
            let id = UInt32(readUInt(bytes, at: offset, width: idWidth))
            let count = Int(bytes[offset + idWidth])
            offset += idWidth + 1
            guard offset + count * associationWidth <= body.upperBound else { return nil }
            if id == item {
                // The top bit of each association marks it essential.
                return (0..<count).map { i in
                    let raw = readUInt(bytes, at: offset + i * associationWidth, width: associationWidth)
                    return raw & (wideIndices ? 0x7FFF : 0x7F)
                }
            }
            offset += count * associationWidth
            seen += 1
        }
        return []
    }

    // MARK: - Boxes

    struct Box {
        var type: String
        var body: Range<Int>
    }

    /// The boxes laid end to end in a range, lazily, stopping at the first
    /// one that does not fit (a truncated file still yields the boxes before
    /// it) or after `maxBoxesPerContainer`.
    struct Boxes: Sequence, IteratorProtocol {
        private let bytes: UnsafeRawBufferPointer
        private let end: Int
        private var offset: Int
        private var yielded = 0

        init(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) {
            precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count)
            self.bytes = bytes
            self.end = range.upperBound
            self.offset = range.lowerBound
        }

        mutating func next() -> Box? {
            guard offset + 8 <= end, yielded < HEIFItems.maxBoxesPerContainer else { return nil }
            var size = readUInt(bytes, at: offset, width: 4)
            let type = fourCC(bytes, at: offset + 4)
            var header = 8
            if size == 1 {
                guard offset + 16 <= end else { return nil }
                size = readUInt(bytes, at: offset + 8, width: 8)
                header = 16
            } else if size == 0 {
                size = end - offset
            }
            guard size >= header, size <= end - offset else {
                offset = end
                return nil
            }
            let box = Box(type: type, body: offset + header..<offset + size)
            offset += size
            yielded += 1
            return box
        }
    }

    /// A big-endian unsigned integer of `width` bytes (at most 8), clamped
    /// to Int's range so a 64-bit size can never turn negative.
    static func readUInt(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> Int {
        var value: UInt64 = 0
        for i in offset..<offset + width { value = value << 8 | UInt64(bytes[i]) }
        return Int(clamping: value)
    }

    static func fourCC(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> String {
        String(decoding: bytes[offset..<offset + 4], as: Unicode.ASCII.self)
    }
}
