import Foundation

/// Runs pieces of database work that arrive concurrently (steps of different jobs,
/// done-marks, a backend's own writes) in shared write transactions, each piece in
/// its own savepoint: the per-transaction commit is what bounds throughput, and a
/// piece that throws (a lost lease, a failing step) rolls back only its own writes
/// while the others commit. A piece returns once the transaction holding it commits.
public final class TransactionBatcher<Transaction>: @unchecked Sendable {
    public typealias Pieces = @Sendable (Transaction) throws -> [(any Error)?]
    private struct Pending {
        let work: @Sendable (Transaction) throws -> Void
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let write: @Sendable (@escaping Pieces) async throws -> [(any Error)?]
    private let savepoint: @Sendable (Transaction, () throws -> Void) throws -> Void
    private let lock = NSLock()
    private var pending: [Pending] = []
    private var flushScheduled = false

    /// `write` runs its closure in one write transaction and commits it; `savepoint`
    /// runs a piece so that throwing undoes that piece's writes alone.
    public init(
        write: @escaping @Sendable (@escaping Pieces) async throws -> [(any Error)?],
        savepoint: @escaping @Sendable (Transaction, () throws -> Void) throws -> Void
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
            let savepoint = self.savepoint
            do {
                let failures: [(any Error)?]
                if let only = works.first, works.count == 1 {
                    // Alone in its transaction, a piece needs no savepoint: its failure rolls
                    // the whole transaction back, which is all it wrote.
                    _ = try await write { tx in
                        try only(tx)
                        return [nil]
                    }
                    failures = [nil]
                } else {
                    failures = try await write { tx in
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
                for (item, failure) in zip(batch, failures) {
                    if let failure { item.continuation.resume(throwing: failure) } else { item.continuation.resume() }
                }
            } catch {
                for item in batch { item.continuation.resume(throwing: error) }
            }
        }
    }
}

/// Carries a piece's result out of the transaction closure; written once, before the
/// continuation resumes, and read only after.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
