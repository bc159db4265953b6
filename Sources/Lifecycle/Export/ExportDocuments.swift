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
        var photoID: String?

        enum CodingKeys: String, CodingKey {
            case path, bytes, sha256, photoID = "photo_id"
        }
    }

    struct OmittedPhoto: Codable, Equatable {
        var photoID: String
        var reason: String

        enum CodingKeys: String, CodingKey {
            case photoID = "photo_id", reason
        }
    }

    var formatVersion: Int
    var exportID: String
    var accountID: String
    var archiveRoot: String
    var generatedAt: String
    var expiresAt: String
    var rowCounts: [String: Int]
    var files: [File]
    /// Absent from an app export's manifest, which lists `omitted_files` instead.
    var omittedPhotos: [OmittedPhoto]?

    enum CodingKeys: String, CodingKey {
        case formatVersion = "format_version", exportID = "export_id", accountID = "account_id", archiveRoot = "archive_root"
        case generatedAt = "generated_at", expiresAt = "expires_at", rowCounts = "row_counts", files
        case omittedPhotos = "omitted_photos"
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
    static func accountJSON(
        account: Account, preferences: Preferences?, statistics: ExportStatistics, profilePhotoPath: String?,
        profilePhotoOmitted: Bool
    ) -> String {
        let minutes = Double(statistics.meditationSeconds) / 60
        let profile: OrderedJSON = .object([
            ("id", .string(account.id)),
            ("email", .optional(account.email)),
            ("first_name", .optional(account.firstName)),
            ("last_name", .optional(account.lastName)),
            ("display_name", .optional(account.displayName)),
            ("bio", .optional(account.bio)),
            ("primary_sport", .optional(account.primarySport)),
            ("morning_reminder_time", .optional(account.morningReminderTime)),
            ("timezone", .optional(account.timezone)),
            // The archive path of the photo, or null; omitted photos are listed in manifest.json.
            ("profile_photo", profilePhotoOmitted ? .null : .optional(profilePhotoPath)),
            ("created_at", .timestamp(account.createdAt)),
        ])
        let preferencesJSON: OrderedJSON = preferences.map { prefs in
            .object([
                ("theme", .string(prefs.theme.rawValue)),
                ("font_size_offset", .integer(Int64(prefs.fontSizeOffset))),
                ("notifications_enabled", .bool(prefs.notificationsEnabled)),
                ("daily_reminder_time", .optional(prefs.dailyReminderTime)),
            ])
        } ?? .null
        let document: OrderedJSON = .object([
            ("profile", profile),
            ("preferences", preferencesJSON),
            ("subscription", .object([("status", .optional(account.subscriptionStatus))])),
            ("integrations", .object([
                ("whoop", .bool(account.integrations.whoop)),
                ("strava", .bool(account.integrations.strava)),
                ("apple_health", .bool(account.integrations.appleHealth)),
                ("fitness", .bool(account.integrations.fitness)),
            ])),
            ("statistics", .object([
                ("mesocycles_completed", .integer(Int64(statistics.mesocyclesCompleted))),
                ("mesocycles_total", .integer(Int64(statistics.mesocyclesTotal))),
                ("meditation_sessions", .integer(Int64(statistics.meditationSessions))),
                ("meditation_minutes_total", minutes.rounded() == minutes ? .integer(Int64(minutes)) : .number((minutes * 10).rounded() / 10)),
            ])),
        ])
        return document.rendered() + "\n"
    }

    static let tableDescriptions: [String: String] = [
        "journal_entries": "your journal entries",
        "photos": "the list of your photos: ids, dates, sizes and checksums (the pictures are in photos/)",
        "mesocycles": "your training blocks (mesocycles) and their status",
        "meditation_sessions": "your meditation sessions and how long each lasted",
    ]

    /// The README of an app's export: the app's tables by the file names its map gives.
    static func appReadme(accountID: String, generatedAt: Date, expiresAt: Date, tableFiles: [(table: String, stem: String)], rateLimitHours: Int) -> String {
        let row = rowFormat(stems: tableFiles.map(\.stem))
        var lines = introduction(accountID: accountID, generatedAt: generatedAt, expiresAt: expiresAt, rateLimitHours: rateLimitHours) + [
            row("README.txt", "this file"),
        ]
        for file in tableFiles {
            lines.append(row("\(file.stem).json/.csv", "your rows of \(file.table)"))
        }
        lines += [
            row("files/", "every file your rows name (photos, attachments), byte for byte as stored, in"),
            row("", "files/TABLE/YEAR/MONTH/DAY/ by the date of the row (UTC) where it has one"),
            row("manifest.json", "every file with its size in bytes and SHA-256 checksum, the storage key it"),
            row("", "came from, the number of rows per file, and any file that could not be"),
            row("", "included (\"omitted_files\")"),
            "",
        ] + formatNotes
        return lines.joined(separator: "\n")
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

    static func readme(
        accountID: String, generatedAt: Date, expiresAt: Date, tableFiles: [String], timeZone: String,
        rateLimitHours: Int
    ) -> String {
        let row = rowFormat(stems: tableFiles)
        var lines = introduction(accountID: accountID, generatedAt: generatedAt, expiresAt: expiresAt, rateLimitHours: rateLimitHours) + [
            row("README.txt", "this file"),
            row("manifest.json", "every file with its size in bytes and SHA-256 checksum, the number of"),
            row("", "rows per table, and any photo that could not be included (\"omitted_photos\")"),
            row("account.json", "your profile, preferences, subscription, connected integrations and statistics"),
        ]
        for stem in tableFiles {
            lines.append(row("\(stem).json/.csv", tableDescriptions[stem] ?? "your \(stem.replacingOccurrences(of: "_", with: " "))"))
        }
        lines += [
            row("photos/", "your photos in original resolution, byte for byte as uploaded, in folders"),
            row("", "photos/YEAR/MONTH/DAY/ by the day each was taken (else uploaded), in your time"),
            row("", "zone (\(timeZone))"),
            "",
        ] + formatNotes
        return lines.joined(separator: "\n")
    }
}
