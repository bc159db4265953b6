import Foundation

/// Runs pieces of database work that arrive concurrently (steps of different jobs,
/// done-marks, a backend's own writes) in shared write transactions: the
/// per-transaction commit is what bounds throughput. A piece that throws (a lost
/// lease, a failing step) must not undo the others, so each piece either runs in its
/// own savepoint, or, where a savepoint costs a round trip to a server, the pieces run
/// bare and, when one throws, the transaction is abandoned and every piece runs again
/// in a transaction of its own. A piece returns once the transaction holding it commits.
public final class TransactionBatcher<Transaction>: @unchecked Sendable {
    public typealias Pieces = @Sendable (Transaction) throws -> [(any Error)?]
    private struct Pending {
        let work: @Sendable (Transaction) throws -> Void
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let write: @Sendable (@escaping Pieces) async throws -> [(any Error)?]
    private let savepoint: (@Sendable (Transaction, () throws -> Void) throws -> Void)?
    private let lock = NSLock()
    private var pending: [Pending] = []
    private var flushScheduled = false

    /// `write` runs its closure in one write transaction and commits it (rolls back if it
    /// throws); `savepoint` runs a piece so that throwing undoes that piece's writes alone,
    /// or is nil to rerun pieces alone instead. Pieces must then be safe to run twice,
    /// which job steps are: a rolled-back run left nothing behind.
    public init(
        write: @escaping @Sendable (@escaping Pieces) async throws -> [(any Error)?],
        savepoint: (@Sendable (Transaction, () throws -> Void) throws -> Void)?
    ) {
        self.write = write
        self.savepoint = savepoint
    }

    public func run<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        let box = ResultBox<T>()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let startFlush = lock.withLock {
                pending.append(Pending(work: { tx in box.value = try body(tx) }, continuation: continuation))
                if flushScheduled { return false }
                flushScheduled = true
                return true
            }
            if startFlush { Task { await self.flush() } }
        }
        guard let value = box.value else { preconditionFailure("a batched transaction piece succeeded without a result") }
        return value
    }

    /// Pieces waiting for the next transaction.
    var waiting: Int { lock.withLock { pending.count } }

    /// One flush at a time: work that arrives while a transaction is open goes into the next one.
    private func flush() async {
        while true {
            let batch: [Pending] = lock.withLock {
                if pending.isEmpty {
                    flushScheduled = false
                    return []
                }
                defer { pending = [] }
                return pending
            }
            guard !batch.isEmpty else { return }
            let works = batch.map(\.work)
            let failures: [(any Error)?]
            do {
                failures = try await run(works)
            } catch {
                failures = Array(repeating: error, count: batch.count)
            }
            for (item, failure) in zip(batch, failures) {
                if let failure { item.continuation.resume(throwing: failure) } else { item.continuation.resume() }
            }
        }
    }

    /// What each piece threw, or throws what the transaction as a whole did (it did not commit).
    private func run(_ works: [@Sendable (Transaction) throws -> Void]) async throws -> [(any Error)?] {
        if let only = works.first, works.count == 1 {
            // Alone in its transaction, a piece needs no savepoint: its failure rolls
            // the whole transaction back, which is all it wrote.
            return [await alone(only)]
        }
        if let savepoint {
            return try await write { tx in
                works.map { work in
                    do {
                        try savepoint(tx) { try work(tx) }
                        return nil
                    } catch {
                        return error
                    }
                }
            }
        }
        do {
            return try await write { tx in
                for work in works { try work(tx) }
                return Array(repeating: nil, count: works.count)
            }
        } catch {
            // One piece failed (or the commit did): nothing of this batch stayed, so each
            // piece gets a transaction of its own and its own outcome.
            var failures: [(any Error)?] = []
            for work in works { failures.append(await alone(work)) }
            return failures
        }
    }

    private func alone(_ work: @escaping @Sendable (Transaction) throws -> Void) async -> (any Error)? {
        do {
            _ = try await write { tx in
                try work(tx)
                return [nil]
            }
            return nil
        } catch {
            return error
        }
    }
}

/// Carries a piece's result out of the transaction closure; written once, before the
/// continuation resumes, and read only after.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
