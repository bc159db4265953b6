import Foundation
import Imaging
import Testing

extension ImagingTests {
    /// `PhotoHeader`, Imaging's own header parsers, on their own: no libvips.
    @Suite struct HeaderParser {
        /// SOI, then `segments` (marker byte, body) with their lengths.
        static func jpeg(_ segments: [(UInt8, [UInt8])], prefix: [UInt8] = []) -> Data {
            var bytes: [UInt8] = [0xFF, 0xD8] + prefix
            for (marker, body) in segments {
                bytes += [0xFF, marker, UInt8((body.count + 2) >> 8), UInt8((body.count + 2) & 0xFF)] + body
            }
            return Data(bytes)
        }

        /// A frame header body: 8-bit, `height`×`width`, one component.
        static func frame(width: Int, height: Int) -> [UInt8] {
            [8, UInt8(height >> 8), UInt8(height & 0xFF), UInt8(width >> 8), UInt8(width & 0xFF), 1, 1, 0x11, 0]
        }

        @Test("real files: the parsed size is the one vipsheader reports")
        func realFiles() async throws {
            let scratch = try Scratch()
            for name in ["a.jpg", "b.png", "c.heic"] {
                let data = try await scratch.encode(.gradient(width: 123, height: 45), as: name)
                let header = try PhotoHeader.read(data)
                #expect((header.width, header.height) == (123, 45), "\(name): \(header)")
            }
            // Progressive: the frame is SOF2.
            _ = try await scratch.encode(.gradient(width: 77, height: 31), as: "p.jpg", options: "interlace")
            #expect(try PhotoHeader.read(try scratch.read("p.jpg")) == PhotoHeader(format: .jpeg, width: 77, height: 31))
        }

        @Test("JPEG markers are walked the way libjpeg walks them")
        func jpegMarkers() throws {
            // DHT (C4), JPG (C8) and DAC (CC) sit in the SOF range but are not frames.
            let tables = Self.jpeg([(0xE0, Array("JFIF\0".utf8)), (0xC4, [0, 1, 2]), (0xC8, [9]), (0xCC, [1, 2]),
                                    (0xC0, Self.frame(width: 300, height: 200))])
            #expect(try PhotoHeader.read(tables) == PhotoHeader(format: .jpeg, width: 300, height: 200))
            for sof: UInt8 in [0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF] {
                let data = Self.jpeg([(0xDB, [0, 1]), (sof, Self.frame(width: 5, height: 7))])
                #expect(try PhotoHeader.read(data) == PhotoHeader(format: .jpeg, width: 5, height: 7), "SOF \(sof)")
            }
            // Fill bytes before a marker, stray bytes after a segment, and a
            // stuffed FF00 are skipped as libjpeg skips them.
            var messy = [UInt8](Self.jpeg([(0xE1, [1, 2, 3])]))
            messy += [0x12, 0x34, 0xFF, 0x00, 0xFF, 0xFF, 0xFF, 0xD0, 0xFF, 0x01]
            messy += [UInt8](Self.jpeg([(0xC0, Self.frame(width: 1, height: 65_535))]).dropFirst(2))
            #expect(try PhotoHeader.read(Data(messy)) == PhotoHeader(format: .jpeg, width: 1, height: 65_535))
            // Only the first frame counts.
            let two = Self.jpeg([(0xC0, Self.frame(width: 10, height: 10)), (0xC2, Self.frame(width: 60_000, height: 60_000))])
            #expect(try PhotoHeader.read(two) == PhotoHeader(format: .jpeg, width: 10, height: 10))
        }

        @Test("malformed JPEG headers are corrupt")
        func jpegCorrupt() {
            let cases: [(Data, String)] = [
                (Data([0xFF, 0xD8, 0xFF]), "JPEG ends before its frame header (SOF)"),
                (Self.jpeg([(0xE0, [0, 0])]), "JPEG ends before its frame header (SOF)"),
                (Self.jpeg([(0xE0, [])]) + Data([0xFF, 0xD9]), "JPEG reaches EOI before its frame header (SOF)"),
                (Self.jpeg([(0xDA, [0])]), "JPEG reaches SOS before its frame header (SOF)"),
                (Self.jpeg([]) + Data([0xFF, 0xD8]), "JPEG has a second SOI before its frame header (SOF)"),
                (Self.jpeg([(0xE0, [])]) + Data([0xFF, 0xC0, 0x00, 0x08, 8, 0, 1]), "JPEG frame header (FFC0) is truncated"),
                (Self.jpeg([(0xC0, [8, 0, 1]), (0xE0, [0, 0, 0])]), "JPEG frame header (FFC0) has length 5, under 8"),
                (Self.jpeg([(0xC0, Self.frame(width: 10, height: 0))]), "JPEG frame header (FFC0) declares an empty 10×0 image"),
                (Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x00]), "JPEG segment FFE0 has length 0, under 2"),
                // A length pointing past the end: the frame header is never reached.
                (Self.jpeg([(0xE0, [])]).dropLast(2) + Data([0xFF, 0xFF]) + Self.jpeg([(0xC0, Self.frame(width: 1, height: 1))]),
                 "JPEG ends before its frame header (SOF)"),
            ]
            for (input, detail) in cases {
                #expect(throws: PhotoRejection.corrupt(detail)) { try PhotoHeader.read(input) }
            }
        }

        @Test("PNG: IHDR must come first, 13 bytes, sizes within the format")
        func png() throws {
            #expect(try PhotoHeader.read(Crafted.pngClaiming(width: 100_000, height: 3)) == PhotoHeader(format: .png, width: 100_000, height: 3))
            #expect(try PhotoHeader.read(Crafted.pngClaiming(width: Int(Int32.max), height: 1)).width == Int(Int32.max))
            let signature = Data(Containers.png([]))
            var long = Data()
            long.append(bigEndian: 1)
            long.append(bigEndian: 1)
            let cases: [(Data, String)] = [
                (Crafted.pngClaiming(width: 1 << 31, height: 1), "PNG IHDR declares 2147483648×1, outside 1...2147483647"),
                (Crafted.pngClaiming(width: 5, height: 0), "PNG IHDR declares 5×0, outside 1...2147483647"),
                (Crafted.pngClaiming(width: 5, height: 5).prefix(28), "PNG ends before its IHDR chunk is complete"),
                (Containers.png([.init(type: "IHDR", body: long + Data(count: 9))]), "PNG IHDR chunk is 17 bytes long, not 13"),
                (Containers.png([.init(type: "IDAT", body: Data(count: 13))]), "PNG's first chunk is \"IDAT\", not IHDR"),
                (signature + Data(count: 40), "PNG's first chunk is \"\\0\\0\\0\\0\", not IHDR"),
            ]
            for (input, detail) in cases {
                #expect(throws: PhotoRejection.corrupt(detail)) { try PhotoHeader.read(input) }
            }
        }

        /// A minimal HEIF: ftyp, then meta with the given children.
        static func heif(_ metaChildren: [Data]) -> Data {
            Crafted.ftyp(major: "heic", compatible: ["mif1", "heic"])
                + Containers.fullBox("meta", metaChildren.reduce(Data(), +))
        }

        static func infe(id: Int, type: String) -> Data {
            Containers.fullBox("infe", version: 2, Data([UInt8(id >> 8), UInt8(id & 0xFF), 0, 0]) + Data(type.utf8) + Data([0]))
        }

        static func iinf(_ entries: [Data]) -> Data {
            Containers.fullBox("iinf", Data([0, UInt8(entries.count)]) + entries.reduce(Data(), +))
        }

        static func pitm(_ id: Int) -> Data {
            Containers.fullBox("pitm", Data([UInt8(id >> 8), UInt8(id & 0xFF)]))
        }

        static func ispe(_ width: Int, _ height: Int) -> Data {
            var body = Data()
            body.append(bigEndian: UInt32(width))
            body.append(bigEndian: UInt32(height))
            return Containers.fullBox("ispe", body)
        }

        /// `properties` in ipco; `associations` maps item IDs to 1-based
        /// property indices (7-bit form, version 0).
        static func iprp(_ properties: [Data], _ associations: [(Int, [Int])]) -> Data {
            var ipma = Data()
            ipma.append(bigEndian: UInt32(associations.count))
            for (item, indices) in associations {
                ipma.append(contentsOf: [UInt8(item >> 8), UInt8(item & 0xFF), UInt8(indices.count)])
                ipma.append(contentsOf: indices.map { UInt8($0) })
            }
            return Containers.box("iprp", Containers.box("ipco", properties.reduce(Data(), +)) + Containers.fullBox("ipma", ipma))
        }

        @Test("HEIF: the size is the primary item's ispe, whichever item it is")
        func heifPrimarySize() throws {
            // Item 1 is a hidden tile, item 2 the primary grid; properties in
            // ipco order: hvcC stand-in, tile ispe, grid ispe.
            let file = Self.heif([
                Self.pitm(2),
                Self.iinf([Self.infe(id: 1, type: "hvc1"), Self.infe(id: 2, type: "grid")]),
                Self.iprp([Containers.box("hvcC", Data(count: 4)), Self.ispe(512, 512), Self.ispe(4032, 3024)],
                          [(1, [1, 2]), (2, [3])]),
            ])
            #expect(try PhotoHeader.read(file) == PhotoHeader(format: .heic, width: 4032, height: 3024))
            // The essential bit (0x80) is not part of the index.
            let essential = Self.heif([
                Self.pitm(1), Self.iinf([Self.infe(id: 1, type: "hvc1")]),
                Self.iprp([Self.ispe(7, 9)], [(1, [0x81])]),
            ])
            #expect(try PhotoHeader.read(essential) == PhotoHeader(format: .heic, width: 7, height: 9))
            // Two ispe associated: the one named first wins, as in libheif.
            let twice = Self.heif([
                Self.pitm(1), Self.iinf([Self.infe(id: 1, type: "hvc1")]),
                Self.iprp([Self.ispe(1, 1), Self.ispe(60_000, 60_000)], [(1, [2, 1])]),
            ])
            #expect(try PhotoHeader.read(twice) == PhotoHeader(format: .heic, width: 60_000, height: 60_000))
        }

        @Test("HEIF: missing or broken pieces are corrupt or unsupported, with the reason")
        func heifRefusals() {
            let items = Self.iinf([Self.infe(id: 1, type: "hvc1")])
            let sizes = Self.iprp([Self.ispe(10, 10)], [(1, [1])])
            let cases: [(Data, PhotoRejection)] = [
                (Crafted.ftyp(major: "heic", compatible: []), .corrupt("HEIF item table (meta/iinf) missing or truncated")),
                (Self.heif([Self.pitm(1), sizes]), .corrupt("HEIF item table (meta/iinf) missing or truncated")),
                (Self.heif([Self.pitm(1), Self.iinf([]), sizes]), .corrupt("HEIF container declares no coded image")),
                (Self.heif([Self.pitm(1), Self.iinf([Self.infe(id: 1, type: "av01")]), sizes]),
                 .unsupportedType("HEIF container holds av01 images, only hvc1 (HEVC) is HEIC")),
                (Self.heif([items, sizes]), .corrupt("HEIF declares no readable primary item (meta/pitm)")),
                (Self.heif([Containers.fullBox("pitm"), items, sizes]), .corrupt("HEIF declares no readable primary item (meta/pitm)")),
                (Self.heif([Self.pitm(9), items, sizes]), .corrupt("HEIF primary item 9 is not in the item table (meta/iinf)")),
                (Self.heif([Self.pitm(1), items]), .corrupt("HEIF primary item 1 has no readable image size property (iprp/ipco/ispe)")),
                (Self.heif([Self.pitm(1), items, Self.iprp([Self.ispe(10, 10)], [(1, [2])])]),
                 .corrupt("HEIF primary item 1 has no readable image size property (iprp/ipco/ispe)")),
                (Self.heif([Self.pitm(1), items, Self.iprp([Self.ispe(0, 10)], [(1, [1])])]),
                 .corrupt("HEIF primary item 1 declares an empty 0×10 image")),
                (Crafted.ftyp(major: "msf1", compatible: ["msf1"]) + Containers.box("moov"),
                 .unsupportedType("HEIF image sequence (a moov track with no primary still image): image sequences are not supported")),
                (Self.heif([items, sizes]) + Containers.box("moov"),
                 .unsupportedType("HEIF image sequence (a moov track with no primary still image): image sequences are not supported")),
                (Self.heif([Containers.fullBox("hdlr", Data(count: 20))]) + Containers.box("moov"),
                 .unsupportedType("HEIF image sequence (a moov track with no primary still image): image sequences are not supported")),
            ]
            for (input, expected) in cases {
                #expect(throws: expected) { try PhotoHeader.read(input) }
            }
        }

        @Test("HEIF: a 64-bit box size and a box running to the end of the file are followed")
        func heifBoxSizes() throws {
            let meta = Containers.fullBox("meta", Self.pitm(1) + Self.iinf([Self.infe(id: 1, type: "hvc1")])
                                          + Self.iprp([Self.ispe(3, 4)], [(1, [1])]))
            var large = Data()
            large.append(bigEndian: 1)
            large.append(Data("free".utf8))
            large.append(bigEndian: 0)
            large.append(bigEndian: 16 + 5)
            large.append(Data(count: 5))
            var toEnd = Data()
            toEnd.append(bigEndian: 0)
            toEnd.append(Data("meta".utf8))
            toEnd.append(meta.dropFirst(8))
            let file = Crafted.ftyp(major: "heic", compatible: []) + large + toEnd
            #expect(try PhotoHeader.read(file) == PhotoHeader(format: .heic, width: 3, height: 4))
        }

        @Test("worst-case layouts end in one bounded pass")
        func pathologicalLayouts() {
            // 2 MB of standalone markers: a million steps, no frame.
            let markers = Data([0xFF, 0xD8]) + Data(repeating: 0, count: 2 << 20).enumerated().map { $0.offset % 2 == 0 ? 0xFF : 0x01 }
            #expect(throws: PhotoRejection.corrupt("JPEG ends before its frame header (SOF)")) { try PhotoHeader.read(markers) }
            // 2 MB of empty boxes, at the top and inside meta: the walk stops
            // after maxBoxesPerContainer of them.
            var empty = Data()
            for _ in 0..<(1 << 18) { empty.append(Containers.box("free")) }
            #expect(throws: PhotoRejection.corrupt("HEIF item table (meta/iinf) missing or truncated")) {
                try PhotoHeader.read(Crafted.ftyp(major: "heic", compatible: []) + empty)
            }
            #expect(throws: PhotoRejection.corrupt("HEIF item table (meta/iinf) missing or truncated")) {
                try PhotoHeader.read(Self.heif([empty, Self.pitm(1), Self.iinf([Self.infe(id: 1, type: "hvc1")])]))
            }
            // An ipma claiming four billion entries holds as many as fit.
            var ipma = Data()
            ipma.append(bigEndian: UInt32.max)
            ipma.append(Data(repeating: 0, count: 3 << 18))
            let lying = Self.heif([
                Self.pitm(1), Self.iinf([Self.infe(id: 1, type: "hvc1")]),
                Containers.box("iprp", Containers.box("ipco", Self.ispe(1, 1)) + Containers.fullBox("ipma", ipma)),
            ])
            #expect(throws: PhotoRejection.corrupt("HEIF primary item 1 has no readable image size property (iprp/ipco/ispe)")) {
                try PhotoHeader.read(lying)
            }
        }

        @Test("every prefix and thousands of mutations of real headers parse or refuse, never crash")
        func hostileBytes() async throws {
            let scratch = try Scratch()
            let seeds = [
                try await scratch.encode(.quadrants(width: 40, height: 30), as: "s.jpg"),
                try await scratch.encode(.quadrants(width: 40, height: 30), as: "s.png"),
                try await scratch.encode(.quadrants(width: 40, height: 30), as: "s.heic"),
            ]
            var outcomes = [String: Int]()
            func attempt(_ data: Data) {
                do {
                    _ = try PhotoHeader.read(data)
                    outcomes["parsed", default: 0] += 1
                } catch {
                    outcomes["\(error.code)", default: 0] += 1
                }
            }
            for seed in seeds {
                for length in 0...min(seed.count, 1200) { attempt(seed.prefix(length)) }
                // Seeded byte flips in the first 600 bytes, where the headers are.
                let noise = [UInt8](Crafted.noise(count: 3 * 3000, seed: UInt64(seed.count)))
                for round in 0..<3000 {
                    var bytes = [UInt8](seed)
                    let at = Int(noise[3 * round]) << 8 | Int(noise[3 * round + 1])
                    bytes[at % min(bytes.count, 600)] = noise[3 * round + 2]
                    attempt(Data(bytes))
                }
            }
            #expect(outcomes["parsed", default: 0] > 1000, "\(outcomes)")
            #expect(outcomes["corrupt", default: 0] > 1000, "\(outcomes)")
        }
    }
}
