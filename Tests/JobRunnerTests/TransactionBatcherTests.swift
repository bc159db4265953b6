import Foundation
@testable import JobRunner
import Testing

/// Pieces that share a commit: one piece's failure must leave exactly its own writes out,
/// on both backends (savepoints on SQLite, pieces rerun alone on PostgreSQL).
struct TransactionBatcherTests {
    @Test(arguments: Backend.allCases)
    func aFailingPieceUndoesOnlyItsOwnWritesInASharedTransaction(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let batcher = stepBatcher(store)
            let jobs = try await store.write { tx in
                try (0..<6).map { _ in try store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch, in: tx).job.id }
            }
            let gate = TransactionGate()
            let first = Task {
                try await batcher.run { tx in
                    gate.hold()
                    try store.recordProbeEffect(jobID: jobs[0], step: "write", now: epoch, in: tx)
                }
            }
            await gate.waitUntilHeld()
            let failing = jobs[3]
            let outcomes = try await runBehindGate(gate, jobs.dropFirst(), in: batcher, failingWith: { $0 is InducedRollback }) { _, job in
                try await batcher.run { tx in
                    try store.recordProbeEffect(jobID: job, step: "write", now: epoch, in: tx)
                    if job == failing { throw InducedRollback() }
                }
            }
            try await first.value
            #expect(outcomes.filter { !$0.value }.map(\.key) == [failing])
            for job in jobs {
                #expect(try await store.probeEffectCount(jobID: job) == (job == failing ? 0 : 1))
            }
        }
        try await check(try await backend.makeStore())
    }

    /// A piece alone in its transaction that fails is not run again: rolling the transaction
    /// back undid everything it wrote.
    @Test(arguments: Backend.allCases)
    func aLonePieceThatFailsRunsOnceAndLeavesNothing(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let batcher = stepBatcher(store)
            let job = try await store.write { tx in
                try store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch, in: tx).job.id
            }
            let runs = RunCounts()
            await #expect(throws: InducedRollback.self) {
                try await batcher.run { tx in
                    runs.add(job)
                    try store.recordProbeEffect(jobID: job, step: "write", now: epoch, in: tx)
                    throw InducedRollback()
                }
            }
            #expect(runs.counts[job] == 1)
            #expect(try await store.probeEffectCount(jobID: job) == 0)
        }
        try await check(try await backend.makeStore())
    }

    /// Steps of several jobs share a transaction whose done-marks are written together (one
    /// statement on PostgreSQL): a job whose lease was lost meanwhile gets neither its
    /// step's writes nor its mark, and the others commit with theirs.
    @Test(arguments: Backend.allCases)
    func aLostLeaseInAGroupCommitUndoesOnlyThatStep(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let batcher = stepBatcher(store)
            let jobs = try await sixClaimedJobs(store)
            let lost = jobs[3]
            // Its lease ends before its step's transaction runs (the fence is read there). Not
            // while the first piece holds the transaction below: on SQLite that piece holds the
            // one writer, which the release would wait for.
            try await store.release(jobID: lost, owner: "A", now: epoch)
            @Sendable func step(_ job: JobID, finishing: Bool) -> @Sendable (S.Transaction) throws -> ((), StepMark) {
                { tx in
                    try store.recordProbeEffect(jobID: job, step: "write", now: epoch, in: tx)
                    return ((), StepMark(jobID: job, step: "write", output: "out \(job)", finishesJob: finishing, owner: "A", now: epoch))
                }
            }
            let gate = TransactionGate()
            let first = Task {
                try await batcher.runStep { tx in
                    gate.hold()
                    return try step(jobs[0], finishing: true)(tx)
                }
            }
            await gate.waitUntilHeld()
            let outcomes = try await runBehindGate(gate, jobs.dropFirst(), in: batcher, failingWith: isLeaseLost) { index, job in
                _ = try await batcher.runStep(step(job, finishing: index % 2 == 0))
            }
            _ = try await first.value
            #expect(outcomes.filter { !$0.value }.map(\.key) == [lost])
            for job in jobs {
                #expect(try await store.probeEffectCount(jobID: job) == (job == lost ? 0 : 1))
                let steps = try await store.steps(of: job)
                #expect(steps.map(\.output) == (job == lost ? [] : ["out \(job)"]))
            }
            var states: [JobState?] = []
            for job in jobs { states.append(try await store.job(id: job)?.state) }
            #expect(states == [.succeeded, .succeeded, .running, .queued, .running, .succeeded])
        }
        try await check(try await backend.makeStore())
    }

    /// An outside step's done-mark shares the transaction without a savepoint: when its job's
    /// lease was lost, nothing of it is written, so it alone fails, and the database steps
    /// beside it commit once each (the batch is not sent round again).
    @Test(arguments: Backend.allCases)
    func aLostLeaseBehindAnOutsideStepFailsOnlyThatMark(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let batcher = stepBatcher(store)
            let jobs = try await sixClaimedJobs(store)
            let lost = jobs[3]
            try await store.release(jobID: lost, owner: "A", now: epoch)
            let runs = RunCounts()
            let gate = TransactionGate()
            let first = Task { try await batcher.run { _ in gate.hold() } }
            await gate.waitUntilHeld()
            let outcomes = try await runBehindGate(gate, jobs.dropFirst(), in: batcher, failingWith: isLeaseLost) { _, job in
                let mark = StepMark(jobID: job, step: "step", output: nil, finishesJob: true, owner: "A", now: epoch)
                if job == lost || job == jobs[4] {
                    _ = try await batcher.runMark(mark)
                } else {
                    _ = try await batcher.runStep { tx in
                        runs.add(job)
                        try store.recordProbeEffect(jobID: job, step: "step", now: epoch, in: tx)
                        return ((), mark)
                    }
                }
            }
            try await first.value
            #expect(outcomes.filter { !$0.value }.map(\.key) == [lost])
            #expect(runs.counts == [jobs[1]: 1, jobs[2]: 1, jobs[5]: 1])
            var states: [JobState?] = []
            for job in jobs { states.append(try await store.job(id: job)?.state) }
            #expect(states == [.running, .succeeded, .succeeded, .queued, .succeeded, .succeeded])
            #expect(try await store.steps(of: lost).isEmpty)
            #expect(try await store.probeEffectCount(jobID: jobs[2]) == 1)
        }
        try await check(try await backend.makeStore())
    }
}

extension TransactionBatcherTests {
    /// On SQLite the group commits run one after another on the writer itself, as long as
    /// pieces keep arriving. The process's other writes queue on that same writer (a
    /// release, a failure record, a migration): a session steps back behind them after
    /// `transactionsPerSession` transactions rather than keep them waiting while the queue
    /// is busy. Here every transaction holds the writer until the next piece is queued,
    /// so the session never finds the queue empty; the outside write must still run long
    /// before the last of them.
    @Test func aSteadyStreamOfGroupCommitsLetsTheProcessesOtherWritesThrough() async throws {
        func check<S: JobStore>(_ store: S) async throws {
            try #require(store.writerSessions != nil)
            let batcher = stepBatcher(store)
            let rounds = 3 * TransactionBatcher<S.Transaction>.transactionsPerSession
            let gates = (0..<rounds).map { _ in TransactionGate() }
            let run = RunCounts()
            @Sendable func piece(_ round: Int) -> Task<Void, any Error> {
                Task { try await batcher.run { _ in
                    run.add(0)
                    gates[round].hold()
                } }
            }
            var pieces = [piece(0)]
            await gates[0].waitUntilHeld()
            // Queued on the writer behind the session that holds it now.
            let outside = Task { try await store.writeUnshared { _ in run.counts[0, default: 0] } }
            for round in 0..<rounds {
                if round + 1 < rounds {
                    pieces.append(piece(round + 1))
                    await gates[round].open(onceQueued: 1, in: batcher)
                    await gates[round + 1].waitUntilHeld()
                } else {
                    await gates[round].open(onceQueued: 0, in: batcher)
                }
            }
            for piece in pieces { try await piece.value }
            let transactionsBeforeIt = try await outside.value
            #expect(run.counts[0] == rounds)
            #expect(transactionsBeforeIt < rounds, "the outside write waited for every transaction of the stream")
        }
        try await check(try await Backend.sqlite.makeStore())
    }
}

/// How many times each job's step body ran.
private final class RunCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var value: [JobID: Int] = [:]
    var counts: [JobID: Int] { lock.withLock { value } }
    func add(_ job: JobID) { lock.withLock { value[job, default: 0] += 1 } }
}

/// The batcher a worker builds over `store`, with one transaction at a time on a server
/// too, so that pieces queued behind a held one all wait for the next.
private func stepBatcher<S: JobStore>(_ store: S) -> TransactionBatcher<S.Transaction> {
    TransactionBatcher.forSteps(of: store, maxTransactions: 1)
}

/// Runs `piece` for each job at once while the gate holds the batcher's transaction, lets
/// it go once all of them are queued behind it, and returns for each job whether its piece
/// succeeded: false when it threw an error `failingWith` accepts.
private func runBehindGate<Transaction>(
    _ gate: TransactionGate, _ jobs: ArraySlice<JobID>, in batcher: TransactionBatcher<Transaction>,
    failingWith expected: @escaping @Sendable (any Error) -> Bool,
    _ piece: @escaping @Sendable (_ index: Int, _ job: JobID) async throws -> Void
) async throws -> [JobID: Bool] {
    let pieces = Task {
        try await withThrowingTaskGroup(of: (JobID, Bool).self) { group in
            for (index, job) in jobs.enumerated() {
                group.addTask {
                    do {
                        try await piece(index, job)
                        return (job, true)
                    } catch let error where expected(error) {
                        return (job, false)
                    }
                }
            }
            return try await group.reduce(into: [JobID: Bool]()) { $0[$1.0] = $1.1 }
        }
    }
    await gate.open(onceQueued: jobs.count, in: batcher)
    return try await pieces.value
}

@Sendable private func isLeaseLost(_ error: any Error) -> Bool { (error as? JobRunnerError)?.isLeaseLost ?? false }

/// Six no-op jobs, leased to worker "A" for a minute.
private func sixClaimedJobs<S: JobStore>(_ store: S) async throws -> [JobID] {
    _ = try await store.write { tx in
        try (0..<6).map { _ in try store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch, in: tx).job.id }
    }
    let jobs = try await store.claim(quota: [ProbeJobs.noopKind: 6], leases: [ProbeJobs.noopKind: 60], owner: "A", now: epoch).map(\.record.id)
    try #require(jobs.count == 6)
    return jobs
}

/// Holds a batcher's transaction open from inside one of its pieces, so that the pieces
/// queued meanwhile are certain to share the next transaction.
private final class TransactionGate: @unchecked Sendable {
    private let lock = NSLock()
    private var held = false
    private let opened = DispatchSemaphore(value: 0)

    /// Called by the holding piece, inside its transaction: waits there until `open`.
    func hold() {
        lock.withLock { held = true }
        opened.wait()
    }

    /// Returns once the holding piece is inside its transaction, alone: queued any earlier,
    /// the other pieces could be taken into that transaction with it.
    func waitUntilHeld() async {
        while !lock.withLock({ held }) { await Task.yield() }
    }

    /// Lets the held transaction go once `count` pieces are queued behind it.
    func open<Transaction>(onceQueued count: Int, in batcher: TransactionBatcher<Transaction>) async {
        while batcher.waiting < count { await Task.yield() }
        opened.signal()
    }
}
