import Foundation
import JobRunner

public struct SweepReport: Sendable, Codable, Equatable {
    /// Accounts whose purge is due.
    public var due = 0
    /// Of those, how many had no live purge job and got one now.
    public var enqueued = 0

    public init(due: Int = 0, enqueued: Int = 0) {
        self.due = due
        self.enqueued = enqueued
    }
}

/// What a purge of one account would remove (`lifecycle purge --dry-run`).
public struct PurgePreview: Sendable, Codable, Equatable {
    public var accountID: String
    public var state: AccountState
    public var purgeAfter: Date?
    public var rows: [String: Int]
    public var blobs: Int
    public var blobBytes: Int64

    public var rowsTotal: Int { rows.values.reduce(0, +) }
}

/// Finds accounts whose purge is due and makes sure each has a purge job. Requests
/// schedule their own job, so the sweep matters for accounts imported already
/// pending from another system, and for purges whose job died (the account stays
/// `purging` and the next sweep starts a fresh job, which resumes where it stopped).
public struct PurgeSweep<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>

    public init(services: LifecycleServices<Store>) throws {
        self.services = services
        self.policy = .success(try DeletionPolicy(policies: services.policies))
    }

    init(services: LifecycleServices<Store>, policy: Result<DeletionPolicy, any Error>) {
        self.services = services
        self.policy = policy
    }

    /// The scheduled kind: one step, so `worker` daemons and `worker --once` cron runs purge on the policy's schedule.
    var kind: JobKind<Store.Transaction> {
        JobKind(name: DeletionJobs.sweepKind, steps: [
            // Idempotent: enqueueing by the purge unique key finds a job enqueued by an earlier run.
            JobStep("enqueue-due-purges", external: { _ in try .output(try await enqueueDuePurges()) }),
        ])
    }

    /// Enqueues a purge job for every due account lacking a live one, a batch of
    /// accounts per transaction. Safe to run in several processes at once.
    public func enqueueDuePurges() async throws -> SweepReport {
        let batch = try policy.get().sweepBatch
        let store = services.store
        let purgePolicy = services.policies.policy(for: DeletionJobs.purgeKind)
        let now = services.clock.now()
        var report = SweepReport()
        var after: String?
        while true {
            let cursor = after
            let (count, created, last) = try await store.write { tx -> (Int, Int, String?) in
                let due = try tx.accountsDueForPurge(now: now, after: cursor, limit: batch)
                var created = 0
                for account in due {
                    let request = try DeletionJobs.purgeRequest(accountID: account.accountID, runAt: min(account.purgeAfter ?? now, now))
                    if try store.enqueue(request, policy: purgePolicy, now: now, in: tx).created { created += 1 }
                }
                return (due.count, created, due.last?.accountID)
            }
            report.due += count
            report.enqueued += created
            guard count == batch, let last else { break }
            after = last
        }
        if report.enqueued > 0 {
            services.logger.info("purge jobs enqueued for due accounts", metadata: ["due": "\(report.due)", "enqueued": "\(report.enqueued)"])
        }
        return report
    }

    /// Due accounts and what their purge would remove; changes nothing.
    public func preview(limit: Int?) async throws -> [PurgePreview] {
        let batch = try policy.get().sweepBatch
        let blobBatch = try policy.get().purgeBlobBatch
        let map = try await services.dataMap()
        let tables = map.tables.filter { $0.name != "accounts" }
        let store = services.store
        let now = services.clock.now()
        var previews: [PurgePreview] = []
        var after: String?
        while limit.map({ previews.count < $0 }) ?? true {
            let cursor = after
            let size = min(batch, limit.map { $0 - previews.count } ?? batch)
            let due = try await store.read { tx -> [PurgePreview] in
                try tx.accountsDueForPurge(now: now, after: cursor, limit: size).map { account in
                    PurgePreview(
                        accountID: account.accountID, state: account.state, purgeAfter: account.purgeAfter,
                        rows: try tx.countRows(in: tables, accountID: account.accountID)
                            .merging(try tx.lifecycleRowCounts(accountID: account.accountID), uniquingKeysWith: +),
                        blobs: 0, blobBytes: 0)
                }
            }
            for var preview in due {
                var listedAfter: String?
                while true {
                    let page = try await services.blobs.list(prefix: BlobKey.accountPrefix(preview.accountID), after: listedAfter, limit: blobBatch)
                    preview.blobs += page.count
                    preview.blobBytes += page.reduce(0) { $0 + $1.size }
                    guard page.count == blobBatch, let last = page.last else { break }
                    listedAfter = last.key
                }
                previews.append(preview)
            }
            guard due.count == size, let last = due.last else { break }
            after = last.accountID
        }
        return previews
    }
}
