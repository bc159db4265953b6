import Foundation
import JobRunner
@testable import Lifecycle
import Logging
import SQLiteBackend
import Testing

/// The export job in-process, with a clock the tests move.
@Suite(.serialized)
struct ExportJobTests {
    @Test(arguments: Backend.allCases)
    func anExportHoldsEveryTableTheUserRowAndThePhotosByLocalDate(_ backend: Backend) async throws { try await anExportHoldsEveryTableTheUserRowAndThePhotosByLocalDate(store: try await backend.makeStore()) }

    private func anExportHoldsEveryTableTheUserRowAndThePhotosByLocalDate(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store, policy: ["batch_rows: 1"])
        try await bed.importAccounts([ExportFixture.account(id: "zoe", entries: [("zoe-e1", "first"), ("zoe-e2", "second"), ("zoe-e3", "third")])])
        let export = try await bed.export("zoe@example.com")
        #expect(export.state == .ready)
        #expect(export.expiresAt == ExportFixture.start.addingTimeInterval(7 * 86_400))
        #expect(export.blobKey == "accounts/zoe/exports/\(export.id).zip")

        let folder = try await bed.unpack(export)
        #expect(folder.hasSuffix("/export-zoe-20260101T000000Z"))
        let files = Set(FileManager.default.enumerator(atPath: folder)!.allObjects.compactMap { $0 as? String })
        for name in ["README.txt", "manifest.json", "account.json", "account.csv", "preferences.json", "journal_entries.json",
                     "journal_entries.csv", "photos.json", "photos.csv", "mesocycles.csv", "meditation_sessions.json",
                     "files/photos/2025/03/02/zoe-p1.jpg"] {
            #expect(files.contains(name), "\(name) missing from \(files.sorted())")
        }
        // Taken 23:55 UTC on 1 March is 2 March in the account's zone (the map's `timezone:`,
        // Asia/Tokyo); undated photos go by upload day. Keys without an extension get the one
        // of the type the row records (`recorded:`). Her profile photo (the user row's file
        // column) goes by the day the account was created, in her zone too.
        #expect(files.contains("files/photos/2026/01/01/zoe-p2.jpg"))
        #expect(files.contains("files/accounts/2025/01/02/upload-import.heic"))
        let readme = try String(contentsOfFile: folder + "/README.txt", encoding: .utf8)
        let unwrapped = readme.replacingOccurrences(of: "\n +", with: " ", options: .regularExpression)
        #expect(unwrapped.contains("by the date of the row where it has one, in your time zone (Asia/Tokyo)"), "\(readme)")
        // Each file in the words of the map's `description:`, wrapped to the README's width.
        #expect(readme.contains("journal_entries.json/.csv      your journal entries\n"), "\(readme)")
        #expect(readme.split(separator: "\n").allSatisfy { $0.count <= 100 }, "\(readme)")
        #expect(!files.contains { $0.contains("sessions.") && !$0.contains("meditation") }, "sign-in sessions are credentials")

        // Batches of one row still give every row once, in order.
        let entries = try #require(try bed.json(folder + "/journal_entries.json") as? [[String: Any]])
        #expect(entries.map { $0["id"] as? String } == ["zoe-e1", "zoe-e2", "zoe-e3"])
        #expect(entries.map { $0["created_at"] as? String } == ["2025-03-01T08:00:00Z", "2025-03-02T08:00:00Z", "2025-03-03T08:00:00Z"])
        let photoRows = try #require(try bed.json(folder + "/photos.json") as? [[String: Any]])
        #expect(photoRows.first { $0["id"] as? String == "zoe-p1" }?["taken_at"] as? String == "2025-03-01T23:55:00Z")
        #expect(photoRows.first { $0["id"] as? String == "zoe-p2" }?["taken_at"] is NSNull)
        #expect(photoRows.allSatisfy { $0["created_at"] as? String == "2026-01-01T00:00:00Z" })
        // The user row, as the map's subject `columns:` list it: never the password hash.
        let accountRows = try #require(try bed.json(folder + "/account.json") as? [[String: Any]])
        let profile = try #require(accountRows.first)
        #expect(accountRows.count == 1)
        #expect(profile["first_name"] as? String == "Zoë")
        #expect(profile["profile_photo_key"] == nil, "a storage key is not hers to read")
        #expect(profile["password_hash"] == nil && profile["state"] == nil)
        #expect((try bed.json(folder + "/preferences.json") as? [[String: Any]])?.first?["font_size_offset"] as? Int == -2)

        let manifest = try #require(try bed.json(folder + "/manifest.json") as? [String: Any])
        #expect(manifest["export_id"] as? String == export.id)
        #expect((manifest["row_counts"] as? [String: Int]) == [
            "account": 1, "preferences": 1, "journal_entries": 3, "photos": 2, "mesocycles": 2, "meditation_sessions": 2,
        ])
        let listed = try #require(manifest["files"] as? [[String: Any]])
        #expect(Set(listed.compactMap { $0["path"] as? String }) == files.filter { !$0.hasSuffix("/") && $0 != "manifest.json" && (try? FileManager.default.attributesOfItem(atPath: folder + "/" + $0)[.type] as? FileAttributeType) == .typeRegular })
        for file in listed {
            let path = try #require(file["path"] as? String)
            let digest = try FileDigest.sha256(ofFile: folder + "/" + path)
            #expect(digest.hex == file["sha256"] as? String, "\(path)")
            #expect(digest.size == (file["bytes"] as? NSNumber)?.int64Value, "\(path)")
        }
        // The profile photo's file, found by the key her column names.
        #expect(listed.first { $0["blob_key"] as? String == "accounts/zoe/upload-import.heic" }?["path"] as? String == "files/accounts/2025/01/02/upload-import.heic")
        // The user's notification, once.
        let messages = try await bed.store.read { tx in try tx.outboxMessages(accountID: "zoe") }
        #expect(messages.count == 1)
        // The map's `greeting: [display_name, first_name]`: she has no display name.
        #expect(messages.first?.body.hasPrefix("Hi Zoë,\n") == true, "\(messages.first?.body ?? "")")
        #expect(messages.first?.body.contains("Your data export is ready. We've sent a download link to your email.") == true)
        #expect(messages.first?.body.contains("https://example.invalid/exports/\(export.id)?expires=") == true)
        #expect(messages.first?.state == .pending)
        // Nothing left in the scratch folder, no temporary key.
        #expect((try? FileManager.default.contentsOfDirectory(atPath: bed.exports.root + "/.incoming/exports"))?.isEmpty ?? true)
        #expect(try await bed.exports.list(prefix: "accounts/zoe/exports/", after: nil, limit: 10).map(\.key) == [export.blobKey!])
        // The ZIP was read back from the disk block by block as it was written, and the
        // archive published is that very file (renamed twice, never copied).
        let jobID = try #require(export.jobID)
        let written = try #require(try await bed.store.steps(of: jobID).first { $0.step == "write-archive" }?.output)
        let readBack = try #require(JSONSerialization.jsonObject(with: Data(written.utf8)) as? [String: Any])["readBackFile"]
        let identity = try #require(StoredFileIdentity(path: try bed.archivePath(export)))
        #expect((readBack as? [String: Any])?["inode"] as? NSNumber == NSNumber(value: identity.inode))
    }

    @Test(arguments: Backend.allCases)
    func keysetPagesCoverNullAndTiedOrderValuesExactlyOnce(_ backend: Backend) async throws { try await keysetPagesCoverNullAndTiedOrderValuesExactlyOnce(store: try await backend.makeStore()) }

    private func keysetPagesCoverNullAndTiedOrderValuesExactlyOnce(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store, policy: ["batch_rows: 2"])
        try await bed.importAccounts([ExportFixture.account(id: "ann")])
        // Mesocycles are ordered by started_at, which may be NULL or shared.
        let tied = Date(timeIntervalSince1970: 1_700_000_000)
        try await bed.store.write { tx in
            for index in 0..<5 {
                _ = try tx.insertMesocycle(Mesocycle(id: "null-\(index)", accountID: "ann", status: "planned", startedAt: nil, completedAt: nil))
                _ = try tx.insertMesocycle(Mesocycle(id: "tie-\(index)", accountID: "ann", status: "active", startedAt: tied, completedAt: nil))
            }
        }
        try await bed.store.write { tx in
            _ = try tx.insertMesocycle(Mesocycle(
                id: "late", accountID: "ann", status: "active", startedAt: Date(timeIntervalSince1970: 1_900_000_000.125), completedAt: nil))
        }
        let export = try await bed.export("ann")
        let rows = try #require(try bed.json(try await bed.unpack(export) + "/mesocycles.json") as? [[String: Any]])
        let ids = rows.compactMap { $0["id"] as? String }
        #expect(ids == ["ann-m2", "null-0", "null-1", "null-2", "null-3", "null-4", "tie-0", "tie-1", "tie-2", "tie-3", "tie-4", "ann-m1", "late"])
        #expect(rows.first { $0["id"] as? String == "tie-0" }?["started_at"] as? String == "2023-11-14T22:13:20Z")
        #expect(rows.last?["started_at"] as? String == "2030-03-17T17:46:40.125Z")
        #expect(rows.first?["started_at"] is NSNull)
    }

    @Test(arguments: Backend.allCases)
    func askingAgainReturnsTheLiveJobAndTheRateLimitSaysWhenToComeBack(_ backend: Backend) async throws { try await askingAgainReturnsTheLiveJobAndTheRateLimitSaysWhenToComeBack(store: try await backend.makeStore()) }

    private func askingAgainReturnsTheLiveJobAndTheRateLimitSaysWhenToComeBack(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "bo")])
        let first = try await bed.services.requestExport(ExportRequest(account: "bo"))
        let again = try await bed.services.requestExport(ExportRequest(account: "bo@example.com", format: try ExportSettings.format(named: "tar.gz")))
        #expect(first.created && !again.created)
        #expect(again.job.id == first.job.id)
        try await bed.runWorker()
        let done = try #require(try await bed.store.read { tx in try tx.export(jobID: first.job.id) })
        let completedAt = try #require(done.completedAt)

        bed.clock.advance(by: 3_600)
        let refused = try await #require(throws: LifecycleError.self) { try await bed.services.requestExport(ExportRequest(account: "bo")) }
        #expect(refused.category == .tryLater)
        #expect(refused.message.contains("next export is allowed at \(ISO8601.format(completedAt.addingTimeInterval(86_400)))"))

        bed.clock.set(completedAt.addingTimeInterval(86_400))
        let allowed = try await bed.services.requestExport(ExportRequest(account: "bo"))
        #expect(allowed.created && allowed.job.id != first.job.id)
    }

    @Test(arguments: Backend.allCases)
    func pendingPurgedAndUnknownAccountsAreRefused(_ backend: Backend) async throws { try await pendingPurgedAndUnknownAccountsAreRefused(store: try await backend.makeStore()) }

    private func pendingPurgedAndUnknownAccountsAreRefused(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "pen", state: "pendingDeletion"), ExportFixture.account(id: "gone")])
        let pending = try await #require(throws: LifecycleError.self) { try await bed.services.requestExport(ExportRequest(account: "pen")) }
        #expect(pending.category == .permissionDenied)
        #expect(pending.message.contains("--allow-pending --operator NAME"))

        let operatorExport = try await bed.export("pen", ExportRequest(account: "pen", allowPending: true, operatorName: "sam"))
        #expect(operatorExport.requestedBy == "operator:sam")
        let audit = try await bed.store.read { tx in try tx.auditEvents(accountID: "pen") }
        #expect(audit.contains { $0.actor == "operator:sam" && $0.action == "export.request" && $0.outcome == "queued-while-pending-deletion" })

        let unknown = try await #require(throws: LifecycleError.self) { try await bed.services.requestExport(ExportRequest(account: "nobody")) }
        #expect(unknown.category == .noSuchAccount)

        try await setState(bed, "gone", .purged)
        let purged = try await #require(throws: LifecycleError.self) { try await bed.services.requestExport(ExportRequest(account: "gone")) }
        #expect(purged.category == .noSuchAccount)
    }

    @Test(arguments: Backend.allCases)
    func aPurgeThatStartsDuringTheExportStopsItWithNothingLeftBehind(_ backend: Backend) async throws { try await aPurgeThatStartsDuringTheExportStopsItWithNothingLeftBehind(store: try await backend.makeStore()) }

    private func aPurgeThatStartsDuringTheExportStopsItWithNothingLeftBehind(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "kim")])
        let outcome = try await bed.services.requestExport(ExportRequest(account: "kim"))
        try await setState(bed, "kim", .purging)
        try await bed.runWorker()
        let job = try #require(try await bed.store.job(id: outcome.job.id))
        // Withdrawn, not failed: nothing for an operator to retry.
        #expect(job.state == .cancelled)
        #expect(job.lastError?.contains("account kim is purging") == true)
        #expect(try await bed.exports.list(prefix: "accounts/kim/exports/", after: nil, limit: 10).isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func aMissingOrCorruptPhotoFailsLoudlyUnlessSkippedThenItIsListed(_ backend: Backend) async throws { try await aMissingOrCorruptPhotoFailsLoudlyUnlessSkippedThenItIsListed(store: try await backend.makeStore()) }

    private func aMissingOrCorruptPhotoFailsLoudlyUnlessSkippedThenItIsListed(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "lee")])
        // One blob gone, one with its bytes changed but its size kept.
        try await bed.blobs.delete(keys: ["accounts/lee/photos/lee-p2"])
        let corrupt = try bed.blobs.path(for: "accounts/lee/photos/lee-p1")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: corrupt))
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: corrupt))

        let failing = try await bed.services.requestExport(ExportRequest(account: "lee"))
        try await bed.runWorker()
        let dead = try #require(try await bed.store.job(id: failing.job.id))
        #expect(dead.state == .dead)
        #expect(dead.lastError?.contains("photos.blob_key names accounts/lee/photos/lee-p2, which is not in the blob store") == true, "\(dead.lastError ?? "")")
        #expect(dead.lastError?.contains("--skip-missing-photos") == true)

        // The corrupt photo is only found while it is copied: named, not skipped silently.
        _ = try await bed.blobs.put(key: "accounts/lee/photos/lee-p2", data: try Data(contentsOf: URL(fileURLWithPath: ExportFixture.repositoryRoot + "/Jobs/demo/photos/trail.jpg")))
        let retried = try #require(try await bed.store.retry(jobID: failing.job.id, now: bed.clock.now()))
        #expect(retried.state == .queued)
        try await bed.runWorker()
        let corruptDead = try #require(try await bed.store.job(id: failing.job.id))
        #expect(corruptDead.state == .dead)
        #expect(corruptDead.lastError?.contains("photos.blob_key names accounts/lee/photos/lee-p1, whose SHA-256 is") == true, "\(corruptDead.lastError ?? "")")
        #expect(corruptDead.lastError?.contains("but the row records") == true && corruptDead.lastError?.contains("(corrupted)") == true)

        try await bed.blobs.delete(keys: ["accounts/lee/photos/lee-p2"])
        let export = try await bed.export("lee", ExportRequest(account: "lee", skipMissingPhotos: true))
        #expect(export.omittedPhotos == 2)
        let folder = try await bed.unpack(export)
        let manifest = try #require(try bed.json(folder + "/manifest.json") as? [String: Any])
        let omitted = try #require(manifest["omitted_files"] as? [[String: String]])
        #expect(Set(omitted.compactMap { $0["blob_key"] }) == ["accounts/lee/photos/lee-p1", "accounts/lee/photos/lee-p2"])
        #expect(omitted.allSatisfy { $0["source"] == "photos.blob_key" })
        #expect(omitted.first { $0["blob_key"] == "accounts/lee/photos/lee-p1" }?["reason"]?.contains("SHA-256") == true)
        #expect(omitted.first { $0["blob_key"] == "accounts/lee/photos/lee-p2" }?["reason"]?.contains("not in the blob store") == true)
        let files = try #require(manifest["files"] as? [[String: Any]])
        #expect(files.compactMap { $0["blob_key"] as? String } == ["accounts/lee/upload-import.heic"])
        #expect(!FileManager.default.fileExists(atPath: folder + "/files/photos/2025/03/02/lee-p1.jpg"))
    }

    /// Rows recording a size or a digest their files do not have: all of them are read again
    /// together, then left out together, in one attempt however many there are.
    @Test(arguments: Backend.allCases)
    func manyCorruptFilesAreLeftOutTogetherInOneAttempt(_ backend: Backend) async throws { try await manyCorruptFilesAreLeftOutTogetherInOneAttempt(store: try await backend.makeStore()) }

    private func manyCorruptFilesAreLeftOutTogetherInOneAttempt(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "kai")])
        let now = bed.clock.now()
        for index in 0..<12 {
            let key = "accounts/kai/photos/kai-x\(index)"
            _ = try await bed.blobs.put(key: key, data: Data("x\(index)".utf8))
            // Even: the right size and a wrong digest; odd: a wrong size.
            let photo = PhotoRecord(
                id: "kai-x\(index)", accountID: "kai", entryID: nil, role: .entry, blobKey: key, contentType: "image/jpeg",
                byteSize: index.isMultiple(of: 2) ? Int64("x\(index)".utf8.count) : 99, sha256: String(repeating: "0", count: 64),
                takenAt: nil, createdAt: now)
            try await bed.store.write { tx in _ = try tx.insertPhoto(photo) }
        }
        let refused = try await bed.services.requestExport(ExportRequest(account: "kai"))
        try await bed.runWorker()
        let dead = try #require(try await bed.store.job(id: refused.job.id))
        #expect(dead.state == .dead && dead.attempt == 1, "\(dead)")
        #expect(dead.lastError?.contains("6 file(s) cannot be exported") == true, "\(dead.lastError ?? "")")
        #expect(dead.lastError?.contains("which has 2 bytes but the row records 99 (corrupted)") == true)

        bed.clock.advance(by: 86_400)
        let export = try await bed.export("kai", ExportRequest(account: "kai", skipMissingPhotos: true))
        #expect(export.omittedPhotos == 12)
        let jobID = try #require(export.jobID)
        let job = try #require(try await bed.store.job(id: jobID))
        #expect(job.attempt == 1)
        let folder = try await bed.unpack(export)
        let manifest = try #require(try bed.json(folder + "/manifest.json") as? [String: Any])
        let omitted = try #require(manifest["omitted_files"] as? [[String: String]])
        #expect(omitted.count == 12 && omitted.allSatisfy { $0["reason"]?.hasSuffix("(corrupted)") == true }, "\(omitted)")
        #expect(omitted.filter { $0["reason"]?.contains("SHA-256") == true }.count == 6)
    }

    @Test(arguments: Backend.allCases)
    func theExpiryJobDeletesArchivesPastTheirLinkOnceAndTheLinkThenReadsExpired(_ backend: Backend) async throws { try await theExpiryJobDeletesArchivesPastTheirLinkOnceAndTheLinkThenReadsExpired(store: try await backend.makeStore()) }

    private func theExpiryJobDeletesArchivesPastTheirLinkOnceAndTheLinkThenReadsExpired(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "max"), ExportFixture.account(id: "liv")])
        let old = try await bed.export("max")
        bed.clock.advance(by: 3 * 86_400)
        let recent = try await bed.export("liv")
        let oldLink = try #require(try bed.services.exportLink(for: old))
        #expect(try await bed.services.checkExportLink(oldLink) == .valid(old))

        bed.clock.set(try #require(old.expiresAt).addingTimeInterval(1))
        #expect(try await bed.services.checkExportLink(oldLink) == .expired(exportID: old.id, expiresAt: old.expiresAt!))
        let first = try await runExpiry(bed)
        #expect(first == [old.id])
        #expect(try await bed.exports.info(key: old.blobKey!) == nil)
        #expect(try await bed.exports.info(key: recent.blobKey!) != nil)
        let expired = try #require(try await bed.store.read { tx in try tx.export(id: old.id) })
        #expect(expired.state == .expired)
        #expect(expired.expiredAt == bed.clock.now())
        // Again: nothing more to do, nothing changes.
        bed.clock.advance(by: 3_600)
        #expect(try await runExpiry(bed) == [])
        #expect(try await bed.store.read { tx in try tx.export(id: old.id) } == expired)
    }

    @Test(arguments: Backend.allCases)
    func aRevokedExportsLinkNoLongerVerifiesAndItsArchiveIsGone(_ backend: Backend) async throws { try await aRevokedExportsLinkNoLongerVerifiesAndItsArchiveIsGone(store: try await backend.makeStore()) }

    private func aRevokedExportsLinkNoLongerVerifiesAndItsArchiveIsGone(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "rev")])
        let export = try await bed.export("rev")
        let link = try #require(try bed.services.exportLink(for: export))
        let revoked = try await bed.services.revokeExport(id: export.id, operatorName: "sam", reason: "sent to the wrong address")
        #expect(revoked.state == .revoked)
        guard case .invalid(let reason) = try await bed.services.checkExportLink(link) else {
            Issue.record("a revoked export's link still verifies")
            return
        }
        #expect(reason.contains("revoked"))
        #expect(try await bed.exports.info(key: export.blobKey!) == nil)
        // Revoked exports do not count against the rate limit: support can send a fresh one.
        _ = try await bed.services.requestExport(ExportRequest(account: "rev"))
        let audit = try await bed.store.read { tx in try tx.auditEvents(accountID: "rev") }
        #expect(audit.contains { $0.action == "export.revoke" && $0.actor == "operator:sam" && $0.detail?.contains("wrong address") == true })
    }

    @Test func theNotificationGoesThroughTheSendmailCommandOnce() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sendmail-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let script = directory + "/fake-sendmail"
        // Python's email package decodes the message as a mail server would (the body is quoted-printable).
        try """
            #!/usr/bin/python3
            import email, email.policy, sys
            m = email.message_from_binary_file(sys.stdin.buffer, policy=email.policy.default)
            with open("\(directory)/mailbox", "a") as box:
                box.write("To: %s\\r\\n\\r\\n%s--end--\\n" % (m["To"], m.get_content()))
            """.write(toFile: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script)
        let bed = try ExportTestbed(policy: ["sendmail_command: \"\(script) -t -i\""])
        try await bed.importAccounts([ExportFixture.account(id: "mai")])
        let export = try await bed.export("mai")
        let mailbox = try String(contentsOfFile: directory + "/mailbox", encoding: .utf8)
        #expect(mailbox.components(separatedBy: "--end--").count == 2)
        #expect(mailbox.contains("To: mai@example.com\r\n"))
        #expect(mailbox.contains("Your data export is ready. We've sent a download link to your email."))
        #expect(mailbox.contains("https://example.invalid/exports/\(export.id)?expires="))
        let message = try #require(try await bed.store.read { tx in try tx.outboxMessages(accountID: "mai") }.first)
        #expect(message.state == .delivered)
    }

    @Test func thePolicysCompressionLevelShapesTheArchiveButNotItsContent() async throws {
        var sizes: [Int: Int64] = [:]
        var journals: [Int: Data] = [:]
        let entries = (0..<400).map { ("lvl-e\($0)", "Tempo run number \($0), 5 × 1 km, café au lait after; notes \($0 * 7919 % 1000)") }
        for level in [1, 9] {
            let bed = try ExportTestbed(policy: ["compression_level: \(level)"])
            try await bed.importAccounts([ExportFixture.account(id: "lvl", entries: entries)])
            let export = try await bed.export("lvl@example.com")
            #expect(export.state == .ready)
            sizes[level] = export.byteSize
            journals[level] = FileManager.default.contents(atPath: try await bed.unpack(export) + "/journal_entries.json")
        }
        let fast = try #require(sizes[1]), small = try #require(sizes[9])
        #expect(small < fast, "level 9 gave \(small) bytes, level 1 \(fast)")
        #expect(journals[1] != nil && journals[1] == journals[9])

        let refused = try ExportTestbed(policy: ["compression_level: 0"])
        #expect(throws: LifecycleError.self) { try ExportSettings(policies: refused.services.policies) }
    }

    @Test(arguments: Backend.allCases)
    func withoutASigningKeyNothingIsQueued(_ backend: Backend) async throws { try await withoutASigningKeyNothingIsQueued(store: try await backend.makeStore()) }

    private func withoutASigningKeyNothingIsQueued(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store, signingKey: false)
        try await bed.importAccounts([ExportFixture.account(id: "nok")])
        let refused = try await #require(throws: LifecycleError.self) { try await bed.services.requestExport(ExportRequest(account: "nok")) }
        #expect(refused.category == .unavailable)
        #expect(try await bed.store.jobs(matching: JobFilter(kinds: [ExportJobs.exportKind])).isEmpty)
    }

    /// A worker started without `--exports` (a cron line that missed the setting) would
    /// publish the archive among the app's files: it hands the export back untried, and
    /// a worker that has an export store builds it.
    @Test(arguments: Backend.allCases)
    func aWorkerWithoutAnExportStoreLeavesTheExportToOneThatHasIt(_ backend: Backend) async throws {
        try await aWorkerWithoutAnExportStoreLeavesTheExportToOneThatHasIt(store: try await backend.makeStore())
    }

    private func aWorkerWithoutAnExportStoreLeavesTheExportToOneThatHasIt(store: some LifecycleStore) async throws {
        let bed = try ExportTestbed(store: store)
        try await bed.importAccounts([ExportFixture.account(id: "ivy")])
        let requested = try await bed.services.requestExport(ExportRequest(account: "ivy"))
        let bare = LifecycleServices(
            store: store, blobs: bed.blobs, policies: bed.services.policies, jobsDirectory: bed.jobsDirectory, clock: bed.clock,
            logger: Logger(label: "export-tests"))
        let unready = try await Worker(
            store: store, registry: bare.registry, policies: bare.policies, clock: bed.clock,
            options: WorkerOptions(concurrency: 1, kinds: [ExportJobs.exportKind])
        ).drain()
        #expect(unready.notReady == 1 && unready.succeeded == 0, "\(unready.failures)")
        #expect(unready.failures.first?.contains("LIFECYCLE_EXPORTS") == true, "\(unready.failures)")
        let waiting = try #require(try await store.job(id: requested.job.id))
        #expect(waiting.state == .queued && waiting.attempt == 0, "\(waiting.state) attempt \(waiting.attempt)")
        #expect(try await bed.blobs.list(prefix: "accounts/ivy/exports/", after: nil, limit: 10).isEmpty)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: bed.blobs.root + "/.incoming/exports"))?.isEmpty ?? true)

        #expect(try await bed.runWorker().succeeded == 1)
        let export = try #require(try await store.read { tx in try tx.export(jobID: requested.job.id) })
        #expect(export.state == .ready)
        #expect(try await bed.exports.info(key: try #require(export.blobKey)) != nil)
        #expect(try await bed.blobs.list(prefix: "accounts/ivy/exports/", after: nil, limit: 10).isEmpty)
    }

    private func runExpiry(_ bed: ExportTestbed<some LifecycleStore>) async throws -> [String] {
        let outcome = try await bed.services.enqueue(EnqueueRequest(kind: ExportJobs.expiryKind, uniqueKey: "test-expiry"))
        try await bed.runWorker(kinds: [ExportJobs.expiryKind])
        let steps = try await bed.store.steps(of: outcome.job.id)
        let output = try #require(steps.first { $0.step == "delete-expired-archives" }?.output)
        let decoded = try JobJSON.decode([String: [String]].self, from: output)
        return decoded["expired"] ?? []
    }

    /// Moves the account along the deletion feature's own transitions: pending (due now), purging, and on to purged.
    private func setState(_ bed: ExportTestbed<some LifecycleStore>, _ id: String, _ state: AccountState) async throws {
        precondition(state == .purging || state == .purged, "the export tests need only purging and purged accounts")
        let now = bed.clock.now()
        let moved = try await bed.store.write { tx in try tx.moveDeletion(key: id, to: state, at: now) }
        #expect(moved)
        #expect(try await bed.store.read { tx in try tx.subject(key: id)?.state } == state)
    }
}
