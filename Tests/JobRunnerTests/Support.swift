import Foundation
import JobRunner
import SQLiteBackend

/// A fresh SQLite store in its own temporary directory.
func makeStore() throws -> (SQLiteStore, String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobrunner-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    return (try SQLiteStore(path: directory + "/test.sqlite"), directory)
}

let epoch = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z

func enqueue(_ store: SQLiteStore, _ request: EnqueueRequest, policy: JobPolicy = JobPolicy(), now: Date) async throws -> EnqueueOutcome {
    try await store.write { tx in try store.enqueue(request, policy: policy, now: now, in: tx) }
}

func probePayload(hold: Double = 0, failAttempts: Int = 0) throws -> String {
    try JobJSON.encode(ProbeJobs.Payload(holdSeconds: hold, failAttempts: failAttempts))
}
