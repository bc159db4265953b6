import Foundation
import Imaging
import Testing

extension ImagingTests {
    /// The content sniffer and value types, without libvips.
    @Suite struct Format {
        @Test func magicBytes() {
            #expect(PhotoFormat(sniffing: Data([0xFF, 0xD8, 0xFF, 0xE1, 0, 0])) == .jpeg)
            #expect(PhotoFormat(sniffing: Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0])) == .png)
            #expect(PhotoFormat(sniffing: Data([0xFF, 0xD8])) == nil)
            #expect(PhotoFormat(sniffing: Data([0x89, 0x50, 0x4E, 0x47])) == nil)
            #expect(PhotoFormat(sniffing: Data()) == nil)
            #expect(PhotoFormat(sniffing: Crafted.gif) == nil)
        }

        @Test("HEIF brands that mean HEVC are HEIC", arguments: ["heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1"])
        func heicBrands(major: String) {
            #expect(PhotoFormat(sniffing: Crafted.ftyp(major: major, compatible: ["mif1"])) == .heic)
        }

        @Test func avifIsNotHeic() {
            #expect(PhotoFormat(sniffing: Crafted.ftyp(major: "avif", compatible: ["avif", "mif1", "miaf"])) == nil)
            #expect(PhotoFormat(sniffing: Crafted.ftyp(major: "mif1", compatible: ["avif"])) == nil)
            #expect(PhotoFormat(sniffing: Crafted.ftyp(major: "avis", compatible: ["msf1"])) == nil)
            // Video and other ISO media are not photos.
            #expect(PhotoFormat(sniffing: Crafted.ftyp(major: "isom", compatible: ["mp41"])) == nil)
            #expect(PhotoFormat(sniffing: Crafted.ftyp(major: "mp42", compatible: ["heic"])) == .heic)
        }

        @Test func malformedFtyp() {
            var box = Crafted.ftyp(major: "heic", compatible: [])
            box.replaceSubrange(0..<4, with: [0, 0, 0, 8]) // shorter than its own fields
            #expect(PhotoFormat(sniffing: box) == nil)
            #expect(PhotoFormat(sniffing: Crafted.ftyp(major: "heic", compatible: []).prefix(12)) == nil)
        }

        @Test func sliceOfLargerBuffer() {
            let buffer = Data([0, 1, 2]) + Data([0xFF, 0xD8, 0xFF, 0xDB])
            #expect(PhotoFormat(sniffing: buffer.dropFirst(3)) == .jpeg)
        }

        @Test func policyDefaults() {
            let policy = PhotoPolicy()
            #expect(policy.maxInputBytes == 10 * 1024 * 1024)
            #expect(policy.maxSide == 16_384)
            #expect(policy.maxPixels == 100_000_000)
            #expect(policy.outputMaxSide == 1024)
            #expect(policy.jpegQuality == 85)
            #expect(policy.recipeVersion == 2)
            #expect(policy.recipeIdentifier == "v2-s1024-q85")
        }

        @Test func rejectionMessages() {
            #expect(PhotoRejection.tooLarge(byteCount: 2, limit: 1).userMessage == "Photo must be under 10MB.")
            #expect(PhotoRejection.unsupportedType("GIF").userMessage == "This file type is not supported. Please use JPG, PNG, or HEIC.")
            #expect(PhotoRejection.corrupt("x").userMessage == "This photo could not be read. Please choose another photo.")
            let bomb = PhotoRejection.dimensionsTooLarge(width: 30, height: 40, pixelLimit: 1000)
            #expect(bomb.code == .dimensionsTooLarge)
            #expect(bomb.operatorDetail == "header declares 30×40 = 1200 pixels, limit 1000")
            #expect(bomb.userMessage == "This photo is too large to process. Please choose a smaller photo.")
            let strip = PhotoRejection.dimensionsTooLarge(width: 20_000, height: 1, sideLimit: 16_384)
            #expect(strip.operatorDetail == "header declares 20000×1, side limit 16384")
            #expect("\(PhotoRejection.corrupt("bad"))" == "photo rejected (corrupt): bad")
        }
    }
}
