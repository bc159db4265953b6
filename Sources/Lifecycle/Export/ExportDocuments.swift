import Foundation

/// A JSON value whose object keys keep the order they were given in: account.json
/// and manifest.json read the same in every export.
indirect enum OrderedJSON {
    case object([(String, OrderedJSON)])
    case array([OrderedJSON])
    case string(String)
    case integer(Int64)
    case number(Double)
    case bool(Bool)
    case null

    static func optional(_ text: String?) -> OrderedJSON { text.map { .string($0) } ?? .null }
    static func timestamp(_ date: Date?) -> OrderedJSON { date.map { .string(ExportTime.iso8601($0)) } ?? .null }

    /// On one line, for lists with an entry per line.
    func compact() -> String {
        switch self {
        case .object(let pairs): "{" + pairs.map { "\(JSONText.string($0.0)): \($0.1.compact())" }.joined(separator: ", ") + "}"
        case .array(let items): "[" + items.map { $0.compact() }.joined(separator: ", ") + "]"
        default: rendered()
        }
    }

    /// Two-space indentation, one key per line.
    func rendered(indent: String = "") -> String {
        let inner = indent + "  "
        switch self {
        case .object(let pairs):
            if pairs.isEmpty { return "{}" }
            return "{\n" + pairs.map { "\(inner)\(JSONText.string($0.0)): \($0.1.rendered(indent: inner))" }
                .joined(separator: ",\n") + "\n\(indent)}"
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { inner + $0.rendered(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .string(let text): return JSONText.string(text)
        case .integer(let number): return String(number)
        case .number(let number): return number.isFinite ? "\(number)" : "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .null: return "null"
        }
    }
}

/// manifest.json as the verify step reads it back.
struct ExportManifest: Codable {
    struct File: Codable {
        var path: String
        var bytes: Int64
        var sha256: String
    }

    var formatVersion: Int
    var exportID: String
    var accountID: String
    var archiveRoot: String
    var generatedAt: String
    var expiresAt: String
    var rowCounts: [String: Int]
    var files: [File]

    enum CodingKeys: String, CodingKey {
        case formatVersion = "format_version", exportID = "export_id", accountID = "account_id", archiveRoot = "archive_root"
        case generatedAt = "generated_at", expiresAt = "expires_at", rowCounts = "row_counts", files
    }

    static let formatVersion = 1
}

/// Streams manifest.json to a file, one line per listed file however many there are:
/// the header's keys, `files` (the given ones, then those `more` lists), then `closing`.
enum ManifestOutput {
    static func write(
        to path: String, header: [(String, OrderedJSON)], files: [WrittenFile],
        more: (_ list: (OrderedJSON) throws -> Void) async throws -> Void, closing: (String, OrderedJSON)
    ) async throws -> WrittenFile {
        let output = try HashingFileOutput(path: path)
        output.append("{\n")
        for (key, value) in header {
            output.append("  \(JSONText.string(key)): \(value.rendered(indent: "  ")),\n")
        }
        output.append("  \"files\": [")
        var first = true
        func line(_ entry: OrderedJSON) throws {
            output.append(first ? "\n    " : ",\n    ")
            first = false
            output.append(entry.compact())
            try output.flushIfFull()
        }
        for file in files {
            try line(.object([("path", .string(file.path)), ("bytes", .integer(file.bytes)), ("sha256", .string(file.sha256))]))
        }
        try await more(line)
        output.append(first ? "],\n" : "\n  ],\n")
        output.append("  \(JSONText.string(closing.0)): \(closing.1.rendered(indent: "  "))\n")
        output.append("}\n")
        return try output.finish(archivePath: "manifest.json")
    }

    static func header(exportID: String, accountID: String, root: String, cutoff: Date, expiresAt: Date, rowCounts: [(String, Int)]) -> [(String, OrderedJSON)] {
        [
            ("format_version", .integer(Int64(ExportManifest.formatVersion))),
            ("export_id", .string(exportID)),
            ("account_id", .string(accountID)),
            ("archive_root", .string(root)),
            ("generated_at", .timestamp(cutoff)),
            ("expires_at", .timestamp(expiresAt)),
            ("row_counts", .object(rowCounts.map { ($0.0, .integer(Int64($0.1))) })),
        ]
    }
}

enum ExportDocuments {
    /// The README of an app's export: the app's tables by the file names its map gives.
    static func appReadme(
        accountID: String, generatedAt: Date, expiresAt: Date, tableFiles: [(stem: String, text: String)], timeZone: TimeZone,
        rateLimitHours: Int
    ) -> String {
        let row = rowFormat(stems: tableFiles.map(\.stem))
        var lines = introduction(accountID: accountID, generatedAt: generatedAt, expiresAt: expiresAt, rateLimitHours: rateLimitHours) + [
            row("README.txt", "this file"),
        ]
        func entry(_ name: String, _ text: String) {
            for (index, part) in wrapped(text, width: 64).enumerated() { lines.append(row(index == 0 ? name : "", part)) }
        }
        for file in tableFiles { entry("\(file.stem).json/.csv", file.text) }
        entry("files/", """
            every file your rows name (photos, attachments), byte for byte as stored, in \
            files/TABLE/YEAR/MONTH/DAY/ by the date of the row where it has one, in your time zone (\(timeZone.identifier))
            """)
        entry("manifest.json", """
            every file with its size in bytes and SHA-256 checksum, the storage key it came from, the number of rows \
            per file, and any file that could not be included ("omitted_files")
            """)
        return (lines + [""] + formatNotes).joined(separator: "\n")
    }

    static func introduction(accountID: String, generatedAt: Date, expiresAt: Date, rateLimitHours: Int) -> [String] {
        [
            "Your data export",
            "================",
            "",
            "Account:       \(accountID)",
            "Made:          \(ExportTime.iso8601(generatedAt)) (UTC)",
            "Link expires:  \(ExportTime.iso8601(expiresAt)) (UTC). The archive is deleted then; you can ask",
            "               for a new export at any time (one every \(rateLimitHours) hours).",
            "",
            "What is in this archive",
            "-----------------------",
        ]
    }

    /// Words in lines of at most `width` characters (a longer word on a line of its own).
    static func wrapped(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        return lines + [line]
    }

    /// A line of the file list: the name padded to one column wide enough for every table's files.
    static func rowFormat(stems: [String]) -> (String, String) -> String {
        let width = max(22, (stems.map { $0.count + 12 }.max() ?? 0))
        return { name, text in name.padding(toLength: max(width, name.count + 2), withPad: " ", startingAt: 0) + text }
    }

    /// How the files are written, the same in every export.
    static let formatNotes = [
        "Formats",
        "-------",
        "JSON files are UTF-8. Timestamps are ISO-8601 in UTC, for example 2025-03-01T08:00:00Z.",
        "",
        "CSV files follow RFC 4180: comma-separated, fields with commas, quotes or line breaks in",
        "double quotes, CRLF line ends, a header row first, UTF-8 without a byte-order mark (in a",
        "spreadsheet, import them as UTF-8).",
        "",
        "Spreadsheet safety: a text cell that begins with =, +, -, @, a tab or a carriage return",
        "could be run as a formula by a spreadsheet. In the CSV files such a cell is written with a",
        "leading apostrophe (') so that it shows as text. The JSON files hold every text exactly as",
        "stored.",
        "",
        "Checking the archive",
        "--------------------",
        "`sha256sum FILE` prints the checksum manifest.json lists for FILE.",
        "",
    ]
}
