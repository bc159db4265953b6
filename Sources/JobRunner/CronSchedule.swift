import Foundation

/// A five-field cron expression (minute hour day-of-month month day-of-week),
/// evaluated in UTC, plus the usual `@hourly`/`@daily`/`@weekly`/`@monthly` aliases.
/// Written here because no maintained Swift cron parser is available to this
/// package; it covers the syntax crontab(5) documents: `*`, lists, ranges, steps.
public struct CronSchedule: Sendable, Equatable, CustomStringConvertible {
    public let expression: String
    private let minutes: Set<Int>
    private let hours: Set<Int>
    private let daysOfMonth: Set<Int>
    private let months: Set<Int>
    private let daysOfWeek: Set<Int>
    private let dayOfMonthRestricted: Bool
    private let dayOfWeekRestricted: Bool

    public var description: String { expression }

    public init(_ expression: String) throws {
        let aliases = [
            "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
            "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
        ]
        let trimmed = expression.trimmingCharacters(in: .whitespaces)
        let expanded = aliases[trimmed] ?? trimmed
        let fields = expanded.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard fields.count == 5 else {
            throw JobRunnerError.invalidSchedule(
                "schedule '\(expression)': expected 5 fields (minute hour day-of-month month day-of-week) or an alias like @daily")
        }
        self.expression = trimmed
        minutes = try Self.parse(fields[0], 0...59, "minute", expression)
        hours = try Self.parse(fields[1], 0...23, "hour", expression)
        daysOfMonth = try Self.parse(fields[2], 1...31, "day-of-month", expression)
        months = try Self.parse(fields[3], 1...12, "month", expression)
        // 7 is Sunday too, as in crontab(5).
        daysOfWeek = Set(try Self.parse(fields[4], 0...7, "day-of-week", expression).map { $0 % 7 })
        dayOfMonthRestricted = fields[2] != "*"
        dayOfWeekRestricted = fields[4] != "*"
    }

    private static func parse(_ field: String, _ range: ClosedRange<Int>, _ name: String, _ expression: String) throws -> Set<Int> {
        func fail() -> JobRunnerError {
            .invalidSchedule("schedule '\(expression)': \(name) field '\(field)' is not valid (allowed \(range.lowerBound)-\(range.upperBound), '*', lists, ranges, steps)")
        }
        var values = Set<Int>()
        for part in field.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: "/", omittingEmptySubsequences: false)
            guard pieces.count <= 2 else { throw fail() }
            var step = 1
            if pieces.count == 2 {
                guard let parsed = Int(pieces[1]), parsed > 0 else { throw fail() }
                step = parsed
            }
            let base = pieces[0]
            var lower: Int
            var upper: Int
            if base == "*" {
                lower = range.lowerBound
                upper = range.upperBound
            } else if let dash = base.firstIndex(of: "-") {
                guard let from = Int(base[..<dash]), let to = Int(base[base.index(after: dash)...]) else { throw fail() }
                lower = from
                upper = to
            } else {
                guard let single = Int(base) else { throw fail() }
                lower = single
                upper = pieces.count == 2 ? range.upperBound : single
            }
            guard range.contains(lower), range.contains(upper), lower <= upper else { throw fail() }
            values.formUnion(stride(from: lower, through: upper, by: step))
        }
        return values
    }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    public func matches(_ date: Date) -> Bool {
        let parts = Self.utc.dateComponents([.minute, .hour, .day, .month, .weekday], from: date)
        guard let minute = parts.minute, let hour = parts.hour, let day = parts.day,
              let month = parts.month, let weekday = parts.weekday else { return false }
        guard minutes.contains(minute), hours.contains(hour), months.contains(month) else { return false }
        let dayOK = daysOfMonth.contains(day)
        let weekdayOK = daysOfWeek.contains(weekday - 1)
        // crontab(5): when both day fields are restricted, either may match.
        if dayOfMonthRestricted && dayOfWeekRestricted { return dayOK || weekdayOK }
        return dayOK && weekdayOK
    }

    /// The latest minute at or before `date` that the schedule fires on, looking back at most ~1 year.
    public func latestSlot(atOrBefore date: Date) -> Date? {
        let start = Self.utc.dateInterval(of: .minute, for: date)?.start ?? date
        var candidate = start
        let limit = start.addingTimeInterval(-366 * 86_400)
        while candidate >= limit {
            let parts = Self.utc.dateComponents([.minute, .hour, .day, .month], from: candidate)
            if !months.contains(parts.month!) {
                candidate = Self.utc.dateInterval(of: .month, for: candidate)!.start.addingTimeInterval(-60)
                continue
            }
            if !hours.contains(parts.hour!) {
                candidate = Self.utc.dateInterval(of: .hour, for: candidate)!.start.addingTimeInterval(-60)
                continue
            }
            if matches(candidate) { return candidate }
            candidate = candidate.addingTimeInterval(-60)
        }
        return nil
    }

    /// The first minute strictly after `date` that the schedule fires on.
    public func nextSlot(after date: Date) -> Date? {
        var candidate = (Self.utc.dateInterval(of: .minute, for: date)?.start ?? date).addingTimeInterval(60)
        let limit = date.addingTimeInterval(366 * 86_400)
        while candidate <= limit {
            if matches(candidate) { return candidate }
            candidate = candidate.addingTimeInterval(60)
        }
        return nil
    }
}
