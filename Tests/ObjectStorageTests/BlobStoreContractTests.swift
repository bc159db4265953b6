import Crypto
import Foundation
import Lifecycle
import ObjectStorage
import Testing

/// The stores the contract runs against: one set of tests, every implementation.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case fileSystem
    case s3

    var testDescription: String { rawValue }

    func make() async throws -> any BlobStore {
        switch self {
        case .fileSystem:
            return try FileSystemBlobStore(root: Scratch.directory("contract-blobs"))
        case .s3:
            return try await MotoServer.require().makeStore()
        }
    }
}

enum Scratch {
    static func directory(_ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A file of `size` bytes whose content depends on the position, so a part sent twice
    /// or out of order cannot go unnoticed; returns its path and SHA-256.
    static func file(size: Int, seed: UInt8 = 0) throws -> (path: String, sha256: String) {
        let path = try directory("contract-source") + "/data.bin"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        var hasher = SHA256()
        var written = 0
        var block = [UInt8](repeating: 0, count: 1 << 20)
        while written < size {
            let count = min(block.count, size - written)
            for index in 0..<count {
                let position = written + index
                block[index] = UInt8(truncatingIfNeeded: position &* 31 &+ position >> 12) ^ seed
            }
            let data = Data(block[0..<count])
            hasher.update(data: data)
            try handle.write(contentsOf: data)
            written += count
        }
        return (path, hex(hasher.finalize()))
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}

extension S3Tests {
    @Suite struct BlobStoreContractTests {
        @Test(arguments: StoreKind.allCases)
        func putInfoAndReadBack(_ kind: StoreKind) async throws {
            let store = try await kind.make()
            let stored = try await store.put(key: "accounts/u-1/photos/p-1", data: Data("first photo".utf8))
            #expect(stored == BlobInfo(key: "accounts/u-1/photos/p-1", size: 11))
            #expect(try await store.info(key: "accounts/u-1/photos/p-1") == stored)
            #expect(try await store.readAll(key: "accounts/u-1/photos/p-1") == Data("first photo".utf8))
            #expect(try await store.info(key: "accounts/u-1/photos/absent") == nil)
            await #expect(throws: BlobStoreError.self) { _ = try await store.readAll(key: "accounts/u-1/photos/absent") }

            // A second put replaces the blob whole.
            _ = try await store.put(key: "accounts/u-1/photos/p-1", data: Data("second".utf8))
            #expect(try await store.readAll(key: "accounts/u-1/photos/p-1") == Data("second".utf8))
            // An empty blob is a blob.
            _ = try await store.put(key: "accounts/u-1/empty", data: Data())
            #expect(try await store.info(key: "accounts/u-1/empty")?.size == 0)
            #expect(try await store.readAll(key: "accounts/u-1/empty").isEmpty)
        }

        @Test(arguments: StoreKind.allCases)
        func listIsLexicalPaginatedAndStaysInsideThePrefix(_ kind: StoreKind) async throws {
            let store = try await kind.make()
            for index in 0..<7 {
                _ = try await store.put(key: "accounts/u-1/photos/p-\(index)", data: Data(repeating: 1, count: index))
            }
            _ = try await store.put(key: "accounts/u-1/exports/e-1.zip", data: Data("zip".utf8))
            _ = try await store.put(key: "accounts/u-10/photos/p-0", data: Data("other account".utf8))

            let all = try await store.list(prefix: "accounts/u-1/", after: nil, limit: 100)
            #expect(all.map(\.key) == ["accounts/u-1/exports/e-1.zip"] + (0..<7).map { "accounts/u-1/photos/p-\($0)" })
            #expect(all.map(\.size) == [3, 0, 1, 2, 3, 4, 5, 6])

            var pages: [[String]] = []
            var after: String?
            while true {
                let page = try await store.list(prefix: "accounts/u-1/", after: after, limit: 3)
                if page.isEmpty { break }
                pages.append(page.map(\.key))
                after = page.last?.key
            }
            #expect(pages.map(\.count) == [3, 3, 2])
            #expect(pages.flatMap { $0 } == all.map(\.key))
            #expect(try await store.list(prefix: "accounts/u-1/photos/", after: "accounts/u-1/photos/p-4", limit: 10).map(\.key)
                    == ["accounts/u-1/photos/p-5", "accounts/u-1/photos/p-6"])
            #expect(try await store.list(prefix: "accounts/u-2/", after: nil, limit: 10).isEmpty)
            #expect(try await store.list(prefix: "accounts/u-1/", after: nil, limit: 0).isEmpty)
        }

        @Test(arguments: StoreKind.allCases)
        func deletingAbsentKeysIsNotAnError(_ kind: StoreKind) async throws {
            let store = try await kind.make()
            _ = try await store.put(key: "accounts/u-1/photos/p-1", data: Data("x".utf8))
            _ = try await store.put(key: "accounts/u-1/photos/p-2", data: Data("y".utf8))
            try await store.delete(keys: ["accounts/u-1/photos/p-1", "accounts/u-1/photos/never-there"])
            try await store.delete(keys: ["accounts/u-1/photos/p-1"])
            try await store.delete(keys: [])
            #expect(try await store.list(prefix: "accounts/u-1/", after: nil, limit: 10).map(\.key) == ["accounts/u-1/photos/p-2"])
        }

        @Test(arguments: StoreKind.allCases)
        func moveThenMoveAgainAfterACrash(_ kind: StoreKind) async throws {
            let store = try await kind.make()
            _ = try await store.put(key: "accounts/u-1/exports/e-1.partial.zip", data: Data("archive".utf8))
            try await store.move(from: "accounts/u-1/exports/e-1.partial.zip", to: "accounts/u-1/exports/e-1.zip")
            #expect(try await store.info(key: "accounts/u-1/exports/e-1.partial.zip") == nil)
            #expect(try await store.readAll(key: "accounts/u-1/exports/e-1.zip") == Data("archive".utf8))
            // The publish step run again: the source is gone, the destination there.
            try await store.move(from: "accounts/u-1/exports/e-1.partial.zip", to: "accounts/u-1/exports/e-1.zip")
            #expect(try await store.readAll(key: "accounts/u-1/exports/e-1.zip") == Data("archive".utf8))
            // Neither there: an error naming the blob.
            await #expect(throws: BlobStoreError.self) { try await store.move(from: "accounts/u-1/nothing", to: "accounts/u-1/else") }
        }

        /// Keys as Supabase Storage and S3 allow them. "é" twice: NFC (one scalar) and NFD
        /// (e + combining acute) are two keys, as they are for S3 and for Linux file names.
        static let keysS3Allows: [String] = [
            "accounts/u-1/files/my holiday photo.jpg",
            "accounts/u-1/files/caf\u{E9}.jpg",
            "accounts/u-1/files/cafe\u{301}.jpg",
            "accounts/u-1/files/\u{301}starts with an accent",
            "accounts/u-1/files/Ελληνικά/日本語/😀.png",
            "accounts/u-1/files/a+b=c&d;e,f",
            "accounts/u-1/files/100% done",
            "accounts/u-1/files/why?",
            "accounts/u-1/files/#tag",
            "accounts/u-1/files/\"quoted\" and 'single' <tags>",
            "accounts/u-1/files/tilde~ and `backtick` and \\backslash",
            "accounts/u-1/files/ leading and trailing spaces ",
            // 1,024 bytes: four segments, each within a file name's 255.
            "accounts/u-1/files/" + [String](repeating: String(repeating: "é", count: 125), count: 4).joined(separator: "/")
                + String(repeating: "x", count: 1_024 - 19 - 4 * 250 - 3),
        ]

        @Test func theLongKeyIsExactlyTheLimit() {
            #expect(Self.keysS3Allows.last?.utf8.count == 1_024)
            #expect(Self.keysS3Allows[1] == Self.keysS3Allows[2], "Swift calls the two spellings equal")
            #expect(Self.keysS3Allows[1].utf8.count != Self.keysS3Allows[2].utf8.count)
        }

        @Test(arguments: StoreKind.allCases)
        func everyKeyS3AllowsWorksInEveryOperation(_ kind: StoreKind) async throws {
            let store = try await kind.make()
            let source = try Scratch.file(size: 100, seed: 3)
            for (index, key) in Self.keysS3Allows.enumerated() {
                let content = Data("\(index):".utf8) + Data(key.utf8)
                #expect(try await store.put(key: key, data: content) == BlobInfo(key: key, size: Int64(content.count)), "\(key)")
                #expect(try await store.info(key: key)?.size == Int64(content.count), "\(key)")
                #expect(try await store.readAll(key: key) == content, "\(key)")
            }
            // Both spellings of "café.jpg" kept apart, each with its own content.
            #expect(try await store.readAll(key: Self.keysS3Allows[1]).starts(with: Data("1:".utf8)))
            #expect(try await store.readAll(key: Self.keysS3Allows[2]).starts(with: Data("2:".utf8)))

            // Listed in byte order (as S3 lists), each key exactly as stored, page by page too.
            let sorted = Self.keysS3Allows.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let listed = try await store.list(prefix: "accounts/u-1/", after: nil, limit: 100).map(\.key)
            #expect(listed.map { Array($0.utf8) } == sorted.map { Array($0.utf8) })
            var paged: [String] = []
            var after: String?
            while true {
                let page = try await store.list(prefix: "accounts/u-1/", after: after, limit: 2)
                if page.isEmpty { break }
                paged += page.map(\.key)
                after = page.last?.key
            }
            #expect(paged.map { Array($0.utf8) } == sorted.map { Array($0.utf8) })
            // A prefix is bytes too: "cafe" stops inside neither spelling's character but before NFD's accent.
            #expect(try await store.list(prefix: "accounts/u-1/files/cafe", after: nil, limit: 10).map { Array($0.key.utf8) }
                    == [Array(Self.keysS3Allows[2].utf8)])
            #expect(try await store.list(prefix: "accounts/u-1/files/caf\u{E9}", after: nil, limit: 10).map { Array($0.key.utf8) }
                    == [Array(Self.keysS3Allows[1].utf8)])

            // Stored from a file, moved between such keys; deleting one spelling leaves the other.
            // Folder names as long as "files", so the 1,024-byte key stays within the limit.
            func elsewhere(_ key: String, _ folder: String) -> String { "accounts/u-1/\(folder)/" + key.droppingExactPrefix("accounts/u-1/files/") }
            for key in Self.keysS3Allows {
                _ = try await store.put(key: elsewhere(key, "ready"), fromFile: source.path, moving: false)
                try await store.move(from: elsewhere(key, "ready"), to: elsewhere(key, "moved"))
                #expect(try await store.info(key: elsewhere(key, "ready")) == nil, "\(key)")
                #expect(try await store.info(key: elsewhere(key, "moved"))?.size == 100, "\(key)")
            }
            try await store.delete(keys: [Self.keysS3Allows[1]])
            #expect(try await store.info(key: Self.keysS3Allows[1]) == nil)
            #expect(try await store.readAll(key: Self.keysS3Allows[2]).starts(with: Data("2:".utf8)))
            try await store.delete(keys: Self.keysS3Allows + Self.keysS3Allows.map { elsewhere($0, "moved") })
            #expect(try await store.list(prefix: "accounts/", after: nil, limit: 10).isEmpty)
        }

        /// Refused by every store: S3 itself takes no such key.
        static let keysNoStoreTakes = ["", String(repeating: "k", count: 1_025), "accounts/u-1/" + String(repeating: "é", count: 506)]

        @Test(arguments: StoreKind.allCases, keysNoStoreTakes)
        func keysOverTheLimitAreRefusedEverywhere(_ kind: StoreKind, _ key: String) async throws {
            try await expectRefusedByEveryOperation(try await kind.make(), key)
        }

        /// What cannot map to a path below the store's folder safely.
        static let keysNoPathCanHold: [(key: String, problem: String)] = [
            ("../etc/passwd", "'..' segment"), ("accounts/u-1/..", "'..' segment"), ("accounts/../../x", "'..' segment"),
            ("/abs", "absolute path"), ("/", "absolute path"),
            ("accounts//x", "empty segment"), ("trailing/", "empty segment"), ("accounts/./x", "'.' segment"), (".", "'.' segment"),
            ("a\u{0}b", "U+0000"), ("line\nfeed", "U+000A"), ("tab\there", "U+0009"), ("del\u{7F}", "U+007F"), ("next\u{85}line", "U+0085"),
            ("accounts/" + String(repeating: "n", count: 256), "256 bytes"), ("accounts/" + String(repeating: "é", count: 128), "256 bytes"),
            (".incoming/123-abc", "writes in flight"),
        ]

        @Test(arguments: keysNoPathCanHold)
        func keysThatCannotBeAPathAreRefusedOnTheFileSystem(_ key: String, _ problem: String) async throws {
            let store = try await StoreKind.fileSystem.make()
            #expect(store.keyProblem(key)?.contains(problem) == true, "\(store.keyProblem(key) ?? "accepted")")
            let error = try await expectRefusedByEveryOperation(store, key)
            #expect(error?.isInvalidKey == true)
            #expect(error?.message.contains(BlobKey.quoted(key)) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains(problem) == true, "\(error?.message ?? "")")
            #expect(error?.message.unicodeScalars.contains { $0.value < 0x20 } == false, "control characters are escaped")
        }

        @discardableResult
        private func expectRefusedByEveryOperation(_ store: any BlobStore, _ key: String) async throws -> BlobStoreError? {
            let source = try Scratch.file(size: 10)
            _ = try await store.put(key: "accounts/u-1/x", data: Data("x".utf8))
            await #expect(throws: BlobStoreError.self) { _ = try await store.put(key: key, data: Data()) }
            await #expect(throws: BlobStoreError.self) { _ = try await store.put(key: key, fromFile: source.path, moving: false) }
            await #expect(throws: BlobStoreError.self) { _ = try await store.info(key: key) }
            await #expect(throws: BlobStoreError.self) { _ = try await store.readAll(key: key) }
            await #expect(throws: BlobStoreError.self) { try await store.delete(keys: [key]) }
            await #expect(throws: BlobStoreError.self) { try await store.move(from: key, to: "accounts/u-1/y") }
            await #expect(throws: BlobStoreError.self) { try await store.move(from: "accounts/u-1/x", to: key) }
            #expect(try await store.readAll(key: "accounts/u-1/x") == Data("x".utf8), "a refused move leaves its source")
            do {
                _ = try await store.info(key: key)
                return nil
            } catch let error as BlobStoreError {
                return error
            }
        }

        /// 12 MiB: above the tests' 6 MiB threshold, so S3 gets three parts (5 + 5 + 2 MiB).
        @Test(arguments: StoreKind.allCases)
        func aLargeFileGoesUpInPartsAndComesBackIdentical(_ kind: StoreKind) async throws {
            let store = try await kind.make()
            let source = try Scratch.file(size: 12 << 20, seed: 7)
            let stored = try await store.put(key: "accounts/u-1/exports/big.zip", fromFile: source.path, moving: false)
            #expect(stored.size == 12 << 20)
            #expect(FileManager.default.fileExists(atPath: source.path))
            #expect(try await store.info(key: "accounts/u-1/exports/big.zip")?.size == 12 << 20)
            if let s3 = store as? S3BlobStore {
                // A multipart object's ETag ends in the number of its parts.
                let metadata = try #require(try await s3.objectMetadata(key: "accounts/u-1/exports/big.zip"))
                #expect(metadata.etag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).hasSuffix("-3"), "\(metadata.etag)")
                #expect(try await s3.pendingMultipartUploads().isEmpty)
            }
            var hasher = SHA256()
            var largest = 0
            var total = 0
            try await store.read(key: "accounts/u-1/exports/big.zip", chunkSize: 64 << 10) { chunk in
                hasher.update(bufferPointer: chunk)
                largest = max(largest, chunk.count)
                total += chunk.count
            }
            #expect(total == 12 << 20)
            #expect(largest == 64 << 10)
            #expect(Scratch.hex(hasher.finalize()) == source.sha256)

            // A large blob moves whole too (S3: a copy in parts above the tests' copy threshold).
            try await store.move(from: "accounts/u-1/exports/big.zip", to: "accounts/u-1/exports/final.zip")
            var moved = SHA256()
            try await store.read(key: "accounts/u-1/exports/final.zip", chunkSize: 1 << 20) { moved.update(bufferPointer: $0) }
            #expect(Scratch.hex(moved.finalize()) == source.sha256)
            #expect(try await store.info(key: "accounts/u-1/exports/big.zip") == nil)
        }

        /// More keys than one DeleteObjects call takes.
        @Test(arguments: StoreKind.allCases)
        func deletingMoreThanAThousandKeys(_ kind: StoreKind) async throws {
            let store = try await kind.make()
            let keys = (0..<1_205).map { String(format: "accounts/u-1/photos/p-%05d", $0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for slice in stride(from: 0, to: keys.count, by: 151).map({ Array(keys[$0..<min(keys.count, $0 + 151)]) }) {
                    group.addTask { for key in slice { _ = try await store.put(key: key, data: Data(key.utf8)) } }
                }
                try await group.waitForAll()
            }
            _ = try await store.put(key: "accounts/u-2/photos/keep", data: Data("keep".utf8))
            #expect(try await store.list(prefix: "accounts/u-1/", after: nil, limit: 5_000).count == 1_205)
            try await store.delete(keys: keys + ["accounts/u-1/photos/absent"])
            #expect(try await store.list(prefix: "accounts/u-1/", after: nil, limit: 10).isEmpty)
            #expect(try await store.list(prefix: "accounts/", after: nil, limit: 10).map(\.key) == ["accounts/u-2/photos/keep"])
        }
    }
}
