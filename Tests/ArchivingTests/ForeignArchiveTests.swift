import Archiving
import Foundation
import Testing

/// ArchiveReader also reads what other tools write, so verification does not depend
/// on the writer's particular choices.
struct ForeignArchiveTests {
    @Test(arguments: [["--format", "zip"], ["-z", "--format", "pax"], ["--format", "ustar"]])
    func readsWhatBsdtarWrites(options: [String]) async throws {
        try await withTemporaryDirectory { dir in
            let tree = dir.appendingPathComponent("tree")
            let photo = tree.appendingPathComponent("photos/2025/03/01/日本-é-🏃.jpg")
            try FileManager.default.createDirectory(
                at: photo.deletingLastPathComponent(), withIntermediateDirectories: true)
            let photoData = pseudoRandomData(count: 400_000, seed: 21)
            let text = Data(String(repeating: "ligne, ünïcode\n", count: 5_000).utf8)
            try photoData.write(to: photo)
            try text.write(to: tree.appendingPathComponent("journal.csv"))

            let path = dir.appendingPathComponent("bsdtar-archive").path
            let result = try await Tool.run(
                ["bsdtar", "-cf", path] + options + ["-C", tree.path, "journal.csv", "photos"], scratch: dir)
            try #require(result.status == 0, "\(result.stderr)")

            let files = try readAll(path).filter { $0.info.kind == .file }
            #expect(files.map(\.info.name) == ["journal.csv", "photos/2025/03/01/日本-é-🏃.jpg"])
            #expect(files.map(\.data) == [text, photoData])
        }
    }

    @Test func readsAGzipFileOfSeveralMembers() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("members.tar.gz").path
            let script = #"""
            import gzip, io, sys, tarfile
            raw = io.BytesIO()
            with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
                for name, size in (("a.txt", 70000), ("b.bin", 90000)):
                    data = bytes((i * 7 + len(name)) % 251 for i in range(size))
                    info = tarfile.TarInfo(name); info.size = size
                    t.addfile(info, io.BytesIO(data))
            whole = raw.getvalue()
            cut = len(whole) // 3
            with open(sys.argv[1], "wb") as f:
                f.write(gzip.compress(whole[:cut]) + gzip.compress(whole[cut:]))
            """#
            let result = try await Tool.python(script, [path], scratch: dir)
            try #require(result.status == 0, "\(result.stderr)")

            let entries = try readAll(path)
            #expect(entries.map(\.info.name) == ["a.txt", "b.bin"])
            for entry in entries {
                let expected = Data((0..<entry.data.count).map { UInt8(($0 * 7 + entry.info.name.count) % 251) })
                #expect(entry.data == expected)
            }
            #expect(entries.map(\.data.count) == [70_000, 90_000])
        }
    }
}
