import ArgumentParser
import Foundation
import LifecycleRuntime

/// `--until 2027-01-31` (midnight UTC that day) or a full ISO-8601 instant.
struct HoldEnd: ExpressibleByArgument {
    let date: Date

    init?(argument: String) {
        if let instant = ISO8601.parse(argument) {
            date = instant
        } else if let day = ISO8601.parse(argument + "T00:00:00Z") {
            date = day
        } else {
            return nil
        }
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

struct HoldAccount: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "hold",
        abstract: "Keep an account from being purged (a legal request, an investigation) until `accounts unhold` or --until.",
        discussion: """
            A held account may still be active or pending deletion; it is never purged while held: the nightly \
            sweep leaves it alone (and `purge` names it), and a purge job that reaches it stands down. A queued \
            purge job is cancelled; `accounts unhold` schedules it again. Refused (exit 65) once the purge has \
            begun, and while another hold is in force. Audited with the operator and the reason.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String
    @Option(help: ArgumentHelp("Why (audited and shown wherever the hold is), e.g. a case number.", valueName: "text")) var reason: String
    @Option(help: ArgumentHelp("When the hold ends by itself: YYYY-MM-DD (UTC) or an ISO-8601 instant.", valueName: "date"))
    var until: HoldEnd?

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let result = try await HoldService(services: services, directory: try await services.directory())
            .hold(account: .operator(account), reason: reason, until: until?.date, actor: operatorOption.actor)
        if options.json {
            try Terminal.printJSON(result)
        } else {
            let end = result.hold?.until.map { " until \(ISO8601.format($0))" } ?? " until `lifecycle accounts unhold \(result.account)`"
            Terminal.line("account \(result.account) (\(result.state.rawValue)) is on hold\(end): it is not purged meanwhile"
                + (result.purgeJob.map { "; purge job #\($0) cancelled" } ?? ""))
        }
        return .ok
    }
}

struct UnholdAccount: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "unhold",
        abstract: "Lift an account's hold; a pending account gets its purge scheduled again.",
        discussion: "Exit 0 also when the account was not on hold (nothing changes then). Audited with the operator.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var operatorOption: OperatorOption
    @Argument(help: "The account: its key or any lookup column's value, or COLUMN:VALUE for one lookup column (id or email for the reference app).") var account: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let result = try await HoldService(services: services, directory: try await services.directory())
            .unhold(account: .operator(account), actor: operatorOption.actor)
        if options.json {
            try Terminal.printJSON(result)
        } else if !result.changed {
            Terminal.line("account \(result.account) was not on hold; nothing changed")
        } else {
            Terminal.line("account \(result.account): hold lifted" + (result.purgeJob.map { "; purge job #\($0) scheduled" } ?? ""))
        }
        return .ok
    }
}

struct AuditCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Everything recorded about one account: requests, restores, holds, exports, the purge and its receipt.",
        discussion: """
            Names the account by its key or a lookup column (id or email for the reference app); once it is purged, \
            by its key or by the email (or other lookup value) it had: the purge keeps only a salted hash of each.
            Exit 67 when nothing was ever recorded under that name.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The account: its key, a lookup value, or a purged account's former email.") var account: String

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let report = try await AuditTrail(services: services, directory: try await services.directory()).report(for: .operator(account))
        if options.json {
            try Terminal.printJSON(report)
            return .ok
        }
        var heading = "account \(report.account)"
        if let state = report.state { heading += "  state: \(state.rawValue)" }
        if let purgedAt = report.purgedAt { heading += "  purged at \(ISO8601.format(purgedAt))" }
        if report.foundBy == .purgedLookup { heading += "  (found by a former lookup value)" }
        Terminal.line(heading)
        for hold in report.holds {
            let end = hold.releasedAt.map { "lifted \(ISO8601.format($0)) by \(hold.releasedBy ?? "?")" }
                ?? hold.until.map { "until \(ISO8601.format($0))" } ?? "in force"
            Terminal.line("  hold since \(ISO8601.format(hold.heldAt)) by \(hold.heldBy): \(hold.reason) (\(end))")
        }
        if report.events.isEmpty { Terminal.line("  no events recorded") }
        for event in report.events {
            let detail = event.detail.map { " " + ((try? JobJSON.encode($0)) ?? "") } ?? ""
            Terminal.line("  \(ISO8601.format(event.at))  \(event.action)  \(event.outcome)  by \(event.actor)\(detail)")
        }
        return .ok
    }
}
