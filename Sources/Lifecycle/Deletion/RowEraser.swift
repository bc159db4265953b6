import Foundation
import JobRunner

/// Erases one account's rows as the data map says, for the purge and a part deletion:
/// table after table in the plan's order (children first), in bounded batches, each its
/// own transaction together with its counts (purge progress) and the files the erased
/// rows named (recorded for the job to delete once the rows are gone), so a rerun after a
/// crash carries on with what is left and counts every row once. The transaction that
/// finds nothing more to erase also runs the purge's last writes (the user row), so an
/// account of at most one batch of rows, most of them, is erased in one commit.
///
/// A refusal by the database (a foreign key, a trigger, a missing privilege, a check
/// constraint) rolls the batch back and fails the attempt naming the table, the action
/// and the database's own words: no file has been deleted by then, and the job retries.
struct RowEraser<Store: LifecycleStore>: Sendable {
    let store: Store
    let data: AppData
    let policy: DeletionPolicy
    /// Whether the account is still purging, checked in every batch's transaction: once the
    /// last batch marked it purged, a rerun erases nothing, whatever rows now carry its key.
    let isPurging: @Sendable (_ key: String, Store.Transaction) throws -> Bool

    private enum Batch<T: Sendable>: Sendable {
        case more(erased: Int)
        case done(T)
        case notPurging
    }

    /// Erases the account's rows a batch per transaction, each committed with its counts,
    /// so a rerun carries on with what is left and counts every row once. The transaction
    /// that finds nothing more to erase runs `last` with that batch's counts instead.
    /// nil when the account is not purging (an earlier run finished it): nothing is erased,
    /// whatever rows now carry its key.
    func erase<T: Sendable>(
        key: String, context: StepContext, last: @escaping @Sendable (Store.Transaction, [String: PurgeCounts]) throws -> T
    ) async throws -> T? {
        let (data, policy, isPurging) = (data, policy, isPurging)
        var erased = 0
        while true {
            let batch = try await store.write { tx -> Batch<T> in
                guard try isPurging(key, tx) else { return .notPurging }
                try tx.prepareErasure(settings: data.plan.eraseSettings)
                var counts: [String: PurgeCounts] = [:]
                var files: [String] = []
                let finished = try Self.eraseBatch(key: key, data: data, budget: policy.purgeRowBatch, counts: &counts, files: &files, in: tx)
                try tx.recordPurgeFiles(key: key, files: files)
                if finished { return .done(try last(tx, counts)) }
                try Self.record(counts, key: key, in: tx)
                return .more(erased: counts.values.reduce(0) { $0 + $1.deleted + $1.masked })
            }
            switch batch {
            case .notPurging: return nil
            case .done(let value): return value
            case .more(let count):
                erased += count
                context.progress("\(erased) row(s) erased")
                if policy.batchPause > 0 { try await Task.sleep(nanoseconds: UInt64(policy.batchPause * 1_000_000_000)) }
            }
        }
    }

    static func record(_ counts: [String: PurgeCounts], key: String, in tx: Store.Transaction) throws {
        for (table, count) in counts {
            try tx.addPurgeProgress(key: key, table: table, deleted: count.deleted, masked: count.masked)
        }
    }

    /// The user row's own erasure, after every other row: the files its `blobs:` columns
    /// name are added to `files` (before the row that names them goes), then the row is
    /// deleted or masked as the plan says (a part's plan masks only the columns it clears)
    /// and counted. A refusal names the user table and `action`.
    static func eraseUserRow(
        key: String, data: AppData, action: ErasureRefused.Action, counts: inout [String: PurgeCounts], files: inout [String],
        in tx: Store.Transaction
    ) throws {
        let sql = data.sql
        let userTable = data.displayName(data.plan.subject.table)
        if let statement = sql.subjectBlobs(key: key) {
            files += try tx.rows(statement).flatMap { $0.compactMap(\.text) }.filter { !$0.isEmpty }
        }
        let rows: Int
        do {
            rows = try tx.execute(sql.eraseSubject(key: key))
        } catch {
            throw ErasureRefused(table: userTable, action: action, cause: error)
        }
        if data.plan.subject.erase == .delete {
            counts[userTable, default: PurgeCounts()].deleted += rows
        } else {
            counts[userTable, default: PurgeCounts()].masked += rows
        }
    }

    /// Erases at most `budget` rows (the user's, deleted or masked, and other users' rows
    /// cascaded with them), table after table in the plan's order, adding them to `counts`
    /// and the files the erased rows named to `files`. True when no table has anything
    /// left to erase; false when the budget ran out first. Within a table: cascades, then
    /// the user's rows nothing references any more (leaf rows first, so a reply goes
    /// before what it answers) until none can go, then the rest masked where the map keeps them.
    static func eraseBatch(
        key: String, data: AppData, budget: Int, counts: inout [String: PurgeCounts], files: inout [String], in tx: Store.Transaction
    ) throws -> Bool {
        let sql = data.sql
        var left = budget

        /// One statement; a refusal names the table and what was being done to it.
        func run(_ statement: SQLStatement, _ table: String, _ action: ErasureRefused.Action) throws -> Int {
            do {
                guard !statement.resultKinds.isEmpty else { return try tx.execute(statement) }
                let rows = try tx.rows(statement)
                for row in rows { for value in row { if let file = value.text, !file.isEmpty { files.append(file) } } }
                return rows.count
            } catch let refused as ErasureRefused {
                throw refused
            } catch {
                throw ErasureRefused(table: table, action: action, cause: error)
            }
        }

        func read(_ statement: SQLStatement, _ table: String) throws -> [[SQLValue]] {
            do {
                return try tx.rows(statement)
            } catch {
                throw ErasureRefused(table: table, action: .reading, cause: error)
            }
        }

        /// Runs statements of at most what is left of the budget until one erases fewer
        /// than asked (or none, with `rounds`); false when the budget ran out.
        func drain(_ table: String, deletes: Bool, rounds: Bool, _ statement: (Int) -> SQLStatement) throws -> Bool {
            while true {
                let limit = left
                let count = try run(statement(limit), table, deletes ? .deleting : .masking)
                left -= count
                if deletes { counts[table, default: PurgeCounts()].deleted += count } else { counts[table, default: PurgeCounts()].masked += count }
                if left == 0 { return false }
                if count == 0 || (!rounds && count < limit) { return true }
            }
        }

        /// The files of rows about to be masked (a mask empties the file columns it names).
        func filesBeforeMask(_ table: DataMapPlan.TablePlan, _ mask: DataMap.Mask, side: DataMap.Side? = nil) throws {
            guard let statement = sql.blobsBeforeMask(table, mask: mask, key: key, side: side) else { return }
            for row in try read(statement, data.displayName(table.table.name)) { for value in row { if let file = value.text, !file.isEmpty { files.append(file) } } }
        }

        /// The user's rows of the table (of one side), in rounds: each round's cascades (other
        /// users' rows that go with hers, or stay unlinked, `set:`), deepest first, then the
        /// rows nothing holds back any more, until a round takes them all (or none, where a
        /// reply gone lets more go). False when the budget ran out.
        func deleteOwned(_ table: DataMapPlan.TablePlan, _ name: String, rounds: Bool, side: DataMap.Side? = nil) throws -> Bool {
            while true {
                for index in table.cascades.indices.reversed() {
                    let cascade = table.cascades[index]
                    guard try drain(data.displayName(cascade.table), deletes: cascade.deletesRows, rounds: false, {
                        sql.deleteCascade(table, cascade: index, key: key, limit: $0)
                    }) else { return false }
                }
                let limit = left
                let count = try run(sql.deleteOwned(table, key: key, limit: limit, side: side), name, .deleting)
                left -= count
                counts[name, default: PurgeCounts()].deleted += count
                if left == 0 { return false }
                if count == 0 || (!rounds && count < limit) { return true }
            }
        }

        for table in data.plan.tables {
            let name = data.displayName(table.table.name)
            let rounds = sql.deletesInRounds(table)
            switch table.owner {
            case .sides(let sides):
                for side in sides {
                    if let mask = side.erase.mask {
                        try filesBeforeMask(table, mask, side: side)
                        guard try drain(name, deletes: false, rounds: false, { sql.maskOwned(table, mask: mask, key: key, limit: $0, side: side) }) else { return false }
                        continue
                    }
                    guard try deleteOwned(table, name, rounds: rounds, side: side) else { return false }
                }
            default:
                if table.table.erase.deletesRows {
                    guard try deleteOwned(table, name, rounds: rounds) else { return false }
                }
                if let mask = table.table.erase.mask {
                    try filesBeforeMask(table, mask)
                    guard try drain(name, deletes: false, rounds: false, { sql.maskOwned(table, mask: mask, key: key, limit: $0) }) else { return false }
                }
                // Rows left that no erase could reach are held by a reference the map did not
                // declare (added to the schema since the check): retrying cannot help. Without
                // a reference that holds rows back, a delete short of its limit took them all.
                if table.table.erase == .delete && rounds,
                   case .integer(let count) = try read(sql.countOwned(table, key: key), name).first?.first, count > 0 {
                    throw PermanentJobFailure("""
                        \(count) row(s) of \(name) could not be deleted: another row still references them. Run \
                        `lifecycle map check` and add the reference to the map (cascade or delete_unless_referenced_by), then retry the purge
                        """)
                }
            }
        }
        return true
    }
}

/// The database refused one of the purge's statements: the batch is rolled back, nothing
/// irreversible has happened, and the job retries (a trigger dropped, a privilege granted,
/// a policy changed, and the next attempt goes through).
struct ErasureRefused: Error, CustomStringConvertible {
    enum Action: String {
        case deleting = "deleting rows of"
        case masking = "masking rows of"
        case reading = "reading"
        case erasingUser = "erasing the user row of"
    }

    let table: String
    let action: Action
    let cause: any Error

    var description: String {
        """
        the database refused \(action.rawValue) \(table): \(cause). The batch was rolled back and no file has been deleted; \
        fix the cause (a trigger, a missing privilege, a row level security policy, a constraint), and the purge carries on \
        at its next attempt (`lifecycle jobs retry ID` to try at once)
        """
    }
}
