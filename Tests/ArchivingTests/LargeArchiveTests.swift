import Archiving
import Foundation
import Testing

/// Entries beyond 4 GiB. Minutes of disk I/O and about 4.5 GB of temporary space, so
/// opt-in: `ARCHIVING_LARGE_TESTS=1 swift test --filter LargeArchiveTests`.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["ARCHIVING_LARGE_TESTS"] == "1"))
struct LargeArchiveTests {
    @Test(.timeLimit(.minutes(15)))
    func zipEntriesBeyond4GiBWithKnownAndUnknownSizes() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("large.zip").path
            let mebibyte = 1 << 20
            let storedMiB = 4_608, deflatedMiB = 4_400
            let block = pseudoRandomData(count: mebibyte, seed: 31)
            let zeros = Data(count: mebibyte)

            let writer = try ArchiveWriter(path: path, format: .zip)
            try writer.beginEntry(
                name: "photos/huge.mov", size: Int64(storedMiB * mebibyte), modified: Sample.modified,
                compression: .store)
            for _ in 0..<storedMiB { try writer.write(block) }
            try writer.finishEntry()
            try writer.beginEntry(name: "zeros.bin", size: nil, modified: Sample.modified, compression: .deflate)
            for _ in 0..<deflatedMiB { try writer.write(zeros) }
            try writer.finishEntry()
            try writer.addData(name: "after.txt", data: Data("past 4 GiB".utf8), modified: Sample.modified)
            try writer.close()

            let script = #"""
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1]) as z:
                for i in z.infolist():
                    print(i.filename, i.file_size, i.compress_type, i.header_offset > 0xFFFFFFFF)
                print(z.testzip())
            """#
            let python = try await Tool.python(script, [path], scratch: dir)
            #expect(python.status == 0, "\(python.stderr)")
            #expect(python.stdoutText == """
                photos/huge.mov \(storedMiB * mebibyte) 0 False
                zeros.bin \(deflatedMiB * mebibyte) 8 True
                after.txt 10 8 True
                None

                """)

            let unzip = try await Tool.run(["unzip", "-tq", path], scratch: dir)
            #expect(unzip.status == 0, "\(unzip.stdoutText) \(unzip.stderr)")

            var sizes: [String: Int64] = [:]
            try ArchiveReader.forEachEntry(path: path) { info, content in
                sizes[info.name] = try content.forEachChunk { _ in }
            }
            #expect(sizes == [
                "photos/huge.mov": Int64(storedMiB * mebibyte),
                "zeros.bin": Int64(deflatedMiB * mebibyte),
                "after.txt": 10,
            ])
        }
    }
}
