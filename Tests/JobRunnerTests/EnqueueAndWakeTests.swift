import Foundation
import JobRunner
import Testing

/// Bulk enqueue, and an idle worker woken by an enqueue rather than by its next poll.
struct EnqueueAndWakeTests {
    @Test(arguments: Backend.allCases)
    func bulkEnqueueKeepsRequestOrderAndHonoursUniqueKeys(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let live = try await enqueue(store, EnqueueRequest(kind: ProbeJobs.noopKind, uniqueKey: "k1"), now: epoch).job
            let later = epoch.addingTimeInterval(3_600)
            let requests = [
                EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"i":0}"#),
                EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"i":1}"#, uniqueKey: "k1"),
                EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"i":2}"#),
                EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"i":3}"#, uniqueKey: "k2"),
                EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"i":4}"#, runAt: later, maxAttempts: 7),
            ] + (5..<300).map { EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"i":\#($0)}"#) }
            var fourAttempts = JobPolicy()
            fourAttempts.maxAttempts = 4
            let policy = fourAttempts
            let enqueued = try await store.write { tx in try store.enqueue(many: requests, policy: policy, now: epoch, in: tx) }
            try #require(enqueued.count == requests.count)
            #expect(enqueued[1] == EnqueuedJob(id: live.id, created: false))
            #expect(enqueued.enumerated().allSatisfy { $0.offset == 1 || $0.element.created })
            #expect(Set(enqueued.map(\.id)).count == requests.count)
            for (index, job) in enqueued.enumerated() where index != 1 {
                let record = try #require(try await store.job(id: job.id))
                #expect(record.payload == requests[index].payload)
                #expect(record.state == .queued)
                #expect(record.uniqueKey == requests[index].uniqueKey)
                #expect(record.maxAttempts == (index == 4 ? 7 : 4))
                #expect(record.runAt == (index == 4 ? later : epoch))
            }
        }
        try await check(try await backend.makeStore())
    }

    @Test(arguments: Backend.allCases)
    func aJobEnqueuedOnItsOwnHonoursItsUniqueKey(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let first = try await store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind, uniqueKey: "solo"), policy: JobPolicy(), now: epoch)
            let again = try await store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind, uniqueKey: "solo"), policy: JobPolicy(), now: epoch)
            let plain = try await store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"p":1}"#), policy: JobPolicy(), now: epoch)
            #expect(first.created && !again.created && plain.created)
            #expect(again.job == first.job)
            #expect(plain.job.id != first.job.id && plain.job.payload == #"{"p":1}"#)
            #expect(try await store.job(id: plain.job.id) == plain.job)
        }
        try await check(try await backend.makeStore())
    }

    /// PostgreSQL only: SQLite has no notifications and its idle workers poll.
    @Test func anIdleWorkerStartsAnEnqueuedJobWithoutWaitingForItsPoll() async throws {
        let store = try await Backend.postgres.makeStore()
        func check<S: JobStore>(_ store: S) async throws {
            let (seen, sink) = AsyncStream<Seen>.makeStream()
            // A poll interval (600 s) longer than each round allows (300 s, slack for a loaded CI
            // machine): only a notification wakes the worker in time.
            let worker = Worker(
                store: store, registry: JobRegistry([ProbeJobs.noop(store: store)]), policies: PolicyBook(), clock: SystemTimeSource(),
                options: WorkerOptions(concurrency: 2, pollInterval: 600),
                events: { event in
                    switch event {
                    case .waiting: sink.yield(.waiting)
                    case .finished(let job, .succeeded): sink.yield(.finished(job.id))
                    default: break
                    }
                })
            let running = Task { try await worker.run() }
            defer { running.cancel() }
            for round in 1...3 {
                // Enqueued only once the worker has said it waits: nothing is claimed or being
                // claimed then, so no claim that follows a finished job can find this one, and
                // only the notification (or the 600 s poll) can start it. The first round may
                // also be started by the wake a listener gives once its LISTEN takes effect
                // (for work enqueued before it); the rounds after it have the notification alone.
                let idle = await next(from: seen, within: 300) { $0 == .waiting ? true : nil }
                try #require(idle == true, "round \(round): the worker never said it was waiting")
                let job = try await enqueue(store, EnqueueRequest(kind: ProbeJobs.noopKind, payload: #"{"round":\#(round)}"#), now: Date()).job
                let done = await next(from: seen, within: 300) { event -> JobID? in
                    if case .finished(let id) = event { return id }
                    return nil
                }
                try #require(done == job.id, "round \(round): the job did not start within 300 s although the worker was idle")
            }
            running.cancel()
            _ = try await running.value
        }
        try await check(store)
    }

    /// What the wake-up test hears from its worker.
    private enum Seen: Equatable, Sendable {
        case waiting
        case finished(JobID)
    }

    /// The first event `match` answers, or nil once `seconds` have passed. A wait that runs
    /// out ends the stream (its consumer is cancelled): the test stops there anyway.
    private func next<T: Sendable>(
        from stream: AsyncStream<Seen>, within seconds: UInt64, _ match: @escaping @Sendable (Seen) -> T?
    ) async -> T? {
        let waiter = Task { () -> T? in
            for await event in stream {
                if let value = match(event) { return value }
            }
            return nil
        }
        let deadline = Task {
            try await Task.sleep(nanoseconds: seconds * 1_000_000_000)
            waiter.cancel()
        }
        let value = await waiter.value
        deadline.cancel()
        return value
    }
}
