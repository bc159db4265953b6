import Archiving
import Foundation
import Testing

/// The ZIP the writer produces, as independent readers see it.
struct ZipFormatTests {
    @Test func pythonZipfileSeesExactNamesMethodsModesAndBytes() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.zip").path
            try Sample.write(to: path, format: .zip)

            let result = try await Tool.python(zipInspector, [path], scratch: dir)
            try #require(result.status == 0, "python zipfile failed: \(result.stderr)")
            let inspection = try JSONDecoder().decode(ZipInspection.self, from: result.stdout)

            #expect(inspection.firstBadEntry == nil)
            // Python decodes names as cp437 unless the UTF-8 flag is set, so an exact
            // match of the non-ASCII names proves the flag as well.
            #expect(inspection.entries.map(\.name) == Sample.names)
            for (entry, expected) in zip(inspection.entries, Sample.entries) {
                if !expected.name.utf8.allSatisfy({ $0 < 0x80 }) {
                    #expect(entry.utf8Flag, "no UTF-8 flag on \(expected.name)")
                }
                let stored = 0, deflated = 8
                #expect(entry.method == (expected.compression == .store ? stored : deflated), "\(expected.name)")
                #expect(entry.mode == 0o100644, "\(expected.name)")
                #expect(entry.size == expected.data.count)
                #expect(Data(base64Encoded: entry.data) == expected.data, "content of \(expected.name)")
            }
        }
    }

    @Test func unzipTestsEveryEntryClean() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.zip").path
            try Sample.write(to: path, format: .zip)

            let result = try await Tool.run(["unzip", "-t", path], scratch: dir)
            #expect(result.status == 0, "unzip -t: \(result.stdoutText) \(result.stderr)")
            #expect(result.stdoutText.contains("No errors detected"))
        }
    }

    @Test func bsdtarListsTheSameNames() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.zip").path
            try Sample.write(to: path, format: .zip)

            let result = try await Tool.run(["bsdtar", "-tf", path], scratch: dir)
            try #require(result.status == 0, "bsdtar: \(result.stderr)")
            #expect(result.stdoutText.split(separator: "\n").map(String.init) == Sample.names)
        }
    }

    /// More than 65,535 entries needs the ZIP64 end-of-central-directory record: the
    /// cheap way to exercise ZIP64 (an entry over 4 GiB is in `LargeArchiveTests`).
    @Test func moreThan65535EntriesUseZip64EndRecords() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("many.zip").path
            let count = 65_600
            let writer = try ArchiveWriter(path: path, format: .zip)
            for index in 0..<count {
                try writer.addData(
                    name: "photos/\(index / 1000)/\(index).txt", data: Data("\(index)".utf8),
                    modified: Sample.modified, compression: .store)
            }
            try writer.close()
            #expect(writer.entryCount == count)

            // The ZIP64 end record (56 bytes) and its locator (20) sit before the classic end record (22).
            let tail = try Data(contentsOf: URL(fileURLWithPath: path)).suffix(98)
            #expect(Array(tail.prefix(4)) == [0x50, 0x4B, 0x06, 0x06])

            let script = #"""
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1]) as z:
                names = z.namelist()
                print(len(names), names[-1], z.read(names[-1]).decode(), z.testzip())
            """#
            let python = try await Tool.python(script, [path], scratch: dir)
            #expect(python.status == 0, "\(python.stderr)")
            #expect(python.stdoutText == "\(count) photos/65/65599.txt 65599 None\n")

            var seen = 0
            try ArchiveReader.forEachEntry(path: path) { info, content in
                let text = String(decoding: try content.readData(maxBytes: 16), as: UTF8.self)
                #expect(info.name.hasSuffix("/\(text).txt"))
                seen += 1
            }
            #expect(seen == count)
        }
    }
}
