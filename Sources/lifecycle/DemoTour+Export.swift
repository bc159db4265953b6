import Foundation
import LifecycleRuntime

extension DemoTour {
    func exportChapter() async throws {
        heading("Export: lifecycle export ada --wait")
        try useDemoSigningKey()
        let export: ExportRecord
        do {
            let outcome = try await services.requestExport(ExportRequest(account: "ada"))
            say("export job #\(outcome.job.id) for ada (unique key \(ExportJobs.uniqueKey(accountID: "ada")): asking again returns this job)")
            export = try await runExportToCompletion(services: services, jobID: outcome.job.id)
        } catch let error as LifecycleError where error.category == .tryLater {
            // Running the demo again within a day meets the rate limit, as a user would.
            say("refused (exit 75): \(error.message)")
            let earlier = try await services.store.read { tx in try tx.exports(accountID: "ada") }
            guard let latest = earlier.first(where: { $0.state == .ready }) else { return }
            say("the latest export, from an earlier run:")
            export = latest
        }
        try await printReadyExport(export, services: services, json: false, say: say)
        say("  inside: README.txt, account.json + .csv (the user row), <table>.json + .csv, files/<table>/YYYY/MM/DD/<file> (her profile photo under files/accounts/), manifest.json (size + SHA-256 of every file)")
        if let link = try services.exportLink(for: export) {
            let genuine = try await services.checkExportLink(link)
            say("exports verify-link <link>: \(genuine.summary)")
            let tampered = link.replacingOccurrences(of: "expires=", with: "expires=9")
            say("exports verify-link <link with a later expiry>: \(try await services.checkExportLink(tampered).summary)")
        }
    }

    /// Links must be signed, and a real installation brings its own key. The demo makes
    /// one beside its database, readable by the owner only, unless a key is configured.
    private func useDemoSigningKey() throws {
        if (try? services.linkSigner()) != nil { return }
        let path = (PathText.parent(services.store.path) as NSString).appendingPathComponent("signing.key")
        if !FileManager.default.fileExists(atPath: path) {
            var generator = SystemRandomNumberGenerator()
            let key = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
            guard FileManager.default.createFile(atPath: path, contents: Data((key + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
                throw CLIFailure(.unavailable, "cannot create the demo signing key \(path)")
            }
        }
        setenv(SigningKeySource.environmentFile, path, 1)
        say("demo signing key: \(path) (mode 0600); a real installation sets LIFECYCLE_SIGNING_KEY or export.signing_key_file")
    }
}

extension ExportLinkCheck {
    var summary: String {
        switch self {
        case .valid(let export): "valid (exit 0), expires \(export.expiresAt.map(ISO8601.format) ?? "-")"
        case .expired(_, let expiresAt): "expired at \(ISO8601.format(expiresAt)) (exit 65)"
        case .invalid(let reason): "invalid (exit 77): \(reason)"
        }
    }
}
