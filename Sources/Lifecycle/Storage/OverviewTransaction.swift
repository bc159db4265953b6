import Foundation

/// What the operator dashboard reads besides the queue: holds in force, the latest purges,
/// export volume. Read-only, across accounts.
public protocol OverviewTransaction {
    /// Holds not lifted yet (some may have run past their end date), newest first.
    func openHolds(limit: Int) throws -> [AccountHold]
    /// The latest audit events with this action, newest first.
    func latestAuditEvents(action: String, limit: Int) throws -> [AuditEvent]
    /// Exports by state: how many, and their archives' bytes.
    func exportVolume() throws -> [ExportVolume]
}

public struct ExportVolume: Sendable, Codable, Equatable {
    public var state: String
    public var count: Int
    public var bytes: Int64

    public init(state: String, count: Int, bytes: Int64) {
        self.state = state
        self.count = count
        self.bytes = bytes
    }
}
