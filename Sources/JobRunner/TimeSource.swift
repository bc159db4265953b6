import Foundation
import Synchronization

/// Where the runner and the domain read "now". Passed in everywhere so tests
/// and what-if runs control time; nothing reads `Date()` directly.
public protocol TimeSource: Sendable {
    func now() -> Date
}

public struct SystemTimeSource: TimeSource {
    public init() {}
    public func now() -> Date { Date() }
}

/// Starts at a chosen instant and then advances in real time. A frozen clock
/// would never let a lease expire or a backoff elapse, so `LIFECYCLE_NOW`
/// shifts the clock instead of stopping it.
public struct ShiftedTimeSource: TimeSource {
    public let offset: TimeInterval

    public init(startingAt start: Date, realNow: Date = Date()) {
        offset = start.timeIntervalSince(realNow)
    }

    public func now() -> Date { Date().addingTimeInterval(offset) }
}

/// A clock tests move by hand.
public final class ManualTimeSource: TimeSource, Sendable {
    private let current: Mutex<Date>

    public init(_ start: Date) { current = Mutex(start) }

    public func now() -> Date { current.withLock { $0 } }

    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    public func set(_ date: Date) { current.withLock { $0 = date } }
}

public enum ISO8601 {
    /// Parses `2025-01-02T03:04:05Z`, with or without fractional seconds or an offset.
    public static func parse(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        if let date = plain.date(from: text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }

    /// UTC, second precision: what exports, logs and the CLI print.
    public static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}
