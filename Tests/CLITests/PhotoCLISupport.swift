import CArchive
import ChildProcesses
import Foundation
import Lifecycle
import SQLiteBackend
import Testing

/// Runs a command-line tool (vips, vipsheader, exiftool) and returns its stdout.
@discardableResult
func photoTool(_ arguments: String...) async throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    environment["VIPS_CONCURRENCY"] = "1"
    process.environment = environment
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString)").path
    _ = FileManager.default.createFile(atPath: output, contents: nil)
    defer { try? FileManager.default.removeItem(atPath: output) }
    process.standardOutput = FileHandle(forWritingAtPath: output)
    process.standardError = FileHandle(forWritingAtPath: "/dev/null")
    try process.run()
    await process.exited()
    guard process.terminationStatus == 0 else {
        throw PhotoToolFailure(description: "\(arguments.joined(separator: " ")) exited \(process.terminationStatus) (the tests need libvips-tools and libimage-exiftool-perl)")
    }
    return try String(contentsOfFile: output, encoding: .utf8)
}

struct PhotoToolFailure: Error, CustomStringConvertible {
    let description: String
}

/// Checks a normalised photo with readers that share no code with the recipe's save
/// path: `vipsheader -a` for the header, exiftool for every metadata group.
func expectCleanSquareJPEG(atPath path: String, side: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let header = try await photoTool("vipsheader", "-a", path)
    let fields = Dictionary(header.split(separator: "\n").compactMap { line -> (String, String)? in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }, uniquingKeysWith: { first, _ in first })
    #expect(fields["vips-loader"] == "jpegload", "not a JPEG: \(fields["vips-loader"] ?? "?")", sourceLocation: sourceLocation)
    #expect(fields["width"] == "\(side)" && fields["height"] == "\(side)",
            "\(fields["width"] ?? "?")×\(fields["height"] ?? "?"), expected \(side)²", sourceLocation: sourceLocation)
    #expect(fields["interpretation"] == "srgb" && fields["bands"] == "3", sourceLocation: sourceLocation)
    for field in ["exif-data", "xmp-data", "iptc-data", "icc-profile-data", "jpeg-comment", "orientation"] {
        #expect(fields[field] == nil, "vipsheader shows \(field)", sourceLocation: sourceLocation)
    }
    let json = try await photoTool("exiftool", "-j", "-G", "-a", "-u", path)
    let tags = (try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])?.first ?? [:]
    let groups = Set(tags.keys.compactMap { $0.split(separator: ":").first.map(String.init) })
    let allowed: Set<String> = ["SourceFile", "ExifTool", "File", "JFIF", "Composite"]
    #expect(groups.isSubset(of: allowed), "metadata left: \(groups.subtracting(allowed).sorted())", sourceLocation: sourceLocation)
}

/// Files the product refuses, each with the exact message its uploader sees.
enum RefusedPhoto {
    static let wrongType = "This file type is not supported. Please use JPG, PNG, or HEIC."
    static let tooLarge = "Photo must be under 10MB."
    static let tooManyPixels = "This photo is too large to process. Please choose a smaller photo."
    static let unreadable = "This photo could not be read. Please choose another photo."

    /// Writes every refused file into `directory`: name → expected message.
    static func make(in directory: String) async throws -> [String: String] {
        let demo = repositoryRoot + "/Jobs/demo/photos/"
        func write(_ data: Data, _ name: String) throws { try data.write(to: URL(fileURLWithPath: directory + "/" + name)) }
        func cut(_ file: String, _ name: String) throws {
            let whole = try Data(contentsOf: URL(fileURLWithPath: demo + file))
            try write(whole.prefix(whole.count / 2), name)
        }
        var oversized = Data([0xFF, 0xD8, 0xFF, 0xE0])
        oversized.append(Data(count: 10_485_761 - oversized.count))
        try write(oversized, "ten-mb-plus-one.jpg")
        // Real files of the other formats, named .jpg as an uploader might.
        for format in ["gif", "webp", "tif"] {
            try await photoTool("vips", "copy", demo + "trail.jpg", directory + "/real.\(format)")
            try FileManager.default.moveItem(atPath: directory + "/real.\(format)", toPath: directory + "/\(format).jpg")
        }
        try write(Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>"#.utf8), "svg.jpg")
        try write(Data("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n".utf8), "pdf.jpg")
        try write(Data("just some text, renamed\n".utf8), "text.jpg")
        try write(pngHeader(width: 100_000, height: 100_000), "bomb.png")
        try cut("trail.jpg", "truncated.jpg")
        try cut("avatar-alpha.png", "truncated.png")
        try cut("portrait.heic", "truncated.heic")
        var generator = SystemRandomNumberGenerator()
        try write(Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }), "random.jpg")
        return [
            "ten-mb-plus-one.jpg": tooLarge, "gif.jpg": wrongType, "webp.jpg": wrongType, "tif.jpg": wrongType,
            "svg.jpg": wrongType, "pdf.jpg": wrongType, "text.jpg": wrongType, "bomb.png": tooManyPixels,
            "truncated.jpg": unreadable, "truncated.png": unreadable, "truncated.heic": unreadable, "random.jpg": wrongType,
        ]
    }

    /// A valid PNG signature and IHDR that claim `width`×`height`, with one tiny IDAT:
    /// a few dozen bytes that would decode to tens of gigabytes.
    static func pngHeader(width: UInt32, height: UInt32) -> Data {
        func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
            let typed = Array(type.utf8) + body
            return bigEndian(UInt32(body.count)) + typed + bigEndian(crc32(typed))
        }
        let ihdr = bigEndian(width) + bigEndian(height) + [8, 2, 0, 0, 0]
        let idat: [UInt8] = [0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01]
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", ihdr) + chunk("IDAT", idat) + chunk("IEND", []))
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }

    /// zlib's CRC-32, the checksum every PNG chunk carries.
    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        UInt32(CArchive.crc32(0, bytes, uInt(bytes.count)))
    }
}

extension Workspace {
    /// Each account whose photo column names a file, as `photos list --json` shows it: her
    /// column's key and where it stands (an account a refused upload left without a photo,
    /// listed with no `file`, is not among them).
    func profilePhotos() async throws -> [String: (file: String, state: String)] {
        let listed = try await run(["photos", "list", "--json", "--limit", "100000"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let rows = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
        return Dictionary(rows.compactMap { row in
            guard let account = row["account"] as? String, let file = row["file"] as? String, let state = row["state"] as? String else { return nil }
            return (account, (file, state))
        }, uniquingKeysWith: { first, _ in first })
    }

    /// Every file under blobs/accounts with its size and modification time.
    func blobTree() throws -> [String: String] {
        let root = blobs + "/accounts"
        var tree: [String: String] = [:]
        for case let relative as String in FileManager.default.enumerator(atPath: root) ?? .init() {
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/" + relative)
            guard attributes[.type] as? FileAttributeType == .typeRegular else { continue }
            let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            tree[relative] = "\(attributes[.size] ?? 0) \(modified)"
        }
        return tree
    }

    /// Through `integerNow`, on a thread of its own: for PostgreSQL that is a psql process.
    func photoJobCount() async throws -> Int {
        let sql = "SELECT COUNT(*) FROM \(ownTable("jobs")) WHERE kind = '\(PhotoJobs.normalizeColumnKind)'"
        return try await onThreadOfItsOwn { [self] in try integerNow(sql) }
    }
}
