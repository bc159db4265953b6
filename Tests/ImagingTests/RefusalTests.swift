import Foundation
import Imaging
import Testing

let unsupportedMessage = "This file type is not supported. Please use JPG, PNG, or HEIC."
let tooLargeMessage = "Photo must be under 10MB."

/// Runs `body`, which must throw a PhotoRejection, and returns it.
func rejection(
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) -> PhotoRejection? {
    do {
        try body()
        Issue.record("expected a PhotoRejection, nothing was thrown", sourceLocation: sourceLocation)
    } catch let rejection as PhotoRejection {
        return rejection
    } catch {
        Issue.record("expected a PhotoRejection, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

extension ImagingTests {
    @Suite struct Refusals {
        let normalizer = PhotoNormalizer()

        /// Checks `inspect`, `normalize` and `normalizeFile` all refuse
        /// `input` the same way, and that the file path leaves nothing
        /// behind.
        func expectRefused(
            _ input: Data, code: PhotoRejection.Code, named name: String = "photo.jpg",
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws -> PhotoRejection? {
            let scratch = try Scratch()
            let inputPath = try scratch.write(input, to: name)
            // Header-only inspection cannot see damage deep in the pixel data.
            let fromInspect = code == .corrupt
                ? nil : rejection(sourceLocation: sourceLocation) { _ = try normalizer.inspect(input) }
            let fromNormalize = rejection(sourceLocation: sourceLocation) { _ = try normalizer.normalize(input) }
            let fromFile = rejection(sourceLocation: sourceLocation) {
                try normalizer.normalizeFile(at: inputPath, to: scratch.path("out.jpg"))
            }
            if code != .corrupt {
                #expect(fromInspect?.code == code, "inspect: \(String(describing: fromInspect))", sourceLocation: sourceLocation)
            }
            #expect(fromNormalize?.code == code, "normalize: \(String(describing: fromNormalize))", sourceLocation: sourceLocation)
            #expect(fromFile?.code == code, "normalizeFile: \(String(describing: fromFile))", sourceLocation: sourceLocation)
            let left = try scratch.contents()
            #expect(left == [name], "left behind: \(left)", sourceLocation: sourceLocation)
            return fromNormalize
        }

        @Test("10 MB + 1 byte is refused with the product message")
        func tooLarge() async throws {
            let scratch = try Scratch()
            var input = try await scratch.encode(.gradient(width: 64, height: 64), as: "small.jpg")
            input.append(Data(count: 10 * 1024 * 1024 + 1 - input.count))
            let refusal = try expectRefused(input, code: .tooLarge)
            #expect(refusal?.userMessage == tooLargeMessage)
            #expect(refusal?.operatorDetail == "input is 10485761 bytes, limit 10485760")
        }

        @Test("exactly 10 MB is accepted")
        func exactlyTenMegabytes() async throws {
            let scratch = try Scratch()
            var input = try await scratch.encode(.gradient(width: 64, height: 64), as: "small.jpg")
            // Bytes after the JPEG end marker are never read by the decoder.
            input.append(Data(count: 10 * 1024 * 1024 - input.count))
            #expect(input.count == 10_485_760)
            let photo = try normalizer.normalize(input)
            #expect(photo.width == 64)
        }

        enum Foreign: String, CaseIterable, Sendable {
            case gif, webp, tiff, bmp, svg, pdf, text, noise, empty, avif, avifBrandsOnly, av1DisguisedAsHeic
        }

        @Test("other formats are refused by content, whatever the name", arguments: Foreign.allCases)
        func foreignFormat(_ kind: Foreign) async throws {
            let scratch = try Scratch()
            let raster = Raster.quadrants(width: 64, height: 48)
            let input: Data = switch kind {
            case .gif: Crafted.gif
            case .webp: try await scratch.encode(raster, as: "x.webp")
            case .tiff: try await scratch.encode(raster, as: "x.tif")
            case .bmp: Crafted.bmp
            case .svg: Crafted.svg
            case .pdf: Crafted.pdf
            case .text: Crafted.text
            case .noise: Crafted.noise(count: 4096, seed: 42)
            case .empty: Data()
            case .avif: try await scratch.encode(raster, as: "x.avif")
            // What an AVIF's ftyp says: HEIF's `mif1` with an AV1 brand.
            case .avifBrandsOnly: Crafted.ftyp(major: "mif1", compatible: ["avif", "miaf", "mif1"])
            // A real AVIF whose ftyp brands were rewritten to claim HEIC: the
            // sniffer is fooled, the payload check is not.
            case .av1DisguisedAsHeic: try await {
                var avif = try await scratch.encode(raster, as: "x.avif")
                let brands = Crafted.ftyp(major: "heic", compatible: ["heic", "mif1", "miaf"])
                #expect(avif.prefix(4) == brands.prefix(4), "expected a 28-byte ftyp box")
                avif.replaceSubrange(avif.startIndex..<avif.startIndex + brands.count, with: brands)
                return avif
            }()
            }
            let refusal = try expectRefused(input, code: .unsupportedType, named: "upload.jpg")
            #expect(refusal?.userMessage == unsupportedMessage)
        }

        @Test("a header claiming 100,000×100,000 is refused before decoding")
        func pixelBomb() throws {
            let refusal = try expectRefused(Crafted.pngClaiming(width: 100_000, height: 100_000), code: .dimensionsTooLarge, named: "bomb.png")
            #expect(refusal?.operatorDetail == "header declares 100000×100000 = 10000000000 pixels, limit 100000000")
            #expect(refusal?.userMessage == "This photo is too large to process. Please choose a smaller photo.")
        }

        @Test("a side longer than 16384 is refused")
        func longSide() async throws {
            let crafted = try expectRefused(Crafted.pngClaiming(width: 20_000, height: 10), code: .dimensionsTooLarge)
            #expect(crafted?.operatorDetail == "header declares 20000×10, side limit 16384")

            let scratch = try Scratch()
            try await Tool.run("vips", "black", scratch.path("strip.jpg"), "16385", "8")
            let real = try expectRefused(try scratch.read("strip.jpg"), code: .dimensionsTooLarge)
            #expect(real?.operatorDetail == "header declares 16385×8, side limit 16384")
        }

        @Test("the pixel limit comes from the policy")
        func policyPixelLimit() async throws {
            let scratch = try Scratch()
            let input = try await scratch.encode(.gradient(width: 800, height: 600), as: "in.jpg")
            let strict = PhotoNormalizer(policy: PhotoPolicy(maxPixels: 400_000))
            let refusal = rejection { _ = try strict.normalize(input) }
            #expect(refusal?.code == .dimensionsTooLarge)
            #expect(refusal?.operatorDetail == "header declares 800×600 = 480000 pixels, limit 400000")
        }

        enum Damage: String, CaseIterable, Sendable {
            case jpegHalf, jpegHeaderOnly, pngHalf, pngHeaderOnly, heicHalf, heicHeaderCut,
                 jpegMagicThenNoise, pngSignatureThenNoise, heicBrandThenNoise
        }

        @Test("truncated or corrupt data is refused, never half-written", arguments: Damage.allCases)
        func damaged(_ damage: Damage) async throws {
            let scratch = try Scratch()
            let raster = Raster.gradient(width: 640, height: 480)
            func cut(_ data: Data, keeping fraction: Double) -> Data { data.prefix(Int(Double(data.count) * fraction)) }
            let input: Data = switch damage {
            case .jpegHalf: cut(try await scratch.encode(raster, as: "x.jpg"), keeping: 0.5)
            case .jpegHeaderOnly: try await scratch.encode(raster, as: "x.jpg").prefix(400)
            case .pngHalf: cut(try await scratch.encode(raster, as: "x.png"), keeping: 0.5)
            case .pngHeaderOnly: try await scratch.encode(raster, as: "x.png").prefix(40)
            case .heicHalf: cut(try await scratch.encode(raster, as: "x.heic"), keeping: 0.5)
            case .heicHeaderCut: try await scratch.encode(raster, as: "x.heic").prefix(200)
            case .jpegMagicThenNoise: Data([0xFF, 0xD8, 0xFF, 0xE0]) + Crafted.noise(count: 8192, seed: 7)
            case .pngSignatureThenNoise: Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + Crafted.noise(count: 8192, seed: 8)
            case .heicBrandThenNoise: Crafted.ftyp(major: "heic", compatible: ["mif1", "heic"]) + Crafted.noise(count: 8192, seed: 9)
            }
            let refusal = try expectRefused(input, code: .corrupt)
            #expect(refusal?.userMessage == "This photo could not be read. Please choose another photo.")
            #expect(refusal?.operatorDetail.isEmpty == false)
        }

        @Test("a JPEG cut short still has a readable header, but no output")
        func headerOnlyInspection() async throws {
            let scratch = try Scratch()
            let input = try await scratch.encode(.gradient(width: 640, height: 480), as: "x.jpg").prefix(2000)
            // inspect reads only the header: it cannot and need not see the damage.
            #expect(try normalizer.inspect(input) == PhotoInfo(format: .jpeg, width: 640, height: 480, orientation: 1))
            #expect(rejection { _ = try normalizer.normalize(input) }?.code == .corrupt)
        }
    }
}
