import Foundation
import JobRunner
import Logging

/// Everything a job or command needs, passed in explicitly: no globals, so tests
/// choose the store, the blob store and the clock.
public struct LifecycleServices<Store: LifecycleStore>: Sendable {
    public let store: Store
    public let blobs: any BlobStore
    /// Where export archives live: a store of their own (`--exports`), so that no archive
    /// sits where the app serves its files; `blobs` itself when none is configured.
    public let exports: any BlobStore
    /// Whether `exports` is a store apart from `blobs`; archives made before it was
    /// configured stay in `blobs`, and are still served, expired and purged from there.
    public let exportsApart: Bool
    public let policies: PolicyBook
    /// Where policies, the data map and demo files live.
    public let jobsDirectory: String
    /// A variable so that a copy can look at the installation from another moment (the
    /// demo's purge a month on) with everything else, the export store included, the same.
    public var clock: any TimeSource
    public let logger: Logger
    /// The link-signing key file a command line named (`--signing-key-file`), over
    /// LIFECYCLE_SIGNING_KEY_FILE; read by every job of this process that signs a link.
    public var signingKeyFile: String?
    /// The data map as read when the installation was opened, failure included, so it is
    /// parsed once however many jobs and commands consult it; nil reads the file on demand.
    private let parsedDataMap: Result<DataMap, any Error>?

    public init(
        store: Store, blobs: any BlobStore, policies: PolicyBook, jobsDirectory: String, clock: any TimeSource, logger: Logger,
        dataMap: Result<DataMap, any Error>? = nil, exports: (any BlobStore)? = nil
    ) {
        self.store = store
        self.jobsDirectory = jobsDirectory
        self.blobs = blobs
        self.exports = exports ?? blobs
        exportsApart = exports != nil
        self.policies = policies
        self.clock = clock
        self.logger = logger
        parsedDataMap = dataMap
    }

    /// `<jobsDirectory>/account-data.yaml`, unchecked against the database. A map that
    /// failed to parse when the installation was opened fails here, with the same message.
    public func dataMapDocument() throws -> DataMap {
        if let parsedDataMap { return try parsedDataMap.get() }
        return try DataMap(jobsDirectory: jobsDirectory)
    }

    /// Every job kind the toolkit runs, for workers to register.
    public var registry: JobRegistry<Store.Transaction> {
        JobRegistry([ProbeJobs.probe(store: store), ProbeJobs.noop(store: store)]
            + PhotoJobs.kinds(for: self) + ExportJobs.kinds(for: self) + DeletionJobs.kinds(for: self))
    }

    public func enqueue(_ request: EnqueueRequest) async throws -> EnqueueOutcome {
        let policy = try policies.policy(for: request.kind)
        let now = clock.now()
        return try await store.enqueue(request, policy: policy, now: now)
    }

    /// Many jobs in one transaction, in request order: one statement per kind on PostgreSQL
    /// rather than one per job. Requests with a unique key behave as in `enqueue`.
    public func enqueue(many requests: [EnqueueRequest]) async throws -> [EnqueuedJob] {
        var indicesByKind: [String: [Int]] = [:]
        for (index, request) in requests.enumerated() { indicesByKind[request.kind, default: []].append(index) }
        let groups = try indicesByKind.map { kind, indices in (indices, try self.policies.policy(for: kind)) }
        let now = clock.now()
        let store = self.store
        return try await store.write { tx in
            var enqueued = [EnqueuedJob?](repeating: nil, count: requests.count)
            for (indices, policy) in groups {
                let jobs = try store.enqueue(many: indices.map { requests[$0] }, policy: policy, now: now, in: tx)
                for (index, job) in zip(indices, jobs) { enqueued[index] = job }
            }
            return enqueued.map { $0! }
        }
    }

    /// The account's rows in each table of the data map, counted by the statements generated from it.
    /// A caller counting several accounts passes one `cache`: without it each call reads the
    /// map and the database's catalog again.
    public func rowCounts(accountID: String, cache: AppDataCache = AppDataCache()) async throws -> [String: Int] {
        let data = try await cache.appData(self)
        return try await store.read { tx in try data.rowCounts(key: accountID, in: tx) }
    }

    public func account(_ reference: String) async throws -> Account? {
        try await store.read { tx in
            if let account = try tx.account(id: reference) { return account }
            return reference.contains("@") ? try tx.account(email: reference) : nil
        }
    }
}
