import Foundation
import Imaging
import Testing

extension ImagingTests {
    /// Orientation is checked by where the coloured quadrants land, read
    /// back from the output's pixels; the tag itself is gone from the output.
    @Suite struct Orientation {
        let normalizer = PhotoNormalizer()
        let display = Raster.quadrants(width: 300, height: 200)

        @Test("JPEG with EXIF orientation is stored upright", arguments: 1...8)
        func jpeg(orientation: Int) async throws {
            let scratch = try Scratch()
            let input = try await scratch.orientedJPEG(showing: display, orientation: orientation)
            let info = try normalizer.inspect(input)
            #expect(info == PhotoInfo(format: .jpeg, width: 300, height: 200, orientation: orientation))

            let photo = try normalizer.normalize(input)
            #expect(photo.width == 200 && photo.height == 200)
            expectUpright(try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 200, in: scratch))
        }

        @Test("PNG with an EXIF orientation is stored upright", arguments: [3, 6, 8])
        func png(orientation: Int) async throws {
            let scratch = try Scratch()
            let input = try await scratch.orientedPNG(showing: display, orientation: orientation)
            #expect(try normalizer.inspect(input).orientation == orientation)
            let photo = try normalizer.normalize(input)
            expectUpright(try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 200, in: scratch))
        }

        /// Phones record HEIC rotation in the item's `irot` property, which
        /// libheif applies while decoding. No CLI here writes `irot`, so the
        /// fixture overwrites the 16-byte `pixi` property (optional, and
        /// associated with the primary image) with an equally long `irot`
        /// box: angle 1, a quarter turn anticlockwise, the same turn as EXIF
        /// orientation 8.
        @Test("HEIC rotation (irot) is applied")
        func heicRotation() async throws {
            let scratch = try Scratch()
            var input = try await scratch.encode(display.stored(forOrientation: 8), as: "turned.heic", options: "Q=90")
            let pixi = try #require(input.range(of: Data("pixi".utf8)))
            let boxStart = pixi.lowerBound - 4
            #expect(input[boxStart..<pixi.lowerBound] == Data([0, 0, 0, 16]))
            input.replaceSubrange(boxStart..<boxStart + 16, with: Data([0, 0, 0, 16]) + Data("irot".utf8) + Data([1]) + Data(count: 7))

            #expect(try normalizer.inspect(input) == PhotoInfo(format: .heic, width: 300, height: 200, orientation: 1))
            expectUpright(try await OutputCheck.expectCleanJPEG(try normalizer.normalize(input).jpegData, side: 200, in: scratch))
        }

        /// libheif applies the HEIF `irot` box itself; an EXIF Orientation tag
        /// inside a HEIC is not authoritative and is ignored, as libheif's own
        /// tools do. This pins that behaviour so a libvips upgrade that starts
        /// double-rotating phone photos is noticed.
        @Test("EXIF orientation inside HEIC is ignored")
        func heicExifOrientation() async throws {
            let scratch = try Scratch()
            _ = try await scratch.encode(display, as: "tagged.heic", options: "Q=90")
            try await Tool.run("exiftool", "-q", "-overwrite_original", "-n", "-Orientation=6", scratch.path("tagged.heic"))
            let input = try scratch.read("tagged.heic")
            #expect(try normalizer.inspect(input) == PhotoInfo(format: .heic, width: 300, height: 200, orientation: 1))
            expectUpright(try await OutputCheck.expectCleanJPEG(try normalizer.normalize(input).jpegData, side: 200, in: scratch))
        }
    }
}
