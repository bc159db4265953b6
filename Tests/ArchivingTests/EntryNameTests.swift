import Archiving
import Foundation
import Testing

struct EntryNameTests {
    @Test(arguments: [
        "../x", "/etc/passwd", "a/../../b", "a//b", "a\\b", "a\u{0}b", "", ".", "..", "a/", "/",
        "./a", "a/./b", "a/..", "line\nbreak", "tab\there", "del\u{7F}", "c1\u{85}",
        "photo\u{202E}gpj.exe", "x\u{2066}y", "...", ".. /x", "a/b.", "trailing ",
        String(repeating: "n", count: 256), String(repeating: "a/", count: 2048) + "b",
    ])
    func unsafeNamesAreRejected(name: String) async throws {
        #expect(!ArchiveWriter.isSafeEntryName(name))
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("names.zip").path
            let writer = try ArchiveWriter(path: path, format: .zip)
            let error = #expect(throws: ArchiveError.self) {
                try writer.beginEntry(name: name, size: 1, modified: Sample.modified, compression: .deflate)
            }
            #expect(error?.code == .unsafeEntryName)
            // A refused name writes nothing and leaves the writer usable.
            try writer.addData(name: "fine.txt", data: Data("1".utf8), modified: Sample.modified)
            try writer.close()
            #expect(try readAll(path).map(\.info.name) == ["fine.txt"])
        }
    }

    @Test(arguments: [
        "README.txt", "export-acc_42-20250301T120000Z/manifest.json",
        "photos/2025/03/01/日本-é-🏃.jpg", "a/b/c/👨‍👩‍👧.png", "..a", ".hidden", "name with spaces.csv",
        String(repeating: "n", count: 255),
    ])
    func ordinaryNamesAreAccepted(name: String) {
        #expect(ArchiveWriter.isSafeEntryName(name))
    }
}
