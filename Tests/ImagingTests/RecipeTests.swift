import Foundation
import Imaging
import Testing

extension ImagingTests {
    @Suite struct Recipe {
        let normalizer = PhotoNormalizer()

        @Test(
            "square, never enlarged, at most 1024 a side",
            arguments: [
                (1, 1, 1), (800, 600, 600), (600, 800, 600), (1500, 500, 500),
                (1024, 1024, 1024), (1025, 1025, 1024), (1030, 2000, 1024), (3, 1000, 3),
            ])
        func sizes(width: Int, height: Int, expectedSide: Int) async throws {
            let scratch = try Scratch()
            let input = try await scratch.encode(.gradient(width: width, height: height), as: "in.jpg", options: "Q=95")
            let photo = try normalizer.normalize(input)
            #expect(photo.width == expectedSide && photo.height == expectedSide)
            #expect(photo.source == PhotoInfo(format: .jpeg, width: width, height: height, orientation: 1))
            try await OutputCheck.expectCleanJPEG(photo.jpegData, side: expectedSide, in: scratch)
        }

        @Test("a 12 MP photo comes out 1024×1024")
        func largePhoto() async throws {
            let scratch = try Scratch()
            let input = try await scratch.largeJPEG(width: 4000, height: 3000)
            let photo = try normalizer.normalize(input)
            #expect(photo.width == 1024 && photo.height == 1024)
            try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 1024, in: scratch)
        }

        @Test("a centre crop keeps the middle of a wide photo")
        func centreCrop() async throws {
            let scratch = try Scratch()
            // Blue thirds left and right, red middle: only a centred crop of
            // a 3:1 image is all red.
            let raster = Raster(width: 1500, height: 500) { x, _ in (500..<1000).contains(x) ? .red : .blue }
            let photo = try normalizer.normalize(try await scratch.encode(raster, as: "wide.png"))
            let pixels = try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 500, in: scratch)
            for x in [2, 250, 497] {
                #expect(pixels[x, 250].isClose(to: .red), "pixel \(x) is \(pixels[x, 250])")
            }
        }

        @Test("transparent areas become white")
        func alphaFlattensOnWhite() async throws {
            let scratch = try Scratch()
            let input = try await scratch.pngWithAlpha(width: 200, height: 200) { x, _ in
                x < 100 ? (rgb: .black, alpha: 0) : (rgb: .red, alpha: 255)
            }
            let pixels = try await OutputCheck.expectCleanJPEG(try normalizer.normalize(input).jpegData, side: 200, in: scratch)
            #expect(pixels[40, 100].isClose(to: .white, tolerance: 6), "\(pixels[40, 100])")
            #expect(pixels[160, 100].isClose(to: .red, tolerance: 12), "\(pixels[160, 100])")
        }

        @Test("16-bit PNG becomes 8-bit sRGB with the same colour")
        func sixteenBitPNG() async throws {
            let scratch = try Scratch()
            let input = try await scratch.png16(width: 300, height: 200, colour: (r: 65535, g: 0, b: 32896))
            #expect(try await String(decoding: Tool.run("vipsheader", scratch.path("rgb16.png")), as: UTF8.self).contains("ushort"))
            let pixels = try await OutputCheck.expectCleanJPEG(try normalizer.normalize(input).jpegData, side: 200, in: scratch)
            #expect(pixels[100, 100].isClose(to: RGB(r: 255, g: 0, b: 128), tolerance: 10), "\(pixels[100, 100])")
        }

        @Test("16-bit PNG with alpha is flattened onto white")
        func sixteenBitAlphaPNG() async throws {
            let scratch = try Scratch()
            let input = try await scratch.pngWithAlpha(width: 120, height: 120, sixteenBit: true) { _, y in
                y < 60 ? (rgb: .blue, alpha: 0) : (rgb: .blue, alpha: 255)
            }
            let pixels = try await OutputCheck.expectCleanJPEG(try normalizer.normalize(input).jpegData, side: 120, in: scratch)
            #expect(pixels[60, 20].isClose(to: .white, tolerance: 6), "\(pixels[60, 20])")
            #expect(pixels[60, 100].isClose(to: .blue, tolerance: 16), "\(pixels[60, 100])")
        }

        @Test("CMYK JPEG becomes sRGB", arguments: [true, false])
        func cmyk(embedProfile: Bool) async throws {
            let scratch = try Scratch()
            let input = try await scratch.cmykJPEG(.quadrants(width: 300, height: 200), embedProfile: embedProfile)
            #expect(try await String(decoding: Tool.run("vipsheader", scratch.path(embedProfile ? "cmyk-tagged.jpg" : "cmyk-bare.jpg")), as: UTF8.self)
                .contains("4 bands, cmyk"))
            let pixels = try await OutputCheck.expectCleanJPEG(try normalizer.normalize(input).jpegData, side: 200, in: scratch)
            #expect(pixels[50, 50].isClose(to: .red, tolerance: 60), "\(pixels[50, 50])")
            #expect(pixels[150, 150].isClose(to: .yellow, tolerance: 60), "\(pixels[150, 150])")
        }

        @Test("an embedded colour profile is converted to sRGB, not dropped")
        func taggedProfileIsHonoured() async throws {
            let scratch = try Scratch()
            let intended = RGB(r: 40, g: 200, b: 40)
            _ = try await scratch.encode(Raster(width: 64, height: 64) { _, _ in intended }, as: "srgb.jpg", options: "Q=98")
            // icc_transform rewrites the numbers into Display P3 and tags
            // them, so the picture looks the same but its raw values differ.
            try await Tool.run("vips", "icc_transform", scratch.path("srgb.jpg"), scratch.path("p3.jpg") + "[Q=98]", "p3")
            let raw = try await OutputCheck.pixels(of: scratch.path("p3.jpg"))[32, 32]
            #expect(!raw.isClose(to: intended, tolerance: 20), "P3 numbers \(raw) should differ from sRGB \(intended)")

            let photo = try normalizer.normalize(try scratch.read("p3.jpg"))
            let pixels = try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 64, in: scratch)
            #expect(pixels[32, 32].isClose(to: intended, tolerance: 8), "\(pixels[32, 32])")
        }

        @Test("HEIC is decoded, cropped and re-encoded as JPEG")
        func heic() async throws {
            let scratch = try Scratch()
            let input = try await scratch.encode(.quadrants(width: 300, height: 200), as: "in.heic", options: "Q=90")
            #expect(try normalizer.inspect(input) == PhotoInfo(format: .heic, width: 300, height: 200, orientation: 1))
            let pixels = try await OutputCheck.expectCleanJPEG(try normalizer.normalize(input).jpegData, side: 200, in: scratch)
            expectUpright(pixels)
        }

        @Test("of the libvips modules only HEIF is in the process: no ImageMagick, poppler or OpenSlide decoders")
        func onlyTheHeifModuleIsLoaded() async throws {
            let scratch = try Scratch()
            _ = try normalizer.normalize(try await scratch.encode(.quadrants(width: 40, height: 40), as: "in.heic", options: "Q=90"))
            // FileHandle reads to the end; a read sized from stat would stop at /proc's reported size 0.
            let mapped = String(decoding: try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/maps")).readToEnd() ?? Data(), as: UTF8.self)
            #expect(mapped.contains("/vips-heif.so"))
            for module in ["vips-magick", "vips-poppler", "vips-openslide", "vips-jxl", "libMagickCore", "libpoppler"] {
                #expect(!mapped.contains(module), "\(module) should not be loaded")
            }
        }

        @Test("greyscale input comes out as three-band sRGB")
        func greyscale() async throws {
            let scratch = try Scratch()
            let raster = Raster(width: 90, height: 60) { _, _ in RGB(r: 100, g: 100, b: 100) }
            _ = try await scratch.encode(raster, as: "rgb.png")
            try await Tool.run("vips", "colourspace", scratch.path("rgb.png"), scratch.path("grey.png"), "b-w")
            let pixels = try await OutputCheck.expectCleanJPEG(
                try normalizer.normalize(try scratch.read("grey.png")).jpegData, side: 60, in: scratch)
            #expect(pixels[30, 30].isClose(to: RGB(r: 100, g: 100, b: 100), tolerance: 4), "\(pixels[30, 30])")
        }

        @Test("a smaller policy side is honoured")
        func customSide() async throws {
            let scratch = try Scratch()
            let normalizer = PhotoNormalizer(policy: PhotoPolicy(outputMaxSide: 256, jpegQuality: 70))
            let photo = try normalizer.normalize(try await scratch.encode(.gradient(width: 800, height: 600), as: "in.jpg"))
            try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 256, in: scratch)
        }
    }
}

/// The quadrant pattern, centre-cropped from 300×200 to 200×200: the
/// crop takes columns 50..<250, so each quadrant's middle stays put.
func expectUpright(_ pixels: Raster, sourceLocation: SourceLocation = #_sourceLocation) {
    let s = pixels.width
    let probes: [(Int, Int, RGB, String)] = [
        (s / 4, s / 4, .red, "top-left"), (3 * s / 4, s / 4, .green, "top-right"),
        (s / 4, 3 * s / 4, .blue, "bottom-left"), (3 * s / 4, 3 * s / 4, .yellow, "bottom-right"),
    ]
    for (x, y, colour, place) in probes {
        #expect(pixels[x, y].isClose(to: colour), "\(place) is \(pixels[x, y]), expected \(colour)",
                sourceLocation: sourceLocation)
    }
}
