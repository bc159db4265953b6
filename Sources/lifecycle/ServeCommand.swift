import ArgumentParser
import Foundation
import Lifecycle
import LifecycleServer

struct ServeCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the export download links over HTTP (GET and HEAD /exports/<id>?expires=…&sig=…).",
        discussion: """
            Checks each link as `exports verify-link` does: 403 forged or altered, 404 no such export, 410 expired
            or revoked; streams the archive with Range, If-Range, ETag and Content-Disposition, so a download resumes
            where it stopped. Put it behind a TLS-terminating proxy (Jobs/runbooks/serve.md). Prints
            "listening on http://HOST:PORT" ({"listening": …} with --json) once it accepts connections; SIGTERM or
            SIGINT stops it after the requests in flight. --with-worker runs the job worker in the same process.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(help: ArgumentHelp("Address and port to listen on (port 0: any free one).", valueName: "addr:port"))
    var listen: String = "127.0.0.1:8080"
    @Flag(name: .customLong("with-worker"), help: "Also run the job worker in this process.") var withWorker = false
    @Option(help: "Jobs the worker runs at once (with --with-worker).") var concurrency: Int = 2

    func validate() throws {
        _ = try endpoint()
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 256") }
    }

    /// `host:port`, or `[v6]:port`.
    func endpoint() throws -> (host: String, port: Int) {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65_535).contains(port) else {
            throw ValidationError("--listen must be ADDRESS:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080 (got '\(listen)')")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen needs an address before the port, e.g. 127.0.0.1:\(port)") }
        return (host, port)
    }

    func run() async throws {
        try await guarded { try await options.withServices(self) }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let (host, port) = try endpoint()
        // Refused now, not at the first download: without a key no link can be checked.
        if services.blobs.downloadURLLifetimeLimit == nil { _ = try services.linkSigner() }
        try await LifecycleHTTPServer(services: services).run(
            ServeOptions(host: host, port: port, withWorker: withWorker, workerConcurrency: concurrency)
        ) { [json = options.json] address in
            if json {
                try? Terminal.printJSON(["listening": "http://\(address)"])
            } else {
                Terminal.line("listening on http://\(address)")
            }
        }
        return .ok
    }
}
