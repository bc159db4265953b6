import Foundation
import LifecycleRuntime
import Synchronization

/// For the process tests only: with `LIFECYCLE_TEST_BARRIER` naming an existing directory,
/// a `worker`, `purge` or `jobs probe` run that reaches its work (a claimed job, the first
/// enqueue) leaves `arrived-<pid>` there and waits until the test creates `release`.
/// A test that starts several runs and sees all of them arrive before it releases any has
/// proven that they overlapped; runs made serial by something (a lock around the binary)
/// never all arrive, and the test fails instead of passing on one run's work.
///
/// Compiled into debug builds only (`make test` runs `.build/debug`; the release binary
/// `scripts/build-release.sh` makes has none): a stray setting in an installation's
/// environment file must never hold a production run whose leases its heartbeat keeps
/// fresh, where `jobs check` would see nothing wrong. Even in a debug build a directory that
/// does not exist is ignored, and a run waits at most `longestWait` before it goes on, so a
/// test that died before releasing its runs leaves no process behind for ever.
final class TestBarrier: Sendable {
    static let variable = "LIFECYCLE_TEST_BARRIER"

    /// The barrier of this process, if its environment asks for one.
    static let current = named(variable)

    /// With `LIFECYCLE_TEST_BARRIER_AFTER_JOB` naming an existing directory, a `worker` run
    /// waits there after a job has ended, its outcome recorded, before it goes on to report:
    /// where a test kills it to show that what the run had to report is not lost.
    static let afterJobBarrier = named("LIFECYCLE_TEST_BARRIER_AFTER_JOB")

    private static func named(_ variable: String) -> TestBarrier? {
        #if !DEBUG
        return nil
        #else
        guard let directory = ProcessInfo.processInfo.environment[variable], !directory.isEmpty else { return nil }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else { return nil }
        return TestBarrier(directory: directory)
        #endif
    }

    static let longestWait: Duration = .seconds(600)

    /// `WorkerOptions.beforeJob` for this process: nil when no barrier is asked for.
    static var beforeJob: (@Sendable (JobRecord) async -> Void)? {
        guard let barrier = current else { return nil }
        return { @Sendable (_: JobRecord) async in await barrier.arrive() }
    }

    /// `WorkerOptions.afterJob` for this process: nil when no barrier is asked for.
    static var afterJob: (@Sendable (JobRecord, JobOutcome) async -> Void)? {
        guard let barrier = afterJobBarrier else { return nil }
        return { @Sendable (_: JobRecord, _: JobOutcome) async in await barrier.arrive() }
    }

    private let directory: String
    private let state = Mutex((announced: false, released: false))

    private init(directory: String) {
        self.directory = directory
    }

    /// Announces this process once, then returns when the test has released the barrier
    /// (at once, after that).
    func arrive() async {
        if state.withLock({ $0.released }) { return }
        let first = state.withLock { state in
            defer { state.announced = true }
            return !state.announced
        }
        if first {
            let marker = directory + "/arrived-\(ProcessInfo.processInfo.processIdentifier)"
            _ = FileManager.default.createFile(atPath: marker, contents: nil)
        }
        let giveUp = ContinuousClock.now + Self.longestWait
        while !FileManager.default.fileExists(atPath: directory + "/release"), ContinuousClock.now < giveUp {
            // Task.sleep: the job's lease heartbeat and the other jobs keep running meanwhile.
            try? await Task.sleep(nanoseconds: 10_000_000)
            if Task.isCancelled { return }
        }
        state.withLock { $0.released = true }
    }
}
