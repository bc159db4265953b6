import Foundation
import GRDB
@testable import SQLiteBackend
import Testing

@Suite struct StoredDateTests {
    /// The runner's own date text must be GRDB's to the byte: queue queries compare the two
    /// as strings (`run_at <= ?`), and a job written by one must be due by the other.
    @Test func writesWhatGRDBWrites() {
        var generator = SystemRandomNumberGenerator()
        var dates: [Date] = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.0005), Date(timeIntervalSince1970: -1.9999),
            Date(timeIntervalSince1970: 1_700_000_000.9999), Date(timeIntervalSince1970: 951_782_400.123),  // 2000-02-29
            Date(timeIntervalSinceReferenceDate: 0.0015), Date.distantPast, Date.distantFuture, Date(),
        ]
        for _ in 0..<20_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: -2_000_000_000...4_000_000_000, using: &generator)))
        }
        for _ in 0..<2_000 {
            // Exact millisecond boundaries and a hair either side, where truncation shows.
            let millis = Double(Int64.random(in: 0...4_000_000_000_000, using: &generator)) / 1000
            dates.append(contentsOf: [Date(timeIntervalSince1970: millis), Date(timeIntervalSince1970: millis.nextDown), Date(timeIntervalSince1970: millis.nextUp)])
        }
        var mismatches: [String] = []
        for date in dates where StoredDate(date).databaseValue != date.databaseValue {
            mismatches.append("\(date.timeIntervalSince1970): \(StoredDate(date).databaseValue) vs \(date.databaseValue)")
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) dates differ, first: \(mismatches.prefix(5))")
    }

    /// Reading through the per-batch reader gives GRDB's reading, repeated texts included.
    @Test func theReaderReadsWhatGRDBReads() {
        var reader = StoredDate.Reader()
        let values: [DatabaseValue] = [
            "2026-11-26 08:30:00.500".databaseValue, "2000-12-28 02:16:38.057".databaseValue, "2026-11-26 08:30:00.500".databaseValue,
            "2026-11-26 08:30:00".databaseValue, "2000-12-28 02:16:38.057".databaseValue, 1_764_000_000.databaseValue, .null,
        ]
        for value in values {
            #expect(reader.date(value) == Date.fromDatabaseValue(value), "\(value)")
        }
    }

    /// Stored to the nearest millisecond, as GRDB stores it, and read back as that instant.
    @Test func readsBackAsTheNearestMillisecond() throws {
        let date = Date(timeIntervalSince1970: 1_764_000_000.4567)
        let read = try #require(Date.fromDatabaseValue(StoredDate(date).databaseValue))
        #expect(abs(read.timeIntervalSince1970 - 1_764_000_000.457) < 0.0002)
    }
}
