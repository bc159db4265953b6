import Foundation
import Imaging
import Testing

extension ImagingTests {
    @Suite struct Files {
        let normalizer = PhotoNormalizer()

        @Test("writes the JPEG under the final name and nothing else")
        func writes() async throws {
            let scratch = try Scratch()
            _ = try await scratch.encode(.gradient(width: 800, height: 600), as: "in.png")
            let photo = try normalizer.normalizeFile(at: scratch.path("in.png"), to: scratch.path("out.jpg"))
            #expect(try scratch.read("out.jpg") == photo.jpegData)
            #expect(try scratch.contents() == ["in.png", "in.png.source.ppm", "out.jpg"])
            try await OutputCheck.expectCleanJPEG(photo.jpegData, side: 600, in: scratch)
        }

        @Test("replaces an existing output; a refusal leaves the old one alone")
        func replaces() async throws {
            let scratch = try Scratch()
            try scratch.write(Data("stale".utf8), to: "out.jpg")
            _ = try await scratch.encode(.gradient(width: 300, height: 300), as: "in.jpg")
            try normalizer.normalizeFile(at: scratch.path("in.jpg"), to: scratch.path("out.jpg"))
            let fresh = try scratch.read("out.jpg")
            #expect(fresh.starts(with: [0xFF, 0xD8, 0xFF]))

            try scratch.write(Crafted.text, to: "note.jpg")
            #expect(rejection { try normalizer.normalizeFile(at: scratch.path("note.jpg"), to: scratch.path("out.jpg")) }?
                .userMessage == unsupportedMessage)
            #expect(try scratch.read("out.jpg") == fresh)
        }

        @Test("an oversized file is refused without reading it whole")
        func oversizedFile() throws {
            let scratch = try Scratch()
            // Sparse: 1 GB on paper, nothing on disk.
            let path = scratch.path("huge.jpg")
            #expect(FileManager.default.createFile(atPath: path, contents: Data([0xFF, 0xD8, 0xFF, 0xE0])))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.truncate(atOffset: 1 << 30)
            try handle.close()
            let refusal = rejection { try normalizer.normalizeFile(at: path, to: scratch.path("out.jpg")) }
            #expect(refusal?.code == .tooLarge)
            #expect(refusal?.operatorDetail == "input is 1073741824 bytes, limit 10485760")
            #expect(try scratch.contents() == ["huge.jpg"])
        }

        @Test("file-system failures are not photo refusals and leave nothing behind")
        func fileSystemErrors() async throws {
            let scratch = try Scratch()
            // The file system's own error, exactly: a refusal (PhotoRejection) here would tell
            // the person their photo was wrong when it was never read.
            #expect(throws: POSIXError(.ENOENT)) {
                try normalizer.normalizeFile(at: scratch.path("missing.jpg"), to: scratch.path("out.jpg"))
            }
            _ = try await scratch.encode(.gradient(width: 40, height: 40), as: "in.jpg")
            let unwritable = #expect(throws: PhotoFileError.self) {
                try normalizer.normalizeFile(at: scratch.path("in.jpg"), to: scratch.path("no-such-dir/out.jpg"))
            }
            #expect(unwritable?.operation == "creating" && unwritable?.errorNumber == ENOENT, "\(String(describing: unwritable))")
            #expect(try scratch.contents() == ["in.jpg", "in.jpg.source.ppm"])
        }
    }
}
