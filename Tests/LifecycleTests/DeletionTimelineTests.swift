import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// Random timelines of requests, restores, clock moves and purge runs (some racing
/// restores), checked after every step against a model of DESIGN.md's state diagram:
/// no account is ever purged while active or inside its grace period, and a restore
/// and a purge never both succeed.
struct DeletionTimelineTests {
    /// 8 seeds × 25 accounts on each backend: 200 timelines a backend, each account its own.
    @Test(arguments: Backend.allCases, 1...8)
    func randomTimelinesNeverPurgeTooEarlyAndNeverBothRestoreAndPurge(_ backend: Backend, seed: UInt64) async throws {
        try await timeline(seed: seed, store: try await backend.makeStore())
    }

    private func timeline(seed: UInt64, store: some LifecycleStore) async throws {
        // Lockout would make outcomes depend on earlier guesses; its own tests cover it.
        let fixture = try await DeletionFixture(store: store, deletionPolicy: "lockout_failures: 1000\n")
        var random = SplitMix64(seed: seed)
        let ids = (0..<25).map { "t\(seed)-\($0)" }
        var model: [String: ModelState] = [:]
        var blobCounts: [String: Int] = [:]
        var rowCounts: [String: [String: Int]] = [:]
        for id in ids {
            blobCounts[id] = try await fixture.addAccount(id, entries: 1, sessions: 1)
            rowCounts[id] = try await fixture.rows(id).filter { $0.key != "sessions" }
            model[id] = .active
        }

        func check(_ accounts: [String], _ context: String) async throws {
            for other in accounts {
                let account = try #require(try await fixture.account(other))
                let record = try await fixture.deletionRecord(other)
                // Sign-in sessions end with a deletion request (the map's `on_deletion:`), by design.
                let rows = try await fixture.rows(other).filter { $0.key != "sessions" }
                let blobs = try await fixture.blobKeys(other).count
                switch model[other]! {
                case .active:
                    #expect(account.state == .active && (record?.state ?? .active) == .active, "\(context): \(other)")
                case .pending(let purgeAfter):
                    #expect(account.state == .pendingDeletion && record?.state == .pendingDeletion, "\(context): \(other)")
                    #expect(record?.purgeAfter == purgeAfter, "\(context): \(other)")
                case .purging:
                    #expect(record?.state == .purging, "\(context): \(other)")
                case .purged:
                    #expect(account.state == .purged && record?.state == .purged, "\(context): \(other)")
                    #expect(account.email == nil && account.passwordHash == nil, "\(context): \(other)")
                    #expect(rows.values.allSatisfy { $0 == 0 }, "\(context): \(other) rows left \(rows)")
                    #expect(blobs == 0, "\(context): \(other) blobs left")
                    continue
                }
                // Never a byte lost before the purge: active and pending accounts keep everything.
                #expect(rows == rowCounts[other], "\(context): \(other) lost rows")
                #expect(blobs == blobCounts[other], "\(context): \(other) lost blobs")
            }
        }

        var restores = 0
        for step in 0..<60 {
            let now = fixture.clock.now()
            let id = ids[Int(random.next() % UInt64(ids.count))]
            let context = "seed \(seed) step \(step) account \(id)"
            let kind = random.next() % 9
            switch kind {
            case 0, 1:
                let rightPassword = random.next() % 4 != 0
                let outcome = await attempt { try await fixture.deletion.requestDeletion(account: .key(id), password: rightPassword ? demoPassword : "nope") }
                switch model[id]! {
                case .active:
                    if rightPassword {
                        #expect(outcome.result?.outcome == .requested, "\(context)")
                        model[id] = .pending(now.addingTimeInterval(30 * day))
                    } else {
                        #expect(outcome.error?.category == .permissionDenied, "\(context)")
                    }
                case .pending, .purging:
                    #expect(outcome.result?.outcome == .alreadyPending, "\(context)")
                case .purged:
                    #expect(outcome.error?.category == .noSuchAccount, "\(context)")
                }
            case 2:
                let immediately = random.next() % 2 == 0
                let outcome = await attempt {
                    try await fixture.deletion.requestDeletionByOperator(account: .key(id), operatorName: "ops", reason: "timeline", immediately: immediately)
                }
                switch model[id]! {
                case .active:
                    #expect(outcome.result?.outcome == .requested, "\(context)")
                    model[id] = .pending(immediately ? now : now.addingTimeInterval(30 * day))
                case .pending(let purgeAfter):
                    if immediately && purgeAfter > now {
                        #expect(outcome.result?.outcome == .rescheduled, "\(context)")
                        model[id] = .pending(now)
                    } else {
                        #expect(outcome.result?.outcome == .alreadyPending, "\(context)")
                    }
                case .purging:
                    #expect(outcome.result?.outcome == .alreadyPending, "\(context)")
                case .purged:
                    #expect(outcome.error?.category == .noSuchAccount, "\(context)")
                }
            case 3, 4:
                let outcome = await attempt { try await fixture.deletion.restore(account: .key(id)) }
                if case .pending(let purgeAfter) = model[id]!, purgeAfter > now {
                    #expect(outcome.result != nil, "\(context): \(outcome.error?.message ?? "")")
                    model[id] = .active
                    restores += 1
                } else {
                    #expect(outcome.error?.category == .badInput, "\(context)")
                }
            case 5, 6:
                let moves: [TimeInterval] = [60, 3_600, day, 7 * day, 29 * day, 30 * day, 31 * day]
                fixture.clock.advance(by: moves[Int(random.next() % UInt64(moves.count))])
            case 7:
                try await fixture.purge()
                for other in ids { if case .pending(let purgeAfter) = model[other]!, purgeAfter <= now { model[other] = .purged } }
            default:
                // A purge run racing the sign-ins of every pending account.
                let pending = ids.filter { if case .pending = model[$0]! { true } else { false } }
                let run = Task { try await fixture.purge() }
                var restored: Set<String> = []
                for other in pending where (try? await fixture.deletion.restore(account: .key(other))) != nil { restored.insert(other) }
                _ = try await run.value
                for other in pending {
                    guard case .pending(let purgeAfter) = model[other]! else { continue }
                    let state = try await fixture.deletionRecord(other)?.state
                    #expect(!(restored.contains(other) && state == .purged), "\(context): \(other) both restored and purged")
                    if purgeAfter > now {
                        #expect(restored.contains(other), "\(context): \(other) inside its grace period was not restorable")
                        model[other] = .active
                        restores += 1
                    } else {
                        #expect(!restored.contains(other), "\(context): \(other) restored after its purge date")
                        model[other] = .purged
                    }
                }
            }

            // A purge run may touch any account, so every account is checked after one; a
            // request, a restore or a clock move names one account, and any harm it did to
            // another stays in the database until the next purge step's check or the last one.
            try await check(kind >= 7 ? ids : [id], context)
        }
        try await check(ids, "seed \(seed) at the end")
        // A timeline where nothing was ever purged or restored would prove nothing.
        let purged = model.values.filter { $0 == .purged }.count
        #expect(purged > 0, "seed \(seed): no account was purged")
        #expect(restores > 0, "seed \(seed): no account was restored")
    }

    enum ModelState: Equatable {
        case active
        case pending(Date)
        case purging
        case purged
    }

    struct Attempt<T> {
        var result: T?
        var error: LifecycleError?
    }

    func attempt<T>(_ body: () async throws -> T) async -> Attempt<T> {
        do {
            return Attempt(result: try await body(), error: nil)
        } catch let error as LifecycleError {
            return Attempt(result: nil, error: error)
        } catch {
            return Attempt(result: nil, error: LifecycleError(.internalError, "\(error)"))
        }
    }
}

/// A small seeded generator, so a failing timeline can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
