import Foundation

/// The message a user receives when an export is ready.
enum ExportNotification {
    /// The product's own words (DESIGN.md, "User-facing messages").
    static let readyText = "Your data export is ready. We've sent a download link to your email."
    static let subject = "Your data export is ready"

    static func uniqueKey(exportID: String) -> String { ExportJobs.notificationKey(exportID: exportID) }

    static func message(
        accountID: String, recipient: String?, greetingName: String?, exportID: String, link: String, expiresAt: Date,
        lifetimeDays: Int, now: Date
    ) -> OutboxMessage {
        // Whatever the row holds (it may predate today's import checks), the greeting
        // stays one line of the body.
        let greeting = greetingName.map(MailEncoding.singleLine)
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
            uniqueKey: uniqueKey(exportID: exportID), accountID: accountID, recipient: recipient, subject: subject,
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
        try input.fileHandleForWriting.write(contentsOf: try Self.rfc5322(message, recipient: recipient))
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

    /// Delivers an outbox row and records the outcome on it: delivered, or a failed
    /// attempt with its error (then thrown). At least once, never zero times: a crash
    /// between the command and the mark sends it again on a rerun.
    func deliver<Store: LifecycleStore>(_ message: OutboxMessage, id: Int64, recordingIn store: Store, at now: Date) async throws {
        do {
            try await deliver(message)
        } catch {
            let text = "\(error)"
            try await store.write { tx in try tx.markOutboxFailedAttempt(id: id, error: text, at: now) }
            throw error
        }
        try await store.write { tx in try tx.markOutboxDelivered(id: id, at: now) }
    }

    /// The message as sendmail reads it. The recipient must be exactly one address; the
    /// subject is an RFC 2047 encoded word when it is not plain ASCII; the body is
    /// quoted-printable, so no user text can end the headers, add one, or send a line
    /// an SMTP server would act on.
    static func rfc5322(_ message: OutboxMessage, recipient: String) throws -> Data {
        let address: String
        do {
            address = try ProfileRules.email(recipient)
        } catch {
            throw LifecycleError(.badInput, "outbox message \(message.uniqueKey): the recipient is not one email address (\(error.reason))")
        }
        let headers = [
            "To: \(address)",
            "Subject: \(MailEncoding.headerText(message.subject))",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: quoted-printable",
            "X-Lifecycle-Message: \(MailEncoding.headerText(message.uniqueKey))",
        ]
        return Data((headers.joined(separator: "\r\n") + "\r\n\r\n" + MailEncoding.quotedPrintable(message.body)).utf8)
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

/// RFC 2045/2047 encodings for the mail this toolkit writes.
enum MailEncoding {
    /// Control characters (line breaks included) become spaces: for a user's value set
    /// inside one line of a message.
    static func singleLine(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : $0 }))
    }

    /// Header text: as it is when it is printable ASCII, else one RFC 2047 encoded word
    /// per up to 39 bytes of UTF-8 (whole characters), folded onto continuation lines, so
    /// a `Subject:` line stays within 76 characters.
    static func headerText(_ text: String) -> String {
        if text.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) { return text }
        var words: [String] = []
        var chunk: [UInt8] = []
        for character in text {
            let bytes = Array(String(singleLine(String(character))).utf8)
            if chunk.count + bytes.count > 39 {
                words.append("=?UTF-8?B?\(Data(chunk).base64EncodedString())?=")
                chunk = []
            }
            chunk += bytes
        }
        if !chunk.isEmpty { words.append("=?UTF-8?B?\(Data(chunk).base64EncodedString())?=") }
        return words.joined(separator: "\r\n ")
    }

    /// Quoted-printable (RFC 2045 §6.7) with CRLF line ends: every line at most 76
    /// characters, only printable ASCII on the wire, the body's own line breaks kept.
    static func quotedPrintable(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var lines: [String] = []
        for line in text.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false) {
            var encoded: [UInt8] = []
            var width = 0
            let bytes = Array(line.utf8)
            for (index, byte) in bytes.enumerated() {
                let isLast = index == bytes.count - 1
                let literal = (byte >= 33 && byte <= 126 && byte != UInt8(ascii: "=")) || ((byte == 0x20 || byte == 0x09) && !isLast)
                // A leading '.' could end an SMTP transfer early on a server that does not escape it.
                let escapeDot = byte == UInt8(ascii: ".") && width == 0
                let piece: [UInt8] = literal && !escapeDot ? [byte] : [UInt8(ascii: "="), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
                if width + piece.count > 75 {
                    encoded += Array("=\r\n".utf8)
                    width = 0
                }
                encoded += piece
                width += piece.count
            }
            lines.append(String(decoding: encoded, as: UTF8.self))
        }
        return lines.joined(separator: "\r\n")
    }
}
