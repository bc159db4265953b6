import Foundation
@testable import JobRunner
import Testing

/// Pieces that share a commit: one piece's failure must leave exactly its own writes out,
/// on both backends (savepoints on SQLite, pieces rerun alone on PostgreSQL).
struct TransactionBatcherTests {
    @Test(arguments: Backend.allCases)
    func aFailingPieceUndoesOnlyItsOwnWritesInASharedTransaction(_ backend: Backend) async throws {
        func check<S: JobStore>(_ store: S) async throws {
            let batcher: TransactionBatcher<S.Transaction> =
                store.savepointsAreCheap
                ? TransactionBatcher(write: { try await store.write($0) }, savepoint: { tx, body in try store.savepoint(in: tx, body) })
                : TransactionBatcher(write: { try await store.write($0) }, savepoint: nil)
            let jobs = try await store.write { tx in
                try (0..<6).map { _ in try store.enqueue(EnqueueRequest(kind: ProbeJobs.noopKind), policy: JobPolicy(), now: epoch, in: tx).job.id }
            }
            // The first piece holds its transaction open until the others are queued behind
            // it, so those five are certain to share the next transaction.
            let gate = DispatchSemaphore(value: 0)
            let first = Task {
                try await batcher.run { tx in
                    gate.wait()
                    try store.recordProbeEffect(jobID: jobs[0], step: "write", now: epoch, in: tx)
                }
            }
            let failing = jobs[3]
            let rest = Task {
                try await withThrowingTaskGroup(of: (JobID, Bool).self) { group in
                    for job in jobs.dropFirst() {
                        group.addTask {
                            do {
                                try await batcher.run { tx in
                                    try store.recordProbeEffect(jobID: job, step: "write", now: epoch, in: tx)
                                    if job == failing { throw InducedRollback() }
                                }
                                return (job, true)
                            } catch is InducedRollback {
                                return (job, false)
                            }
                        }
                    }
                    return try await group.reduce(into: [JobID: Bool]()) { $0[$1.0] = $1.1 }
                }
            }
            while batcher.waiting < 5 { await Task.yield() }
            gate.signal()
            try await first.value
            let outcomes = try await rest.value
            #expect(outcomes.filter { !$0.value }.map(\.key) == [failing])
            for job in jobs {
                #expect(try await store.probeEffectCount(jobID: job) == (job == failing ? 0 : 1))
            }
        }
        try await check(try await backend.makeStore())
    }
}
