import Foundation

/// What an accepted photo's header says, with no pixel decoded.
public struct PhotoInfo: Sendable, Hashable {
    public let format: PhotoFormat
    /// Width as displayed, after the orientation is applied.
    public let width: Int
    /// Height as displayed, after the orientation is applied.
    public let height: Int
    /// The EXIF orientation libvips will apply, 1...8 (1 = none). HEIC
    /// rotation (`irot`) is applied by libheif while decoding and does not
    /// show here.
    public let orientation: Int

    public init(format: PhotoFormat, width: Int, height: Int, orientation: Int) {
        self.format = format
        self.width = width
        self.height = height
        self.orientation = orientation
    }
}

/// The recipe's output: a square, upright, metadata-free sRGB JPEG.
public struct NormalizedPhoto: Sendable, Hashable {
    public let jpegData: Data
    public let width: Int
    public let height: Int
    /// The input's header, as `PhotoNormalizer.inspect` reports it.
    public let source: PhotoInfo

    public init(jpegData: Data, width: Int, height: Int, source: PhotoInfo) {
        self.jpegData = jpegData
        self.width = width
        self.height = height
        self.source = source
    }
}
