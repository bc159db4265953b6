import Archiving
import Foundation
import Testing
@testable import Lifecycle

/// The copier reads and writes the archive on one thread while another hashes;
/// what lands in the archive and the hash it reports must be those of the file.
struct ExportFileCopyTests {
    private func withDirectory<T>(_ body: (String) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("export-copier-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try body(directory)
    }

    /// A ZIP being written in a fresh directory, and a copier for it.
    private func withArchive<T>(_ body: (String, ArchiveWriter, ArchiveFileCopier) throws -> T) throws -> T {
        try withDirectory { directory in
            let archive = directory + "/archive.zip"
            let writer = try ArchiveWriter(path: archive, format: .zip)
            return try body(directory, writer, ArchiveFileCopier(archivePath: archive, throttleMBPerSecond: 0))
        }
    }

    /// Deterministic bytes (xorshift64*) that no chunk boundary repeats.
    private func randomFile(_ path: String, bytes: Int) throws -> Data {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes)
        var data = Data(count: bytes)
        for index in 0..<bytes {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            data[index] = UInt8(truncatingIfNeeded: (state &* 0x2545_F491_4F6C_DD1D) >> 56)
        }
        try data.write(to: URL(fileURLWithPath: path))
        return data
    }

    @Test func filesOfEverySizeArriveWholeWithTheirOwnHashAndTheCopierCanBeReused() throws {
        try withArchive { directory, writer, copier in
            // Empty, one partial chunk, exactly the buffers' depth in chunks, and more than it.
            let sizes = [0, 1_000, 3 * ArchiveWriter.chunkSize, 7 * ArchiveWriter.chunkSize + 5]
            var expected: [String: Data] = [:]
            for (index, size) in sizes.enumerated() {
                let path = directory + "/file\(index)"
                let data = try randomFile(path, bytes: size)
                try writer.beginEntry(name: "root/file\(index)", size: Int64(size), modified: Date(), compression: .store)
                let copied = try copier.copy(path: path, into: writer, expectedBytes: Int64(size))
                try writer.finishEntry()
                #expect(copied.bytes == Int64(size))
                #expect(copied.sha256 == (try FileDigest.sha256(ofFile: path).hex), "file of \(size) bytes")
                expected["root/file\(index)"] = data
            }
            try writer.close()
            var found: [String: Data] = [:]
            try ArchiveReader.forEachEntry(path: directory + "/archive.zip") { info, content in
                found[info.name] = try content.readData(maxBytes: 8 << 20)
            }
            #expect(found == expected)
        }
    }

    @Test func aFileLargerThanExpectedStopsTheCopyWithoutFailingTheArchive() throws {
        try withArchive { directory, writer, copier in
            let path = directory + "/grown"
            _ = try randomFile(path, bytes: 5 * ArchiveWriter.chunkSize)
            try writer.beginEntry(name: "root/grown", size: nil, modified: Date(), compression: .deflate)
            let copied = try copier.copy(path: path, into: writer, expectedBytes: Int64(2 * ArchiveWriter.chunkSize + 10))
            #expect(copied.bytes > Int64(2 * ArchiveWriter.chunkSize + 10))
            #expect(copied.sha256 == "")
            // The copier is ready for the next file at once.
            let small = directory + "/small"
            let data = try randomFile(small, bytes: 70_000)
            try writer.finishEntry()
            try writer.beginEntry(name: "root/small", size: Int64(data.count), modified: Date(), compression: .store)
            let next = try copier.copy(path: small, into: writer, expectedBytes: Int64(data.count))
            #expect(next.sha256 == (try FileDigest.sha256(ofFile: small).hex))
        }
    }

    @Test func aMissingFileIsReportedAsMissing() throws {
        try withArchive { directory, writer, copier in
            try writer.beginEntry(name: "root/gone", size: 10, modified: Date(), compression: .store)
            let error = try #require(throws: LifecycleError.self) {
                try copier.copy(path: directory + "/gone", into: writer, expectedBytes: 10)
            }
            #expect(error.category == .inputMissing)
        }
    }

    @Test func aFileThatCannotBeReadFailsTheCopyAndTheCopierCanBeReused() throws {
        try withArchive { directory, writer, copier in
            // A directory opens for reading, and its first read fails (EISDIR).
            let unreadable = directory + "/a-directory"
            try FileManager.default.createDirectory(atPath: unreadable, withIntermediateDirectories: false)
            try writer.beginEntry(name: "root/unreadable", size: 10, modified: Date(), compression: .store)
            let error = try #require(throws: LifecycleError.self) {
                try copier.copy(path: unreadable, into: writer, expectedBytes: 10)
            }
            #expect(error.category == .unavailable)
            #expect(error.message.contains("cannot read \(unreadable)"))
            // The hashing thread stopped with the failed copy: the next file, into the next
            // archive (a failed copy fails its archive), hashes as itself.
            let path = directory + "/next"
            _ = try randomFile(path, bytes: 4 * ArchiveWriter.chunkSize + 3)
            let nextWriter = try ArchiveWriter(path: directory + "/next.zip", format: .zip)
            try nextWriter.beginEntry(name: "root/next", size: Int64(4 * ArchiveWriter.chunkSize + 3), modified: Date(), compression: .store)
            let next = try copier.copy(path: path, into: nextWriter, expectedBytes: Int64(4 * ArchiveWriter.chunkSize + 3))
            #expect(next.bytes == Int64(4 * ArchiveWriter.chunkSize + 3))
            #expect(next.sha256 == (try FileDigest.sha256(ofFile: path).hex))
        }
    }
}
