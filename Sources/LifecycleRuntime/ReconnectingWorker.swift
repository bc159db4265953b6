import JobRunner
import Logging
import PostgresBackend

extension Worker {
    /// Runs until cancelled, like `run()`, and outlives database outages: when the server
    /// goes away (restart, failover, network), the worker backs off and starts claiming
    /// again once it is back. Jobs it held are rescued by lease expiry, by itself or any
    /// other worker.
    public func runReconnecting(logger: Logger) async throws -> DrainSummary {
        var delay: Double = 1
        while true {
            do {
                return try await run()
            } catch let error as PostgresStoreError where error.isUnavailable {
                if Task.isCancelled { return DrainSummary() }
                logger.warning("database unavailable; trying again", metadata: ["in_seconds": .stringConvertible(Int(delay)), "error": "\(error.message)"])
                try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
                if Task.isCancelled { return DrainSummary() }
                delay = min(delay * 2, 30)
            }
        }
    }
}
