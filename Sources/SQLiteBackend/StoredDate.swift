import Foundation
import GRDB

/// A date as GRDB stores it ("yyyy-MM-dd HH:mm:ss.SSS", UTC, to the nearest millisecond, halves up),
/// written without GRDB's `DateFormatter`: through ICU that costs a few microseconds per
/// date, and the runner binds several per job (claim, lease, done-mark), about a tenth of
/// a no-op job's whole cost. The text is the same, so it compares with every date GRDB
/// wrote, and reads back as a `Date`.
struct StoredDate: DatabaseValueConvertible {
    let date: Date

    init(_ date: Date) { self.date = date }

    var databaseValue: DatabaseValue {
        guard let text = Self.text(of: date) else { return date.databaseValue }
        return text.databaseValue
    }

    static func fromDatabaseValue(_ dbValue: DatabaseValue) -> StoredDate? {
        Date.fromDatabaseValue(dbValue).map(StoredDate.init)
    }

    /// Nil outside years 1...9999, which GRDB's formatter then writes as it does.
    static func text(of date: Date) -> String? {
        let milliseconds = (date.timeIntervalSince1970 * 1000 + 0.5).rounded(.down)
        guard milliseconds.isFinite, abs(milliseconds) < 253_402_300_800_000 else { return nil }
        let whole = Int64(milliseconds)
        var seconds = time_t(whole / 1000)
        var fraction = Int(whole % 1000)
        if fraction < 0 {
            fraction += 1000
            seconds -= 1
        }
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return nil }
        let year = Int(parts.tm_year) + 1900
        guard (1...9999).contains(year) else { return nil }
        var bytes = [UInt8](repeating: 0, count: 23)
        func put(_ value: Int, at offset: Int, digits: Int) {
            var value = value
            for index in stride(from: offset + digits - 1, through: offset, by: -1) {
                bytes[index] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
        }
        put(year, at: 0, digits: 4)
        bytes[4] = UInt8(ascii: "-")
        put(Int(parts.tm_mon) + 1, at: 5, digits: 2)
        bytes[7] = UInt8(ascii: "-")
        put(Int(parts.tm_mday), at: 8, digits: 2)
        bytes[10] = UInt8(ascii: " ")
        put(Int(parts.tm_hour), at: 11, digits: 2)
        bytes[13] = UInt8(ascii: ":")
        put(Int(parts.tm_min), at: 14, digits: 2)
        bytes[16] = UInt8(ascii: ":")
        put(Int(parts.tm_sec), at: 17, digits: 2)
        bytes[19] = UInt8(ascii: ".")
        put(fraction, at: 20, digits: 3)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension StoredDate {
    /// Dates read back from rows that mostly share them (a claim's batch was enqueued
    /// together and is leased together), each text parsed once: GRDB builds every date
    /// through an ICU calendar, a few microseconds for each of five dates of every claimed
    /// job, on the one writer thread. What it returns is GRDB's own reading.
    struct Reader {
        private var read: [String: Date] = [:]

        mutating func date(_ value: DatabaseValue) -> Date? {
            guard case .string(let text) = value.storage else { return Date.fromDatabaseValue(value) }
            if let date = read[text] { return date }
            let date = Date.fromDatabaseValue(value)
            if let date, read.count < 1024 { read[text] = date }
            return date
        }
    }
}

extension Date {
    /// For statement arguments on the runner's hot path: see `StoredDate`.
    var stored: StoredDate { StoredDate(self) }
}
