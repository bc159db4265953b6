import Foundation

/// Repeated wrong passwords lock deletion for the account: `failures` wrong
/// passwords within `window` lock it until `duration` after the last of them.
/// Derived from the audit trail (every attempt is audited anyway), so there is
/// no second record of attempts to keep in step with it.
public struct Lockout: Sendable, Equatable {
    public var failures: Int
    public var window: TimeInterval
    public var duration: TimeInterval

    public init(failures: Int, window: TimeInterval, duration: TimeInterval) {
        self.failures = failures
        self.window = window
        self.duration = duration
    }

    public init(policy: DeletionPolicy) {
        self.init(failures: policy.lockoutFailures, window: policy.lockoutWindow, duration: policy.lockoutDuration)
    }

    /// How far back failures can matter at `now`.
    public func lookback(from now: Date) -> Date { now.addingTimeInterval(-(window + duration)) }

    /// When the lock ends, or nil when deletion is not locked at `now`.
    /// `failureTimes` are the wrong-password attempts since `lookback(from: now)`.
    public func lockedUntil(failureTimes: [Date], now: Date) -> Date? {
        // Failures stamped "after now" still count: app servers' clocks differ a little.
        let times = failureTimes.sorted()
        guard times.count >= failures else { return nil }
        var until: Date?
        // Any run of `failures` consecutive attempts inside one window locks from its last attempt.
        for end in (failures - 1)..<times.count {
            let start = times[end - (failures - 1)]
            if times[end].timeIntervalSince(start) <= window {
                until = times[end].addingTimeInterval(duration)
            }
        }
        guard let until, until > now else { return nil }
        return until
    }
}
