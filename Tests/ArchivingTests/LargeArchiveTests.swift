import Archiving
import Foundation
import Testing

/// Entries beyond 4 GiB, in every `make test`: an entry's size no longer fits the 32-bit
/// fields, so the writer must switch it to ZIP64. The content is zeros, deflated at level 1,
/// so 8 GiB of entry data make an archive of about 40 MB: the cost is CPU (writing, then
/// Python inflating every entry once), not disk. unzip -t would inflate it all again for
/// little more: Python's reader is independent of libarchive already.
///
/// Not covered here: a local header beyond 4 GiB into the file, which takes an archive of
/// that size on disk (stored content does not shrink).
struct LargeArchiveTests {
    @Test(.timeLimit(.minutes(10)))
    func zipEntriesBeyond4GiBWithKnownAndUnknownSizes() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("large.zip").path
            let mebibyte = 1 << 20
            // 64 MiB past 4 GiB: the first size that needs more than 32 bits, and a little.
            let entryMiB = 4_096 + 64
            let entryBytes = Int64(entryMiB) * Int64(mebibyte)
            let zeros = Data(count: mebibyte)

            let writer = try ArchiveWriter(path: path, format: .zip, compressionLevel: 1)
            try writer.beginEntry(name: "known.bin", size: entryBytes, modified: Sample.modified, compression: .deflate)
            for _ in 0..<entryMiB { try writer.write(zeros) }
            try writer.finishEntry()
            try writer.beginEntry(name: "unknown.bin", size: nil, modified: Sample.modified, compression: .deflate)
            for _ in 0..<entryMiB { try writer.write(zeros) }
            try writer.finishEntry()
            try writer.addData(name: "after.txt", data: Data("past 4 GiB".utf8), modified: Sample.modified)
            try writer.close()

            let archiveBytes = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            #expect(archiveBytes < 64 * mebibyte, "the archive is \(archiveBytes) bytes")

            // Python's zipfile, an independent reader: each size beyond 32 bits comes from a
            // ZIP64 extra field (header id 0x0001) of the central directory, and testzip
            // inflates every entry and checks it against its CRC-32.
            let script = #"""
            import struct, sys, zipfile, zlib
            def zip64(extra):
                while len(extra) >= 4:
                    header, size = struct.unpack("<HH", extra[:4])
                    if header == 1:
                        return True
                    extra = extra[4 + size:]
                return False
            with zipfile.ZipFile(sys.argv[1]) as z:
                for i in z.infolist():
                    print(i.filename, i.file_size, i.compress_type, zip64(i.extra), "%08x" % i.CRC)
                print(z.testzip())
            crc = 0
            block = bytes(1 << 20)
            for _ in range(int(sys.argv[2])):
                crc = zlib.crc32(block, crc)
            print("%08x" % crc)
            """#
            let python = try await Tool.python(script, [path, "\(entryMiB)"], scratch: dir)
            #expect(python.status == 0, "\(python.stderr)")
            let lines = python.stdoutText.split(separator: "\n").map(String.init)
            let zerosCRC = try #require(lines.last)
            #expect(lines == [
                "known.bin \(entryBytes) 8 True \(zerosCRC)",
                "unknown.bin \(entryBytes) 8 True \(zerosCRC)",
                "after.txt 10 8 False ce24c51b",
                "None",
                zerosCRC,
            ], "\(python.stdoutText)")
        }
    }
}
