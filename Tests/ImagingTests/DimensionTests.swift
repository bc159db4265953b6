import Foundation
import Imaging
import Testing

extension ImagingTests {
    /// Imaging's own header parse decides the size limits before libvips
    /// sees the bytes. Inputs are small real files whose size fields were
    /// rewritten, so only the declared size is out of the ordinary.
    @Suite struct Dimensions {
        let normalizer = PhotoNormalizer()

        enum Kind: String, Sendable, CaseIterable {
            case jpeg, png, heic
        }

        /// A real file of `kind`, 64×48, declaring `width`×`height`.
        static func declaring(_ kind: Kind, width: Int, height: Int, in scratch: Scratch) async throws -> Data {
            let raster = Raster.quadrants(width: 64, height: 48)
            switch kind {
            case .jpeg:
                return try Containers.jpeg(try await scratch.encode(raster, as: "x.jpg"), declaringWidth: width, height: height)
            case .png:
                var chunks = try Containers.pngChunks(try await scratch.encode(raster, as: "x.png"))
                var ihdr = Data()
                ihdr.append(bigEndian: UInt32(width))
                ihdr.append(bigEndian: UInt32(height))
                chunks[0].body.replaceSubrange(0..<8, with: ihdr)
                return Containers.png(chunks)
            case .heic:
                return try Containers.heif(try await scratch.encode(raster, as: "x.heic"), declaringWidth: width, height: height)
            }
        }

        // Before Imaging parsed HEIF itself, libheif refused this header with
        // its own security limit and the photo was reported as unreadable.
        @Test("a header declaring 60000×60000 is too large, not unreadable", arguments: Kind.allCases)
        func sixtyThousandSquared(_ kind: Kind) async throws {
            let scratch = try Scratch()
            let input = try await Self.declaring(kind, width: 60_000, height: 60_000, in: scratch)
            for refusal in [rejection { _ = try normalizer.inspect(input) }, rejection { _ = try normalizer.normalize(input) }] {
                #expect(refusal?.code == .dimensionsTooLarge, "\(kind): \(String(describing: refusal))")
                #expect(refusal?.operatorDetail == "header declares 60000×60000 = 3600000000 pixels, limit 100000000")
                #expect(refusal?.userMessage == "This photo is too large to process. Please choose a smaller photo.")
            }
        }

        @Test("a side past the limit is too large in every format", arguments: Kind.allCases)
        func longSide(_ kind: Kind) async throws {
            let scratch = try Scratch()
            let input = try await Self.declaring(kind, width: 40_000, height: 16, in: scratch)
            let refusal = rejection { _ = try normalizer.normalize(input) }
            #expect(refusal?.code == .dimensionsTooLarge, "\(kind): \(String(describing: refusal))")
            #expect(refusal?.operatorDetail == "header declares 40000×16, side limit 16384")
        }

        @Test("the policy's limits apply to the parsed size", arguments: Kind.allCases)
        func policyLimits(_ kind: Kind) async throws {
            let scratch = try Scratch()
            let input = try await Self.declaring(kind, width: 64, height: 48, in: scratch)
            #expect(try normalizer.inspect(input) == PhotoInfo(format: kind == .jpeg ? .jpeg : kind == .png ? .png : .heic,
                                                              width: 64, height: 48, orientation: 1))
            let strict = PhotoNormalizer(policy: PhotoPolicy(maxSide: 63))
            #expect(rejection { _ = try strict.inspect(input) }?.operatorDetail == "header declares 64×48, side limit 63")
            let fewPixels = PhotoNormalizer(policy: PhotoPolicy(maxPixels: 3071))
            #expect(rejection { _ = try fewPixels.inspect(input) }?.operatorDetail == "header declares 64×48 = 3072 pixels, limit 3071")
        }

        @Test("a header declaring no pixels is corrupt", arguments: Kind.allCases)
        func emptyImage(_ kind: Kind) async throws {
            let scratch = try Scratch()
            let input = try await Self.declaring(kind, width: 0, height: 48, in: scratch)
            let refusal = rejection { _ = try normalizer.inspect(input) }
            #expect(refusal?.code == .corrupt, "\(kind): \(String(describing: refusal))")
            #expect(refusal?.operatorDetail.contains("0×48") == true, "\(String(describing: refusal))")
        }

        @Test("a header that cannot be parsed is corrupt, with the reason for the operator")
        func unparsableHeaders() async throws {
            let scratch = try Scratch()
            let jpeg = try await scratch.encode(.quadrants(width: 64, height: 48), as: "x.jpg")
            // SOI, then straight into a scan: no frame header anywhere.
            let sosFirst = Data([0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x08]) + jpeg.dropFirst(2)
            var pngChunks = try Containers.pngChunks(try await scratch.encode(.quadrants(width: 64, height: 48), as: "x.png"))
            pngChunks.insert(Containers.Chunk(type: "tEXt", body: Data("Comment\0first".utf8)), at: 0)
            let heic = try await scratch.encode(.quadrants(width: 64, height: 48), as: "x.heic")
            let primary = try Containers.heifPrimaryItem(heic)

            let cases: [(Data, String)] = [
                (sosFirst, "JPEG reaches SOS before its frame header (SOF)"),
                (Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01]) + Data(count: 64), "JPEG segment FFE0 has length 1, under 2"),
                (Containers.png(pngChunks), "PNG's first chunk is \"tEXt\", not IHDR"),
                (try Containers.heif(heic, primaryItem: primary + 40), "HEIF primary item \(primary + 40) is not in the item table (meta/iinf)"),
            ]
            for (input, detail) in cases {
                let refusal = rejection { _ = try normalizer.inspect(input) }
                #expect(refusal?.code == .corrupt)
                #expect(refusal?.operatorDetail == detail)
            }
        }
    }
}
