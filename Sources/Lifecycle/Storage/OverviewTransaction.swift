import Foundation

/// The audit trail, and what the operator dashboard reads besides the queue (holds in
/// force, the latest purges, export volume).
extension OwnStateTransaction {
    public func recordAudit(_ event: AuditEvent) throws {
        try change("""
            INSERT INTO \(table: .auditEvents) (at, actor, action, account_id, outcome, detail)
            VALUES (\(event.at), \(event.actor), \(event.action), \(event.accountID), \(event.outcome), \(event.detail))
            """)
    }

    /// Oldest first.
    public func auditEvents(accountID: String) throws -> [AuditEvent] {
        try selectAudit("SELECT \(columns: auditColumns) FROM \(table: .auditEvents) WHERE account_id = \(accountID) ORDER BY id")
    }

    /// The latest audit events with this action, newest first.
    public func latestAuditEvents(action: String, limit: Int) throws -> [AuditEvent] {
        try selectAudit("SELECT \(columns: auditColumns) FROM \(table: .auditEvents) WHERE action = \(action) ORDER BY id DESC LIMIT \(limit)")
    }

    /// The account's latest audit events with one of these actions, newest first.
    public func latestAuditEvents(accountID: String, actions: [String], limit: Int) throws -> [AuditEvent] {
        var actionList: OwnSQL = ""
        for (index, action) in actions.enumerated() { actionList += index == 0 ? "\(action)" as OwnSQL : ", \(action)" }
        return try selectAudit("""
            SELECT \(columns: auditColumns) FROM \(table: .auditEvents) WHERE account_id = \(accountID) AND action IN (\(generated: actionList))
            ORDER BY id DESC LIMIT \(limit)
            """)
    }

    /// The account's audit events with this action after the event `afterID`, oldest first.
    public func auditEvents(accountID: String, action: String, afterID: Int64, limit: Int) throws -> [AuditEvent] {
        try selectAudit("""
            SELECT \(columns: auditColumns) FROM \(table: .auditEvents) WHERE account_id = \(accountID) AND action = \(action) AND id > \(afterID)
            ORDER BY id LIMIT \(limit)
            """)
    }

    /// The accounts with an audit event of this action and outcome, in the byte order of
    /// their ids (the same on both backends) after `after` (from the start when nil).
    public func accountsWithAuditEvent(action: String, outcome: String, after: String?, limit: Int) throws -> [String] {
        let start: OwnSQL = after.map { " AND account_id\(byteOrder: ()) > \($0)" } ?? ""
        return try select("""
            SELECT account_id FROM \(table: .auditEvents)
            WHERE action = \(action) AND outcome = \(outcome) AND account_id IS NOT NULL\(generated: start)
            GROUP BY account_id ORDER BY account_id\(byteOrder: ()) LIMIT \(limit)
            """, from: .auditEvents, .text).map { try $0.text(0) }
    }

    private func selectAudit(_ sql: OwnSQL) throws -> [AuditEvent] {
        try select(sql, from: .auditEvents, reading: auditColumns).map { row in
            AuditEvent(
                id: try row.integer(0), at: try row.date(1), actor: try row.text(2), action: try row.text(3), accountID: try row.optionalText(4),
                outcome: try row.text(5), detail: try row.optionalText(6))
        }
    }
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

private let auditColumns = OwnColumns(["id": .integer, "at": .timestamp, "actor": .text, "action": .text, "account_id": .text, "outcome": .text, "detail": .text])
