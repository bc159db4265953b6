import Foundation

/// Real encoded inputs, made at test time with the `vips` and `exiftool`
/// command-line tools (Debian: libvips-tools, libimage-exiftool-perl).
extension Scratch {
    /// Encodes `raster` with `vips copy`; the suffix of `name` picks the
    /// format and `options` are saver options, e.g. `Q=95`.
    func encode(_ raster: Raster, as name: String, options: String = "") async throws -> Data {
        let source = try write(raster.ppm, to: "\(name).source.ppm")
        try await Tool.run("vips", "copy", source, path(name) + (options.isEmpty ? "" : "[\(options)]"))
        return try read(name)
    }

    /// A JPEG whose stored pixels, turned by EXIF `orientation`, show
    /// `display`.
    func orientedJPEG(showing display: Raster, orientation: Int) async throws -> Data {
        try await oriented(display, orientation: orientation, as: "oriented-\(orientation).jpg", options: "Q=95")
    }

    /// The same for PNG, whose EXIF lives in an eXIf chunk.
    func orientedPNG(showing display: Raster, orientation: Int) async throws -> Data {
        try await oriented(display, orientation: orientation, as: "oriented-\(orientation).png")
    }

    private func oriented(_ display: Raster, orientation: Int, as name: String, options: String = "") async throws -> Data {
        _ = try await encode(display.stored(forOrientation: orientation), as: name, options: options)
        try await Tool.run("exiftool", "-q", "-overwrite_original", "-n", "-Orientation=\(orientation)", path(name))
        return try read(name)
    }

    /// A PNG with an alpha channel, 8 or 16 bits per sample. Colour and
    /// alpha are written as PPM/PGM and joined by `vips bandjoin`.
    func pngWithAlpha(
        width: Int, height: Int, sixteenBit: Bool = false,
        pixel: (Int, Int) -> (rgb: RGB, alpha: Int)
    ) async throws -> Data {
        let maxValue = sixteenBit ? 65535 : 255
        var colour = Data("P6\n\(width) \(height)\n\(maxValue)\n".utf8)
        var alpha = Data("P5\n\(width) \(height)\n\(maxValue)\n".utf8)
        func append(_ value: Int, to data: inout Data) {
            if sixteenBit {
                let wide = value * 257
                data.append(UInt8(wide >> 8))
                data.append(UInt8(wide & 0xFF))
            } else {
                data.append(UInt8(value))
            }
        }
        for y in 0..<height {
            for x in 0..<width {
                let p = pixel(x, y)
                append(p.rgb.r, to: &colour)
                append(p.rgb.g, to: &colour)
                append(p.rgb.b, to: &colour)
                append(p.alpha, to: &alpha)
            }
        }
        let name = sixteenBit ? "alpha16.png" : "alpha8.png"
        let colourPath = try write(colour, to: "\(name).colour.ppm")
        let alphaPath = try write(alpha, to: "\(name).alpha.pgm")
        try await Tool.run("vips", "bandjoin", "\(colourPath) \(alphaPath)", path(name))
        return try read(name)
    }

    /// A 16-bit RGB PNG of one colour given in 16-bit units.
    func png16(width: Int, height: Int, colour: (r: Int, g: Int, b: Int)) async throws -> Data {
        var ppm = Data("P6\n\(width) \(height)\n65535\n".utf8)
        for _ in 0..<(width * height) {
            for value in [colour.r, colour.g, colour.b] {
                ppm.append(UInt8(value >> 8))
                ppm.append(UInt8(value & 0xFF))
            }
        }
        let source = try write(ppm, to: "rgb16.ppm")
        try await Tool.run("vips", "copy", source, path("rgb16.png"))
        return try read("rgb16.png")
    }

    /// A CMYK JPEG made through libvips' built-in CMYK profile; with
    /// `embedProfile: false` the profile is stripped, leaving bare CMYK.
    func cmykJPEG(_ raster: Raster, embedProfile: Bool) async throws -> Data {
        let name = embedProfile ? "cmyk-tagged.jpg" : "cmyk-bare.jpg"
        let rgb = try await encode(raster, as: "\(name).rgb.jpg", options: "Q=95")
        _ = rgb
        // icc_transform takes the untagged input as sRGB, converts the
        // numbers to CMYK and embeds the profile it converted to.
        try await Tool.run("vips", "icc_transform", path("\(name).rgb.jpg"), path("\(name).tmp.jpg") + "[Q=95]", "cmyk")
        try await Tool.run("vips", "copy", path("\(name).tmp.jpg"), path(name) + "[Q=95,strip=\(embedProfile ? "false" : "true")]")
        return try read(name)
    }

    /// A large smooth gradient written straight by libvips, so a 12 MP test
    /// input costs neither a 36 MB PPM nor a slow loop in a debug build.
    func largeJPEG(width: Int, height: Int) async throws -> Data {
        try await Tool.run("vips", "sines", path("sines.v"), "\(width)", "\(height)", "--hfreq", "3", "--vfreq", "2")
        try await Tool.run("vips", "linear", path("sines.v"), path("sines8.v"), "100", "128", "--uchar")
        try await Tool.run("vips", "bandjoin", "\(path("sines8.v")) \(path("sines8.v")) \(path("sines8.v"))",
                     path("large.v"))
        try await Tool.run("vips", "copy", path("large.v"), path("large.jpg") + "[Q=90]")
        return try read("large.jpg")
    }
}

/// Gradient content for size tests: no flat areas for a codec to collapse.
extension Raster {
    static func gradient(width: Int, height: Int) -> Raster {
        Raster(width: width, height: height) { x, y in
            RGB(r: x * 255 / max(width - 1, 1), g: y * 255 / max(height - 1, 1), b: 128)
        }
    }
}
