import Credentials
import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

struct DeletionServiceTests {
    @Test(arguments: Backend.allCases)
    func aRightPasswordMarksPendingRevokesSessionsAuditsAndSchedulesThePurge(_ backend: Backend) async throws { try await aRightPasswordMarksPendingRevokesSessionsAuditsAndSchedulesThePurge(store: try await backend.makeStore()) }

    private func aRightPasswordMarksPendingRevokesSessionsAuditsAndSchedulesThePurge(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada", sessions: 3)
        let now = fixture.clock.now()

        let result = try await fixture.deletion.requestDeletion(account: "ada@example.com", password: demoPassword)

        #expect(result.outcome == .requested)
        #expect(result.message == "Your account has been deleted. You have 30 days to recover it by signing in again.")
        #expect(result.sessionsRevoked == 3)
        // What the app shows, as the map's `on_deletion:` says: pending, and signed out.
        #expect(try await fixture.account("ada")?.state == .pendingDeletion)
        #expect(try await fixture.store.read { tx in try tx.sessions(accountID: "ada") }.isEmpty)
        let record = try #require(try await fixture.deletionRecord("ada"))
        #expect(record.state == .pendingDeletion)
        #expect(record.deletionRequestedAt == now)
        #expect(record.purgeAfter == now.addingTimeInterval(30 * day))
        let jobs = try await fixture.purgeJobs("ada")
        #expect(jobs.count == 1)
        #expect(jobs.first?.state == .queued)
        #expect(jobs.first?.runAt == record.purgeAfter)
        #expect(jobs.first?.uniqueKey == "purge:ada")
        #expect(jobs.first?.id == result.purgeJobID)
        let requested = try #require(try await fixture.audit("ada").last)
        #expect(requested.action == DeletionAudit.request)
        #expect(requested.outcome == "requested")
        #expect(requested.detail?.contains("\"hash_format\":\"bcrypt\"") == true)
        // Nothing is removed during the grace period.
        #expect(try await fixture.blobKeys("ada").count == 4)
        #expect(try await fixture.rows("ada")["journal_entries"] == 2)
    }

    @Test(arguments: Backend.allCases)
    func aWrongPasswordIsIncorrectPasswordAuditedAndChangesNothing(_ backend: Backend) async throws { try await aWrongPasswordIsIncorrectPasswordAuditedAndChangesNothing(store: try await backend.makeStore()) }

    private func aWrongPasswordIsIncorrectPasswordAuditedAndChangesNothing(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        let before = try await fixture.account("ada")
        let error = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: "Correct horse battery staple") }
        #expect(error?.category == .permissionDenied)
        #expect(error?.message == "Incorrect password")
        #expect(try await fixture.account("ada") == before)
        #expect(try await fixture.purgeJobs("ada").isEmpty)
        #expect(try await fixture.store.read { tx in try tx.sessions(accountID: "ada") }.allSatisfy { $0.revokedAt == nil })
        let audited = try #require(try await fixture.audit("ada").last)
        #expect(audited.outcome == DeletionAudit.incorrectPassword)
        // Retry allowed: the right password still works.
        #expect(try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword).outcome == .requested)
    }

    @Test(arguments: Backend.allCases)
    func fiveFailuresInFifteenMinutesLockDeletionForFifteenMinutes(_ backend: Backend) async throws { try await fiveFailuresInFifteenMinutesLockDeletionForFifteenMinutes(store: try await backend.makeStore()) }

    private func fiveFailuresInFifteenMinutesLockDeletionForFifteenMinutes(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        var lastFailure = fixture.clock.now()
        for _ in 0..<5 {
            lastFailure = fixture.clock.now()
            let error = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: "guess") }
            #expect(error?.category == .permissionDenied)
            fixture.clock.advance(by: 60)
        }
        // Locked, even for the right password: the lock is on attempts, not on guesses.
        let locked = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword) }
        #expect(locked?.category == .tryLater)
        let until = ISO8601.format(lastFailure.addingTimeInterval(15 * 60))
        #expect(locked?.message.contains("try again after \(until)") == true)
        #expect(try await fixture.account("ada")?.state == .active)
        #expect(try await fixture.audit("ada").last?.outcome == DeletionAudit.lockedOut)

        fixture.clock.set(lastFailure.addingTimeInterval(15 * 60 - 1))
        #expect(await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword) }?.category == .tryLater)
        fixture.clock.set(lastFailure.addingTimeInterval(15 * 60 + 1))
        #expect(try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword).outcome == .requested)
    }

    @Test(arguments: Backend.allCases)
    func parallelWrongGuessesCannotGetPastTheLockout(_ backend: Backend) async throws { try await parallelWrongGuessesCannotGetPastTheLockout(store: try await backend.makeStore()) }

    private func parallelWrongGuessesCannotGetPastTheLockout(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        // A real-cost hash keeps each check running long enough for the guesses to overlap.
        try await fixture.addAccount("ada", passwordHash: try PasswordVerifier().hashNewPassword(demoPassword))
        let deletion = fixture.deletion
        let outcomes = await withTaskGroup(of: LifecycleError.Category?.self) { group in
            for guess in 0..<12 {
                group.addTask {
                    await lifecycleError { _ = try await deletion.requestDeletion(account: "ada", password: "guess \(guess)") }?.category
                }
            }
            var outcomes: [LifecycleError.Category?] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let checked = outcomes.filter { $0 == .permissionDenied }.count
        #expect(checked == 5, "only five guesses may reach the password check")
        #expect(outcomes.filter { $0 == .tryLater }.count == 12 - checked)
        #expect(try await fixture.account("ada")?.state == .active)
        let audited = try await fixture.audit("ada")
        #expect(audited.filter { $0.outcome == DeletionAudit.incorrectPassword }.count == checked)
        #expect(!audited.contains { ($0.detail ?? "").contains("guess") })
        // Nothing is left registered as running once every check has ended.
        let running = try await fixture.store.read { tx in try tx.deletionAttemptsInFlight(accountID: "ada", since: .distantPast) }
        #expect(running.isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func failuresSpreadWiderThanTheWindowDoNotLock(_ backend: Backend) async throws { try await failuresSpreadWiderThanTheWindowDoNotLock(store: try await backend.makeStore()) }

    private func failuresSpreadWiderThanTheWindowDoNotLock(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        for _ in 0..<8 {
            let error = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: "guess") }
            #expect(error?.category == .permissionDenied)
            fixture.clock.advance(by: 4 * 60)  // Five failures span 16 minutes: never five inside 15.
        }
        #expect(try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword).outcome == .requested)
    }

    @Test func lockoutArithmetic() {
        let lockout = Lockout(failures: 3, window: 600, duration: 900)
        let t0 = deletionEpoch
        let times = [t0, t0.addingTimeInterval(100), t0.addingTimeInterval(700), t0.addingTimeInterval(800)]
        // t0+100, t0+700, t0+800 fit in 700 s > 600: no; t0, +100, +700 span 700: no.
        #expect(lockout.lockedUntil(failureTimes: times, now: t0.addingTimeInterval(801)) == nil)
        let tight = [t0, t0.addingTimeInterval(300), t0.addingTimeInterval(600)]
        #expect(lockout.lockedUntil(failureTimes: tight, now: t0.addingTimeInterval(601)) == t0.addingTimeInterval(1_500))
        #expect(lockout.lockedUntil(failureTimes: tight, now: t0.addingTimeInterval(1_500)) == nil)
    }

    @Test(arguments: Backend.allCases)
    func asecondRequestWhilePendingChangesNothing(_ backend: Backend) async throws { try await asecondRequestWhilePendingChangesNothing(store: try await backend.makeStore()) }

    private func asecondRequestWhilePendingChangesNothing(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        let first = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        let account = try await fixture.account("ada")
        fixture.clock.advance(by: 3 * day)
        let again = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        #expect(again.outcome == .alreadyPending)
        #expect(again.purgeAfter == first.purgeAfter)
        #expect(again.message.contains("already scheduled for deletion"))
        #expect(again.message.contains(ISO8601.format(try #require(first.purgeAfter))))
        #expect(try await fixture.account("ada") == account)
        #expect(try await fixture.purgeJobs("ada").count == 1)
    }

    @Test(arguments: Backend.allCases)
    func auditRowsNeverHoldThePasswordOrTheHash(_ backend: Backend) async throws { try await auditRowsNeverHoldThePasswordOrTheHash(store: try await backend.makeStore()) }

    private func auditRowsNeverHoldThePasswordOrTheHash(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        let wrong = "w0rng-Pa55phrase-zebra"
        _ = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: wrong) }
        _ = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        _ = try await fixture.deletion.restore(account: "ada")
        try await fixture.deletion.setPassword(account: "ada", password: "new-Secret-42 ünïcode")
        let newHash = try #require(try await fixture.account("ada")?.passwordHash)
        let rows = try await fixture.audit("ada").map { "\($0.actor)|\($0.action)|\($0.outcome)|\($0.detail ?? "")" }
        #expect(rows.count >= 4)
        for row in rows {
            for secret in [wrong, demoPassword, "new-Secret-42", demoPasswordHash, newHash, "$2b$", "$argon2"] {
                #expect(!row.contains(secret), "audit row holds a secret: \(row)")
            }
        }
    }

    @Test(arguments: Backend.allCases)
    func anUnverifiableHashIsAClearErrorNeverAPass(_ backend: Backend) async throws { try await anUnverifiableHashIsAClearErrorNeverAPass(store: try await backend.makeStore()) }

    private func anUnverifiableHashIsAClearErrorNeverAPass(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("plain", passwordHash: "correct horse battery staple")
        try await fixture.addAccount("cut", passwordHash: String(demoPasswordHash.dropLast(5)))
        for id in ["plain", "cut"] {
            let error = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: .key(id), password: demoPassword) }
            #expect(error?.category == .badInput)
            #expect(error?.message.contains("set-password") == true)
            #expect(try await fixture.account(id)?.state == .active)
            #expect(try await fixture.audit(id).last?.outcome == "unverifiable-hash")
        }
    }

    @Test(arguments: Backend.allCases)
    func setPasswordStoresArgon2idThatDeletionAccepts(_ backend: Backend) async throws { try await setPasswordStoresArgon2idThatDeletionAccepts(store: try await backend.makeStore()) }

    private func setPasswordStoresArgon2idThatDeletionAccepts(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada", passwordHash: "unknown-scheme")
        let cheap = try DeletionService(
            services: fixture.services, directory: try await fixture.services.directory(), verifier: PasswordVerifier(hashingParameters: .init(iterations: 1, memoryKiB: 1_024)))
        #expect(try await cheap.setPassword(account: "ada", password: "tr0ub4dor&3") == "argon2id")
        #expect(try await fixture.account("ada")?.passwordHash?.hasPrefix("$argon2id$") == true)
        #expect(await lifecycleError { _ = try await cheap.requestDeletion(account: "ada", password: "tr0ub4dor&4") }?.message == "Incorrect password")
        #expect(try await cheap.requestDeletion(account: "ada", password: "tr0ub4dor&3").outcome == .requested)
    }

    /// A map whose password column lacks `set: argon2id` is an app that sets its own passwords:
    /// nothing is written to it, and the refusal says which key would allow it.
    @Test func setPasswordIsRefusedWhereTheMapDoesNotLetLifecycleWriteHashes() async throws {
        try await setPasswordIsRefusedWhereTheMapDoesNotLetLifecycleWriteHashes(store: try await Backend.sqlite.makeStore())
    }

    private func setPasswordIsRefusedWhereTheMapDoesNotLetLifecycleWriteHashes(store: some LifecycleStore) async throws {
        let shipped = try String(contentsOfFile: deletionJobsDirectory + "/account-data.yaml", encoding: .utf8)
        let map = shipped.replacingOccurrences(of: "password: {column: password_hash, set: argon2id}", with: "password: {column: password_hash}")
        #expect(map != shipped)
        let fixture = try await DeletionFixture(store: store, dataMap: map)
        try await fixture.addAccount("ada", passwordHash: "unknown-scheme")
        let refusal = await lifecycleError { _ = try await fixture.deletion.setPassword(account: "ada", password: "tr0ub4dor&3") }
        #expect(refusal?.message.contains("add `set: argon2id` to `subject.password`") == true)
        #expect(try await fixture.account("ada")?.passwordHash == "unknown-scheme")
        // The unverifiable hash's advice no longer offers set-password either.
        let request = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: "x") }
        #expect(request?.message.contains("set-password") == false)
        #expect(request?.message.contains("a format lifecycle checks") == true)
    }

    @Test(arguments: Backend.allCases)
    func restoreBeforeThePurgeDateCancelsThePurgeAndKeepsSessionsRevoked(_ backend: Backend) async throws { try await restoreBeforeThePurgeDateCancelsThePurgeAndKeepsSessionsRevoked(store: try await backend.makeStore()) }

    private func restoreBeforeThePurgeDateCancelsThePurgeAndKeepsSessionsRevoked(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        let request = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword)
        fixture.clock.advance(by: 29 * day)
        let restored = try await fixture.deletion.restore(account: "ada")
        #expect(restored.cancelledJobID == request.purgeJobID)
        #expect(try await fixture.account("ada")?.state == .active)
        let record = try #require(try await fixture.deletionRecord("ada"))
        #expect(record.state == .active && record.purgeAfter == nil)
        #expect(try await fixture.purgeJobs("ada").map(\.state) == [.cancelled])
        // Signed out for good: a restore brings back what the app shows, not the sessions.
        #expect(try await fixture.store.read { tx in try tx.sessions(accountID: "ada") }.isEmpty)
        // Past the old purge date nothing happens to it.
        fixture.clock.advance(by: 5 * day)
        try await fixture.purge()
        #expect(try await fixture.account("ada")?.state == .active)
        #expect(try await fixture.blobKeys("ada").count == 4)
    }

    @Test(arguments: Backend.allCases)
    func restoreIsRefusedOutsidePendingDeletionOrAfterThePurgeDate(_ backend: Backend) async throws { try await restoreIsRefusedOutsidePendingDeletionOrAfterThePurgeDate(store: try await backend.makeStore()) }

    private func restoreIsRefusedOutsidePendingDeletionOrAfterThePurgeDate(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("active")
        let notPending = await lifecycleError { _ = try await fixture.deletion.restore(account: "active") }
        #expect(notPending?.category == .badInput)
        #expect(notPending?.message.contains("not scheduled for deletion") == true)

        try await fixture.addAccount("late")
        _ = try await fixture.deletion.requestDeletion(account: "late", password: demoPassword)
        fixture.clock.advance(by: 30 * day)
        let late = await lifecycleError { _ = try await fixture.deletion.restore(account: "late") }
        #expect(late?.category == .badInput)
        #expect(late?.message.contains("grace period ended") == true)
        #expect(try await fixture.account("late")?.state == .pendingDeletion)

        // Once the purge has started (here: its first step committed), restore is refused.
        let started = try await fixture.store.write { tx in try tx.beginSubjectPurge(key: "late", now: fixture.clock.now()) }
        #expect(started)
        fixture.clock.set(deletionEpoch)
        let purging = await lifecycleError { _ = try await fixture.deletion.restore(account: "late") }
        #expect(purging?.message.contains("purge already started") == true)
        #expect(try await fixture.deletionRecord("late")?.state == .purging)

        #expect(await lifecycleError { _ = try await fixture.deletion.restore(account: "nobody") }?.category == .noSuchAccount)
    }

    @Test(arguments: Backend.allCases)
    func theOperatorPathNeedsNoPasswordAndIsAuditedWithNameAndReason(_ backend: Backend) async throws { try await theOperatorPathNeedsNoPasswordAndIsAuditedWithNameAndReason(store: try await backend.makeStore()) }

    private func theOperatorPathNeedsNoPasswordAndIsAuditedWithNameAndReason(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada", passwordHash: nil)
        let missing = await lifecycleError {
            _ = try await fixture.deletion.requestDeletionByOperator(account: "ada", operatorName: "grace", reason: "  ", immediately: false)
        }
        #expect(missing?.category == .badInput)

        let result = try await fixture.deletion.requestDeletionByOperator(
            account: "ada", operatorName: "grace", reason: "ticket 4711", immediately: false)
        #expect(result.outcome == .requested)
        #expect(result.purgeAfter == fixture.clock.now().addingTimeInterval(30 * day))
        let event = try #require(try await fixture.audit("ada").last)
        #expect(event.actor == "operator:grace")
        #expect(event.action == DeletionAudit.operatorRequest)
        #expect(event.detail?.contains("ticket 4711") == true)

        // A legal request: delete now. The pending account's purge moves to now and the next run removes it.
        let now = try await fixture.deletion.requestDeletionByOperator(
            account: "ada", operatorName: "legal", reason: "court order 12/34", immediately: true)
        #expect(now.outcome == .rescheduled)
        let jobs = try await fixture.purgeJobs("ada")
        #expect(Set(jobs.map(\.state)) == [.cancelled, .queued])
        fixture.clock.advance(by: 1)
        try await fixture.purge()
        #expect(try await fixture.account("ada")?.state == .purged)
    }

    @Test(arguments: Backend.allCases)
    func operatorImmediatelyOnAnActiveAccountSkipsTheGracePeriod(_ backend: Backend) async throws { try await operatorImmediatelyOnAnActiveAccountSkipsTheGracePeriod(store: try await backend.makeStore()) }

    private func operatorImmediatelyOnAnActiveAccountSkipsTheGracePeriod(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        try await fixture.addAccount("ada")
        try await fixture.addAccount("bob")
        let result = try await fixture.deletion.requestDeletionByOperator(
            account: "ada", operatorName: "support", reason: "GDPR erasure request", immediately: true)
        #expect(result.purgeAfter == fixture.clock.now())
        #expect(await lifecycleError { _ = try await fixture.deletion.restore(account: "ada") }?.category == .badInput)
        let summary = try await fixture.purge()
        #expect(summary.succeeded == 1)
        #expect(try await fixture.account("ada")?.state == .purged)
        #expect(try await fixture.account("bob")?.state == .active)
    }

    @Test(arguments: Backend.allCases)
    func unknownAndPurgedAccountsAreNoSuchAccount(_ backend: Backend) async throws { try await unknownAndPurgedAccountsAreNoSuchAccount(store: try await backend.makeStore()) }

    private func unknownAndPurgedAccountsAreNoSuchAccount(store: some LifecycleStore) async throws {
        let fixture = try await DeletionFixture(store: store)
        #expect(await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ghost", password: "x") }?.category == .noSuchAccount)
        try await fixture.addAccount("ada", state: .pendingDeletion, purgeAfter: deletionEpoch)
        try await fixture.purge()
        let error = await lifecycleError { _ = try await fixture.deletion.requestDeletion(account: "ada", password: demoPassword) }
        #expect(error?.category == .noSuchAccount)
        #expect(error?.message.contains("was purged") == true)
    }
}
