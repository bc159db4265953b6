import Foundation

/// The picture size a photo's own header declares, read by Imaging's parsers
/// without libvips and without decoding anything.
///
/// This is the first look at an upload's structure: it runs before any
/// libvips call, so the size limits are decided by this code and not by
/// whatever a decoder library's own limits make of the header (libheif, for
/// one, refuses oversized HEICs as unreadable while reading the header).
///
/// Which picture counts, when a file holds more than one:
/// * JPEG: the first frame header (SOFn); images after the first end marker
///   (an MPO's second view) are never decoded.
/// * PNG: the default image, IHDR and IDAT. An animated PNG's `acTL`,
///   `fcTL` and `fdAT` chunks are ancillary and ignored, so only that still
///   image is used.
/// * HEIF: the primary item (`pitm`), wherever it sits among the file's
///   images. A file with no primary still image (an image sequence: a `moov`
///   track, no `meta`/`pitm`) is refused as unsupported.
///
/// Each parser is one forward pass over the leading bytes: every offset is
/// bounds-checked, nothing is allocated in proportion to a declared size and
/// there is no recursion.
public struct PhotoHeader: Sendable, Hashable {
    public let format: PhotoFormat
    /// Width as stored, before any orientation is applied.
    public let width: Int
    /// Height as stored, before any orientation is applied.
    public let height: Int

    public init(format: PhotoFormat, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
    }

    /// Sniffs `data` and parses its header. Throws `.unsupportedType` for
    /// content that is not JPEG, PNG or HEIC (or is a HEIF image sequence or
    /// a non-HEVC HEIF) and `.corrupt` for a header that cannot be parsed.
    /// Applies no policy: the sizes are returned however large they are.
    /// Safe on any input, including hostile and truncated bytes.
    public static func read(_ data: Data) throws(PhotoRejection) -> PhotoHeader {
        let outcome: Result<PhotoHeader, PhotoRejection> = data.withUnsafeBytes { bytes in
            Result { () throws(PhotoRejection) in try read(bytes) }
        }
        return try outcome.get()
    }

    static func read(_ bytes: UnsafeRawBufferPointer) throws(PhotoRejection) -> PhotoHeader {
        guard let format = PhotoFormat.sniff(bytes) else {
            throw .unsupportedType("content is \(PhotoFormat.describeContent(bytes))")
        }
        return try read(bytes, as: format)
    }

    static func read(_ bytes: UnsafeRawBufferPointer, as format: PhotoFormat) throws(PhotoRejection) -> PhotoHeader {
        let size: (width: Int, height: Int)
        switch format {
        case .jpeg: size = try jpegFrameSize(bytes)
        case .png: size = try pngImageSize(bytes)
        case .heic:
            let primary = try HEIFItems.primary(in: bytes)
            size = (primary.width, primary.height)
        }
        return PhotoHeader(format: format, width: size.width, height: size.height)
    }

    /// Throws `.dimensionsTooLarge` when the declared size breaks `policy`:
    /// the pixel count first, then the longer side.
    func check(against policy: PhotoPolicy) throws(PhotoRejection) {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        guard !overflow, pixels <= policy.maxPixels else {
            throw .dimensionsTooLarge(width: width, height: height, pixelLimit: policy.maxPixels)
        }
        guard width <= policy.maxSide, height <= policy.maxSide else {
            throw .dimensionsTooLarge(width: width, height: height, sideLimit: policy.maxSide)
        }
    }

    // MARK: - JPEG

    /// Walks the markers after SOI to the first frame header, the way
    /// libjpeg's marker reader does, so both find the same frame: bytes
    /// before a marker's 0xFF and 0xFF fill bytes are skipped, FF00 is not a
    /// marker, RSTn and TEM stand alone, every other marker carries a 16-bit
    /// length. Each step moves forward, so the walk ends within the input.
    static func jpegFrameSize(_ bytes: UnsafeRawBufferPointer) throws(PhotoRejection) -> (width: Int, height: Int) {
        let count = bytes.count
        guard count >= 2, bytes[0] == 0xFF, bytes[1] == 0xD8 else {
            throw .corrupt("JPEG does not start with SOI")
        }
        var offset = 2
        while true {
            var marker: UInt8 = 0
            repeat {
                while offset < count, bytes[offset] != 0xFF { offset += 1 }
                while offset < count, bytes[offset] == 0xFF { offset += 1 }
                guard offset < count else { throw .corrupt("JPEG ends before its frame header (SOF)") }
                marker = bytes[offset]
                offset += 1
            } while marker == 0x00
            // Only for messages: a file of tiny segments must not cost a
            // string per marker.
            var name: String { "FF" + String(marker, radix: 16, uppercase: true) }

            switch marker {
            case 0xC4, 0xC8, 0xCC:
                // DHT, JPG and DAC share the SOF range but are not frames.
                break
            case 0xC0...0xCF:
                // Length (2), precision (1), height (2), width (2), components (1).
                guard offset + 8 <= count else { throw .corrupt("JPEG frame header (\(name)) is truncated") }
                let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
                guard length >= 8 else { throw .corrupt("JPEG frame header (\(name)) has length \(length), under 8") }
                let height = Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4])
                let width = Int(bytes[offset + 5]) << 8 | Int(bytes[offset + 6])
                // Height 0 defers it to a DNL marker, which libjpeg refuses too.
                guard width > 0, height > 0 else {
                    throw .corrupt("JPEG frame header (\(name)) declares an empty \(width)×\(height) image")
                }
                return (width, height)
            case 0xD8:
                throw .corrupt("JPEG has a second SOI before its frame header (SOF)")
            case 0xD9, 0xDA:
                throw .corrupt("JPEG reaches \(marker == 0xD9 ? "EOI" : "SOS") before its frame header (SOF)")
            case 0x01, 0xD0...0xD7:
                // TEM and RSTn have no length field.
                continue
            default:
                break
            }
            guard offset + 2 <= count else { throw .corrupt("JPEG ends before its frame header (SOF)") }
            let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
            guard length >= 2 else { throw .corrupt("JPEG segment \(name) has length \(length), under 2") }
            offset += length
        }
    }

    // MARK: - PNG

    /// The size in IHDR, which the PNG specification requires to be the
    /// first chunk, 13 bytes long. The CRC is left to the decoder: it cannot
    /// make the declared size any safer to trust.
    static func pngImageSize(_ bytes: UnsafeRawBufferPointer) throws(PhotoRejection) -> (width: Int, height: Int) {
        let signature = PhotoFormat.pngSignature.count
        // Signature, chunk length, chunk type, then width, height and five
        // one-byte fields.
        guard bytes.count >= signature + 8 + 13 else { throw .corrupt("PNG ends before its IHDR chunk is complete") }
        let length = HEIFItems.readUInt(bytes, at: signature, width: 4)
        let type = HEIFItems.fourCC(bytes, at: signature + 4)
        guard type == "IHDR" else {
            throw .corrupt("PNG's first chunk is \(type.debugDescription), not IHDR")
        }
        guard length == 13 else { throw .corrupt("PNG IHDR chunk is \(length) bytes long, not 13") }
        let width = HEIFItems.readUInt(bytes, at: signature + 8, width: 4)
        let height = HEIFItems.readUInt(bytes, at: signature + 12, width: 4)
        // The specification caps both at 2^31 - 1: anything beyond is not a
        // large PNG but a broken one.
        guard (1...Int(Int32.max)).contains(width), (1...Int(Int32.max)).contains(height) else {
            throw .corrupt("PNG IHDR declares \(width)×\(height), outside 1...\(Int32.max)")
        }
        return (width, height)
    }
}
