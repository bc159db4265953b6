import Foundation
import JobRunner
import PostgresBackend
import PostgresTesting
import SQLiteBackend
import Testing

/// The backends every runner behaviour is checked against.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres

    var testDescription: String { rawValue }

    /// A fresh, empty store: a SQLite file in its own directory, or a database of its
    /// own on the test process's PostgreSQL cluster.
    func makeStore() async throws -> any JobStore {
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobrunner-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            return try SQLiteStore(path: directory + "/test.sqlite")
        case .postgres:
            return try await ThrowawayPostgres.makeStore()
        }
    }
}

let epoch = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z

func enqueue<S: JobStore>(_ store: S, _ request: EnqueueRequest, policy: JobPolicy = JobPolicy(), now: Date) async throws -> EnqueueOutcome {
    try await store.write { tx in try store.enqueue(request, policy: policy, now: now, in: tx) }
}

func probePayload(hold: Double = 0, failAttempts: Int = 0) throws -> String {
    try JobJSON.encode(ProbeJobs.Payload(holdSeconds: hold, failAttempts: failAttempts))
}

/// One step's done-mark, as a worker writes it: throws when the job's lease was lost.
func markStepDone<S: JobStore>(_ store: S, _ job: JobID, step: String, owner: String, in tx: S.Transaction) throws {
    let mark = StepMark(jobID: job, step: step, output: nil, finishesJob: false, owner: owner, now: epoch)
    guard try store.markStepsDone([mark], in: tx) != [nil] else { throw JobRunnerError.leaseLost(job) }
}
