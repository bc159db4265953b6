import Crypto
import Foundation

/// A file the export wrote, as manifest.json lists it.
struct WrittenFile: Sendable, Codable, Equatable {
    /// Path inside the archive root, e.g. `journal_entries.csv`.
    var path: String
    var bytes: Int64
    var sha256: String
}

/// Buffered writes to a new file (mode 0600: it holds personal data), hashing
/// every byte on the way so the manifest needs no second read.
final class HashingFileOutput {
    let path: String
    private var fd: Int32
    private var buffer: [UInt8] = []
    private var hasher = SHA256()
    private(set) var byteCount: Int64 = 0
    private static let flushAt = 256 * 1024

    init(path: String) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw LifecycleError(.unavailable, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        buffer.reserveCapacity(Self.flushAt + 4_096)
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    @inline(__always)
    func append(_ byte: UInt8) {
        buffer.append(byte)
    }

    func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    func append(_ text: String) {
        buffer.append(contentsOf: text.utf8)
    }

    func append(_ bytes: [UInt8]) {
        buffer.append(contentsOf: bytes)
    }

    /// Called between rows: the buffer may run past `flushAt` by one row, never by more.
    func flushIfFull() throws {
        if buffer.count >= Self.flushAt { try flush() }
    }

    private func flush() throws {
        guard !buffer.isEmpty else { return }
        try buffer.withUnsafeBytes { bytes in
            hasher.update(bufferPointer: bytes)
            var offset = 0
            while offset < bytes.count {
                let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw LifecycleError(.unavailable, "cannot write \(path): \(String(cString: strerror(errno)))")
                }
                offset += n
            }
        }
        byteCount += Int64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes and closes the file; returns its size and SHA-256.
    func finish(archivePath: String) throws -> WrittenFile {
        try flush()
        let closed = close(fd)
        fd = -1
        guard closed == 0 else {
            throw LifecycleError(.unavailable, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return WrittenFile(path: archivePath, bytes: byteCount, sha256: FileDigest.hex(hasher.finalize()))
    }
}

/// JSON text: UTF-8 as is, only `"`, `\` and control characters escaped.
enum JSONText {
    static func appendString(_ text: String, to output: HashingFileOutput) {
        output.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if start < index { output.append(UnsafeBufferPointer(rebasing: bytes[start..<index])) }
                switch byte {
                case UInt8(ascii: "\""): output.append("\\\"")
                case UInt8(ascii: "\\"): output.append("\\\\")
                case 0x0A: output.append("\\n")
                case 0x0D: output.append("\\r")
                case 0x09: output.append("\\t")
                default:
                    output.append("\\u00")
                    output.append(hexDigit(byte >> 4))
                    output.append(hexDigit(byte & 0x0F))
                }
                start = index + 1
            }
            if start < bytes.count { output.append(UnsafeBufferPointer(rebasing: bytes[start..<bytes.count])) }
        }
        output.append(UInt8(ascii: "\""))
    }

    static func appendValue(_ value: ExportValue, to output: HashingFileOutput) {
        switch value {
        case .null: output.append("null")
        case .integer(let number): output.append(String(number))
        // JSON has no NaN or infinity.
        case .real(let number): output.append(number.isFinite ? "\(number)" : "null")
        case .text(let text): appendString(text, to: output)
        case .timestamp(let date):
            output.append(UInt8(ascii: "\""))
            ExportTime.appendISO8601(date, to: output)
            output.append(UInt8(ascii: "\""))
        case .bytes(let data): appendString(data.base64EncodedString(), to: output)
        }
    }

    static func string(_ text: String) -> String {
        var escaped = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}

/// CSV per RFC 4180: comma-separated, CRLF line ends, fields quoted when they hold a
/// comma, quote, CR or LF, quotes doubled.
enum CSVText {
    /// First characters that make a spreadsheet treat a cell as a formula (OWASP, "CSV Injection").
    static let formulaStarters: Set<UInt8> = [
        UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "@"), 0x09, 0x0D,
    ]

    /// Text cells only: numbers are numbers (a font offset of -2 stays -2), and the JSON
    /// files keep every text exactly as stored. A neutralised cell gets a leading
    /// apostrophe and is always quoted.
    static func appendText(_ text: String, to output: HashingFileOutput) {
        var text = text
        text.withUTF8 { bytes in
            let neutralise = bytes.first.map { formulaStarters.contains($0) } ?? false
            var needsQuotes = neutralise
            if !needsQuotes {
                for byte in bytes where byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\"") || byte == 0x0A || byte == 0x0D {
                    needsQuotes = true
                    break
                }
            }
            guard needsQuotes else {
                output.append(bytes)
                return
            }
            output.append(UInt8(ascii: "\""))
            if neutralise { output.append(UInt8(ascii: "'")) }
            var start = 0
            for index in 0..<bytes.count where bytes[index] == UInt8(ascii: "\"") {
                output.append(UnsafeBufferPointer(rebasing: bytes[start...index]))
                output.append(UInt8(ascii: "\""))
                start = index + 1
            }
            if start < bytes.count { output.append(UnsafeBufferPointer(rebasing: bytes[start..<bytes.count])) }
            output.append(UInt8(ascii: "\""))
        }
    }

    static func appendValue(_ value: ExportValue, to output: HashingFileOutput) {
        switch value {
        case .null: break
        case .integer(let number): output.append(String(number))
        case .real(let number): if number.isFinite { output.append("\(number)") }
        case .text(let text): appendText(text, to: output)
        case .timestamp(let date): ExportTime.appendISO8601(date, to: output)
        case .bytes(let data): output.append(data.base64EncodedString())
        }
    }
}

/// Writes one exported table as `<file>.json` (an array of objects, keys in the map's
/// column order, one row per line) and `<file>.csv` (header row, then the same rows).
final class TableFileWriter {
    let json: HashingFileOutput
    let csv: HashingFileOutput
    let fileStem: String
    private let keyPrefixes: [[UInt8]]
    private(set) var rowCount = 0

    init(directory: String, table: AccountDataMap.Table, fileStem: String) throws {
        self.fileStem = fileStem
        json = try HashingFileOutput(path: (directory as NSString).appendingPathComponent(fileStem + ".json"))
        csv = try HashingFileOutput(path: (directory as NSString).appendingPathComponent(fileStem + ".csv"))
        // `{"id":` for the first key, `,"text":` for the others, escaped once.
        keyPrefixes = table.columns.enumerated().map { index, column in
            Array(((index == 0 ? "{" : ",") + JSONText.string(column) + ":").utf8)
        }
        json.append("[")
        for (index, column) in table.columns.enumerated() {
            if index > 0 { csv.append(UInt8(ascii: ",")) }
            CSVText.appendText(column, to: csv)
        }
        csv.append("\r\n")
    }

    func write(_ values: ArraySlice<ExportValue>) throws {
        json.append(rowCount == 0 ? "\n" : ",\n")
        for (index, value) in zip(0..., values) {
            json.append(keyPrefixes[index])
            if index > 0 { csv.append(UInt8(ascii: ",")) }
            if case .timestamp(let date) = value {
                // Formatted once for both files.
                let text = ExportTime.iso8601(date)
                json.append(UInt8(ascii: "\""))
                json.append(text)
                json.append(UInt8(ascii: "\""))
                csv.append(text)
            } else {
                JSONText.appendValue(value, to: json)
                CSVText.appendValue(value, to: csv)
            }
        }
        json.append(UInt8(ascii: "}"))
        csv.append("\r\n")
        rowCount += 1
        try json.flushIfFull()
        try csv.flushIfFull()
    }

    func finish() throws -> [WrittenFile] {
        json.append(rowCount == 0 ? "]\n" : "\n]\n")
        return [try json.finish(archivePath: fileStem + ".json"), try csv.finish(archivePath: fileStem + ".csv")]
    }
}

/// ISO-8601 UTC timestamps without a formatter per value: exports write one per row.
enum ExportTime {
    /// `2025-03-01T08:00:00Z`, with `.SSS` milliseconds only when they are not zero.
    static func appendISO8601(_ date: Date, to output: HashingFileOutput) {
        output.append(iso8601(date))
    }

    static func iso8601(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(interval.rounded(.down))
        var milliseconds = Int(((interval - interval.rounded(.down)) * 1_000).rounded())
        if milliseconds == 1_000 {
            milliseconds = 0
            seconds += 1
        }
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var value = value
            for _ in 0..<count {
                bytes.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                value %= divisor
                divisor = max(1, divisor / 10)
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        if milliseconds != 0 {
            bytes.append(UInt8(ascii: "."))
            digits(milliseconds, 3)
        }
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `20260101T000000Z`: sorts by time and is safe in file names.
    static func compact(_ date: Date) -> String {
        iso8601(Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)))
            .replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ":", with: "")
    }
}
