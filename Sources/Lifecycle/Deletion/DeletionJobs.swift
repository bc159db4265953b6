import Foundation
import JobRunner

public enum DeletionJobs {
    /// Purges one account whose grace period is over (AppPurgeJob.swift).
    public static let purgeKind = "deletion.purge"
    /// The nightly sweep: enqueues a purge for every due account that has none (PurgeSweep.swift).
    public static let sweepKind = "deletion.purge-sweep"
    /// Deletes the parts of an account a user chose, the account staying open (PartDeletionJob.swift).
    public static let partKind = "deletion.erase-parts"

    /// The step after which an account is purged, whichever the app.
    public static let finalPurgeSteps: Set<String> = ["tombstone", "erase-user", "verify"]

    public static func kinds<Store: LifecycleStore>(for services: LifecycleServices<Store>) -> [JobKind<Store.Transaction>] {
        let policy = Result { try DeletionPolicy(policies: services.policies) }
        let appData = AppDataCache()
        return [
            AppPurgeJob(services: services, policy: policy, appData: appData, scans: ResidueScanBatcher()).kind,
            PurgeSweep(services: services, policy: policy, appData: appData).kind,
            PartDeletionJob(services: services, policy: policy, appData: AppDataCache()).kind,
        ]
    }

    /// One part deletion at a time per account: its records share the account's purge ledger.
    public static func partKey(accountID: String) -> String { "erase-parts:\(accountID)" }

    /// One live purge job per account: requesting deletion twice, the sweep and
    /// overlapping cron runs all find the same job.
    public static func purgeKey(accountID: String) -> String { "purge:\(accountID)" }

    public static func purgeRequest(accountID: String, runAt: Date) throws -> EnqueueRequest {
        try EnqueueRequest(
            kind: purgeKind, payload: PurgePayload(account: accountID), uniqueKey: purgeKey(accountID: accountID), runAt: runAt)
    }
}

/// A purge job's payload: only the account id, so the queue holds no personal data.
public struct PurgePayload: Codable, Sendable, Equatable {
    public var account: String

    public init(account: String) { self.account = account }
}
