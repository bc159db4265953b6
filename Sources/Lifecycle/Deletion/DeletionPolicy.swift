import Credentials
import Foundation
import JobRunner

/// The `deletion:` section of `Jobs/policies/deletion.yaml`. Every number has a
/// default here so a missing file still gives the product's promise (30 days).
public struct DeletionPolicy: Sendable, Equatable {
    /// The longest password any supported hash format checks: a reader of a password
    /// (standard input, a request body) stops there instead of filling memory.
    public static let maxPasswordBytes = PasswordVerifier.maxPasswordBytes

    /// Days between the request and the purge; the product message quotes it.
    public var graceDays: Int = 30
    /// Wrong passwords within `lockoutWindow` that lock deletion for the account.
    public var lockoutFailures: Int = 5
    public var lockoutWindow: TimeInterval = 15 * 60
    /// How long deletion stays locked after the last of those failures.
    public var lockoutDuration: TimeInterval = 15 * 60
    /// Blob keys listed and deleted per call to the blob store.
    public var purgeBlobBatch: Int = 500
    /// Rows deleted per transaction, so a huge account never holds the write lock for long.
    public var purgeRowBatch: Int = 1_000
    /// Accounts the sweep enqueues per transaction.
    public var sweepBatch: Int = 500
    /// Pause between batches, to leave the app's own writes room on a busy database (0: none).
    public var batchPause: TimeInterval = 0

    public init() {}

    public static let sectionName = "deletion"

    public var gracePeriod: TimeInterval { TimeInterval(graceDays) * 86_400 }

    public init(policies: PolicyBook) throws {
        let section = try policies.section(Self.sectionName)
        try section.requireOnly([
            "grace_days", "lockout_failures", "lockout_window_minutes", "lockout_minutes",
            "purge_blob_batch", "purge_row_batch", "sweep_batch", "batch_pause_milliseconds",
        ])
        graceDays = try section.int("grace_days", default: graceDays, in: 0...3_650)
        lockoutFailures = try section.int("lockout_failures", default: lockoutFailures, in: 1...1_000)
        lockoutWindow = TimeInterval(try section.int("lockout_window_minutes", default: 15, in: 1...10_080)) * 60
        lockoutDuration = TimeInterval(try section.int("lockout_minutes", default: 15, in: 1...10_080)) * 60
        purgeBlobBatch = try section.int("purge_blob_batch", default: purgeBlobBatch, in: 1...10_000)
        purgeRowBatch = try section.int("purge_row_batch", default: purgeRowBatch, in: 1...100_000)
        sweepBatch = try section.int("sweep_batch", default: sweepBatch, in: 1...100_000)
        batchPause = TimeInterval(try section.int("batch_pause_milliseconds", default: 0, in: 0...60_000)) / 1_000
    }
}

/// The product's own words (Settings → Delete Account), kept exact.
public enum DeletionMessages {
    public static let incorrectPassword = "Incorrect password"

    /// "Your account has been deleted. You have 30 days to recover it by signing in again."
    public static func deleted(graceDays: Int) -> String {
        "Your account has been deleted. You have \(graceDays) \(graceDays == 1 ? "day" : "days") to recover it by signing in again."
    }

    /// The warning before part of an account's data goes (the data map's part labels).
    public static func partWarning(labels: [String]) -> String {
        "This will permanently delete: \(labels.joined(separator: ", ")). This action cannot be undone. Your account stays open."
    }

    /// The answer once the deletion of parts is under way.
    public static func partsDeleted(labels: [String]) -> String {
        "We're deleting: \(labels.joined(separator: ", ")). This cannot be undone. Your account stays open."
    }
}
