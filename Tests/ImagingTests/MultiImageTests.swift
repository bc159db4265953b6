import Foundation
import Imaging
import Testing

extension ImagingTests {
    /// Files holding more than one picture give one by a fixed rule: HEIF's
    /// primary item, an animated PNG's default image, a JPEG's first frame.
    /// Each input holds a red and a blue picture; the output's colour says
    /// which one was used.
    @Suite struct MultiImage {
        let normalizer = PhotoNormalizer()

        static let red = RGB(r: 220, g: 30, b: 30)
        static let blue = RGB(r: 30, g: 30, b: 220)

        func outputColour(_ input: Data, in scratch: Scratch) async throws -> RGB {
            let photo = try normalizer.normalize(input)
            let pixels = try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 48, in: scratch)
            return pixels[24, 24]
        }

        /// The top-level images `heif-info` (libheif's own tool) lists:
        /// their item IDs and which is primary.
        static func heifImages(_ path: String) async throws -> [(id: Int, primary: Bool)] {
            let text = String(decoding: try await Tool.run("heif-info", path), as: UTF8.self)
            return text.split(separator: "\n").filter { $0.hasPrefix("image: ") }.compactMap { line in
                guard let open = line.range(of: "(id="), let close = line[open.upperBound...].firstIndex(of: ")"),
                      let id = Int(line[open.upperBound..<close]) else { return nil }
                return (id, line.hasSuffix("primary"))
            }
        }

        @Test("HEIF: the primary item is the photo, also when it is not the first image")
        func heifPrimary() async throws {
            let scratch = try Scratch()
            _ = try await scratch.encode(Raster(width: 64, height: 48) { _, _ in Self.red }, as: "red.png")
            _ = try await scratch.encode(Raster(width: 64, height: 48) { _, _ in Self.blue }, as: "blue.png")
            // heif-enc stores its inputs in order and makes the first primary.
            try await Tool.run("heif-enc", "-q", "90", scratch.path("red.png"), scratch.path("blue.png"), "-o", scratch.path("two.heic"))
            let images = try await Self.heifImages(scratch.path("two.heic"))
            try #require(images.count == 2 && images[0].primary && !images[1].primary, "heif-enc wrote \(images)")
            let original = try scratch.read("two.heic")
            #expect(try await outputColour(original, in: scratch).isClose(to: Self.red, tolerance: 24))

            // Same file, pitm now naming the second image: the blue one.
            let swapped = try Containers.heif(original, primaryItem: images[1].id)
            try scratch.write(swapped, to: "two-second-primary.heic")
            let after = try await Self.heifImages(scratch.path("two-second-primary.heic"))
            try #require(after.map(\.id) == images.map(\.id) && !after[0].primary && after[1].primary, "patched: \(after)")
            let colour = try await outputColour(swapped, in: scratch)
            #expect(colour.isClose(to: Self.blue, tolerance: 24), "primary is blue, output is \(colour)")
            #expect(try normalizer.inspect(swapped) == PhotoInfo(format: .heic, width: 64, height: 48, orientation: 1))
        }

        @Test("HEIF: a still image that also carries a movie track is read by its primary item")
        func heifStillWithTrack() async throws {
            let scratch = try Scratch()
            let still = try await scratch.encode(Raster(width: 64, height: 48) { _, _ in Self.red }, as: "still.heic")
            let withTrack = still + Containers.box("moov", Containers.fullBox("mvhd", Data(count: 96)))
            #expect(try await outputColour(withTrack, in: scratch).isClose(to: Self.red, tolerance: 24))
        }

        @Test("HEIF: an image sequence with no primary still image is refused as unsupported")
        func heifSequence() throws {
            let scratch = try Scratch()
            let sequence = Crafted.ftyp(major: "msf1", compatible: ["msf1", "iso8", "hevc"])
                + Containers.box("moov", Containers.fullBox("mvhd", Data(count: 96)) + Containers.box("trak"))
                + Containers.box("mdat", Crafted.noise(count: 512, seed: 3))
            #expect(PhotoFormat(sniffing: sequence) == .heic)
            try scratch.write(sequence, to: "sequence.heic")
            for refusal in [rejection { _ = try normalizer.inspect(sequence) }, rejection { _ = try normalizer.normalize(sequence) },
                            rejection { try normalizer.normalizeFile(at: scratch.path("sequence.heic"), to: scratch.path("out.jpg")) }] {
                #expect(refusal?.code == .unsupportedType, "\(String(describing: refusal))")
                #expect(refusal?.operatorDetail.contains("image sequences are not supported") == true, "\(String(describing: refusal))")
                #expect(refusal?.userMessage == unsupportedMessage)
            }
            #expect(!scratch.exists("out.jpg"))
        }

        @Test("APNG: the default image is the photo, the animation frames are ignored")
        func animatedPNG() async throws {
            let scratch = try Scratch()
            let redChunks = try Containers.pngChunks(try await scratch.encode(Raster(width: 64, height: 48) { _, _ in Self.red }, as: "red.png"))
            let blueChunks = try Containers.pngChunks(try await scratch.encode(Raster(width: 64, height: 48) { _, _ in Self.blue }, as: "blue.png"))
            try #require(redChunks.first?.type == "IHDR" && redChunks.last?.type == "IEND")

            // acTL after IHDR, the red IDAT left outside the animation (no
            // fcTL before it), then one blue frame: fcTL + fdAT carrying the
            // blue PNG's compressed data.
            func be32(_ values: Int...) -> Data {
                var data = Data()
                for value in values { data.append(bigEndian: UInt32(value)) }
                return data
            }
            let frameControl = be32(0, 64, 48, 0, 0) + Data([0, 1, 0, 10, 0, 0]) // seq, size, offset, delay 1/10 s, no dispose, source
            let blueData = blueChunks.filter { $0.type == "IDAT" }.reduce(Data()) { $0 + $1.body }
            var chunks = [redChunks[0], Containers.Chunk(type: "acTL", body: be32(1, 0))]
            chunks += redChunks.dropFirst().dropLast()
            chunks += [
                Containers.Chunk(type: "fcTL", body: frameControl),
                Containers.Chunk(type: "fdAT", body: be32(1) + blueData),
                Containers.Chunk(type: "IEND", body: Data()),
            ]
            let apng = Containers.png(chunks)
            try scratch.write(apng, to: "animated.png")
            // exiftool reads the animation control chunk: the fixture is an APNG.
            let tags = try await OutputCheck.exifTool(scratch.path("animated.png"))
            #expect("\(tags["PNG:AnimationFrames"] ?? "none")" == "1", "\(tags.keys.sorted())")

            let colour = try await outputColour(apng, in: scratch)
            #expect(colour.isClose(to: Self.red, tolerance: 24), "default image is red, output is \(colour)")
        }

        @Test("JPEG: of two concatenated images the first is the photo")
        func concatenatedJPEG() async throws {
            let scratch = try Scratch()
            let red = try await scratch.encode(Raster(width: 64, height: 48) { _, _ in Self.red }, as: "red.jpg")
            let blue = try await scratch.encode(Raster(width: 96, height: 96) { _, _ in Self.blue }, as: "blue.jpg")
            let both = red + blue
            #expect(try normalizer.inspect(both) == PhotoInfo(format: .jpeg, width: 64, height: 48, orientation: 1))
            #expect(try await outputColour(both, in: scratch).isClose(to: Self.red, tolerance: 24))
        }
    }
}
