import Foundation
import Imaging
import Testing

extension ImagingTests {
    /// Tagged inputs are converted through their profile to sRGB before the
    /// profile is stripped. The expected colours come from the spaces'
    /// published matrices (`ColourMaths`), not from libvips, and every input
    /// is chosen so that its raw numbers read as sRGB are visibly wrong: a
    /// recipe that dropped the profile without converting would fail.
    @Suite struct Colour {
        let normalizer = PhotoNormalizer()

        enum Space: String, Sendable, CaseIterable {
            case displayP3, adobeRGB
        }

        /// (60, 200, 60) lies outside sRGB in both spaces: its red comes
        /// out clipped to 0, where the raw number was 60.
        static let cases: [(Space, [Int], String)] = [
            (.displayP3, [200, 60, 60], "png"), (.displayP3, [60, 200, 60], "png"), (.displayP3, [60, 200, 60], "jpg"),
            (.adobeRGB, [200, 60, 60], "png"), (.adobeRGB, [60, 200, 60], "png"), (.adobeRGB, [60, 200, 60], "jpg"),
        ]

        @Test("tagged Display P3 and Adobe RGB come out as the same colour in sRGB", arguments: cases)
        func tagged(space: Space, raw numbers: [Int], format: String) async throws {
            let scratch = try Scratch()
            let raw = RGB(r: numbers[0], g: numbers[1], b: numbers[2])
            let expected = space == .displayP3 ? ColourMaths.sRGB(fromP3: raw) : ColourMaths.sRGB(fromAdobeRGB: raw)
            #expect(!raw.isClose(to: expected, tolerance: 14), "raw \(raw) too near \(expected) to tell a conversion from none")

            let name = "in.\(format)"
            _ = try await scratch.encode(Raster(width: 96, height: 64) { _, _ in raw }, as: name, options: format == "jpg" ? "Q=100" : "")
            let profile = try scratch.write(try await Self.profile(space, in: scratch), to: "\(space).icc")
            try await Tool.run("exiftool", "-q", "-overwrite_original", "-ICC_Profile<=\(profile)", scratch.path(name))
            let header = String(decoding: try await Tool.run("vipsheader", "-a", scratch.path(name)), as: UTF8.self)
            #expect(header.contains("icc-profile-data"), "fixture is not tagged")

            let photo = try normalizer.normalize(try scratch.read(name))
            let pixels = try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 64, in: scratch)
            #expect(pixels[32, 32].isClose(to: expected, tolerance: 6), "\(space) \(raw): got \(pixels[32, 32]), expected \(expected)")
        }

        @Test("tagged CMYK is converted through its own profile, not a stock CMYK profile")
        func cmykThroughEmbeddedProfile() async throws {
            let scratch = try Scratch()
            // Quadrants of full inks: cyan, magenta / yellow, cyan + magenta.
            let inks: [[UInt8]] = [[255, 0, 0, 0], [0, 255, 0, 0], [0, 0, 255, 0], [255, 255, 0, 0]]
            let expected: [RGB] = [RGB(r: 0, g: 255, b: 255), RGB(r: 255, g: 0, b: 255), .yellow, .blue]
            var planes: [String] = []
            for channel in 0..<4 {
                var pgm = Data("P5\n128 128\n255\n".utf8)
                for y in 0..<128 {
                    for x in 0..<128 { pgm.append(inks[(y < 64 ? 0 : 2) + (x < 64 ? 0 : 1)][channel]) }
                }
                planes.append(try scratch.write(pgm, to: "plane\(channel).pgm"))
            }
            try await Tool.run("vips", "bandjoin", planes.joined(separator: " "), scratch.path("inks.v"))
            try await Tool.run("vips", "copy", scratch.path("inks.v"), scratch.path("bare.jpg") + "[Q=100]", "--interpretation", "cmyk")
            try FileManager.default.copyItem(atPath: scratch.path("bare.jpg"), toPath: scratch.path("tagged.jpg"))
            let profile = try scratch.write(ICCProfile.idealInksCMYK, to: "inks.icc")
            try await Tool.run("exiftool", "-q", "-overwrite_original", "-ICC_Profile<=\(profile)", scratch.path("tagged.jpg"))
            #expect(String(decoding: try await Tool.run("vipsheader", scratch.path("tagged.jpg")), as: UTF8.self).contains("4 bands, cmyk"))

            let probes = [(32, 32), (96, 32), (32, 96), (96, 96)]
            let tagged = try await OutputCheck.expectCleanJPEG(
                try normalizer.normalize(try scratch.read("tagged.jpg")).jpegData, side: 128, in: scratch)
            for ((x, y), colour) in zip(probes, expected) {
                #expect(tagged[x, y].isClose(to: colour, tolerance: 12), "tagged (\(x),\(y)): \(tagged[x, y]), expected \(colour)")
            }
            // The same inks untagged go through libvips' stock press profile,
            // whose cyan is far from the ideal one: the profile made the difference.
            let bare = try await OutputCheck.expectCleanJPEG(
                try normalizer.normalize(try scratch.read("bare.jpg")).jpegData, side: 128, in: scratch)
            #expect(!bare[32, 32].isClose(to: expected[0], tolerance: 40), "untagged cyan \(bare[32, 32])")
        }

        @Test("tagged CMYK with an EXIF orientation comes out upright")
        func cmykOriented() async throws {
            // Pure green and blue leave the press gamut and come back as other
            // colours, so the reference is the same picture stored upright.
            let scratch = try Scratch()
            let display = Raster.quadrants(width: 300, height: 200)
            let upright = try normalizer.normalize(try await scratch.cmykJPEG(display, embedProfile: true))
            let reference = try await OutputCheck.expectCleanJPEG(upright.jpegData, side: 200, in: scratch)

            _ = try await scratch.cmykJPEG(display.stored(forOrientation: 6), embedProfile: true)
            try await Tool.run("exiftool", "-q", "-overwrite_original", "-n", "-Orientation=6", scratch.path("cmyk-tagged.jpg"))
            let photo = try normalizer.normalize(try scratch.read("cmyk-tagged.jpg"))
            #expect(photo.source == PhotoInfo(format: .jpeg, width: 300, height: 200, orientation: 6))
            let pixels = try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 200, in: scratch)

            let probes = [(50, 50), (150, 50), (50, 150), (150, 150)]
            for (i, a) in probes.enumerated() {
                for b in probes[(i + 1)...] {
                    #expect(!reference[a.0, a.1].isClose(to: reference[b.0, b.1], tolerance: 40), "quadrants \(a) and \(b) look alike")
                }
                #expect(pixels[a.0, a.1].isClose(to: reference[a.0, a.1], tolerance: 10), "\(a): \(pixels[a.0, a.1]), upright \(reference[a.0, a.1])")
            }
        }

        @Test("a large tagged CMYK photo is block-shrunk on load and still comes out 1024×1024")
        func cmykLarge() async throws {
            let scratch = try Scratch()
            _ = try await scratch.largeJPEG(width: 4400, height: 4200)
            try await Tool.run("vips", "icc_transform", scratch.path("large.jpg"), scratch.path("large-cmyk.jpg") + "[Q=90]", "cmyk")
            #expect(String(decoding: try await Tool.run("vipsheader", "-f", "interpretation", scratch.path("large-cmyk.jpg")), as: UTF8.self)
                .contains("CMYK"))
            let photo = try normalizer.normalize(try scratch.read("large-cmyk.jpg"))
            try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 1024, in: scratch)
        }

        /// Display P3 is libvips' built-in profile, taken out of a file it
        /// tagged; Adobe RGB is written by `ICCProfile`.
        static func profile(_ space: Space, in scratch: Scratch) async throws -> Data {
            switch space {
            case .adobeRGB:
                return ICCProfile.adobeRGB
            case .displayP3:
                _ = try await scratch.encode(Raster(width: 8, height: 8) { _, _ in .white }, as: "carrier.png")
                try await Tool.run("vips", "icc_transform", scratch.path("carrier.png"), scratch.path("p3-carrier.png"), "p3")
                let profile = try await Tool.run("exiftool", "-b", "-ICC_Profile", scratch.path("p3-carrier.png"))
                try #require(profile.count > 128, "no P3 profile extracted")
                return profile
            }
        }
    }
}
