import Archiving
import Foundation
import Testing

/// What ArchiveWriter writes, ArchiveReader gives back.
struct RoundTripTests {
    @Test(arguments: ArchiveFormat.allCases)
    func readerReturnsSameNamesMetadataAndBytes(format: ArchiveFormat) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("export.\(format.fileExtension)").path
            try Sample.write(to: path, format: format)

            let entries = try readAll(path)
            #expect(entries.map(\.info.name) == Sample.names)
            for (entry, expected) in zip(entries, Sample.entries) {
                #expect(entry.data == expected.data, "content of \(expected.name)")
                #expect(entry.info.size == Int64(expected.data.count), "size of \(expected.name)")
                #expect(entry.info.kind == .file)
                #expect(entry.info.permissions == 0o644)
                #expect(entry.info.modified == Sample.modified)
            }
        }
    }

    @Test(arguments: ArchiveFormat.allCases)
    func chunksAreBoundedAndCoverTheEntry(format: ArchiveFormat) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("big.\(format.fileExtension)").path
            let data = pseudoRandomData(count: 3 * ArchiveWriter.chunkSize + 17, seed: 9)
            let writer = try ArchiveWriter(path: path, format: format)
            try writer.addData(name: "photos/big.jpg", data: data, modified: Sample.modified, compression: .store)
            try writer.close()

            var chunks: [Int] = []
            var joined = Data()
            try ArchiveReader.forEachEntry(path: path) { _, content in
                let total = try content.forEachChunk { chunk in
                    chunks.append(chunk.count)
                    joined.append(contentsOf: chunk)
                }
                #expect(total == Int64(data.count))
            }
            #expect(chunks.count >= 4)
            #expect(chunks.allSatisfy { $0 > 0 && $0 <= ArchiveWriter.chunkSize })
            #expect(joined == data)
        }
    }

    @Test(arguments: ArchiveFormat.allCases)
    func addFileStreamsChunksToTheObserverAndUsesTheFileTime(format: ArchiveFormat) async throws {
        try await withTemporaryDirectory { dir in
            let source = dir.appendingPathComponent("original.heic")
            let data = pseudoRandomData(count: 2 * ArchiveWriter.chunkSize + 1_000, seed: 5)
            try data.write(to: source)
            let fileTime = Date(timeIntervalSince1970: 1_600_000_000)
            try FileManager.default.setAttributes([.modificationDate: fileTime], ofItemAtPath: source.path)

            let path = dir.appendingPathComponent("export.\(format.fileExtension)").path
            let writer = try ArchiveWriter(path: path, format: format)
            var observed: [Data] = []
            let size = try writer.addFile(
                name: "photos/2020/09/13/p1.heic", contentsOf: source.path, compression: .store
            ) { chunk in
                observed.append(Data(chunk))
            }
            try writer.close()

            #expect(size == Int64(data.count))
            #expect(observed.map(\.count) == [ArchiveWriter.chunkSize, ArchiveWriter.chunkSize, 1_000])
            #expect(observed.reduce(Data(), +) == data)
            let entries = try readAll(path)
            #expect(entries.count == 1)
            #expect(entries.first?.data == data)
            #expect(entries.first?.info.modified == fileTime)
        }
    }

    @Test func addFileRefusesSomethingThatIsNotARegularFile() async throws {
        try await withTemporaryDirectory { dir in
            let writer = try ArchiveWriter(path: dir.appendingPathComponent("a.zip").path, format: .zip)
            let error = #expect(throws: ArchiveError.self) {
                try writer.addFile(name: "x", contentsOf: dir.path, compression: .store)
            }
            #expect(error?.code == .fileSystem)
            let missing = #expect(throws: ArchiveError.self) {
                try writer.addFile(name: "y", contentsOf: dir.appendingPathComponent("nope").path, compression: .store)
            }
            #expect(missing?.errno == ENOENT)
            // Nothing was started, so the writer is still good.
            try writer.addData(name: "ok.txt", data: Data("ok".utf8), modified: Sample.modified)
            try writer.close()
            #expect(try readAll(dir.appendingPathComponent("a.zip").path).map(\.info.name) == ["ok.txt"])
        }
    }

    /// Unknown sizes: ZIP + deflate streams with a data descriptor; ZIP + store and every
    /// tar entry go through a spool file. Either way the result must be exact, and no
    /// spool file may be left beside the archive.
    @Test(arguments: ArchiveFormat.allCases)
    func unknownSizesProduceExactEntriesAndLeaveNoSpoolFiles(format: ArchiveFormat) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("unknown.\(format.fileExtension)").path
            let entries = [
                SampleEntry(name: "a.csv", data: Data(String(repeating: "x,y\n", count: 50_000).utf8),
                            compression: .deflate, sizeKnown: false),
                SampleEntry(name: "b.jpg", data: pseudoRandomData(count: 600_000, seed: 7),
                            compression: .store, sizeKnown: false),
                SampleEntry(name: "c.txt", data: Data(), compression: .deflate, sizeKnown: false),
                SampleEntry(name: "d.jpg", data: Data(), compression: .store, sizeKnown: false),
            ]
            try Sample.write(entries, to: path, format: format)

            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == [(path as NSString).lastPathComponent])
            let read = try readAll(path)
            #expect(read.map(\.info.name) == entries.map(\.name))
            #expect(read.map(\.data) == entries.map(\.data))

            if format == .zip {
                let result = try await Tool.python(zipInspector, [path], scratch: dir)
                try #require(result.status == 0, "\(result.stderr)")
                let inspection = try JSONDecoder().decode(ZipInspection.self, from: result.stdout)
                #expect(inspection.firstBadEntry == nil)
                // A stored photo stays stored even when its size was not known up front.
                #expect(inspection.entries.map(\.method) == [8, 0, 8, 0])
            }
        }
    }
}
