import Archiving
import ChildProcesses
import Foundation
import Testing

/// A fresh directory under the system temporary directory, removed after `body`.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("ArchivingTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// Runs an independent reader (unzip, bsdtar, python3) found on PATH.
enum Tool {
    struct Result {
        let status: Int32
        let stdout: Data
        let stderr: String
        var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// Output goes through files in `scratch`, so a chatty tool cannot fill a pipe and hang.
    static func run(_ arguments: [String], scratch: URL) async throws -> Result {
        let outURL = scratch.appendingPathComponent("tool-\(UUID().uuidString).out")
        let errURL = scratch.appendingPathComponent("tool-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: outURL)
            try? FileManager.default.removeItem(at: errURL)
        }
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        // Tools print non-ASCII names only in a UTF-8 locale.
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C.UTF-8"
        process.environment = environment
        process.standardOutput = out
        process.standardError = err
        try process.run()
        await process.exited()
        try out.close()
        try err.close()
        return Result(
            status: process.terminationStatus,
            stdout: try Data(contentsOf: outURL),
            stderr: String(decoding: try Data(contentsOf: errURL), as: UTF8.self))
    }

    static func python(_ script: String, _ arguments: [String], scratch: URL) async throws -> Result {
        try await run(["python3", "-c", script] + arguments, scratch: scratch)
    }
}

/// Fast deterministic filler for binary test content (xorshift64*).
func pseudoRandomData(count: Int, seed: UInt64) -> Data {
    var state = seed | 1
    var data = Data(count: count)
    data.withUnsafeMutableBytes { raw in
        let bytes = raw.bindMemory(to: UInt8.self)
        var index = 0
        while index < count {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            var word = state &* 0x2545_F491_4F6C_DD1D
            for _ in 0..<8 where index < count {
                bytes[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
    }
    return data
}

/// One entry of the sample export used across the format tests.
struct SampleEntry {
    let name: String
    let data: Data
    let compression: EntryCompression
    /// Whether the writer is told the size up front.
    let sizeKnown: Bool
}

enum Sample {
    /// 2025-03-01T12:00:00Z
    static let modified = Date(timeIntervalSince1970: 1_740_830_400)
    static let root = "export-acc_42-20250301T120000Z"

    static let entries: [SampleEntry] = {
        let readme = Data("What each file is.\nLink expires in 7 days.\n".utf8)
        let journal = Data(
            String(repeating: #"{"title":"Café crème — 日記 🏃","body":"naïve façade"}"# + "\n", count: 2_000).utf8)
        let csv = Data("id,title\n1,\"=cmd\"\n2,Ünïcödé\n".utf8)
        return [
            SampleEntry(name: "\(root)/README.txt", data: readme, compression: .deflate, sizeKnown: true),
            SampleEntry(name: "\(root)/journal_entries.json", data: journal, compression: .deflate, sizeKnown: true),
            SampleEntry(name: "\(root)/empty.csv", data: Data(), compression: .deflate, sizeKnown: true),
            SampleEntry(
                name: "\(root)/photos/2025/03/01/日本-é-🏃.jpg",
                data: pseudoRandomData(count: 300_000, seed: 1), compression: .store, sizeKnown: true),
            SampleEntry(
                name: "\(root)/photos/2025/03/02/Ünïcödé ñame 写真 👨‍👩‍👧.jpg",
                data: pseudoRandomData(count: 10_000, seed: 2), compression: .store, sizeKnown: true),
            SampleEntry(name: "\(root)/journal_entries.csv", data: csv, compression: .deflate, sizeKnown: false),
            SampleEntry(
                name: "\(root)/photos/2025/03/03/streamed.png",
                data: pseudoRandomData(count: 70_000, seed: 3), compression: .store, sizeKnown: false),
        ]
    }()

    static var names: [String] { entries.map(\.name) }

    /// Writes `entries` through the public API, feeding data in uneven chunks.
    static func write(_ entries: [SampleEntry] = entries, to path: String, format: ArchiveFormat) throws {
        let writer = try ArchiveWriter(path: path, format: format)
        for entry in entries {
            try writer.beginEntry(
                name: entry.name, size: entry.sizeKnown ? Int64(entry.data.count) : nil,
                modified: modified, compression: entry.compression)
            var offset = 0
            while offset < entry.data.count {
                let end = min(offset + 12_345, entry.data.count)
                try writer.write(entry.data[offset..<end])
                offset = end
            }
            try writer.finishEntry()
        }
        try writer.close()
    }
}

/// Everything ArchiveReader saw, content included (test archives are small).
struct ReadEntry {
    let info: ArchiveEntryInfo
    let data: Data
}

func readAll(_ path: String) throws -> [ReadEntry] {
    var result: [ReadEntry] = []
    try ArchiveReader.forEachEntry(path: path) { info, content in
        result.append(ReadEntry(info: info, data: try content.readData(maxBytes: 10_000_000)))
    }
    return result
}

/// Python's zipfile view of an archive: names as decoded (cp437 unless the UTF-8 flag
/// is set), the flag itself, compression method, mode and content.
let zipInspector = #"""
import base64, json, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    bad = z.testzip()
    entries = [{
        "name": i.filename,
        "utf8Flag": bool(i.flag_bits & 0x800),
        "method": i.compress_type,
        "size": i.file_size,
        "mode": i.external_attr >> 16,
        "data": base64.b64encode(z.read(i)).decode(),
    } for i in z.infolist()]
print(json.dumps({"firstBadEntry": bad, "entries": entries}))
"""#

struct ZipInspection: Decodable {
    struct Entry: Decodable {
        let name: String
        let utf8Flag: Bool
        let method: Int
        let size: Int
        let mode: Int
        let data: String
    }
    let firstBadEntry: String?
    let entries: [Entry]
}

/// Python's tarfile view of a gzip-compressed tar.
let tarInspector = #"""
import base64, json, sys, tarfile
entries = []
with tarfile.open(sys.argv[1], "r:gz") as t:
    for m in t:
        f = t.extractfile(m)
        entries.append({
            "name": m.name,
            "type": m.type.decode(),
            "size": m.size,
            "mode": m.mode,
            "mtime": m.mtime,
            "paxPath": m.pax_headers.get("path"),
            "data": base64.b64encode(f.read() if f else b"").decode(),
        })
print(json.dumps(entries))
"""#

struct TarInspection: Decodable {
    let name: String
    let type: String
    let size: Int
    let mode: Int
    let mtime: Double
    let paxPath: String?
    let data: String
}
