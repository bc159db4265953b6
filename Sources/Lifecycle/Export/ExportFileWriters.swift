import Archiving
import Crypto
import Foundation

/// A file the export wrote, as manifest.json lists it.
struct WrittenFile: Sendable, Codable, Equatable {
    /// Path inside the archive root, e.g. `journal_entries.csv`.
    var path: String
    var bytes: Int64
    var sha256: String
}

/// Bytes on their way to a file, appended through a raw pointer. A struct used through
/// `inout`: the table writers append a few dozen pieces per row, and on a class's
/// stored property every one of them would cost a runtime exclusivity check.
struct OutputBytes: ~Copyable {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit {
        base.deallocate()
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    mutating func removeAll() {
        count = 0
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        if count == capacity { grow(to: count + 1) }
        base[count] = byte
        count += 1
    }

    mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        if count + bytes.count > capacity { grow(to: count + bytes.count) }
        (base + count).update(from: source, count: bytes.count)
        count += bytes.count
    }

    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { append($0) }
    }

    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { append($0) }
    }

    /// Appends a copy of bytes already in this buffer, from `start` to the end.
    mutating func appendCopy(from start: Int, into other: inout OutputBytes) {
        other.append(UnsafeBufferPointer(start: base + start, count: count - start))
    }

    private mutating func grow(to needed: Int) {
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: max(needed, capacity * 2))
        grown.moveInitialize(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = max(needed, capacity * 2)
    }
}

/// Buffered writes to a new file (mode 0600: it holds personal data) or straight into
/// an archive's open entry, hashing every byte on the way so the manifest needs no
/// second read.
final class HashingFileOutput {
    /// The file, or the entry's name.
    let path: String
    private var fd: Int32
    private let entry: ArchiveWriter?
    private var buffer: OutputBytes
    private var hasher = SHA256()
    private(set) var byteCount: Int64 = 0
    private static let flushAt = 256 * 1024

    init(path: String) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw LifecycleError(.unavailable, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        entry = nil
        buffer = OutputBytes(capacity: Self.flushAt + 4_096)
    }

    /// Into the entry `writer` has open, named `entryName`; the caller finishes the entry
    /// after ``finish(archivePath:)``.
    init(entryName: String, in writer: ArchiveWriter) {
        path = entryName
        fd = -1
        entry = writer
        buffer = OutputBytes(capacity: Self.flushAt + 4_096)
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Appends through the buffer itself: one access for any number of appends.
    @inline(__always)
    func appending<Result>(_ body: (inout OutputBytes) throws -> Result) rethrows -> Result {
        try body(&buffer)
    }

    func append(_ byte: UInt8) {
        buffer.append(byte)
    }

    func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        buffer.append(bytes)
    }

    func append(_ text: String) {
        buffer.append(text)
    }

    func append(_ bytes: [UInt8]) {
        buffer.append(bytes)
    }

    /// Called between rows: the buffer may run past `flushAt` by one row, never by more.
    func flushIfFull() throws {
        if buffer.count >= Self.flushAt { try flush() }
    }

    private func flush() throws {
        guard buffer.count > 0 else { return }
        let bytes = buffer.bytes
        hasher.update(bufferPointer: bytes)
        if let entry {
            try entry.write(bytes)
        } else {
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
        byteCount += Int64(bytes.count)
        buffer.removeAll()
    }

    /// Flushes and closes the file; returns its size and SHA-256.
    func finish(archivePath: String) throws -> WrittenFile {
        try flush()
        if entry != nil {
            return WrittenFile(path: archivePath, bytes: byteCount, sha256: FileDigest.hex(hasher.finalize()))
        }
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
    static func appendString(_ text: String, to output: inout OutputBytes) {
        var text = text
        text.withUTF8 { appendString(utf8: $0, to: &output) }
    }

    static func appendString(utf8 bytes: UnsafeBufferPointer<UInt8>, to output: inout OutputBytes) {
        output.append(UInt8(ascii: "\""))
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
        output.append(UInt8(ascii: "\""))
    }

    static func appendValue(_ value: ExportValue, to output: inout OutputBytes) {
        switch value {
        case .null: output.append("null")
        case .integer(let number): output.append(String(number))
        // JSON has no NaN or infinity.
        case .real(let number): output.append(number.isFinite ? "\(number)" : "null")
        case .text(let text): appendString(text, to: &output)
        case .timestamp(let date):
            output.append(UInt8(ascii: "\""))
            ExportTime.appendISO8601(date, to: &output)
            output.append(UInt8(ascii: "\""))
        case .boolean(let flag): output.append(flag ? "true" : "false")
        case .bytes(let data): appendString(data.base64EncodedString(), to: &output)
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
    @inline(__always)
    static func startsFormula(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "@"), 0x09, 0x0D: true
        default: false
        }
    }

    /// Text cells only: numbers are numbers (a font offset of -2 stays -2), and the JSON
    /// files keep every text exactly as stored. A neutralised cell gets a leading
    /// apostrophe and is always quoted.
    static func appendText(_ text: String, to output: inout OutputBytes) {
        var text = text
        text.withUTF8 { appendText(utf8: $0, to: &output) }
    }

    static func appendText(utf8 bytes: UnsafeBufferPointer<UInt8>, to output: inout OutputBytes) {
        let neutralise = bytes.first.map(startsFormula) ?? false
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

    static func appendValue(_ value: ExportValue, to output: inout OutputBytes) {
        switch value {
        case .null: break
        case .integer(let number): output.append(String(number))
        case .real(let number): if number.isFinite { output.append("\(number)") }
        case .text(let text): appendText(text, to: &output)
        case .timestamp(let date): ExportTime.appendISO8601(date, to: &output)
        case .boolean(let flag): output.append(flag ? "true" : "false")
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

    convenience init(directory: String, columns: [String], fileStem: String) throws {
        try self.init(
            json: HashingFileOutput(path: (directory as NSString).appendingPathComponent(fileStem + ".json")),
            csv: HashingFileOutput(path: (directory as NSString).appendingPathComponent(fileStem + ".csv")),
            columns: columns, fileStem: fileStem)
    }

    init(json: HashingFileOutput, csv: HashingFileOutput, columns: [String], fileStem: String) {
        self.fileStem = fileStem
        self.json = json
        self.csv = csv
        // `{"id":` for the first key, `,"text":` for the others, escaped once.
        keyPrefixes = columns.enumerated().map { index, column in
            Array(((index == 0 ? "{" : ",") + JSONText.string(column) + ":").utf8)
        }
        json.append("[")
        csv.appending { csv in
            for (index, column) in columns.enumerated() {
                if index > 0 { csv.append(UInt8(ascii: ",")) }
                CSVText.appendText(column, to: &csv)
            }
            csv.append("\r\n")
        }
    }

    func write(_ values: ArraySlice<ExportValue>) throws {
        let first = rowCount == 0
        keyPrefixes.withUnsafeBufferPointer { prefixes in
            json.appending { json in
                csv.appending { csv in
                    json.append(first ? 0x0A : UInt8(ascii: ","))
                    if !first { json.append(0x0A) }
                    var index = 0
                    for value in values {
                        prefixes[index].withUnsafeBufferPointer { json.append($0) }
                        if index > 0 { csv.append(UInt8(ascii: ",")) }
                        switch value {
                        case .text(var text):
                            text.withUTF8 { bytes in
                                JSONText.appendString(utf8: bytes, to: &json)
                                CSVText.appendText(utf8: bytes, to: &csv)
                            }
                        case .timestamp(let date):
                            // Formatted once for both files.
                            json.append(UInt8(ascii: "\""))
                            let start = json.count
                            ExportTime.appendISO8601(date, to: &json)
                            json.appendCopy(from: start, into: &csv)
                            json.append(UInt8(ascii: "\""))
                        default:
                            JSONText.appendValue(value, to: &json)
                            CSVText.appendValue(value, to: &csv)
                        }
                        index += 1
                    }
                    json.append(UInt8(ascii: "}"))
                    csv.append(0x0D)
                    csv.append(0x0A)
                }
            }
        }
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
    static func appendISO8601(_ date: Date, to output: inout OutputBytes) {
        let interval = date.timeIntervalSince1970
        var seconds = Int(interval.rounded(.down))
        var milliseconds = Int(((interval - interval.rounded(.down)) * 1_000).rounded())
        if milliseconds == 1_000 {
            milliseconds = 0
            seconds += 1
        }
        // Civil date from days since 1970-01-01, proleptic Gregorian (H. Hinnant's
        // civil_from_days): what gmtime gives, without a call and a struct per value.
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var value = value
            for _ in 0..<count {
                output.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                value %= divisor
                divisor = max(1, divisor / 10)
            }
        }
        digits(year, 4)
        output.append(UInt8(ascii: "-"))
        digits(month, 2)
        output.append(UInt8(ascii: "-"))
        digits(day, 2)
        output.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3_600, 2)
        output.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        output.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        if milliseconds != 0 {
            output.append(UInt8(ascii: "."))
            digits(milliseconds, 3)
        }
        output.append(UInt8(ascii: "Z"))
    }

    static func iso8601(_ date: Date) -> String {
        var bytes = OutputBytes(capacity: 32)
        appendISO8601(date, to: &bytes)
        return String(decoding: bytes.bytes, as: UTF8.self)
    }

    /// `20260101T000000Z`: sorts by time and is safe in file names.
    static func compact(_ date: Date) -> String {
        iso8601(Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)))
            .replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ":", with: "")
    }
}
