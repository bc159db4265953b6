import Foundation
import JobRunner

public struct SweepReport: Sendable, Codable, Equatable {
    /// Accounts whose purge is due.
    public var due = 0
    /// Of those, how many had no live purge job and got one now.
    public var enqueued = 0
    /// Of those, the accounts on hold (`accounts hold`): left alone until the hold ends.
    public var held: [String] = []
    /// Of those, the accounts whose purge the residue scan stopped: its dead job waits for
    /// `jobs retry` once the map maps or allows what was found; a new job would only stop again.
    public var stopped: [String] = []
    /// An app whose sessions name their user only encoded (`django_session`): rows decoded
    /// for the first time as the sweep brought lifecycle's index of them up to date, and
    /// rows of accounts pending deletion it found and signed out (nil: no such table).
    public var sessionRowsIndexed: Int?
    public var sessionsSignedOut: Int?

    public init(due: Int = 0, enqueued: Int = 0, held: [String] = [], stopped: [String] = []) {
        self.due = due
        self.enqueued = enqueued
        self.held = held
        self.stopped = stopped
    }

    enum CodingKeys: String, CodingKey {
        case due, enqueued, held, stopped, sessionRowsIndexed = "session_rows_indexed", sessionsSignedOut = "sessions_signed_out"
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
    /// The hold in force, if any: then nothing is purged until it ends.
    public var hold: AccountHold?
    /// An app's account: what its purge would delete and mask per table, rehearsed for
    /// real in a transaction that was rolled back (the counts its receipt then holds).
    public var erase: [String: PurgeCounts]?
    /// An app's account: why its purge would fail now (the database refused a statement of
    /// the rehearsal, or this role cannot see or change every row), naming the table.
    public var refused: String?

    public var rowsTotal: Int { rows.values.reduce(0, +) }

    enum CodingKeys: String, CodingKey {
        case accountID = "account", state, purgeAfter = "purge_after", rows, rowsTotal = "rows_total", blobs, blobBytes = "blob_bytes", hold,
             erase, refused
    }

    public init(accountID: String, state: AccountState, purgeAfter: Date?, rows: [String: Int], blobs: Int, blobBytes: Int64, hold: AccountHold? = nil) {
        self.accountID = accountID
        self.state = state
        self.purgeAfter = purgeAfter
        self.rows = rows
        self.blobs = blobs
        self.blobBytes = blobBytes
        self.hold = hold
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            accountID: try container.decode(String.self, forKey: .accountID), state: try container.decode(AccountState.self, forKey: .state),
            purgeAfter: try container.decodeIfPresent(Date.self, forKey: .purgeAfter), rows: try container.decode([String: Int].self, forKey: .rows),
            blobs: try container.decode(Int.self, forKey: .blobs), blobBytes: try container.decode(Int64.self, forKey: .blobBytes),
            hold: try container.decodeIfPresent(AccountHold.self, forKey: .hold))
        erase = try container.decodeIfPresent([String: PurgeCounts].self, forKey: .erase)
        refused = try container.decodeIfPresent(String.self, forKey: .refused)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accountID, forKey: .accountID)
        try container.encode(state, forKey: .state)
        try container.encodeIfPresent(purgeAfter, forKey: .purgeAfter)
        try container.encode(rows, forKey: .rows)
        try container.encode(rowsTotal, forKey: .rowsTotal)
        try container.encode(blobs, forKey: .blobs)
        try container.encode(blobBytes, forKey: .blobBytes)
        try container.encodeIfPresent(hold, forKey: .hold)
        try container.encodeIfPresent(erase, forKey: .erase)
        try container.encodeIfPresent(refused, forKey: .refused)
    }
}

/// Finds accounts whose purge is due and makes sure each has a purge job. Requests
/// schedule their own job, so the sweep matters for accounts imported already
/// pending from another system, and for purges whose job died (the account stays
/// `purging` and the next sweep starts a fresh job, which resumes where it stopped).
public struct PurgeSweep<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    let policy: Result<DeletionPolicy, any Error>
    let appData: AppDataCache

    public init(services: LifecycleServices<Store>, directory: AccountDirectory<Store>) throws {
        self.services = services
        self.policy = .success(try DeletionPolicy(policies: services.policies))
        self.appData = AppDataCache(directory: directory)
    }

    init(services: LifecycleServices<Store>, policy: Result<DeletionPolicy, any Error>, appData: AppDataCache) {
        self.services = services
        self.policy = policy
        self.appData = appData
    }

    private func directory() async throws -> AccountDirectory<Store> {
        AccountDirectory(data: try await appData.appData(services))
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
        let purgePolicy = try services.policies.policy(for: DeletionJobs.purgeKind)
        let now = services.clock.now()
        let directory = try await directory()
        var report = SweepReport()
        // Once per sweep, before the purges it enqueues: each purge then signs its account out
        // through the index, in time that does not grow with the sessions table.
        if directory.data.hasEncodedRemovals {
            let data = directory.data
            let refresh = try await data.refreshEncodedOwners(store: store)
            (report.sessionRowsIndexed, report.sessionsSignedOut) = (refresh.indexed, refresh.signedOut)
        }
        // Found residue stays until the map or the data changes: a fresh job each night would
        // stop the same way and leave one more dead job. The dead one is retried instead.
        let stopped = Set(try await store.jobs(matching: JobFilter(states: [.dead], kinds: [DeletionJobs.purgeKind], limit: 100_000))
            .filter { $0.lastError?.contains(ResidueScan.marker) == true }
            .compactMap { try? JobJSON.decode(PurgePayload.self, from: $0.payload).account })
        var after: String?
        while true {
            let cursor = after
            let (count, created, held, last) = try await store.write { tx -> (Int, Int, [String], String?) in
                let due = try directory.accountsDueForPurge(now: now, after: cursor, limit: batch, in: tx)
                // The purge job checks again under the account's lock; this keeps a held
                // account from getting a job that would only stand down.
                let held = try tx.heldKeys(due.map(\.accountID), now: now)
                var created = 0
                for account in due where !held.contains(ExactText(account.accountID)) && !stopped.contains(account.accountID) {
                    let request = try DeletionJobs.purgeRequest(accountID: account.accountID, runAt: min(account.purgeAfter ?? now, now))
                    if try store.enqueue(request, policy: purgePolicy, now: now, in: tx).created { created += 1 }
                }
                return (due.count, created, due.map(\.accountID).filter { held.contains(ExactText($0)) }, due.last?.accountID)
            }
            report.due += count
            report.enqueued += created
            report.held += held
            guard count == batch, let last else { break }
            after = last
        }
        report.stopped = stopped.sorted()
        if report.enqueued > 0 {
            services.logger.info("purge jobs enqueued for due accounts", metadata: ["due": .stringConvertible(report.due), "enqueued": .stringConvertible(report.enqueued)])
        }
        return report
    }

    /// Due accounts and what their purge would remove; changes nothing.
    public func preview(limit: Int?) async throws -> [PurgePreview] {
        let batch = try policy.get().sweepBatch
        let blobBatch = try policy.get().purgeBlobBatch
        let directory = try await directory()
        let store = services.store
        let now = services.clock.now()
        var previews: [PurgePreview] = []
        var after: String?
        let data = directory.data
        let count: @Sendable (String, Store.Transaction) throws -> [String: Int] = { id, tx in
            try data.rowCounts(key: id, in: tx).merging(
                try tx.lifecycleRowCounts(accountID: id).map { ("lifecycle." + $0.key, $0.value) }, uniquingKeysWith: +)
        }
        while limit.map({ previews.count < $0 }) ?? true {
            let cursor = after
            let size = min(batch, limit.map { $0 - previews.count } ?? batch)
            let due = try await store.read { tx -> [PurgePreview] in
                try directory.accountsDueForPurge(now: now, after: cursor, limit: size, in: tx).map { account in
                    let hold = try tx.openHold(key: account.accountID).flatMap { $0.isActive(at: now) ? $0 : nil }
                    return PurgePreview(
                        accountID: account.accountID, state: account.state, purgeAfter: account.purgeAfter,
                        rows: try count(account.accountID, tx), blobs: 0, blobBytes: 0, hold: hold)
                }
            }
            for var preview in due {
                let rehearsal = try await AppErasure.rehearse(key: preview.accountID, data: directory.data, store: store)
                preview.erase = rehearsal.rows
                preview.refused = rehearsal.refused
                if rehearsal.refused == nil {
                    preview.rows = rehearsal.rows.mapValues { $0.deleted + $0.masked }
                }
                try await countBlobs(of: &preview, directory: directory, batch: blobBatch)
                previews.append(preview)
            }
            guard due.count == size, let last = due.last else { break }
            after = last.accountID
        }
        return previews
    }

    /// The files a purge would delete: every file the account's rows name, its file
    /// catalogs' files, whatever lies in the user's folders (`blob_prefixes:`) and under
    /// lifecycle's own prefix for the account (its photos and archives), each counted once.
    /// A file in her folder that a row the purge keeps names is counted, and kept by the purge.
    private func countBlobs(of preview: inout PurgePreview, directory: AccountDirectory<Store>, batch: Int) async throws {
        let data = directory.data
        let prefix = BlobKey.accountPrefix(BlobKey.segment(forID: preview.accountID))
        var counted = Set<String>()
        func count(_ key: String, bytes: Int64) {
            guard counted.insert(key).inserted else { return }
            preview.blobs += 1
            preview.blobBytes += bytes
        }
        let key = preview.accountID
        let sql = data.sql
        let catalogs = data.plan.tables.filter { !$0.table.fileKey.isEmpty }.map { table in
            AppData.BlobQuery(label: data.displayName(table.table.name)) { after in sql.catalogFileKeys(table, key: key, after: after, limit: batch) }
        }
        for query in data.blobQueries(key: key, batch: batch) + catalogs {
            var after: String?
            while true {
                let statement = query.page(after)
                let page = try await services.store.read { tx in try tx.rows(statement).compactMap { $0.first?.text } }
                for file in page where services.blobs.keyProblem(file) == nil {
                    do {
                        if let info = try await services.blobs.info(key: file) { count(file, bytes: info.size) }
                    } catch let error as BlobStoreError where error.isUnsafePath {
                        continue  // The purge refuses it too, and its receipt names the link.
                    }
                }
                guard page.count == batch, let last = page.last else { break }
                after = last
            }
        }
        for folder in data.plan.subject.blobPrefixes {
            // A key that cannot be one folder stops the purge itself, which says so.
            guard let resolved = try? folder.resolved(key: key) else { continue }
            var listedAfter: String?
            while true {
                let page: [BlobInfo]
                do {
                    page = try await services.blobs.list(prefix: resolved, after: listedAfter, limit: batch)
                } catch let error as BlobStoreError where error.isUnsafePath {
                    break  // A folder that is a link: the purge lists nothing there either.
                }
                for info in page { count(info.key, bytes: info.size) }
                guard page.count == batch, let last = page.last else { break }
                listedAfter = last.key
            }
        }
        var listedAfter: String?
        while true {
            let page = try await services.blobs.list(prefix: prefix, after: listedAfter, limit: batch)
            for info in page { count(info.key, bytes: info.size) }
            guard page.count == batch, let last = page.last else { break }
            listedAfter = last.key
        }
    }
}
