import Foundation
import JobRunner
import Lifecycle

/// A job an operator should hear about: what `purge`, `worker --once` and `jobs check`
/// name before they exit 75, so that a run never reports success while work is stuck,
/// whichever process left it so.
public struct JobAttention: Codable, Sendable, Equatable {
    public enum Reason: String, Codable, Sendable {
        /// Out of attempts: waits for `jobs retry` or `jobs cancel`.
        case dead
        /// Failed, and waits out its backoff before the next attempt.
        case backingOff = "backing_off"
        /// Held by a worker (another process, or one that died and whose lease has not run out).
        case leased
        /// Due, and no worker has claimed it.
        case waiting
    }

    public var job: JobID
    public var kind: String
    public var account: String?
    public var reason: Reason
    public var attempt: Int
    public var maxAttempts: Int
    /// When it runs next (backing off, waiting) or when its lease runs out (leased).
    public var until: Date?
    public var leaseOwner: String?
    public var lastError: String?

    enum CodingKeys: String, CodingKey {
        case job, kind, account, reason, attempt, maxAttempts = "max_attempts", until, leaseOwner = "lease_owner", lastError = "last_error"
    }

    public init(_ record: JobRecord) {
        job = record.id
        kind = record.kind
        account = Self.account(in: record.payload)
        attempt = record.attempt
        maxAttempts = record.maxAttempts
        leaseOwner = record.leaseOwner
        lastError = record.lastError
        switch record.state {
        case .dead: (reason, until) = (.dead, nil)
        case .retrying: (reason, until) = (.backingOff, record.runAt)
        case .running: (reason, until) = (.leased, record.leaseExpiresAt)
        default: (reason, until) = (.waiting, record.runAt)
        }
    }

    /// Every job payload that concerns one account names it `account`.
    private static func account(in payload: String) -> String? {
        guard let data = payload.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return object["account"] as? String ?? object["accountID"] as? String
    }

    /// One line, naming the account, the job and what to do.
    public var line: String {
        let subject = "\(kind) job #\(job)" + (account.map { " (account \($0))" } ?? "")
        let error = lastError.map { ": \($0)" } ?? ""
        switch reason {
        case .dead:
            return "\(subject) is dead after \(attempt)/\(maxAttempts) attempts\(error); fix the cause, then `lifecycle jobs retry \(job)`"
        case .backingOff:
            return "\(subject) failed attempt \(attempt)/\(maxAttempts) and retries at \(until.map(ISO8601.format) ?? "?")\(error)"
        case .leased:
            return "\(subject) is held by \(leaseOwner ?? "another worker") until \(until.map(ISO8601.format) ?? "?")"
                + " (a worker that died hands it on when that lease runs out)"
        case .waiting:
            // A worker that could not run it as set up handed it back with why (an export without the signing key).
            return "\(subject) is due since \(until.map(ISO8601.format) ?? "?") and no worker has claimed it"
                + (lastError.map { "; last error: \($0)" } ?? "")
        }
    }

    /// At most this many are listed; a count says how many more there are not.
    public static let listLimit = 200

    /// The stuck jobs of `kinds` (empty: all) after a run, as of `now`.
    public static func stuck(in store: some JobStore, kinds: [String], now: Date) async throws -> [JobAttention] {
        try await store.jobsNeedingAttention(kinds: kinds, .stuck(now: now), limit: listLimit).map(JobAttention.init)
    }
}

/// What `lifecycle jobs check` reports: the queue's health for monitoring.
public struct QueueHealth: Codable, Sendable {
    public var ok: Bool
    public var checkedAt: Date
    public var overdueAfterSeconds: Int
    public var dead: [JobAttention]
    public var overdue: [JobAttention]
    public var paused: [PausedKind]
    /// Policy files that cannot be used, each with what is wrong and what refuses to run:
    /// a file that does not parse (its kinds are not run by any worker) or a settings
    /// section that `purge`, `export`, `import` or a photo job would refuse.
    public var brokenPolicyFiles: [String]
    /// Jobs by state, every state named (0 when none).
    public var counts: [String: Int]

    enum CodingKeys: String, CodingKey {
        case ok, checkedAt = "checked_at", overdueAfterSeconds = "overdue_after_seconds", dead, overdue, paused
        case brokenPolicyFiles = "broken_policy_files", counts
    }

    /// Healthy when no job is dead, none has waited (or been abandoned by its worker)
    /// longer than `overdueAfter`, and every policy file can be used. A paused kind's
    /// waiting jobs are listed under `paused`, not as overdue: an operator stopped them on purpose.
    public static func check(store: some JobStore, policies: PolicyBook, overdueAfter: TimeInterval, now: Date) async throws -> QueueHealth {
        let attention = try await store.jobsNeedingAttention(
            kinds: [], .overdue(before: now.addingTimeInterval(-overdueAfter)), limit: JobAttention.listLimit
        ).map(JobAttention.init)
        let byState = try await store.countByState()
        let dead = attention.filter { $0.reason == .dead }
        let overdue = attention.filter { $0.reason != .dead }
        let broken = policies.brokenFiles.map { "\($0.message); its job kinds do not run" } + PolicySettingsCheck.problems(in: policies)
        return QueueHealth(
            ok: dead.isEmpty && overdue.isEmpty && broken.isEmpty, checkedAt: now, overdueAfterSeconds: Int(overdueAfter), dead: dead,
            overdue: overdue, paused: try await store.pausedKinds(), brokenPolicyFiles: broken,
            counts: Dictionary(uniqueKeysWithValues: JobState.allCases.map { ($0.rawValue, byState[$0] ?? 0) }))
    }
}

/// Due jobs of a paused kind: left on purpose by an operator, but left, so a run that
/// finds them is not green (`worker --once`, `purge` exit 75 and name the pause).
public struct PausedWork: Codable, Sendable, Equatable {
    public var pause: PausedKind
    /// Its jobs due now that no worker claims while it is paused.
    public var due: Int

    public var line: String {
        "\(due) due \(pause.kind) job(s) wait: the kind is paused since \(ISO8601.format(pause.pausedAt)) by \(pause.pausedBy)"
            + (pause.reason.map { " (\($0))" } ?? "") + "; `lifecycle jobs resume \(pause.kind)` lets workers claim them again"
    }

    /// Of `kinds`, those paused with jobs due at `now`.
    public static func waiting(in store: some JobStore, kinds: [String], now: Date) async throws -> [PausedWork] {
        var waiting: [PausedWork] = []
        for pause in try await store.pausedKinds() where kinds.contains(pause.kind) {
            let due = try await store.countDue(kinds: [pause.kind], now: now)
            if due > 0 { waiting.append(PausedWork(pause: pause, due: due)) }
        }
        return waiting
    }
}
