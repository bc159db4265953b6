import Foundation
import Testing
@testable import Lifecycle

/// The pieces the archive is made of: CSV and JSON cells, timestamps, entry names, links.
struct ExportFormatTests {
    private func writeTable(_ rows: [[ExportValue]], columns: [String]) throws -> (json: String, csv: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("export-format-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writer = try TableFileWriter(directory: directory, columns: columns, fileStem: "things")
        for row in rows { try writer.write(row[...]) }
        let files = try writer.finish()
        let json = try String(contentsOfFile: directory + "/things.json", encoding: .utf8)
        let csv = try String(contentsOfFile: directory + "/things.csv", encoding: .utf8)
        // The manifest's figures are those of the bytes on disk.
        #expect(files[0].bytes == Int64(json.utf8.count))
        #expect(files[1].sha256 == (try FileDigest.sha256(ofFile: directory + "/things.csv").hex))
        return (json, csv)
    }

    @Test func csvQuotesWhatRFC4180RequiresAndNothingElse() throws {
        let (_, csv) = try writeTable([
            [.text("plain"), .text("a,b"), .text("say \"hi\""), .text("two\nlines"), .text("café 東京 🏃")],
        ], columns: ["a", "b", "c", "d", "e"])
        #expect(csv == "a,b,c,d,e\r\nplain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",café 東京 🏃\r\n")
    }

    @Test func spreadsheetFormulaCellsAreNeutralisedButNumbersAndJSONAreNot() throws {
        let starters = ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]
        let (json, csv) = try writeTable([starters.map { .text($0) } + [.integer(-2)]], columns: ["a", "b", "c", "d", "e", "f", "g"])
        #expect(csv.hasPrefix("a,b,c,d,e,f,g\r\n\"'=HYPERLINK(\"\"http://x\"\")\",\"'+1+1\",\"'-2+3\",\"'@SUM(A1)\",\"'\tcmd\",\"'\rcmd\",-2\r\n"))
        // A formula starter later in the cell is harmless and left alone.
        let (_, later) = try writeTable([[.text("total =SUM(A1)")]], columns: ["a"])
        #expect(later == "a\r\ntotal =SUM(A1)\r\n")
        // JSON keeps the text exactly as stored.
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        #expect(parsed[0]["a"] as? String == starters[0])
        #expect(parsed[0]["f"] as? String == "\rcmd")
        #expect(parsed[0]["g"] as? Int == -2)
    }

    @Test func jsonEscapesControlCharactersAndKeepsUnicodeAndColumnOrder() throws {
        let tricky = "quote \" backslash \\ nul \u{0} bell \u{7} tab \t line\nreturn\r emoji 🏃 CJK 東京 accents Zoë"
        let (json, _) = try writeTable([[.text(tricky), .null, .real(1.5), .integer(Int64.max)], [.text(""), .text("x"), .null, .integer(0)]], columns: ["z", "a", "m", "b"])
        #expect(json.hasPrefix("[\n{\"z\":"))
        #expect(json.contains("emoji 🏃 CJK 東京 accents Zoë"))
        #expect(json.contains("\\u0000") && json.contains("\\u0007"))
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        #expect(parsed.count == 2)
        #expect(parsed[0]["z"] as? String == tricky)
        #expect(parsed[0]["a"] is NSNull)
        #expect(parsed[0]["m"] as? Double == 1.5)
        // Keys in the map's column order, row after row.
        let keyOrder = json.components(separatedBy: "\n")[1].split(separator: ":").count
        #expect(keyOrder == 5)
        #expect(json.components(separatedBy: "\n")[2] == "{\"z\":\"\",\"a\":\"x\",\"m\":null,\"b\":0}")
        let (empty, emptyCSV) = try writeTable([], columns: ["a"])
        #expect(empty == "[]\n")
        #expect(emptyCSV == "a\r\n")
    }

    @Test func timestampsAreISO8601UTCWithMillisecondsOnlyWhenPresent() {
        #expect(ExportTime.iso8601(Date(timeIntervalSince1970: 1_740_816_000)) == "2025-03-01T08:00:00Z")
        #expect(ExportTime.iso8601(Date(timeIntervalSince1970: 1_740_816_000.123)) == "2025-03-01T08:00:00.123Z")
        #expect(ExportTime.iso8601(Date(timeIntervalSince1970: 1_740_816_000.9996)) == "2025-03-01T08:00:01Z")
        #expect(ExportTime.iso8601(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(ExportTime.compact(Date(timeIntervalSince1970: 1_740_816_000.5)) == "20250301T080000Z")
    }

    @Test func entryNamesFromHostileIdsStayInsideTheArchiveRoot() {
        let hostile = ["..", "../../etc/passwd", "/etc/passwd", "a/../../b", "..\\..\\win", "C:evil", "photo.", " .hidden ",
                       "\u{202E}gpj.exe", "nul\u{0}byte", "line\nbreak", "", String(repeating: "é", count: 300), "c1\u{85}next", "del\u{7F}"]
        var names = Set<String>()
        for id in hostile {
            let name = ExportNames.segment(id, fallback: "photo")
            #expect(!name.contains("/") && !name.contains("\\"), "\(id) → \(name)")
            #expect(name != ".." && name != "." && !name.hasPrefix("."), "\(id) → \(name)")
            #expect(!name.unicodeScalars.contains { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }, "\(id) → \(name)")
            #expect(name.utf8.count <= 200)
            names.insert(name)
        }
        #expect(names.count == hostile.count, "two ids share a name")
        // Ids that are already safe, in any script, are kept as they are.
        // So are the last segments of storage keys (Supabase names files as users do): spaces
        // inside, any script, either normalisation of an accent.
        for id in ["ada-p1", "café-東京-🏃", "Zoë_Ångström.2", "my holiday photo.jpg", "Ελληνικά 😀.png", "cafe\u{301}.jpg", "caf\u{E9}.jpg"] {
            #expect(ExportNames.segment(id, fallback: "photo").isExactly(id))
        }
        // A file is named by the media type its row records, for documents and media only: a
        // type another user wrote into a row never makes it a page or a program once unpacked.
        #expect(ExportNames.fileExtension(contentType: "image/heic") == "heic")
        #expect(ExportNames.fileExtension(contentType: "IMAGE/JPEG") == "jpg")
        #expect(ExportNames.fileExtension(contentType: "image/jpeg; charset=x") == "jpg")
        #expect(ExportNames.fileExtension(contentType: "application/pdf; charset=binary") == "pdf")
        for active in ["text/html", "application/hta", "application/x-msdownload", "image/svg+xml", "application/exe", "a/;", ""] {
            #expect(ExportNames.fileExtension(contentType: active) == nil, "\(active)")
        }
    }

    @Test func signedLinksVerifyAndAnyAlterationIsInvalid() {
        let signer = LinkSigner(key: Data(repeating: 7, count: 32))
        let expires = Date(timeIntervalSince1970: 1_800_000_000)
        let link = signer.link(base: "https://example.invalid/exports", exportID: "e-1", expiresAt: expires)
        #expect(link.hasPrefix("https://example.invalid/exports/e-1?expires=1800000000&sig="))
        let before = expires.addingTimeInterval(-1)
        #expect(signer.verify(link, now: before) == .valid(exportID: "e-1", expiresAt: expires))
        #expect(signer.verify(link, now: expires) == .expired(exportID: "e-1", expiresAt: expires))
        // Signing twice gives the same link: a rerun of the step changes nothing.
        #expect(signer.link(base: "https://example.invalid/exports", exportID: "e-1", expiresAt: expires) == link)

        func isInvalid(_ candidate: String) -> Bool {
            if case .invalid = signer.verify(candidate, now: before) { return true }
            return false
        }
        #expect(isInvalid(link.replacingOccurrences(of: "expires=1800000000", with: "expires=1900000000")))
        #expect(isInvalid(link.replacingOccurrences(of: "/e-1?", with: "/e-2?")))
        let signature = String(link.suffix(64))
        let flipped = String(signature.prefix(63)) + (signature.last == "0" ? "1" : "0")
        #expect(isInvalid(link.replacingOccurrences(of: signature, with: flipped)))
        #expect(isInvalid(link.replacingOccurrences(of: "&sig=", with: "&sig=00&sig=")))
        #expect(isInvalid(String(link.dropLast(2))))
        #expect(isInvalid("not a link"))
        #expect(isInvalid("https://example.invalid/exports/e-1?expires=1800000000"))
        // A link another key signed is invalid even though its form is right.
        let other = LinkSigner(key: Data(repeating: 8, count: 32)).link(base: "https://example.invalid/exports", exportID: "e-1", expiresAt: expires)
        #expect(isInvalid(other))
        // Expired and altered: the alteration wins, so a forged link never reads as merely expired.
        #expect(isInvalid(link.replacingOccurrences(of: "expires=1800000000", with: "expires=1700000000")))
    }

    @Test func aShortOrWorldReadableKeyIsRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("export-key-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = directory + "/key"
        _ = FileManager.default.createFile(
            atPath: file, contents: Data("260e405a992c9a50ca3321e10a52ded2a77fa64c09598d124ecba2388ab422b4\n".utf8), attributes: [.posixPermissions: 0o644])
        var settings = ExportSettings()
        settings.signingKeyFile = file
        #expect(throws: LifecycleError.self) { try SigningKeySource.load(settings: settings, jobsDirectory: directory, environment: [:]) }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        _ = try SigningKeySource.load(settings: settings, jobsDirectory: directory, environment: [:])
        let short = try #require(throws: LifecycleError.self) {
            try SigningKeySource.load(settings: settings, jobsDirectory: directory, environment: [SigningKeySource.environmentKey: "short"])
        }
        #expect(short.category == .unavailable)
        // Long enough, and no key: 32 spaces, one character, a short pattern, a few letters.
        for weak in [String(repeating: " ", count: 32), String(repeating: "a", count: 40), String(repeating: "a7", count: 32), "abcdabcdabcdabcdabcdabcdabcdabcdabcd", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"] {
            let refused = try #require(throws: LifecycleError.self) {
                try SigningKeySource.load(settings: settings, jobsDirectory: directory, environment: [SigningKeySource.environmentKey: weak])
            }
            #expect(refused.message.contains("too weak") && refused.message.contains("openssl rand -hex 32"), "\(refused.message)")
        }
        #expect(SecretStrength.problem(Array("cli-tests-signing-key-0123456789abcdef".utf8)) == nil)
        // A key file another user owns is theirs to replace.
        var owned = stat()
        #expect(stat(file, &owned) == 0 && SecretStrength.ownerProblem(owned) == nil)
        owned.st_uid = geteuid() &+ 1
        #expect(SecretStrength.ownerProblem(owned)?.contains("belongs to uid") == true)
        let none = try #require(throws: LifecycleError.self) {
            try SigningKeySource.load(settings: ExportSettings(), jobsDirectory: directory, environment: [:])
        }
        #expect(none.category == .unavailable)
        #expect(none.message.contains("no signing key"))
    }
}
