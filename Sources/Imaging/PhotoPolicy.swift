/// The limits and output settings of the profile-photo recipe.
///
/// Output bytes depend on `outputMaxSide`, `jpegQuality` and the code of the
/// recipe itself; bump `recipeVersion` whenever that code changes the pixels
/// it writes, so callers that key finished photos by recipe re-run them.
public struct PhotoPolicy: Sendable, Hashable {
    /// Largest accepted input, in bytes. The product promises "under 10MB":
    /// exactly 10 MiB is accepted, one byte more is refused.
    public var maxInputBytes: Int
    /// Largest accepted input width or height, in pixels, as declared by the
    /// file header.
    public var maxSide: Int
    /// Largest accepted input pixel count (width × height, from the header).
    /// Checked before any pixel is decoded, so a small file that declares a
    /// huge canvas cannot exhaust memory.
    public var maxPixels: Int
    /// The output is square with a side of at most this many pixels.
    public var outputMaxSide: Int
    /// libjpeg quality factor of the output, 1...100.
    public var jpegQuality: Int
    /// Version of the recipe code, part of `recipeIdentifier`.
    public var recipeVersion: Int

    public init(
        maxInputBytes: Int = 10_485_760,
        maxSide: Int = 16_384,
        maxPixels: Int = 100_000_000,
        outputMaxSide: Int = 1024,
        jpegQuality: Int = 85,
        recipeVersion: Int = 2
    ) {
        precondition(maxInputBytes > 0, "maxInputBytes must be positive")
        precondition(maxSide > 0 && maxPixels > 0, "input limits must be positive")
        precondition(outputMaxSide > 0, "outputMaxSide must be positive")
        precondition((1...100).contains(jpegQuality), "jpegQuality must be in 1...100")
        self.maxInputBytes = maxInputBytes
        self.maxSide = maxSide
        self.maxPixels = maxPixels
        self.outputMaxSide = outputMaxSide
        self.jpegQuality = jpegQuality
        self.recipeVersion = recipeVersion
    }

    /// Names everything that decides the output bytes, e.g. `v2-s1024-q85`.
    /// Two runs with equal identifiers on equal input bytes write equal bytes
    /// (on the same libvips/libjpeg build), so it belongs in an output key.
    public var recipeIdentifier: String {
        "v\(recipeVersion)-s\(outputMaxSide)-q\(jpegQuality)"
    }
}
