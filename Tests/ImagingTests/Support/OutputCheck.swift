import Foundation
import Testing

/// Reads a normalised JPEG with tools that share no code with Imaging's
/// save path: exiftool (Perl) for metadata, `vipsheader` for the header.
enum OutputCheck {
    /// exiftool groups a bare baseline JPEG may show; anything else (EXIF,
    /// GPS, XMP, IPTC, ICC_Profile, Photoshop, MakerNotes, …) is metadata
    /// that should have been stripped.
    static let allowedGroups: Set<String> = ["SourceFile", "ExifTool", "File", "JFIF", "Composite"]
    static let forbiddenVipsFields = ["exif-data", "xmp-data", "iptc-data", "icc-profile-data", "jpeg-comment", "orientation"]

    /// Checks the recipe's promises for one output and returns its pixels.
    @discardableResult
    static func expectCleanJPEG(
        _ jpeg: Data, side: Int, in scratch: Scratch,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Raster {
        #expect(jpeg.starts(with: [0xFF, 0xD8, 0xFF]), "not JPEG", sourceLocation: sourceLocation)
        let name = "output-\(UUID().uuidString).jpg"
        let file = try scratch.write(jpeg, to: name)

        let header = String(decoding: try await Tool.run("vipsheader", "-a", file), as: UTF8.self)
        let fields = Dictionary(
            header.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            },
            uniquingKeysWith: { first, _ in first })
        #expect(fields["width"] == "\(side)", "width \(fields["width"] ?? "?")", sourceLocation: sourceLocation)
        #expect(fields["height"] == "\(side)", "height \(fields["height"] ?? "?")", sourceLocation: sourceLocation)
        #expect(side <= 1024, sourceLocation: sourceLocation)
        #expect(fields["bands"] == "3", sourceLocation: sourceLocation)
        #expect(fields["format"] == "uchar", sourceLocation: sourceLocation)
        #expect(fields["interpretation"] == "srgb", sourceLocation: sourceLocation)
        for field in forbiddenVipsFields {
            #expect(fields[field] == nil, "vipsheader shows \(field)", sourceLocation: sourceLocation)
        }

        let tags = try await exifTool(file)
        let groups = Set(tags.keys.map { $0.split(separator: ":").first.map(String.init) ?? $0 })
        #expect(groups.isSubset(of: allowedGroups), "metadata groups left: \(groups.subtracting(allowedGroups).sorted())",
                sourceLocation: sourceLocation)
        let suspicious = tags.keys.filter { $0.localizedCaseInsensitiveContains("GPS") || $0.localizedCaseInsensitiveContains("Comment") }
        #expect(suspicious.isEmpty, "tags left: \(suspicious.sorted())", sourceLocation: sourceLocation)

        return try await pixels(of: file)
    }

    /// Every tag exiftool finds, keyed "Group:Tag".
    static func exifTool(_ file: String) async throws -> [String: Any] {
        let json = try await Tool.run("exiftool", "-j", "-G", "-a", "-u", file)
        let array = try JSONSerialization.jsonObject(with: json) as? [[String: Any]]
        return array?.first ?? [:]
    }

    /// Decoded 8-bit RGB pixels of an image file.
    static func pixels(of file: String) async throws -> Raster {
        let ppm = file + ".ppm"
        try await Tool.run("vips", "copy", file, ppm)
        return try Raster(ppm: Data(contentsOf: URL(fileURLWithPath: ppm)))
    }
}
