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

    /// With more than one reader, a ZIP's entries are shared out: each check must hold
    /// whichever reader read the entry (a tar.gz is always read by one).
    @Test(arguments: ArchiveFormat.allCases, [1, 2, 3])
    func anArchiveMatchingItsManifestPassesAndAWrongSizeAMissingOrAnUnlistedFileFails(format: ArchiveFormat, readers: Int) throws {
        try withDirectory { directory in
            let path = directory + "/archive.\(format.fileExtension)"
            let photoHash = try sha256(Self.photo, in: directory), textHash = try sha256(Self.text, in: directory)
            let entries: [(String, Data, EntryCompression)] = [("entries.json", Self.text, .deflate), ("photos/p.jpg", Self.photo, .store)]
            let listed = [("entries.json", Self.text.count, textHash), ("photos/p.jpg", Self.photo.count, photoHash)]

            try writeArchive(path, format: format, entries: entries, listed: listed)
            let summary = try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: format, readers: readers)
            #expect(summary.entries == 3)
            #expect(summary.bytes > Int64(Self.photo.count + Self.text.count))

            try writeArchive(path, format: format, entries: entries, listed: [listed[0], ("photos/p.jpg", Self.photo.count + 1, photoHash)])
            let wrongSize = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: format, readers: readers)
            }
            #expect(wrongSize.message.contains("photos/p.jpg"))

            try writeArchive(path, format: format, entries: entries, listed: listed + [("photos/gone.jpg", 10, photoHash)])
            let missing = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: format, readers: readers)
            }
            #expect(missing.message.contains("photos/gone.jpg"))

            try writeArchive(path, format: format, entries: entries, listed: [listed[1]])
            let unlisted = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: format, readers: readers)
            }
            #expect(unlisted.message.contains("entries.json"))
        }
    }

    /// A ZIP compared block by block as it was written is not read again: the structure
    /// check alone (sizes from the central directory, the manifest) still fails every fault
    /// of the manifest's, and a sound archive sums up as the full read-back does.
    @Test func anArchiveComparedWhenWrittenIsCheckedThroughItsHeadersAndManifest() throws {
        try withDirectory { directory in
            let path = directory + "/archive.zip"
            let photoHash = try sha256(Self.photo, in: directory), textHash = try sha256(Self.text, in: directory)
            let entries: [(String, Data, EntryCompression)] = [("entries.json", Self.text, .deflate), ("photos/p.jpg", Self.photo, .store)]
            let listed = [("entries.json", Self.text.count, textHash), ("photos/p.jpg", Self.photo.count, photoHash)]
            func verify() throws -> ExportArchiveVerifier.Summary {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: .zip, comparedWhenWritten: true)
            }

            try writeArchive(path, format: .zip, entries: entries, listed: listed)
            let headersOnly = try verify()
            let full = try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: .zip)
            #expect(headersOnly.entries == full.entries)
            #expect(headersOnly.bytes == full.bytes)

            try writeArchive(path, format: .zip, entries: entries, listed: [listed[0], ("photos/p.jpg", Self.photo.count + 1, photoHash)])
            #expect(try #require(throws: ExportVerificationFailure.self) { try verify() }.message.contains("photos/p.jpg has"))
            try writeArchive(path, format: .zip, entries: entries, listed: listed + [("photos/gone.jpg", 10, photoHash)])
            #expect(try #require(throws: ExportVerificationFailure.self) { try verify() }.message.contains("photos/gone.jpg"))
            try writeArchive(path, format: .zip, entries: entries, listed: [listed[1]])
            #expect(try #require(throws: ExportVerificationFailure.self) { try verify() }.message.contains("entries.json is not listed"))

            // Cut short before its central directory, it is no ZIP at all.
            try writeArchive(path, format: .zip, entries: entries, listed: listed)
            let whole = try Data(contentsOf: URL(fileURLWithPath: path))
            try whole.prefix(whole.count - 100).write(to: URL(fileURLWithPath: path))
            #expect(throws: ExportVerificationFailure.self) { try verify() }
        }
    }

    /// The file a verification may trust to have been compared: the one renamed into
    /// place, not a copy of it, and not once it has been written to since, even with its
    /// modification time set back afterwards (as `cp -p` or a restore leave it).
    @Test func aStoredFileIsTheComparedOneOnlyIfRenamedAndUnchanged() throws {
        try withDirectory { directory in
            let written = directory + "/written.zip", stored = directory + "/stored.zip", copied = directory + "/copied.zip"
            try Self.photo.write(to: URL(fileURLWithPath: written))
            let compared = try #require(StoredFileIdentity(path: written))
            try FileManager.default.copyItem(atPath: written, toPath: copied)
            #expect(rename(written, stored) == 0)
            let renamed = try #require(StoredFileIdentity(path: stored))
            #expect(renamed.isSameFile(as: compared))
            #expect(try #require(StoredFileIdentity(path: copied)).isSameFile(as: compared) == false)
            #expect(StoredFileIdentity(path: written) == nil)
            #expect(StoredFileIdentity(path: stored) == renamed, "nothing has touched it since")
            #expect(!renamed.bootID.isEmpty)

            let modified = try #require(try FileManager.default.attributesOfItem(atPath: stored)[.modificationDate] as? Date)
            // The change time has a clock tick's resolution: let the tick pass, so the write lands in a later one.
            Self.waitForTheClockToPass(nanoseconds: renamed.changedNanoseconds)
            let fd = open(stored, O_WRONLY)
            #expect(fd >= 0)
            var byte: UInt8 = 0x5A
            #expect(pwrite(fd, &byte, 1, 1_000) == 1)
            close(fd)
            try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: stored)
            let rewritten = try #require(StoredFileIdentity(path: stored))
            #expect(rewritten.isSameFile(as: renamed))
            #expect(rewritten != renamed, "same size, same inode, same modification time, but written to")
        }
    }

    private static func waitForTheClockToPass(nanoseconds: Int64) {
        var now = timespec()
        repeat {
            clock_gettime(CLOCK_REALTIME_COARSE, &now)
        } while Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec) <= nanoseconds
    }

    /// The one check standing in for a second SHA-256 pass: the archive's CRC-32 of each
    /// entry (ZIP), or of the whole stream (tar.gz), read back from the disk.
    /// A photo is read back by the first reader however many there are (see the next test).
    @Test(arguments: [1, 2])
    func aByteChangedInAStoredPhotoOnDiskFailsVerification(readers: Int) throws {
        let format = ArchiveFormat.zip
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
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: format, readers: readers)
            }
            #expect(failure.message.contains("CRC"))
            #expect(failure.message.contains("photos/p.jpg"))
        }
    }

    @Test func aByteChangedInsideATarGzOnDiskFailsVerification() throws {
        let (format, readers) = (ArchiveFormat.tarGzip, 2)
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
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: format, readers: readers)
            }
            #expect(failure.message.contains("incorrect data check"))
        }
    }

    /// Files at the archive root (tables, deflated in a real export; stored here so a byte
    /// of them can be found and changed) are shared out among the readers; files in folders
    /// stay with the first. A byte changed in any one of them fails the verification naming
    /// that file, whichever reader read it, and the untouched archive reads back to the same
    /// summary however many readers share it.
    @Test(arguments: [2, 3])
    func aChangedByteIsFoundInWhicheverReadersShareItIs(readers: Int) throws {
        try withDirectory { directory in
            let path = directory + "/archive.zip"
            let sizes = [300_000, 40_000, 700_000, 90_000, 250_000, 500_000]
            let files = sizes.enumerated().map { index, size in
                (index == 2 ? "photos/p2.jpg" : "table\(index).csv", Self.photo.prefix(size) + Data("entry \(index) ends here".utf8))
            }
            let listed = try files.map { ($0.0, $0.1.count, try sha256($0.1, in: directory)) }
            let entries = files.map { ($0.0, $0.1, EntryCompression.store) }
            try writeArchive(path, format: .zip, entries: entries, listed: listed)
            let alone = try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: .zip, readers: 1)
            let shared = try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: .zip, readers: readers)
            #expect(alone.entries == 7 && shared.entries == 7)
            #expect(alone.bytes == shared.bytes)

            let pristine = try Data(contentsOf: URL(fileURLWithPath: path))
            for (name, data) in files {
                var bytes = pristine
                // Each entry ends in its own words, so its tail is found in it alone.
                let inside = try #require(bytes.range(of: data.suffix(64)))
                bytes[inside.lowerBound + 10] ^= 0x01
                try bytes.write(to: URL(fileURLWithPath: path))
                let failure = try #require(throws: ExportVerificationFailure.self) {
                    try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: .zip, readers: readers)
                }
                #expect(failure.message.contains("CRC"), "\(name): \(failure.message)")
                #expect(failure.message.contains(name), "\(name): \(failure.message)")
            }
        }
    }

    /// Two faults, a changed byte early (in a file the second reader reads) and an unlisted
    /// file later (the first reader's): the earlier one is reported, as one reader reports it.
    @Test(arguments: [1, 2])
    func theFirstFaultInTheArchiveIsReportedWhicheverReaderFoundIt(readers: Int) throws {
        try withDirectory { directory in
            let path = directory + "/archive.zip"
            let early = Self.photo.prefix(300_000) + Data("the early file ends here".utf8)
            let middle = Self.photo.prefix(40_000)
            let files = [("a.csv", early), ("b.csv", middle), ("c.csv", Data("not listed".utf8))]
            let listed = try files.prefix(2).map { ($0.0, $0.1.count, try sha256($0.1, in: directory)) }
            try writeArchive(path, format: .zip, entries: files.map { ($0.0, $0.1, EntryCompression.store) }, listed: listed)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let inside = try #require(bytes.range(of: early.suffix(64)))
            bytes[inside.lowerBound + 10] ^= 0x01
            try bytes.write(to: URL(fileURLWithPath: path))
            let failure = try #require(throws: ExportVerificationFailure.self) {
                try ExportArchiveVerifier.verify(path: path, root: Self.root, exportID: Self.exportID, format: .zip, readers: readers)
            }
            #expect(failure.message.contains("CRC") && failure.message.contains("a.csv"), "\(failure.message)")
        }
    }

    /// Which reader reads which entry: root files by fewest bytes so far, the rest with the first.
    @Test func rootFilesAreSharedByBytesAndFilesInFoldersStayWithTheFirstReader() {
        var share = ExportArchiveVerifier.EntryShare(reader: 0, of: 2)
        let owners = [
            share.owner(ofFile: "README.txt", size: 2_000),
            share.owner(ofFile: "account.json", size: 600),
            share.owner(ofFile: "journal_entries.json", size: 15_000_000),
            share.owner(ofFile: "journal_entries.csv", size: 12_000_000),
            share.owner(ofFile: "mesocycles.json", size: 3),
            share.owner(ofFile: "unknown.csv", size: nil),
            share.owner(ofFile: "manifest.json", size: 1_000),
            share.owner(ofFile: "photos/2024/01/02/p1.jpg", size: 16_000_000),
        ]
        #expect(owners == [0, 1, 1, 0, 0, 0, 0, 0])
    }
}
