import Archiving
import Foundation
import Testing

/// The writer's compression level reaches zlib, and every level still gives archives
/// that independent readers accept byte for byte.
struct CompressionLevelTests {
    /// Text like an export's JSON: repetitive enough that the levels differ clearly.
    static let text: Data = {
        var lines = "["
        for index in 0..<20_000 {
            lines += "\n{\"id\":\"e\(index)\",\"created_at\":\"2025-\(1 + index % 12)-\(1 + index % 28)T08:00:00Z\","
            lines += "\"text\":\"Entry \(index): tempo run, café au lait, notes \(index * 7919 % 100_000)\"},"
        }
        return Data((lines + "\n]\n").utf8)
    }()
    static let photo = pseudoRandomData(count: 300_000, seed: 5)
    static let modified = Date(timeIntervalSince1970: 1_767_225_600)

    static func write(_ path: String, format: ArchiveFormat, level: Int) throws {
        let writer = try ArchiveWriter(path: path, format: format, compressionLevel: level)
        try writer.addData(name: "root/entries.json", data: text, modified: modified, compression: .deflate)
        try writer.addData(name: "root/photos/p.jpg", data: photo, modified: modified, compression: .store)
        try writer.close()
    }

    static func size(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }

    @Test(arguments: ArchiveFormat.allCases)
    func aHigherLevelGivesASmallerArchiveWithTheSameContent(format: ArchiveFormat) async throws {
        try await withTemporaryDirectory { dir in
            var sizes: [Int: Int] = [:]
            for level in [1, 9] {
                let path = dir.appendingPathComponent("level\(level).\(format.fileExtension)").path
                try Self.write(path, format: format, level: level)
                sizes[level] = try Self.size(path)
                var contents: [String: Data] = [:]
                try ArchiveReader.forEachEntry(path: path) { info, content in
                    contents[info.name] = try content.readData(maxBytes: 16 << 20)
                }
                #expect(contents == ["root/entries.json": Self.text, "root/photos/p.jpg": Self.photo], "level \(level)")
            }
            // Were the level ignored, both files would be identical in size.
            let fast = try #require(sizes[1]), small = try #require(sizes[9])
            #expect(small < fast, "level 9 gave \(small) bytes, level 1 \(fast)")
        }
    }

    @Test(arguments: [1, 2, 9])
    func unzipAndPythonZipfileReadEveryLevel(level: Int) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.zip").path
            try Self.write(path, format: .zip, level: level)

            let unzip = try await Tool.run(["unzip", "-t", path], scratch: dir)
            #expect(unzip.status == 0, "unzip -t: \(unzip.stdoutText) \(unzip.stderr)")
            // The expected bytes go beside the archive for Python to compare against.
            let expected = dir.appendingPathComponent("expected")
            try FileManager.default.createDirectory(at: expected.appendingPathComponent("root/photos"), withIntermediateDirectories: true)
            try Self.text.write(to: expected.appendingPathComponent("root/entries.json"))
            try Self.photo.write(to: expected.appendingPathComponent("root/photos/p.jpg"))
            let script = """
                import os, sys, zipfile
                with zipfile.ZipFile(sys.argv[1]) as archive:
                    assert archive.testzip() is None
                    for info in archive.infolist():
                        same = archive.read(info) == open(os.path.join(sys.argv[2], info.filename), "rb").read()
                        print(info.filename, info.compress_type, same)
                """
            let python = try await Tool.python(script, [path, expected.path], scratch: dir)
            try #require(python.status == 0, "python zipfile: \(python.stderr)")
            let stored = 0, deflated = 8
            #expect(python.stdoutText.split(separator: "\n").map(String.init) == [
                "root/entries.json \(deflated) True",
                "root/photos/p.jpg \(stored) True",
            ])
        }
    }

    @Test(arguments: [0, 10, -1])
    func aLevelOutsideOneToNineIsRefused(level: Int) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.zip").path
            #expect(throws: ArchiveError.self) { try ArchiveWriter(path: path, format: .zip, compressionLevel: level) }
        }
    }
}
