import Foundation

/// The CLI's test barrier (`LIFECYCLE_TEST_BARRIER`, TestBarrier.swift): each run started
/// with `environment` says it has reached its work, then waits for `release`. A test of
/// overlapping runs proves they overlapped by seeing every one of them arrive before it
/// releases any; runs made serial never all arrive.
struct OverlapBarrier {
    let directory: String

    init(in workspace: Workspace) throws {
        directory = workspace.root + "/barrier-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    var environment: [String: String] { ["LIFECYCLE_TEST_BARRIER": directory] }

    /// The processes that have reached their work, by pid.
    var arrived: [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("arrived-") }.compactMap { Int32($0.dropFirst("arrived-".count)) }
    }

    /// Waits until every one of `processes` holds the barrier at once (or one of them has
    /// ended, or the time is up), then releases them, whatever happened: the runs must end
    /// either way. Returns how many had arrived when it let them go.
    func releaseOnceAllArrive(_ processes: [Process], timeout: TimeInterval = 120) async throws -> Int {
        // Released whatever happens, a thrown or cancelled wait included: the runs must end.
        defer { _ = FileManager.default.createFile(atPath: directory + "/release", contents: nil) }
        // Counted, not matched by pid: a run started through a wrapper has a pid of its own.
        _ = try await eventually(timeout: timeout) {
            arrived.count >= processes.count || processes.contains { !$0.isRunning }
        }
        return arrived.count
    }
}
