import Foundation
import Imaging
import Testing

extension ImagingTests {
    /// No location or other personal metadata may leave the server. Inputs
    /// carry GPS, XMP, IPTC, a comment and an ICC profile; exiftool confirms
    /// they are present before and absent after.
    @Suite struct Metadata {
        let normalizer = PhotoNormalizer()

        static let tagging = [
            "-GPSLatitude=48.8583", "-GPSLatitudeRef=N", "-GPSLongitude=2.2945", "-GPSLongitudeRef=E",
            "-GPSAltitude=35", "-XMP-dc:Creator=Jane Doe", "-XMP-dc:Description=home",
            "-Artist=Jane Doe", "-Copyright=Jane Doe", "-Make=ExamplePhone", "-Model=Pro",
        ]

        @Test("GPS, EXIF, XMP, IPTC, comments and ICC are stripped from JPEG")
        func jpeg() async throws {
            let scratch = try Scratch()
            _ = try await scratch.encode(.quadrants(width: 300, height: 200), as: "plain.jpg", options: "Q=95")
            // icc_transform converts to Display P3 and embeds its profile.
            try await Tool.run("vips", "icc_transform", scratch.path("plain.jpg"), scratch.path("in.jpg") + "[Q=95]", "p3")
            try await Tool.run(["exiftool", "-q", "-overwrite_original"] + Self.tagging
                         + ["-IPTC:Keywords=private", "-Comment=taken at home", scratch.path("in.jpg")])

            let before = try await OutputCheck.exifTool(scratch.path("in.jpg"))
            for key in ["EXIF:GPSLatitude", "XMP:Creator", "IPTC:Keywords", "File:Comment", "EXIF:Artist"] {
                #expect(before[key] != nil, "fixture lacks \(key): \(before.keys.sorted())")
            }
            #expect(before.keys.contains { $0.hasPrefix("ICC_Profile:") }, "fixture lacks an ICC profile")

            let photo = try normalizer.normalize(try scratch.read("in.jpg"))
            try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 200, in: scratch)
            for marker in ["Exif\0\0", "http://ns.adobe.com/xap", "ICC_PROFILE", "Photoshop 3.0", "taken at home", "Jane Doe"] {
                #expect(photo.jpegData.range(of: Data(marker.utf8)) == nil, "output still contains \(marker)")
            }
        }

        @Test("GPS is stripped from PNG and HEIC", arguments: ["in.png", "in.heic"])
        func otherFormats(name: String) async throws {
            let scratch = try Scratch()
            _ = try await scratch.encode(.quadrants(width: 300, height: 200), as: name)
            try await Tool.run(["exiftool", "-q", "-overwrite_original"] + Self.tagging + [scratch.path(name)])
            let before = try await OutputCheck.exifTool(scratch.path(name))
            #expect(before.keys.contains { $0.contains("GPSLatitude") }, "fixture lacks GPS: \(before.keys.sorted())")

            let photo = try normalizer.normalize(try scratch.read(name))
            try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 200, in: scratch)
            #expect(photo.jpegData.range(of: Data("Jane Doe".utf8)) == nil)
        }
    }
}
