import Foundation
import Synchronization

/// Runs pieces of database work that arrive concurrently (steps of different jobs,
/// done-marks, a backend's own writes) in shared write transactions: the
/// per-transaction commit is what bounds throughput. A piece that throws (a lost
/// lease, a failing step) must not undo the others, so each piece either runs in its
/// own savepoint, or, where a savepoint costs a round trip to a server, the pieces run
/// bare and, when one throws, the transaction is abandoned and every piece runs again
/// in a transaction of its own. A piece returns once the transaction holding it commits.
///
/// A job step's piece ends in a done-mark (`StepMark`). The marks of every piece in a
/// transaction are written together (`markAll`) after the pieces' own writes, so a batch
/// of steps costs one statement (one round trip to a server) for its marks, not one or
/// more each. A step that wrote nothing but its mark (an outside step's) needs no
/// savepoint: `markAll` writes nothing for a mark whose lease was lost, so that piece
/// alone fails. A lost lease behind a step that wrote more abandons the transaction, and
/// each piece runs again alone.
public final class TransactionBatcher<Transaction>: Sendable {
    /// A piece's outcome: for a step, whether cancellation of its job was requested.
    public typealias Outcome = Result<Bool, any Error>
    public typealias Pieces = @Sendable (Transaction) throws -> [Outcome]
    public typealias MarkAll = @Sendable (Transaction, [StepMark]) throws -> [Bool?]

    /// What a piece does inside the transaction.
    private enum Work: Sendable {
        /// Writes, then returns the piece's done-mark, or nil for a piece that is not a step;
        /// `carried` is the done-mark of the outside step before it, written with it.
        case writes(carried: StepMark?, @Sendable (Transaction) throws -> StepMark?)
        /// Only a done-mark: a step whose work was done outside the database.
        case markOnly(StepMark)

        /// Runs the piece's writes, if it has any, and returns its done-marks: the carried
        /// one first.
        func perform(in tx: Transaction) throws -> [StepMark] {
            switch self {
            case .writes(let carried, let body):
                let own = try body(tx)
                return [carried, own].compactMap { $0 }
            case .markOnly(let mark): return [mark]
            }
        }

        var carriesMark: Bool {
            if case .writes(let carried, _) = self { return carried != nil }
            return false
        }
    }

    private struct Pending: Sendable {
        let work: Work
        let continuation: CheckedContinuation<Bool, any Error>
    }

    /// Exactly one of the two is set, by the initialiser used.
    private let write: (@Sendable (@escaping Pieces) async throws -> [Outcome])?
    private let writerSessions: WriterSessions<Transaction>?
    private let savepoint: (@Sendable (Transaction, () throws -> Void) throws -> Void)?
    private let markAll: MarkAll?
    private let maxTransactions: Int
    private let state = Mutex(State())

    private struct State {
        var pending: [Pending] = []
        var openTransactions = 0
        /// A session is scheduled on the writer or running there (`writerSessions` only).
        var sessionOpen = false
    }

    /// `write` runs its closure in one write transaction and commits it (rolls back if it
    /// throws); `savepoint` runs a piece so that throwing undoes that piece's writes alone,
    /// or is nil to rerun pieces alone instead. Pieces must be safe to run twice (also
    /// with savepoints: a step that wrote and then lost its lease sends the whole batch
    /// round again), which job steps are: a rolled-back run left nothing behind. `markAll`
    /// writes done-marks, fenced by their leases: for each mark, nil when the lease was
    /// lost (and nothing of it written), else whether cancellation was requested. Without
    /// it only `run` may be used.
    /// `maxTransactions` shared transactions may be open at once: one for a database with
    /// a single writer; more where each is a connection to a server, so pieces keep
    /// arriving into a new transaction while earlier ones wait on their round trips.
    public init(
        write: @escaping @Sendable (@escaping Pieces) async throws -> [Outcome],
        savepoint: (@Sendable (Transaction, () throws -> Void) throws -> Void)?,
        markAll: MarkAll? = nil,
        maxTransactions: Int = 1
    ) {
        self.write = write
        self.writerSessions = nil
        self.savepoint = savepoint
        self.markAll = markAll
        self.maxTransactions = max(1, maxTransactions)
    }

    /// For a single writer that runs code of ours (SQLite): the transactions run one after
    /// another on the writer itself (see `runSession`). `savepoint` and `markAll` as above.
    public init(
        writerSessions: @escaping WriterSessions<Transaction>,
        savepoint: (@Sendable (Transaction, () throws -> Void) throws -> Void)?,
        markAll: MarkAll? = nil
    ) {
        self.write = nil
        self.writerSessions = writerSessions
        self.savepoint = savepoint
        self.markAll = markAll
        self.maxTransactions = 1
    }

    /// The batcher a worker runs its jobs' steps through on `store`: savepoints where the
    /// store finds them cheap, done-marks written by the store, sessions on its writer where
    /// it has them, else as many transactions in flight as it allows (or `maxTransactions`).
    static func forSteps<Store: JobQueue>(of store: Store, maxTransactions: Int? = nil) -> TransactionBatcher
    where Store.Transaction == Transaction {
        var savepoint: (@Sendable (Transaction, () throws -> Void) throws -> Void)?
        if store.savepointsAreCheap { savepoint = { tx, body in try store.savepoint(in: tx, body) } }
        let markAll: MarkAll = { tx, marks in try store.markStepsDone(marks, in: tx) }
        if let sessions = store.writerSessions {
            return TransactionBatcher(writerSessions: sessions, savepoint: savepoint, markAll: markAll)
        }
        return TransactionBatcher(
            write: { work in try await store.writeUnshared(work) }, savepoint: savepoint, markAll: markAll,
            maxTransactions: maxTransactions ?? store.concurrentWriteTransactions)
    }

    public func run<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        let box = ResultBox<T>()
        _ = try await enqueue(.writes(carried: nil) { tx in
            box.value = try body(tx)
            return nil
        })
        guard let value = box.value else { preconditionFailure("a batched transaction piece succeeded without a result") }
        return value
    }

    /// Runs a job step's piece: `body`'s writes, then the done-mark it returns, committed
    /// together. Returns `body`'s value and whether cancellation of the job was requested;
    /// throws `JobRunnerError.leaseLost` (having undone `body`'s writes) when the lease was lost.
    /// `carrying` is the done-mark of the outside step just before, written in the same
    /// transaction: when it finds the job's cancellation requested, `body`'s writes are
    /// undone too and `CancelledBeforeStep` is thrown, so the step does not take effect.
    public func runStep<T: Sendable>(
        carrying: StepMark? = nil, _ body: @escaping @Sendable (Transaction) throws -> (T, StepMark)
    ) async throws -> (T, cancelRequested: Bool) {
        precondition(markAll != nil, "a TransactionBatcher runs steps only with a markAll")
        let box = ResultBox<T>()
        let cancelRequested = try await enqueue(.writes(carried: carrying) { tx in
            let (value, mark) = try body(tx)
            box.value = value
            return mark
        })
        guard let value = box.value else { preconditionFailure("a batched step succeeded without a result") }
        return (value, cancelRequested)
    }

    /// Writes the done-mark of a step that wrote nothing else (its work was outside the
    /// database). Returns whether cancellation of the job was requested; throws
    /// `JobRunnerError.leaseLost` when the lease was lost.
    public func runMark(_ mark: StepMark) async throws -> Bool {
        precondition(markAll != nil, "a TransactionBatcher writes marks only with a markAll")
        return try await enqueue(.markOnly(mark))
    }

    private func enqueue(_ work: Work) async throws -> Bool {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            let start = state.withLock { state -> Start in
                state.pending.append(Pending(work: work, continuation: continuation))
                if writerSessions != nil {
                    if state.sessionOpen { return .none }
                    state.sessionOpen = true
                    return .session
                }
                if state.openTransactions >= maxTransactions { return .none }
                state.openTransactions += 1
                return .flush
            }
            switch start {
            case .none: break
            case .session: scheduleSession()
            case .flush: Task { await self.flush() }
            }
        }
    }

    private enum Start { case none, session, flush }

    /// Pieces waiting for the next transaction.
    var waiting: Int { state.withLock { $0.pending.count } }

    /// Batches a session commits before it steps back behind the other writes of the
    /// process queued on the same writer (a heartbeat, a release, a migration). A batch
    /// that failed as a whole counts once, though its pieces then run again one by one.
    static var transactionsPerSession: Int { 16 }

    private func scheduleSession() {
        writerSessions! { transact in self.runSession(transact) }
    }

    /// On the writer: one transaction after another, each taking every piece that waits
    /// when it begins, until none waits (or `transactionsPerSession` have run). The writer
    /// goes from one commit straight to the next batch. Run from a task instead, each transaction began only once the task was
    /// resumed on the cooperative pool, behind the jobs the last commit had just resumed:
    /// the writer sat idle 35-45 % of a three-step drain, and a transaction started ahead
    /// of its pieces committed empty.
    private func runSession(_ transact: WriterTransact<Transaction>) {
        for _ in 0..<Self.transactionsPerSession {
            let batch = state.withLock { state -> [Pending] in
                if state.pending.isEmpty { state.sessionOpen = false }
                defer { state.pending = [] }
                return state.pending
            }
            if batch.isEmpty { return }
            let outcomes = runTransaction(batch.map { $0.work }, transact)
            precondition(outcomes.count == batch.count, "a group commit answered \(outcomes.count) of \(batch.count) pieces")
            for (item, outcome) in zip(batch, outcomes) {
                item.continuation.resume(with: outcome)
            }
        }
        scheduleSession()
    }

    /// One transaction on the writer holding `works`; if it fails as a whole after the
    /// pieces ran (one without a savepoint threw, or the commit did), each piece runs again
    /// in a transaction of its own.
    private func runTransaction(_ works: [Work], _ transact: WriterTransact<Transaction>) -> [Outcome] {
        var began = false
        var outcomes: [Outcome] = []
        do {
            try transact { tx in
                began = true
                outcomes = try self.transactionBody(works, in: tx)
            }
            return outcomes
        } catch {
            // Not begun (the file stayed locked past the busy timeout, an I/O error): nothing
            // ran. Alone, a piece that failed (or whose commit did) left nothing. Neither is
            // run again.
            if !began || works.count <= 1 { return works.map { _ in .failure(error) } }
            return works.map { work in
                var outcome: Outcome = .failure(error)
                do {
                    try transact { tx in outcome = try self.transactionBody([work], in: tx)[0] }
                } catch {
                    outcome = .failure(error)
                }
                return outcome
            }
        }
    }

    /// Up to `maxTransactions` flushes at a time: work that arrives while they are all open
    /// goes into the next transaction.
    private func flush() async {
        while true {
            let waiting = takeWaiting()
            let (batch, outcomes) = waiting.isEmpty ? ([], []) : await runTransaction(taking: waiting)
            for (item, outcome) in zip(batch, outcomes) {
                item.continuation.resume(with: outcome)
            }
            let done = state.withLock { state in
                if state.pending.isEmpty {
                    state.openTransactions -= 1
                    return true
                }
                return false
            }
            if done { return }
        }
    }

    private func takeWaiting() -> [Pending] {
        state.withLock { state in
            defer { state.pending = [] }
            return state.pending
        }
    }

    /// One transaction holding `pieces`; returns them with their outcomes.
    private func runTransaction(taking pieces: [Pending]) async -> ([Pending], [Outcome]) {
        // A closure, not `\.work`: a key path into a generic type is built anew at run
        // time on each use.
        let works = pieces.map { $0.work }
        do {
            return (pieces, try await write! { tx in try self.transactionBody(works, in: tx) })
        } catch {
            // Alone, a piece that failed (or whose commit did) left nothing: it is not run again.
            if pieces.count <= 1 { return (pieces, pieces.map { _ in .failure(error) }) }
            // One piece failed (or the commit did): nothing of this batch stayed, so each
            // piece gets a transaction of its own and its own outcome.
            var outcomes: [Outcome] = []
            for work in works { outcomes.append(await alone(work)) }
            return (pieces, outcomes)
        }
    }

    /// The pieces' writes and marks, in the transaction `tx`.
    private func transactionBody(_ works: [Work], in tx: Transaction) throws -> [Outcome] {
        guard let only = works.first, works.count == 1 else { return try perform(works, in: tx) }
        // Alone in its transaction, a piece needs no savepoint: its failure rolls the whole
        // transaction back, which is all it wrote.
        return [.success(try markOne(only, try only.perform(in: tx), in: tx))]
    }

    /// Writes one piece's marks in the piece's own transaction.
    private func markOne(_ work: Work, _ marks: [StepMark], in tx: Transaction) throws -> Bool {
        guard !marks.isEmpty else { return false }
        guard let markAll else { preconditionFailure("a step piece without a markAll") }
        return try outcome(of: work, marks: marks, results: ArraySlice(try markAll(tx, marks)))
    }

    /// A piece's outcome from its marks' results: whether cancellation was requested, or
    /// the error that must undo its writes.
    private func outcome(of work: Work, marks: [StepMark], results: ArraySlice<Bool?>) throws -> Bool {
        guard results.count == marks.count else { preconditionFailure("markAll answered \(results.count) of \(marks.count) marks") }
        guard results.allSatisfy({ $0 != nil }) else { throw JobRunnerError.leaseLost(marks[0].jobID) }
        // The job's cancellation was requested before this step: it must not take effect.
        if work.carriesMark, results.first! == true { throw CancelledBeforeStep(jobID: marks[0].jobID) }
        return results.last!!
    }

    /// Runs several pieces in one transaction, each in its own savepoint where savepoints
    /// are cheap; throws what should abandon the whole transaction.
    private func perform(_ works: [Work], in tx: Transaction) throws -> [Outcome] {
        var outcomes = [Outcome](repeating: .success(false), count: works.count)
        var marks = [[StepMark]](repeating: [], count: works.count)
        for (index, work) in works.enumerated() {
            // A piece with only a mark writes nothing it would need a savepoint to undo.
            guard case .writes = work, let savepoint = self.savepoint else {
                // Without savepoints a failure here abandons the batch (below).
                marks[index] = try work.perform(in: tx)
                continue
            }
            do {
                try savepoint(tx) { marks[index] = try work.perform(in: tx) }
            } catch {
                outcomes[index] = .failure(error)
            }
        }
        let marked = marks.indices.filter { !marks[$0].isEmpty }
        guard !marked.isEmpty else { return outcomes }
        guard let markAll = self.markAll else { preconditionFailure("a step piece without a markAll") }
        let all = marked.flatMap { marks[$0] }
        let results = try markAll(tx, all)
        guard results.count == all.count else { preconditionFailure("markAll answered \(results.count) of \(all.count) marks") }
        var offset = 0
        for index in marked {
            let answers = results[offset..<(offset + marks[index].count)]
            offset += marks[index].count
            if case .markOnly = works[index], answers.first! == nil {
                // Nothing of this piece was written: it alone fails.
                outcomes[index] = .failure(JobRunnerError.leaseLost(marks[index][0].jobID))
                continue
            }
            // A lost lease, or a cancellation that came before a step whose writes are in
            // this transaction: give it up, and every piece runs again alone below.
            outcomes[index] = .success(try outcome(of: works[index], marks: marks[index], results: answers))
        }
        return outcomes
    }

    private func alone(_ work: Work) async -> Outcome {
        do {
            return try await write! { tx in try self.transactionBody([work], in: tx) }[0]
        } catch {
            return .failure(error)
        }
    }
}

/// Carries a piece's result out of the transaction closure; written once, before the
/// continuation resumes, and read only after.
// Unchecked: the continuation orders the write and the read, and the compiler cannot see it.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}

/// A database step's piece carried the done-mark of the outside step before it, and that
/// mark found the job's cancellation requested: the step's writes were undone, and the
/// carried mark is still to be written.
struct CancelledBeforeStep: Error {
    let jobID: JobID
}

/// Runs `body` in one write transaction on the store's writer, there and then: commits if
/// it returns, rolls back and rethrows if it throws (or rethrows why BEGIN or COMMIT failed).
public typealias WriterTransact<Transaction> = (_ body: (Transaction) throws -> Void) throws -> Void

/// Schedules `session` on a store's one writer, outside any transaction, and returns at
/// once; the session opens and commits its transactions through the `WriterTransact` it is
/// given, one after another, without leaving the writer.
public typealias WriterSessions<Transaction> = @Sendable (_ session: @escaping @Sendable (WriterTransact<Transaction>) -> Void) -> Void
