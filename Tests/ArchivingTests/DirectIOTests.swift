import Archiving
import Crypto
import Foundation
import Testing

/// Archives are written past the page cache in aligned 1 MiB blocks and read back in
/// the same blocks, read ahead. Entry sizes around the block and page edges, and many
/// small entries (the reader seeks back into the block it just handed out), must come
/// out byte for byte, and the file must be the very file a page-cache write makes.
struct DirectIOTests {
    static let block = 1 << 20
    static let sizes = [0, 1, 4_095, 4_096, 4_097, block - 1, block, block + 1, 3 * block + 17]
        + (0..<150).map { 100 + ($0 * 7_919) % 6_000 }

    private struct Written {
        var name: String
        var sha256: String
        var bytes: Int
    }

    private func write(
        _ path: String, format: ArchiveFormat, bypassPageCache: Bool, readBack: Bool = false
    ) throws -> (entries: [Written], direct: Bool, readBack: Int64?) {
        let writer = try ArchiveWriter(path: path, format: format, bypassPageCache: bypassPageCache, readBack: readBack)
        var entries: [Written] = []
        for (index, size) in Self.sizes.enumerated() {
            let data = pseudoRandomData(count: size, seed: UInt64(index + 1))
            let name = String(format: "root/%03d-%d.bin", index, size)
            // Alternate stored and deflated, and known and unknown sizes, as the export does.
            let compression: EntryCompression = index % 2 == 0 ? .store : .deflate
            try writer.beginEntry(name: name, size: index % 3 == 0 ? nil : Int64(size), modified: Sample.modified, compression: compression)
            try writer.write(data)
            try writer.finishEntry()
            entries.append(Written(name: name, sha256: SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined(), bytes: size))
        }
        let direct = writer.bypassesPageCache
        #expect(writer.bytesReadBack == nil, "nothing counts as read back before the archive is finished")
        try writer.close()
        return (entries, direct, writer.bytesReadBack)
    }

    /// Written two blocks at a time into space allocated ahead (which must not survive as
    /// a zero tail), and with `readBack` every block read back from the disk as it goes.
    @Test(arguments: ArchiveFormat.allCases, [false, true])
    func blockEdgesAndManySmallEntriesRoundTripAndMatchAPageCacheWrite(format: ArchiveFormat, readBack: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let directPath = directory.appendingPathComponent("direct.\(format.fileExtension)").path
            let cachedPath = directory.appendingPathComponent("cached.\(format.fileExtension)").path
            let (entries, wasDirect, readBackBytes) = try write(directPath, format: format, bypassPageCache: true, readBack: readBack)
            let (_, cachedWasDirect, cachedReadBack) = try write(cachedPath, format: format, bypassPageCache: false, readBack: readBack)
            #expect(!cachedWasDirect)
            #expect(cachedReadBack == nil, "only direct blocks are read back")
            let size = try #require(try FileManager.default.attributesOfItem(atPath: directPath)[.size] as? NSNumber).int64Value
            if wasDirect {
                #expect(readBackBytes == (readBack ? size : nil), "every byte of the file, or none")
            }
            var direct = try Data(contentsOf: URL(fileURLWithPath: directPath))
            var cached = try Data(contentsOf: URL(fileURLWithPath: cachedPath))
            if format == .tarGzip {
                // libarchive stamps the gzip header with the time of writing (RFC 1952 MTIME, bytes 4–7).
                direct.replaceSubrange(4..<8, with: [0, 0, 0, 0])
                cached.replaceSubrange(4..<8, with: [0, 0, 0, 0])
            }
            #expect(direct.count > 3 * Self.block)
            #expect(direct == cached)

            // Our reader, with its read-ahead.
            var read: [Written] = []
            try ArchiveReader.forEachEntry(path: directPath) { info, content in
                var hasher = SHA256()
                let bytes = try content.forEachChunk { hasher.update(bufferPointer: $0) }
                read.append(Written(name: info.name, sha256: hasher.finalize().map { String(format: "%02x", $0) }.joined(), bytes: Int(bytes)))
            }
            #expect(read.map(\.name) == entries.map(\.name))
            #expect(read.map(\.sha256) == entries.map(\.sha256))
            #expect(read.map(\.bytes) == entries.map(\.bytes))

            // An independent one.
            let script = """
                import hashlib, sys, tarfile, zipfile
                path = sys.argv[1]
                if path.endswith(".zip"):
                    with zipfile.ZipFile(path) as z:
                        for info in z.infolist():
                            print(info.filename, hashlib.sha256(z.read(info)).hexdigest())
                else:
                    with tarfile.open(path, "r:gz") as t:
                        for member in t:
                            print(member.name, hashlib.sha256(t.extractfile(member).read()).hexdigest())
                """
            let python = try await Tool.python(script, [directPath], scratch: directory)
            #expect(python.status == 0, "\(python.stderr)")
            #expect(python.stdoutText == entries.map { "\($0.name) \($0.sha256)\n" }.joined())
        }
    }
}
