import Archiving
import Foundation
import Testing

/// Misuse, bad input and broken archives end in a thrown ArchiveError, never a crash
/// or an archive that looks complete.
struct FailureTests {
    @Test func callsOutOfOrderAreMisuse() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("order.zip").path
            let writer = try ArchiveWriter(path: path, format: .zip)
            #expect(throws: ArchiveError.self) { try writer.write(Data("x".utf8)) }
            #expect(throws: ArchiveError.self) { try writer.finishEntry() }

            try writer.beginEntry(name: "a.txt", size: 1, modified: Sample.modified, compression: .deflate)
            let nested = #expect(throws: ArchiveError.self) {
                try writer.beginEntry(name: "b.txt", size: 1, modified: Sample.modified, compression: .deflate)
            }
            #expect(nested?.code == .misuse)
            let early = #expect(throws: ArchiveError.self) { try writer.close() }
            #expect(early?.code == .misuse)

            // None of that damaged the archive.
            try writer.write(Data("1".utf8))
            try writer.finishEntry()
            try writer.close()
            let late = #expect(throws: ArchiveError.self) { try writer.close() }
            #expect(late?.code == .misuse)
            #expect(try readAll(path).map(\.data) == [Data("1".utf8)])
        }
    }

    @Test(arguments: ArchiveFormat.allCases)
    func writingMoreThanTheDeclaredSizeFailsTheArchive(format: ArchiveFormat) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("over.\(format.fileExtension)").path
            let writer = try ArchiveWriter(path: path, format: format)
            try writer.beginEntry(name: "a.txt", size: 4, modified: Sample.modified, compression: .deflate)
            try writer.write(Data("1234".utf8))
            let error = #expect(throws: ArchiveError.self) { try writer.write(Data("5".utf8)) }
            #expect(error?.code == .sizeMismatch)
            #expect(error?.entryName == "a.txt")
            // The writer stays failed, and close() does not turn it into a valid archive.
            let closing = #expect(throws: ArchiveError.self) { try writer.close() }
            #expect(closing?.code == .sizeMismatch)
            #expect(throws: ArchiveError.self) { try readAll(path) }
        }
    }

    @Test(arguments: ArchiveFormat.allCases)
    func writingLessThanTheDeclaredSizeFailsTheEntry(format: ArchiveFormat) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("under.\(format.fileExtension)").path
            let writer = try ArchiveWriter(path: path, format: format)
            try writer.beginEntry(name: "a.txt", size: 10, modified: Sample.modified, compression: .store)
            try writer.write(Data("12345".utf8))
            let error = #expect(throws: ArchiveError.self) { try writer.finishEntry() }
            #expect(error?.code == .sizeMismatch)
            #expect(error?.description.contains("declared 10 bytes, got 5") == true)
            #expect(throws: ArchiveError.self) { try writer.addData(name: "b.txt", data: Data(), modified: Sample.modified) }
        }
    }

    @Test func aWriterDroppedWithoutCloseLeavesNoValidZip() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("abandoned.zip").path
            do {
                let writer = try ArchiveWriter(path: path, format: .zip)
                try writer.addData(name: "a.txt", data: Data("hello".utf8), modified: Sample.modified)
            }
            #expect(FileManager.default.fileExists(atPath: path))
            let unzip = try await Tool.run(["unzip", "-t", path], scratch: dir)
            #expect(unzip.status != 0)
            let error = #expect(throws: ArchiveError.self) { try readAll(path) }
            #expect(error?.code == .readFailed)
        }
    }

    /// /dev/full accepts open() and fails every write with ENOSPC: a full disk. Every Linux
    /// system has it; without it the test fails rather than being skipped and counted.
    @Test func aFullDiskSurfacesLibarchivesError() throws {
        try #require(FileManager.default.isWritableFile(atPath: "/dev/full"), "/dev/full is missing or not writable")
        let writer = try ArchiveWriter(path: "/dev/full", format: .zip)
        let error = #expect(throws: ArchiveError.self) {
            try writer.addData(
                name: "photos/p.jpg", data: pseudoRandomData(count: 1_000_000, seed: 4),
                modified: Sample.modified, compression: .store)
            try writer.close()
        }
        #expect(error?.code == .writeFailed)
        #expect(error?.errno == ENOSPC)
        #expect(error?.entryName == "photos/p.jpg")
        #expect(error?.archivePath == "/dev/full")
    }

    @Test func creatingAnArchiveInAMissingDirectoryFails() {
        let error = #expect(throws: ArchiveError.self) {
            _ = try ArchiveWriter(path: "/nonexistent-\(UUID().uuidString)/a.zip", format: .zip)
        }
        #expect(error?.code == .fileSystem)
        #expect(error?.errno == ENOENT)
    }

    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        case truncatedZip, flippedStoredZipByte, flippedDeflatedZipByte
        case truncatedTarGzip, flippedTarGzipByte, garbage, empty
        /// libarchive's own gzip reader ignores the trailer; these two need the zlib check.
        case flippedGzipCRC, garbageAfterGzip
        var testDescription: String { rawValue }
        var format: ArchiveFormat {
            switch self {
            case .truncatedTarGzip, .flippedTarGzipByte, .flippedGzipCRC, .garbageAfterGzip: .tarGzip
            default: .zip
            }
        }
    }

    @Test(arguments: Damage.allCases)
    func damagedArchivesThrowReadFailed(damage: Damage) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("damaged").path
            let stored = pseudoRandomData(count: 200_000, seed: 11)
            // Hex text: compressible enough to be deflated, varied enough to keep a long stream.
            // Its length makes the tar stream (512-byte header, data, 1,024-byte end marker)
            // exactly three reader chunks, so libarchive has seen the end marker before
            // zlib reaches the gzip trailer: the trailer is checked only if the reader
            // drains the stream itself.
            let textLength = 3 * ArchiveWriter.chunkSize - 1_536
            let digits = Array("0123456789abcdef".utf8)
            let text = Data(pseudoRandomData(count: textLength / 2, seed: 12).flatMap {
                [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]]
            })
            let format = damage.format
            let compression: EntryCompression = damage == .flippedStoredZipByte ? .store : .deflate
            let writer = try ArchiveWriter(path: path, format: format)
            try writer.addData(
                name: "entry", data: compression == .store ? stored : text, modified: Sample.modified,
                compression: compression)
            try writer.close()

            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            switch damage {
            case .truncatedZip, .truncatedTarGzip:
                bytes = bytes.prefix(bytes.count / 2)
            case .flippedStoredZipByte, .flippedDeflatedZipByte, .flippedTarGzipByte:
                bytes[bytes.count / 2] ^= 0x40
            case .flippedGzipCRC:
                bytes[bytes.count - 6] ^= 0x01
            case .garbageAfterGzip:
                bytes.append(contentsOf: Array("not gzip".utf8))
            case .garbage:
                bytes = pseudoRandomData(count: 5_000, seed: 13)
            case .empty:
                bytes = Data()
            }
            try bytes.write(to: URL(fileURLWithPath: path))

            let error = #expect(throws: ArchiveError.self) {
                try ArchiveReader.forEachEntry(path: path) { _, content in
                    try content.forEachChunk { _ in }
                }
            }
            #expect(error?.code == .readFailed)
            #expect(error?.message.isEmpty == false)
        }
    }

    @Test func readingAMissingFileIsAFileSystemError() {
        let error = #expect(throws: ArchiveError.self) {
            try ArchiveReader.forEachEntry(path: "/nonexistent-\(UUID().uuidString).zip") { _, _ in }
        }
        #expect(error?.code == .fileSystem)
        #expect(error?.errno == ENOENT)
    }

    @Test func readDataRefusesEntriesOverTheLimit() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("limit.zip").path
            try Sample.write(to: path, format: .zip)
            let error = #expect(throws: ArchiveError.self) {
                try ArchiveReader.forEachEntry(path: path) { _, content in
                    _ = try content.readData(maxBytes: 1_000)
                }
            }
            #expect(error?.code == .entryTooLarge)
            #expect(error?.entryName == "\(Sample.root)/journal_entries.json")
        }
    }
}
