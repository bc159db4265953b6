import Foundation

/// ICC profiles for colour tests, written here byte by byte instead of
/// committed or downloaded: an RGB matrix/TRC profile is a header, a tag
/// table and nine small tags (ICC.1:2001-04, version 2.1).
enum ICCProfile {
    /// Adobe RGB (1998) by its published definition: the primaries' XYZ
    /// adapted to the D50 connection space, and a pure gamma of 563/256.
    static let adobeRGB = matrixTRC(
        description: "Adobe RGB (1998) compatible, made by ImagingTests",
        red: (0.6097, 0.3111, 0.0195),
        green: (0.2053, 0.6257, 0.0609),
        blue: (0.1492, 0.0632, 0.7446),
        gamma256: 563)

    /// A printer profile unlike any real press: each ink is the ideal
    /// subtractive primary, so CMYK (c, m, y, k) at full or no ink is the
    /// sRGB colour ((1-c)(1-k), (1-m)(1-k), (1-y)(1-k)). Pure cyan comes out
    /// (0, 255, 255) through it, about (0, 156, 228) through libvips'
    /// built-in CMYK profile: an output tells which profile was used.
    /// A 2-point lut8 (`mft1`) from CMYK to Lab, used for every intent.
    static let idealInksCMYK: Data = {
        var lut = Data("mft1".utf8) + Data(count: 4)
        lut.append(contentsOf: [4, 3, 2, 0]) // inputs, outputs, grid points, padding
        for row in 0..<3 {
            for column in 0..<3 { lut.append(s15Fixed16(row == column ? 1 : 0)) }
        }
        let ramp = Data((0...255).map { UInt8($0) })
        for _ in 0..<4 { lut.append(ramp) }
        // Grid corners, the first input (cyan) varying slowest.
        for c in 0...1 {
            for m in 0...1 {
                for y in 0...1 {
                    for k in 0...1 {
                        let lab = ColourMaths.lab(fromSRGB: [1 - c, 1 - m, 1 - y].map { Double($0 * (1 - k)) })
                        // lut8 Lab: L 0...100 as 0...255, a and b offset by 128.
                        lut.append(contentsOf: [
                            UInt8((lab.l * 255 / 100).rounded()),
                            UInt8((lab.a + 128).rounded()),
                            UInt8((lab.b + 128).rounded()),
                        ])
                    }
                }
            }
        }
        for _ in 0..<3 { lut.append(ramp) }
        // lcms looks for the table of the intent asked for (A2B1 for
        // relative colorimetric); both names point at the same bytes.
        return profile(class: "prtr", space: "CMYK", pcs: "Lab ", tags: [
            ("desc", textDescription("Ideal inks CMYK, made by ImagingTests")),
            ("wtpt", xyzType(d50)),
            ("A2B0", lut),
            ("A2B1", lut),
        ])
    }()

    typealias XYZ = (x: Double, y: Double, z: Double)
    static let d50: XYZ = (0.9642, 1.0, 0.8249)

    /// textDescriptionType: ASCII, then empty Unicode and ScriptCode parts.
    private static func textDescription(_ text: String) -> Data {
        var body = Data("desc".utf8) + Data(count: 4)
        let ascii = Data(text.utf8) + Data([0])
        body.append(bigEndian: UInt32(ascii.count))
        body.append(ascii)
        body.append(bigEndian: 0) // Unicode language
        body.append(bigEndian: 0) // Unicode count
        body.append(contentsOf: [0, 0, 0]) // ScriptCode code and count
        body.append(Data(count: 67))
        return body
    }

    static func matrixTRC(description: String, red: XYZ, green: XYZ, blue: XYZ, gamma256: UInt16) -> Data {
        var tags: [(signature: String, body: Data)] = []
        tags.append(("desc", textDescription(description)))
        tags.append(("cprt", Data("text".utf8) + Data(count: 4) + Data("No copyright, test data\0".utf8)))
        tags.append(("wtpt", xyzType(d50)))
        tags.append(("rXYZ", xyzType(red)))
        tags.append(("gXYZ", xyzType(green)))
        tags.append(("bXYZ", xyzType(blue)))
        var curve = Data("curv".utf8) + Data(count: 4)
        curve.append(bigEndian: 1) // one entry: a gamma in u8Fixed8
        curve.append(contentsOf: [UInt8(gamma256 >> 8), UInt8(gamma256 & 0xFF), 0, 0])
        for channel in ["rTRC", "gTRC", "bTRC"] { tags.append((channel, curve)) }
        return profile(class: "mntr", space: "RGB ", pcs: "XYZ ", tags: tags)
    }

    /// Header, tag table and tags; tags with equal bodies share one copy.
    private static func profile(class deviceClass: String, space: String, pcs: String, tags: [(signature: String, body: Data)]) -> Data {
        let tableSize = 4 + 12 * tags.count
        var table = Data()
        var payload = Data()
        var placed: [Data: (offset: Int, size: Int)] = [:]
        table.append(bigEndian: UInt32(tags.count))
        for tag in tags {
            var body = tag.body
            while body.count % 4 != 0 { body.append(0) }
            let place = placed[body] ?? (128 + tableSize + payload.count, body.count)
            if placed[body] == nil {
                placed[body] = place
                payload.append(body)
            }
            table.append(Data(tag.signature.utf8))
            table.append(bigEndian: UInt32(place.offset))
            table.append(bigEndian: UInt32(place.size))
        }

        var header = Data()
        header.append(bigEndian: UInt32(128 + tableSize + payload.count))
        header.append(Data(count: 4)) // preferred CMM
        header.append(bigEndian: 0x0210_0000)
        header.append(Data((deviceClass + space + pcs).utf8))
        for field: UInt16 in [2024, 1, 1, 0, 0, 0] { header.append(contentsOf: [UInt8(field >> 8), UInt8(field & 0xFF)]) }
        header.append(Data("acsp".utf8))
        header.append(Data(count: 28)) // platform, flags, manufacturer, model, attributes
        header.append(bigEndian: 0) // perceptual intent
        header.append(s15Fixed16(d50))
        header.append(Data(count: 128 - header.count))
        return header + table + payload
    }

    private static func xyzType(_ value: XYZ) -> Data {
        Data("XYZ ".utf8) + Data(count: 4) + s15Fixed16(value)
    }

    private static func s15Fixed16(_ value: XYZ) -> Data {
        s15Fixed16(value.x) + s15Fixed16(value.y) + s15Fixed16(value.z)
    }

    private static func s15Fixed16(_ value: Double) -> Data {
        var data = Data()
        data.append(bigEndian: UInt32(bitPattern: Int32((value * 65536).rounded())))
        return data
    }
}

/// The reference colour maths the tests compare libvips' output with:
/// RGB spaces by their published matrices to CIE XYZ (D65), sRGB's
/// piecewise transfer curve, out-of-gamut values clipped per channel.
enum ColourMaths {
    typealias Matrix = [[Double]]

    static let p3ToXYZ: Matrix = [
        [0.4865709, 0.2656677, 0.1982173],
        [0.2289746, 0.6917385, 0.0792869],
        [0.0000000, 0.0451134, 1.0439444],
    ]
    static let adobeToXYZ: Matrix = [
        [0.5767309, 0.1855540, 0.1881852],
        [0.2973769, 0.6273491, 0.0752741],
        [0.0270343, 0.0706872, 0.9911085],
    ]
    static let xyzToSRGB: Matrix = [
        [3.2404542, -1.5371385, -0.4985314],
        [-0.9692660, 1.8760108, 0.0415560],
        [0.0556434, -0.2040259, 1.0572252],
    ]

    /// Display P3 uses sRGB's transfer curve.
    static func sRGB(fromP3 colour: RGB) -> RGB {
        convert(colour, decode: sRGBDecode, toXYZ: p3ToXYZ)
    }

    static func sRGB(fromAdobeRGB colour: RGB) -> RGB {
        convert(colour, decode: { pow($0, 563.0 / 256.0) }, toXYZ: adobeToXYZ)
    }

    private static func convert(_ colour: RGB, decode: (Double) -> Double, toXYZ: Matrix) -> RGB {
        let linear = [colour.r, colour.g, colour.b].map { decode(Double($0) / 255) }
        let xyz = multiply(toXYZ, linear)
        let out = multiply(xyzToSRGB, xyz).map { v -> Int in
            let clipped = min(max(v, 0), 1)
            let encoded = clipped <= 0.0031308 ? 12.92 * clipped : 1.055 * pow(clipped, 1 / 2.4) - 0.055
            return Int((encoded * 255).rounded())
        }
        return RGB(r: out[0], g: out[1], b: out[2])
    }

    /// sRGB's primaries adapted to D50 (Bradford), as ICC sRGB profiles
    /// state them.
    static let sRGBToXYZD50: Matrix = [
        [0.4360747, 0.3850649, 0.1430804],
        [0.2225045, 0.7168786, 0.0606169],
        [0.0139322, 0.0971045, 0.7141733],
    ]

    /// CIELAB (D50) of an sRGB colour given as 0...1 per channel.
    static func lab(fromSRGB rgb: [Double]) -> (l: Double, a: Double, b: Double) {
        let xyz = multiply(sRGBToXYZD50, rgb.map(sRGBDecode))
        let white = [ICCProfile.d50.x, ICCProfile.d50.y, ICCProfile.d50.z]
        let f = zip(xyz, white).map { value, reference -> Double in
            let t = value / reference
            return t > pow(6.0 / 29, 3) ? cbrt(t) : t / (3 * pow(6.0 / 29, 2)) + 4.0 / 29
        }
        return (116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2]))
    }

    private static func sRGBDecode(_ v: Double) -> Double {
        v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    private static func multiply(_ m: Matrix, _ v: [Double]) -> [Double] {
        m.map { row in zip(row, v).reduce(0) { $0 + $1.0 * $1.1 } }
    }
}
