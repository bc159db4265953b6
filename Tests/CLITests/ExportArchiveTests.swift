import Foundation
import GRDB
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// Archives from `lifecycle export`, read back by tools that share no code with ours.
@Suite(.serialized)
struct ExportArchiveTests {
    /// Text a spreadsheet would run, names in several scripts, ids that try to leave the archive.
    static let trickyEntries = #"""
    [{"id":"u1-e1","created_at":"2025-03-01T08:00:00Z","text":"Tempo run 🏃 — café, Zoë, 東京, ß, Ωμέγα","photos":[{"id":"u1-p1","file":"photos/run.jpg","taken_at":"2025-03-01T07:55:00Z"}]},
     {"id":"u1-e2","created_at":"2025-03-02T08:00:00Z","text":"=HYPERLINK(\"http://evil.example\",\"click\")"},
     {"id":"u1-e3","created_at":"2025-03-03T08:00:00Z","text":"+1+cmd|' /C calc'!A0"},
     {"id":"u1-e4","created_at":"2025-03-04T08:00:00Z","text":"-2+3"},
     {"id":"u1-e5","created_at":"2025-03-05T08:00:00Z","text":"@SUM(A1:A9)"},
     {"id":"u1-e6","created_at":"2025-03-06T08:00:00Z","text":"\tleading tab"},
     {"id":"u1-e7","created_at":"2025-03-07T08:00:00Z","text":"\rleading return"},
     {"id":"u1-e8","created_at":"2025-03-08T08:00:00Z","text":"quotes \"inside\", commas, and a\nline break"}]
    """#.replacingOccurrences(of: "\n", with: "")

    func trickyWorkspace(_ backend: Backend) async throws -> Workspace {
        let workspace = try await Workspace.make(backend)
        let line = ImportFixture.account(id: "u1", firstName: "Zoë-Ångström")
            .replacingOccurrences(
                of: #"[{"id":"u1-e1","created_at":"2025-03-01T08:00:00Z","text":"Tempo run 🏃 café 東京","photos":[{"id":"u1-p1","file":"photos/run.jpg","taken_at":"2025-03-01T07:55:00Z"}]}]"#,
                with: Self.trickyEntries)
        #expect(line.contains("HYPERLINK"))
        try await ExportCLI.importAccounts(workspace, [line])
        // Ids no import would let in, written straight into the database.
        let source = repositoryRoot + "/Jobs/demo/photos/trail.jpg"
        let hostile = ["café-東京-🏃", "../../../../tmp/escaped", "/etc/passwd", "..", "a\\..\\b", "\u{202E}gpj.exe", "x/../../y"]
        for (index, id) in hostile.enumerated() {
            try await ExportCLI.insertPhoto(
                workspace, accountID: "u1", photoID: id, blobName: "hostile-\(index)", source: source,
                takenAt: Date(timeIntervalSince1970: 1_741_000_000))
        }
        return workspace
    }

    @Test(arguments: Backend.allCases)
    func aZipIsReadByUnzipBsdtarAndPythonWithEveryHashAndCSVRowRight(_ backend: Backend) async throws {
        let workspace = try await trickyWorkspace(backend)
        let ready = try await ExportCLI.exportNow(workspace, "u1")
        let archive = try #require(ready.archivePath)
        #expect(archive.hasSuffix("/accounts/u1/exports/\(ready.exportID).zip"))

        let unzip = try await ExportCLI.tool("/usr/bin/unzip", ["-t", archive])
        #expect(unzip.status == 0, "\(unzip.output)")
        #expect(unzip.output.contains("No errors detected"))
        let bsdtar = try await ExportCLI.tool("/usr/bin/bsdtar", ["-tf", archive])
        #expect(bsdtar.status == 0, "\(bsdtar.output)")

        let report = try await ExportCLI.checkWithPython(archive, format: "zip")
        // Emoji, accents and CJK survive in JSON and CSV; files are named by their storage
        // keys, which name hostile ids by a hash (bsdtar and Python agree on every name).
        #expect(Set(bsdtar.output.split(separator: "\n").map(String.init)) == Set(report.names))
        // README, manifest, the user row and five tables in JSON and CSV, and the nine photos,
        // hostile ids among them, as plain names inside the root.
        let tableFiles = 6 * 2
        let photoFiles = 9
        #expect(report.names.count == 2 + tableFiles + photoFiles, "\(report.names)")
        #expect(report.names.contains("\(report.root)/files/photos/2025/03/01/u1-p1.jpg"))
        let photosJSON = try await ExportCLI.tool("/usr/bin/unzip", ["-p", archive, "\(report.root)/photos.json"])
        #expect(photosJSON.output.contains("café-東京-🏃"), "\(photosJSON.output.prefix(500))")
        #expect(!report.names.contains { name in
            name.split(separator: "/").contains { $0 == ".." || $0 == "." } || name.contains("\u{202E}") || name.contains("\\")
        })

        let unpacked = workspace.root + "/unpacked"
        try FileManager.default.createDirectory(atPath: unpacked, withIntermediateDirectories: true)
        #expect(try await ExportCLI.tool("/usr/bin/unzip", ["-q", archive, "-d", unpacked]).status == 0)
        let folder = unpacked + "/" + report.root
        let csv = try String(contentsOfFile: folder + "/journal_entries.csv", encoding: .utf8)
        #expect(csv.contains("\"'=HYPERLINK(\"\"http://evil.example\"\",\"\"click\"\")\""))
        #expect(csv.contains("\"'+1+cmd|' /C calc'!A0\""))
        #expect(csv.contains("\"'-2+3\"") && csv.contains("\"'@SUM(A1:A9)\"") && csv.contains("\"'\tleading tab\"") && csv.contains("\"'\rleading return\""))
        #expect(csv.contains("Tempo run 🏃 — café, Zoë, 東京, ß, Ωμέγα"))
        let json = try String(contentsOfFile: folder + "/journal_entries.json", encoding: .utf8)
        #expect(json.contains(#""text":"=HYPERLINK(\"http://evil.example\",\"click\")""#))
        #expect(json.contains("Tempo run 🏃 — café, Zoë, 東京, ß, Ωμέγα"))
        let account = try String(contentsOfFile: folder + "/account.json", encoding: .utf8)
        #expect(account.contains("\"first_name\":\"Zoë-Ångström\""), "\(account)")
        let readme = try String(contentsOfFile: folder + "/README.txt", encoding: .utf8)
        #expect(readme.contains("leading apostrophe"))
        // Nothing was written outside the extraction folder.
        #expect(!FileManager.default.fileExists(atPath: "/tmp/escaped.jpg"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: unpacked) == [report.root])
    }

    @Test(arguments: Backend.allCases)
    func aTarGzIsReadByPythonTarfileAndBsdtar(_ backend: Backend) async throws {
        let workspace = try await trickyWorkspace(backend)
        let ready = try await ExportCLI.exportNow(workspace, "u1", ["--format", "tar.gz"])
        let archive = try #require(ready.archivePath)
        #expect(archive.hasSuffix(".tar.gz"))
        let report = try await ExportCLI.checkWithPython(archive, format: "tar.gz")
        #expect(report.names.contains("\(report.root)/files/photos/2025/03/01/u1-p1.jpg"))
        let bsdtar = try await ExportCLI.tool("/usr/bin/bsdtar", ["-tzf", archive])
        #expect(bsdtar.status == 0, "\(bsdtar.output)")
        #expect(Set(bsdtar.output.split(separator: "\n").map(String.init)) == Set(report.names))
        let gzip = try await ExportCLI.tool("/usr/bin/env", ["gzip", "-t", archive])
        #expect(gzip.status == 0, "\(gzip.output)")
    }
}
