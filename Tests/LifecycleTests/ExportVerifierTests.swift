import Archiving
import Foundation
import Testing
@testable import Lifecycle

/// Reading an archive back checks it against manifest.json and every byte against the archive's own checksums.
struct ExportVerifierTests {
    static let root = "export-ada-20260101T000000Z"
    static let exportID = "0f6c1e6e-1111-4222-8333-944455556666"
    static let modified = Date(timeIntervalSince1970: 1_767_225_600)

    /// Several chunks and a ragged end, so both buffers are used and reused.
    static let photo: Data = {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var data = Data(count: 3 * ArchiveWriter.chunkSize + 17)
        for index in data.indices {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            data[index] = UInt8(truncatingIfNeeded: (state &* 0x2545_F491_4F6C_DD1D) >> 56)
        }
        return data
    }()
    static let text = Data(String(repeating: "{\"id\":\"e1\",\"text\":\"café\"}\n", count: 20_000).utf8)

    private func withDirectory<T>(_ body: (String) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("export-verify-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try body(directory)
    }

    private func sha256(_ data: Data, in directory: String) throws -> String {
        let path = directory + "/hash-\(UUID().uuidString)"
        try data.write(to: URL(fileURLWithPath: path))
        return try FileDigest.sha256(ofFile: path).hex
    }

    /// An archive whose manifest lists `listed` (name → bytes, SHA-256) and holds `entries`.
    private func writeArchive(
        _ path: String, format: ArchiveFormat, entries: [(String, Data, EntryCompression)], listed: [(String, Int, String)]
    ) throws {
        let files = listed.map { #"{"path":"\#($0.0)","bytes":\#($0.1),"sha256":"\#($0.2)"}"# }.joined(separator: ",")
        let manifest = #"""
            {"format_version":1,"export_id":"\#(Self.exportID)","account_id":"ada","archive_root":"\#(Self.root)",
             "generated_at":"2026-01-01T00:00:00Z","expires_at":"2026-01-08T00:00:00Z","row_counts":{},
             "files":[\#(files)],"omitted_photos":[]}
            """#
        let writer = try ArchiveWriter(path: path, format: format)
        try writer.addData(name: Self.root + "/manifest.json", data: Data(manifest.utf8), modified: Self.modified)
        for (name, data, compression) in entries {
            try writer.addData(name: Self.root + "/" + name, data: data, modified: Self.modified, compression: compression)
        }
        try writer.close()
    }

    @Test(arguments: ArchiveFormat.allCases)
    func anArchiveMatchingItsManifestPassesAndAWrongSizeAMissingOrAnUnlistedFileFails(format: ArchiveFormat) throws {
        try withDirectory { directory in
            let path = directory + "/archive.\(format.fileExtension)"
            let photoHash = try sha256(Self.photo, in: directory), textHash = try sha256(Self.text, in: directory)
            let entries: [(String, Data, EntryCompression)] = [("entries.json", Self.text, .deflate), ("photos/p.jpg", Self.photo, .store)]
            let listed = [("entries.json", Self.text.count, textHash), ("photos/p.jpg", Self.photo.count, photoHash)]

            try writeArchive(path, format: format, entries: entries, listed: listed)
            let summary = try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID)
            #expect(summary.entries == 3)
            #expect(summary.bytes > Int64(Self.photo.count + Self.text.count))

            try writeArchive(path, format: format, entries: entries, listed: [listed[0], ("photos/p.jpg", Self.photo.count + 1, photoHash)])
            let wrongSize = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID)
            }
            #expect(wrongSize.message.contains("photos/p.jpg"))

            try writeArchive(path, format: format, entries: entries, listed: listed + [("photos/gone.jpg", 10, photoHash)])
            let missing = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID)
            }
            #expect(missing.message.contains("photos/gone.jpg"))

            try writeArchive(path, format: format, entries: entries, listed: [listed[1]])
            let unlisted = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID)
            }
            #expect(unlisted.message.contains("entries.json"))
        }
    }

    /// The one check standing in for a second SHA-256 pass: the archive's CRC-32 of each
    /// entry (ZIP), or of the whole stream (tar.gz), read back from the disk.
    @Test func aByteChangedInAStoredPhotoOnDiskFailsVerification() throws {
        try withDirectory { directory in
            let path = directory + "/archive.zip"
            try writeArchive(
                path, format: .zip, entries: [("photos/p.jpg", Self.photo, .store)],
                listed: [("photos/p.jpg", Self.photo.count, try sha256(Self.photo, in: directory))])
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            // Deep inside the photo's data, past every header.
            let inside = try #require(bytes.range(of: Self.photo.subdata(in: 500_000..<500_064)))
            bytes[inside.lowerBound] ^= 0x01
            try bytes.write(to: URL(fileURLWithPath: path))
            let failure = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID)
            }
            #expect(failure.message.contains("CRC"))
            #expect(failure.message.contains("photos/p.jpg"))
        }
    }

    @Test func aByteChangedInsideATarGzOnDiskFailsVerification() throws {
        try withDirectory { directory in
            let path = directory + "/archive.tar.gz"
            try writeArchive(
                path, format: .tarGzip, entries: [("photos/p.jpg", Self.photo, .store)],
                listed: [("photos/p.jpg", Self.photo.count, try sha256(Self.photo, in: directory))])
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            // The photo does not compress: deflate keeps it as stored blocks, so the stream still
            // inflates and only the gzip trailer's CRC-32 can tell.
            bytes[bytes.count / 2] ^= 0x01
            try bytes.write(to: URL(fileURLWithPath: path))
            let failure = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID)
            }
            #expect(failure.message.contains("incorrect data check"))
        }
    }
}
