import Archiving
import Foundation
import Testing

/// The tar.gz the writer produces, as independent readers see it.
struct TarGzipFormatTests {
    @Test func pythonTarfileSeesExactNamesModesTimesAndBytes() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.tar.gz").path
            try Sample.write(to: path, format: .tarGzip)

            let head = try FileHandle(forReadingFrom: URL(fileURLWithPath: path)).read(upToCount: 2)
            #expect(head.map(Array.init) == [0x1F, 0x8B])

            let result = try await Tool.python(tarInspector, [path], scratch: dir)
            try #require(result.status == 0, "python tarfile failed: \(result.stderr)")
            let entries = try JSONDecoder().decode([TarInspection].self, from: result.stdout)

            #expect(entries.map(\.name) == Sample.names)
            for (entry, expected) in zip(entries, Sample.entries) {
                #expect(entry.type == "0", "\(expected.name) is not a regular file")
                #expect(entry.mode == 0o644)
                #expect(entry.mtime == Sample.modified.timeIntervalSince1970)
                #expect(entry.size == expected.data.count)
                #expect(Data(base64Encoded: entry.data) == expected.data, "content of \(expected.name)")
                // Non-ASCII names travel in a pax record (UTF-8 by definition); ASCII ones need none.
                let ascii = expected.name.utf8.allSatisfy { $0 < 0x80 }
                #expect(entry.paxPath == (ascii ? nil : expected.name))
            }
        }
    }

    @Test func bsdtarListsTheSameNames() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.tar.gz").path
            try Sample.write(to: path, format: .tarGzip)

            let result = try await Tool.run(["bsdtar", "-tzf", path], scratch: dir)
            try #require(result.status == 0, "bsdtar: \(result.stderr)")
            #expect(result.stdoutText.split(separator: "\n").map(String.init) == Sample.names)
        }
    }
}
