import Foundation

struct RGB: Equatable, CustomStringConvertible {
    var r: Int
    var g: Int
    var b: Int

    static let red = RGB(r: 255, g: 0, b: 0)
    static let green = RGB(r: 0, g: 255, b: 0)
    static let blue = RGB(r: 0, g: 0, b: 255)
    static let yellow = RGB(r: 255, g: 255, b: 0)
    static let white = RGB(r: 255, g: 255, b: 255)
    static let black = RGB(r: 0, g: 0, b: 0)

    /// Lossy JPEG and colour conversion move values a little; quadrant
    /// colours are far apart, so a loose match still tells them apart.
    func isClose(to other: RGB, tolerance: Int = 48) -> Bool {
        abs(r - other.r) <= tolerance && abs(g - other.g) <= tolerance && abs(b - other.b) <= tolerance
    }

    var description: String { "(\(r),\(g),\(b))" }
}

/// An 8-bit RGB image held in memory, written and read as binary PPM so the
/// `vips` CLI can turn it into any format.
struct Raster {
    let width: Int
    let height: Int
    private(set) var samples: [UInt8]

    init(width: Int, height: Int, pixel: (Int, Int) -> RGB) {
        self.width = width
        self.height = height
        var samples = [UInt8]()
        samples.reserveCapacity(width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let p = pixel(x, y)
                samples += [UInt8(p.r), UInt8(p.g), UInt8(p.b)]
            }
        }
        self.samples = samples
    }

    subscript(x: Int, y: Int) -> RGB {
        let i = (y * width + x) * 3
        return RGB(r: Int(samples[i]), g: Int(samples[i + 1]), b: Int(samples[i + 2]))
    }

    var ppm: Data {
        Data("P6\n\(width) \(height)\n255\n".utf8) + Data(samples)
    }

    /// Parses an 8-bit binary PPM as `vips copy x.jpg x.ppm` writes it.
    init(ppm data: Data) throws {
        struct Malformed: Error {}
        var index = data.startIndex
        func token() throws -> String {
            var text = ""
            while index < data.endIndex {
                let byte = data[index]
                if byte == UInt8(ascii: "#") {
                    while index < data.endIndex && data[index] != 0x0A { index += 1 }
                } else if byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
                    index += 1
                    if !text.isEmpty { return text }
                    continue
                } else {
                    text.append(Character(UnicodeScalar(byte)))
                    index += 1
                    continue
                }
                index += 1
            }
            throw Malformed()
        }
        guard try token() == "P6", let w = Int(try token()), let h = Int(try token()),
              try token() == "255", data.endIndex - index >= w * h * 3
        else { throw Malformed() }
        width = w
        height = h
        samples = [UInt8](data[index..<index + w * h * 3])
    }

    /// Four solid quadrants: red top-left, green top-right, blue bottom-left,
    /// yellow bottom-right. Any rotation or mirror moves them somewhere else.
    static func quadrants(width: Int, height: Int) -> Raster {
        Raster(width: width, height: height) { x, y in
            switch (x < width / 2, y < height / 2) {
            case (true, true): .red
            case (false, true): .green
            case (true, false): .blue
            case (false, false): .yellow
            }
        }
    }

    /// The pixels a camera would store so that applying EXIF `orientation`
    /// shows `self`. Derived from the TIFF/EXIF definitions, not from
    /// libvips: for each stored pixel, where the viewer puts it.
    func stored(forOrientation orientation: Int) -> Raster {
        let swapped = orientation >= 5
        let storedWidth = swapped ? height : width
        let storedHeight = swapped ? width : height
        return Raster(width: storedWidth, height: storedHeight) { sx, sy in
            let (dx, dy): (Int, Int)
            switch orientation {
            case 1: (dx, dy) = (sx, sy)
            case 2: (dx, dy) = (storedWidth - 1 - sx, sy)                    // mirror horizontal
            case 3: (dx, dy) = (storedWidth - 1 - sx, storedHeight - 1 - sy) // rotate 180
            case 4: (dx, dy) = (sx, storedHeight - 1 - sy)                   // mirror vertical
            case 5: (dx, dy) = (sy, sx)                                      // transpose
            case 6: (dx, dy) = (storedHeight - 1 - sy, sx)                   // rotate 90 clockwise
            case 7: (dx, dy) = (storedHeight - 1 - sy, storedWidth - 1 - sx) // transverse
            case 8: (dx, dy) = (sy, storedWidth - 1 - sx)                    // rotate 90 anticlockwise
            default: preconditionFailure("orientation \(orientation)")
            }
            return self[dx, dy]
        }
    }
}
