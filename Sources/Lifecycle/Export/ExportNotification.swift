import Foundation

/// The message a user receives when an export is ready.
enum ExportNotification {
    /// The product's own words (DESIGN.md, "User-facing messages").
    static let readyText = "Your data export is ready. We've sent a download link to your email."
    static let subject = "Your data export is ready"

    static func uniqueKey(exportID: String) -> String { ExportJobs.notificationKey(exportID: exportID) }

    static func message(account: Account, exportID: String, link: String, expiresAt: Date, lifetimeDays: Int, now: Date) -> OutboxMessage {
        let greeting = account.displayName ?? account.firstName
        let body = [
            greeting.map { "Hi \($0)," } ?? "Hello,",
            "",
            readyText,
            "",
            "Download your data (journal entries and other records as JSON and CSV, and your photos in",
            "original resolution, organised by date):",
            "",
            link,
            "",
            "The link expires on \(ExportTime.iso8601(expiresAt)) (UTC), \(lifetimeDays) days after the archive was made;",
            "the archive is deleted then. If you did not ask for this export, reply to this email.",
            "",
        ].joined(separator: "\n")
        return OutboxMessage(
            uniqueKey: uniqueKey(exportID: exportID), accountID: account.id, recipient: account.email, subject: subject,
            body: body, createdAt: now)
    }
}

/// Hands a message to a sendmail-compatible command (`/usr/sbin/sendmail -t -i`, msmtp,
/// a script): the RFC 5322 message on stdin, success by exit status 0.
struct SendmailDelivery: Sendable {
    let command: [String]
    var timeout: TimeInterval = 60

    func deliver(_ message: OutboxMessage) async throws {
        guard let recipient = message.recipient, !recipient.isEmpty else {
            throw LifecycleError(.badInput, "outbox message \(message.uniqueKey) has no recipient (the account has no email)")
        }
        // A line break in the address would let it add headers of its own.
        guard !recipient.contains(where: { $0.isNewline }) else {
            throw LifecycleError(.badInput, "outbox message \(message.uniqueKey): the recipient address contains a line break")
        }
        guard let executable = Self.resolve(command[0]) else {
            throw LifecycleError(.unavailable, "sendmail command '\(command[0])' not found; fix export.sendmail_command in the export policy")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = Array(command.dropFirst())
        let input = Pipe()
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("sendmail-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errors) }
        process.standardInput = input
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        try input.fileHandleForWriting.write(contentsOf: Self.rfc5322(message, recipient: recipient))
        try input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                throw LifecycleError(.unavailable, "sendmail command did not finish within \(Int(timeout)) s")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            let detail = (try? String(contentsOf: errors, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            throw LifecycleError(.unavailable, "sendmail command exited with status \(process.terminationStatus)\(detail.isEmpty ? "" : ": \(detail)")")
        }
    }

    static func rfc5322(_ message: OutboxMessage, recipient: String) -> Data {
        let headers = [
            "To: \(recipient)",
            "Subject: \(message.subject)",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: 8bit",
            "X-Lifecycle-Message: \(message.uniqueKey)",
        ]
        let body = message.body.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: "\r\n")
        return Data((headers.joined(separator: "\r\n") + "\r\n\r\n" + body).utf8)
    }

    private static func resolve(_ name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
