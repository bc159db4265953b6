import Foundation
import GRDB
import JobRunner
import Lifecycle
import LifecycleRuntime
import SQLiteBackend
import Testing

/// Which errors met while serving an app are the installation's trouble (a neutral 503 to
/// the app, the cause in the log) rather than a refusal the app reads. A full disk cannot
/// be had cheaply under a real serve, so its errors are built here as the stores build them.
struct ServersTroubleTests {
    @Test func aFullOrFailingDiskIsTheServersNotSomethingTheAppWaitsOut() {
        let full: [any Error] = [
            SQLiteStoreError.classify(DatabaseError(resultCode: .SQLITE_FULL), path: "/var/lib/lifecycle/lifecycle.sqlite")!,
            BlobStoreError.fileSystem(ENOSPC, "writing accounts/ada/photo"),
            LifecycleError.fileSystem(ENOSPC, "writing", "/var/lib/lifecycle/spool/upload"),
            LifecycleError.fileSystem(EIO, "reading", "/var/lib/lifecycle/blobs/x"),
        ]
        for error in full {
            #expect(LifecycleError(classifying: error).category == .tryLater, "the operator still runs the same command again: \(error)")
            #expect(LifecycleError.isTheServersTrouble(error), "\(error)")
        }
    }

    @Test func aRowEditedByHandOrAnUnusablePolicyIsTheServers() {
        #expect(LifecycleError.isTheServersTrouble(JobRunnerError.invalidPolicy("policies/deletion.yaml: unknown key grace_dayz")))
        #expect(LifecycleError.isTheServersTrouble(JobRunnerError.invalidSchedule("bad cron line")))
    }

    @Test func refusalsTheAppActsOnStayTheRequests() {
        let later = Date(timeIntervalSinceNow: 3_600)
        let refusals: [any Error] = [
            LifecycleError(.tryLater, "the next export is allowed at …", retryAt: later),
            LifecycleError(.badInput, "not pending", forApp: .init(code: "not_pending", message: "not pending")),
            LifecycleError(.unavailable, "down", forApp: .init(code: "down", message: "down")),
            LifecycleError.noSuchAccount("ada"),
            // Not the installation's settings: a job the request names that is not there.
            JobRunnerError.noSuchJob(7), JobRunnerError.notRetryable(7, .succeeded), JobRunnerError.unknownKind("nothing"),
        ]
        for refusal in refusals {
            #expect(!LifecycleError.isTheServersTrouble(refusal), "\(refusal)")
        }
    }
}
