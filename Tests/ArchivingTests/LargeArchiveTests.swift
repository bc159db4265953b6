import Archiving
import Foundation
import Testing

/// Entries beyond 4 GiB, in every `make test`: an entry's size no longer fits the 32-bit
/// fields, so the writer must switch it to ZIP64. The content is zeros, deflated at level 1,
/// so 8 GiB of entry data make an archive of about 40 MB: the cost is CPU (writing, then
/// Python inflating every entry once), not disk. unzip -t would inflate it all again for
/// little more: Python's reader is independent of libarchive already.
///
/// A stored entry beyond 4 GiB and a local header beyond 4 GiB into the file take an archive
/// of that size on disk (stored content does not shrink): the second test writes one, once.
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

    /// What the deflated test above cannot reach: a stored entry beyond 4 GiB (stored content
    /// does not shrink, so the archive is that big on disk) and, after it, a local header more
    /// than 4 GiB into the file, whose offset only a ZIP64 extra field of the central directory
    /// can hold. The content is generated chunk by chunk, never read from a file: a repeating
    /// non-zero pattern with each mebibyte stamped with its index, so a chunk lost, repeated or
    /// swapped changes the bytes and a sparse or zero-filled stretch cannot pass. The size is
    /// not a whole number of mebibytes, so the archive does not end on a block boundary either.
    /// The file is written once (about 4.1 GB; removed with its directory, failed or not) and
    /// read twice: by Python's zipfile, then by ArchiveReader.
    @Test(.timeLimit(.minutes(10)))
    func storedEntryBeyond4GiBAndALocalHeaderPastIt() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("stored.zip").path
            let mebibyte = 1 << 20
            let wholeMiB = 4_096 + 16, tailBytes = 12_345
            let bigBytes = Int64(wholeMiB) * Int64(mebibyte) + Int64(tailBytes)
            let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: mebibyte, alignment: 16)
            defer { chunk.deallocate() }
            for i in 0..<mebibyte { chunk[i] = UInt8(i % 251 + 1) }

            let writer = try ArchiveWriter(path: path, format: .zip)
            try writer.beginEntry(name: "photos/huge.mov", size: bigBytes, modified: Sample.modified, compression: .store)
            for index in 0...wholeMiB {
                chunk.storeBytes(of: UInt64(index).littleEndian, toByteOffset: 0, as: UInt64.self)
                try writer.write(UnsafeRawBufferPointer(rebasing: chunk[0..<(index < wholeMiB ? mebibyte : tailBytes)]))
            }
            try writer.finishEntry()
            try writer.addData(name: "after.txt", data: Data("past 4 GiB".utf8), modified: Sample.modified)
            try writer.close()

            // Python's zipfile takes every size and offset beyond 32 bits from the ZIP64 fields;
            // the script also reads each local header and the end records raw, and compares the
            // big entry with the pattern byte for byte while zlib.crc32 runs over it (zipfile
            // itself raises if the CRC-32 the writer recorded does not match).
            let script = #"""
            import struct, sys, zipfile, zlib
            MIB = 1 << 20
            def zip64(extra):
                while len(extra) >= 4:
                    header, size = struct.unpack("<HH", extra[:4])
                    if header == 1:
                        return list(struct.unpack("<%dQ" % (size // 8), extra[4:4 + size]))
                    extra = extra[4 + size:]
                return None
            with open(sys.argv[1], "rb") as raw, zipfile.ZipFile(sys.argv[1]) as z:
                entries = z.infolist()
                for i in entries:
                    raw.seek(i.header_offset)
                    (signature, _, flags, method, _, _, crc, csize, usize, nlen, xlen) = struct.unpack(
                        "<IHHHHHIIIHH", raw.read(30))
                    name = raw.read(nlen).decode()
                    local = zip64(raw.read(xlen))
                    print(i.filename, i.compress_type, i.file_size, i.compress_size, i.header_offset,
                          zip64(i.extra), "%08x" % i.CRC, "| local %08x" % signature, name, method,
                          "%08x %08x %08x" % (crc, csize, usize), local, end=" ")
                    # Bit 3: the CRC-32 and sizes follow the data, 8 bytes each with ZIP64.
                    if flags & 8:
                        raw.seek(i.compress_size, 1)
                        descriptor = struct.unpack("<II" + ("QQ" if local else "II"), raw.read(24 if local else 16))
                        print("| descriptor %08x %08x %d %d" % descriptor)
                    else:
                        print("| no descriptor")
                raw.seek(-22, 2)
                eocd = struct.unpack("<IHHHHIIH", raw.read(22))
                raw.seek(-42, 2)
                locator = struct.unpack("<I", raw.read(4))[0]
                print("end %08x %08x %08x" % (eocd[0], eocd[6], locator))
                pattern = bytes(i % 251 + 1 for i in range(MIB))
                crc = total = index = 0
                first_bad = None
                with z.open(entries[0]) as f:
                    while chunk := f.read(MIB):
                        expected = struct.pack("<Q", index) + pattern[8:len(chunk)]
                        if first_bad is None and chunk != expected:
                            first_bad = total
                        crc = zlib.crc32(chunk, crc)
                        total += len(chunk)
                        index += 1
                print(z.read(entries[1]).decode())
                print(total, first_bad, "%08x" % crc)
            """#
            let python = try await Tool.python(script, [path], scratch: dir)
            #expect(python.status == 0, "\(python.stderr)")
            let lines = python.stdoutText.split(separator: "\n").map(String.init)
            let bigCRC = try #require(lines.last?.split(separator: " ").last.map(String.init))
            // after.txt's local header lies past 4 GiB: its offset comes from the ZIP64 field
            // alone, and a local header with its name is found there.
            let afterOffset = try #require(lines.count > 1 ? Int64(lines[1].split(separator: " ")[4]) : nil)
            #expect(afterOffset > 0xFFFF_FFFF && afterOffset > bigBytes)
            #expect(lines == [
                "photos/huge.mov 0 \(bigBytes) \(bigBytes) 0 [\(bigBytes), \(bigBytes)] \(bigCRC)"
                    + " | local 04034b50 photos/huge.mov 0 00000000 ffffffff ffffffff [\(bigBytes), \(bigBytes)]"
                    + " | descriptor 08074b50 \(bigCRC) \(bigBytes) \(bigBytes)",
                "after.txt 8 10 12 \(afterOffset) [\(afterOffset)] ce24c51b"
                    + " | local 04034b50 after.txt 8 00000000 00000000 0000000a None"
                    + " | descriptor 08074b50 ce24c51b 12 10",
                "end 06054b50 ffffffff 07064b50",
                "past 4 GiB",
                "\(bigBytes) None \(bigCRC)",
            ], "\(python.stdoutText)")

            // The project's own reader, as an export is verified: sizes from the headers, and
            // every byte read, which checks each entry against its CRC-32.
            var seen: [String] = []
            try ArchiveReader.forEachEntry(path: path) { info, content in
                let read = info.name == "after.txt"
                    ? String(decoding: try content.readData(maxBytes: 1_000), as: UTF8.self)
                    : String(try content.readToEnd())
                seen.append("\(info.name) \(info.size.map(String.init) ?? "nil") \(read)")
            }
            #expect(seen == ["photos/huge.mov \(bigBytes) \(bigBytes)", "after.txt 10 past 4 GiB"])
        }
    }
}
