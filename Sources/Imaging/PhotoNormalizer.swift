import CVips
import Foundation

/// Turns an uploaded profile photo into the product's canonical form:
/// upright, centre-cropped square, at most `outputMaxSide` pixels a side
/// (never enlarged), sRGB, alpha flattened onto white, JPEG at
/// `jpegQuality`, with every metadata block (EXIF, GPS, XMP, IPTC, ICC,
/// comments) removed.
///
/// A file holding several pictures yields one, by a fixed rule (see
/// `PhotoHeader`): a JPEG's first frame, an animated PNG's default image
/// (IHDR/IDAT, the `acTL`/`fcTL`/`fdAT` animation is ignored), a HEIF's
/// primary item (`pitm`) even when it is not the first image in the file.
/// A HEIF image sequence with no primary still image is refused as
/// `unsupportedType`.
///
/// Equal input bytes and policy give equal output bytes. Safe to use from
/// many tasks at once; each call is synchronous and CPU-bound, so run it
/// off the cooperative pool if the caller is latency-sensitive.
public struct PhotoNormalizer: Sendable {
    public let policy: PhotoPolicy

    /// Stops the process when libvips cannot be opened, and `normalize` or `inspect` when
    /// a HEIC upload meets a HEIF module that cannot: callers that can carry on without
    /// photos call `requireLibrary(for:)` with the upload first.
    public init(policy: PhotoPolicy = .init()) {
        VipsRuntime.start()
        self.policy = policy
    }

    /// Opens and starts libvips, which the process loads on its first photo rather than
    /// at start; throws when it cannot (the library is missing or broken). Nothing is
    /// wrong with any photo then, and the work can be tried again once it is installed.
    ///
    /// With the upload's bytes, also what reading them takes: for a HEIC upload, the
    /// libvips HEIF module, which is opened by the first HEIC photo rather than at start.
    public static func requireLibrary(for upload: Data? = nil) throws(ImagingUnavailable) {
        if let failure = VipsRuntime.failure { throw ImagingUnavailable(description: failure) }
        if let upload, PhotoFormat(sniffing: upload) == .heic, let failure = VipsRuntime.heifFailure {
            throw ImagingUnavailable(description: failure)
        }
    }

    /// Checks an upload the way `normalize` will, reading only its header.
    ///
    /// Checks run cheapest first: byte size, leading bytes, Imaging's own
    /// header parse (`PhotoHeader`: structure, codec, declared dimensions
    /// against the policy), the libvips loader that claims the bytes, then
    /// the dimensions libvips reads from the header, checked again.
    public func inspect(_ data: Data) throws(PhotoRejection) -> PhotoInfo {
        try withBytes(data) { bytes throws(PhotoRejection) in
            try readHeader(bytes).info
        }
    }

    /// Runs the whole recipe. Throws `PhotoRejection` for anything it will
    /// not or cannot turn into a photo; never returns partial output.
    public func normalize(_ data: Data) throws(PhotoRejection) -> NormalizedPhoto {
        try withBytes(data) { bytes throws(PhotoRejection) in
            let header = try readHeader(bytes)
            let side = min(policy.outputMaxSide, header.info.width, header.info.height)
            let jpeg = try RenderThreads.shared.render { () throws(PhotoRejection) in try render(bytes, side: side, header: header) }
            return NormalizedPhoto(jpegData: jpeg, width: side, height: side, source: header.info)
        }
    }

    // MARK: - Header

    private struct Header {
        var info: PhotoInfo
        var hasICCProfile: Bool
        var isCMYK: Bool
        /// The shorter side as stored, before orientation: what a JPEG's
        /// block shrink on load divides.
        var storedShorterSide: Int
    }

    private func readHeader(_ bytes: UnsafeRawBufferPointer) throws(PhotoRejection) -> Header {
        guard bytes.count <= policy.maxInputBytes else {
            throw .tooLarge(byteCount: bytes.count, limit: policy.maxInputBytes)
        }
        guard let format = PhotoFormat.sniff(bytes), let base = bytes.baseAddress else {
            throw .unsupportedType("content is \(PhotoFormat.describeContent(bytes))")
        }
        // Our own parse decides first, before any libvips call: it reports an
        // oversized picture as too large where a decoder library might call
        // it unreadable, and refuses HEIF sequences and non-HEVC payloads.
        try PhotoHeader.read(bytes, as: format).check(against: policy)

        // Callers pass the upload to `requireLibrary(for:)` first, which opens the HEIF
        // module; one that did not, with the module failing, is stopped here, as `init`
        // stops it when libvips cannot start, rather than have a good photo refused.
        if format == .heic, let failure = VipsRuntime.heifFailure {
            fatalError("libvips cannot read HEIC: \(failure); call PhotoNormalizer.requireLibrary(for:) with the upload first")
        }
        guard let loaderName = cvips_foreign_find_load_buffer(base, bytes.count) else {
            throw .corrupt("sniffed as \(format.rawValue) but no libvips loader accepts it: \(VipsRuntime.takeError())")
        }
        let loader = String(cString: loaderName)
        guard loader == format.vipsLoader else {
            throw .unsupportedType("sniffed as \(format.rawValue) but libvips chose \(loader)")
        }

        let image = try VipsImageHandle.make("reading \(format.rawValue) header") { out in
            out.pointee = cvips_header_from_buffer(base, bytes.count)
            return out.pointee == nil ? -1 : 0
        }

        let storedWidth = image.width
        let storedHeight = image.height
        guard storedWidth > 0, storedHeight > 0 else {
            throw .corrupt("header declares an empty \(storedWidth)×\(storedHeight) image")
        }
        // Defence in depth: what the decoder will allocate for can differ from
        // what we parsed (a HEIF grid's canvas lives in its own descriptor,
        // not in the ispe we read), so its opinion is checked too.
        try PhotoHeader(format: format, width: storedWidth, height: storedHeight).check(against: policy)

        // Orientations 5–8 turn the picture a quarter: what the viewer calls
        // width is the stored height.
        let swap = image.orientationSwapsAxes
        let info = PhotoInfo(
            format: format,
            width: swap ? storedHeight : storedWidth,
            height: swap ? storedWidth : storedHeight,
            orientation: image.orientation)
        return Header(
            info: info, hasICCProfile: image.has("icc-profile-data"),
            isCMYK: image.interpretation == VIPS_INTERPRETATION_CMYK, storedShorterSide: min(storedWidth, storedHeight))
    }

    // MARK: - Recipe

    private func render(_ bytes: UnsafeRawBufferPointer, side: Int, header: Header) throws(PhotoRejection) -> Data {
        guard let base = bytes.baseAddress else { throw .corrupt("empty input") }

        // vips_thumbnail with size=down only crops what it can reach without
        // enlarging: asked for 1024 it leaves 800×600 at 800×600. Asking for
        // the shorter side (capped at the maximum) makes every input square.
        // A tagged image (Display P3 from a phone, Adobe RGB, CMYK with its
        // press profile) is converted through its profile to sRGB; untagged
        // ones are taken as sRGB, which is what browsers assume too.
        var image: VipsImageHandle
        if header.isCMYK && header.hasICCProfile && header.info.format == .jpeg {
            // libvips 8.14's thumbnail would use its own CMYK profile instead
            // of the embedded one (see the shim). The block shrink leaves at
            // least a factor of two to the resize, as vips_thumbnail does.
            let reduction = header.storedShorterSide / side
            let shrink: Int32 = reduction >= 16 ? 8 : reduction >= 8 ? 4 : reduction >= 4 ? 2 : 1
            let srgb = try VipsImageHandle.make("decoding CMYK through its profile") { out in
                cvips_jpeg_cmyk_to_srgb(base, bytes.count, out, shrink)
            }
            image = try srgb.then("resizing") { cvips_thumbnail_image_square($0, $1, Int32(side)) }
        } else {
            image = try VipsImageHandle.make("decoding and resizing") { out in
                cvips_thumbnail_square(base, bytes.count, out, Int32(side), header.hasICCProfile ? "srgb" : nil)
            }
        }

        // Greyscale leaves the thumbnail as one-band B_W; the recipe
        // promises three-band 8-bit sRGB. The format checks cover 16-bit
        // paths that differ between libvips releases.
        if image.interpretation != VIPS_INTERPRETATION_sRGB || image.format != VIPS_FORMAT_UCHAR {
            image = try image.then("converting to sRGB") { cvips_to_srgb($0, $1) }
        }
        if image.hasAlpha {
            image = try image.then("flattening alpha") { cvips_flatten_on_white($0, $1) }
        }
        if image.format != VIPS_FORMAT_UCHAR {
            image = try image.then("casting to 8 bit") { cvips_cast_uchar($0, $1) }
        }
        if image.width != image.height {
            // Rounding in the resize could leave a pixel's difference; the
            // output must be square whatever happened upstream.
            let edge = min(image.width, image.height)
            let left = Int32((image.width - edge) / 2)
            let top = Int32((image.height - edge) / 2)
            image = try image.then("squaring") { cvips_crop($0, $1, left, top, Int32(edge), Int32(edge)) }
        }
        guard image.width == side, image.height == side, image.bands == 3 else {
            throw .corrupt("recipe produced \(image.width)×\(image.height)×\(image.bands), expected \(side)×\(side)×3")
        }

        // Pixels are decoded here, so truncation and decode errors surface
        // from this call: nothing is returned unless the save succeeded.
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard cvips_jpegsave_stripped(image.pointer, &buffer, &length, Int32(policy.jpegQuality)) == 0,
              let buffer
        else {
            throw .corrupt("encoding JPEG: \(VipsRuntime.takeError())")
        }
        defer { cvips_free(buffer) }
        return Data(bytes: buffer, count: length)
    }

    // MARK: - Plumbing

    /// libvips reads the caller's bytes in place (no copy), so every image
    /// made from them must be released before this returns; the
    /// non-copyable handles guarantee that.
    private func withBytes<Result>(
        _ data: Data,
        _ body: (UnsafeRawBufferPointer) throws(PhotoRejection) -> Result
    ) throws(PhotoRejection) -> Result {
        let outcome: Swift.Result<Result, PhotoRejection> = data.withUnsafeBytes { bytes in
            Swift.Result { () throws(PhotoRejection) in try body(bytes) }
        }
        return try outcome.get()
    }
}

/// libvips could not be opened or started, or for a HEIC upload its HEIF module could not:
/// `PhotoNormalizer.requireLibrary(for:)`. Nothing is wrong with the photo; the work can be
/// tried again once the library is installed.
public struct ImagingUnavailable: Error, CustomStringConvertible {
    public let description: String
}
