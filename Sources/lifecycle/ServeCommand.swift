import ArgumentParser
import Foundation
import LifecycleRuntime
import LifecycleServer

struct ServeCommand: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the export download links and the app API over HTTP.",
        usage: """
            lifecycle serve [--listen <addr:port>] [--api-token-file <path>] [--ops-token-file <path>] [--operator <name>]
                            [--with-worker [--concurrency <concurrency>]] [--header-timeout <seconds>] [--body-timeout <seconds>]
                            [--keep-alive-timeout <seconds>] [--max-connections <n>]
                            [--connections-per-peer <n>] [--min-body-rate <bytes>] [--trusted-proxy <ip> ...]
                            \(GlobalOptions.usage)
            """,
        discussion: """
            Checks each link as `exports verify-link` does: 403 forged or altered, 404 no such export, 410 expired \
            or revoked; streams the archive with Range, If-Range, ETag and Content-Disposition, so a download resumes \
            where it stopped. Put it behind a TLS-terminating proxy (Jobs/runbooks/serve.md). Prints \
            "listening on http://HOST:PORT" ({"listening": …} with --json) once it accepts connections; SIGTERM or \
            SIGINT stops it after the requests in flight. --with-worker runs the job worker in the same process.
            With an API token (--api-token-file) it also serves the app backend's API under /v1, described by \
            Sources/LifecycleServer/openapi.yaml: account state, exports, deletion with the password, restore.
            /ops is the operator's page (jobs, dead jobs with retry, pause and resume, holds, the last purges, \
            exports): with --ops-token-file the token is the HTTP Basic password, without one it answers this \
            machine only.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(help: ArgumentHelp("Address and port to listen on (port 0: any free one).", valueName: "addr:port"))
    var listen: String = "127.0.0.1:8080"
    @Flag(name: .customLong("with-worker"), help: "Also run the job worker in this process.") var withWorker = false
    @Option(help: "Jobs the worker runs at once (with --with-worker).") var concurrency: Int = 2
    @Option(name: .customLong("api-token-file"), help: ArgumentHelp(
        "File holding the app API's bearer token, at least 32 characters (env LIFECYCLE_API_TOKEN_FILE, or LIFECYCLE_API_TOKEN itself); without one /v1 is not served.",
        valueName: "path"))
    var apiTokenFile: String?
    @Option(name: .customLong("ops-token-file"), help: ArgumentHelp(
        "File holding the operator token for /ops, the HTTP Basic password (env LIFECYCLE_OPS_TOKEN_FILE or LIFECYCLE_OPS_TOKEN); without one /ops answers this machine only.",
        valueName: "path"))
    var opsTokenFile: String?
    @OptionGroup var operatorOption: OperatorOption
    @Option(name: .customLong("header-timeout"), help: ArgumentHelp(
        "Seconds a client has to send a complete request head, from connecting or from the end of the previous answer.",
        valueName: "seconds"))
    var headerTimeout: Double = Self.seconds(ServerLimits.defaultHeaderTimeout)
    @Option(name: .customLong("body-timeout"), help: ArgumentHelp(
        "Seconds a request body may pause between two reads.", valueName: "seconds"))
    var bodyTimeout: Double = Self.seconds(ServerLimits.defaultBodyIdleTimeout)
    @Option(name: .customLong("keep-alive-timeout"), help: ArgumentHelp(
        "Seconds a kept-alive connection may wait for its next request.", valueName: "seconds"))
    var keepAliveTimeout: Double = Self.seconds(ServerLimits.defaultKeepAliveTimeout)
    @Option(name: .customLong("max-connections"), help: ArgumentHelp(
        "Connections served at once; beyond them requests get 503 and /healthz still answers (default: half the open-file limit, at most 1024).",
        valueName: "n"))
    var maxConnections: Int?
    @Option(name: .customLong("connections-per-peer"), help: ArgumentHelp(
        "Connections one client address may hold at once; beyond them its requests get 503 (default: a quarter of --max-connections, at most 64; a --trusted-proxy is not held to it).",
        valueName: "n"))
    var connectionsPerPeer: Int?
    @Option(name: .customLong("min-body-rate"), help: ArgumentHelp(
        "Bytes a second a request body must average once --header-timeout seconds have passed since its head; a slower one is closed.",
        valueName: "bytes"))
    var minBodyRate: Int = ServerLimits.defaultMinBodyRate
    @Option(name: .customLong("trusted-proxy"), help: ArgumentHelp(
        "A proxy in front of serve, by IP address; repeatable (env LIFECYCLE_TRUSTED_PROXIES, comma-separated). Only its X-Forwarded-For names the client the deletion page limits; from any other peer the header is ignored.",
        valueName: "ip"))
    var trustedProxy: [String] = []

    func validate() throws {
        _ = try endpoint()
        _ = try trustedProxies()
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 256") }
        _ = try limits()
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    func trustedProxies() throws -> TrustedProxies {
        let listed = trustedProxy.isEmpty
            ? (ProcessInfo.processInfo.environment["LIFECYCLE_TRUSTED_PROXIES"] ?? "").split(separator: ",").map(String.init).filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            : trustedProxy
        do {
            return try TrustedProxies(listed)
        } catch {
            throw ValidationError("--trusted-proxy: \(error)")
        }
    }

    func limits() throws -> ServerLimits {
        func seconds(_ value: Double, _ flag: String) throws -> Duration {
            guard value.isFinite, value >= 0.1, value <= 3_600 else {
                throw ValidationError("--\(flag) must be between 0.1 and 3600 seconds (got \(value))")
            }
            return .milliseconds(Int64(value * 1_000))
        }
        let files = ServerLimits.openFileLimit()
        let connections = maxConnections ?? ServerLimits.defaultMaxConnections(openFileLimit: files)
        guard connections >= 1, connections < files else {
            throw ValidationError("--max-connections must be between 1 and the open-file limit (\(files), `ulimit -n`) less one; got \(connections)")
        }
        if let connectionsPerPeer, !(1...connections).contains(connectionsPerPeer) {
            throw ValidationError("--connections-per-peer must be between 1 and --max-connections (\(connections)); got \(connectionsPerPeer)")
        }
        guard (1...100_000_000).contains(minBodyRate) else {
            throw ValidationError("--min-body-rate must be between 1 and 100000000 bytes a second; got \(minBodyRate)")
        }
        return ServerLimits(
            headerTimeout: try seconds(headerTimeout, "header-timeout"), bodyIdleTimeout: try seconds(bodyTimeout, "body-timeout"),
            keepAliveTimeout: try seconds(keepAliveTimeout, "keep-alive-timeout"), maxConnections: connections,
            connectionsPerPeer: connectionsPerPeer, minBodyRate: minBodyRate, trustedProxies: try trustedProxies())
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

    /// A token from its file option, else its `…_FILE` variable, else the variable holding it; nil when none.
    static func token(file: String?, variable: String, what: String) throws -> String? {
        let environment = ProcessInfo.processInfo.environment
        var text: String?
        if let path = file ?? environment[variable + "_FILE"].flatMap({ $0.isEmpty ? nil : $0 }) {
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw CLIFailure(.noInput, "\(path): cannot read the \(what) file: \(String(cString: strerror(errno))) (create it with `openssl rand -hex 32 > \(path) && chmod 600 \(path)`)")
            }
            // As the signing key's: a token others on the machine can read is anyone's. (A
            // container's secret mounted 0400 for root and read by root passes; 0644 does not.)
            guard info.st_mode & 0o077 == 0 else {
                throw CLIFailure(.permissionDenied, """
                    \(path): the \(what) file must be private to its owner (mode \(String(info.st_mode & 0o777, radix: 8))); \
                    run `chmod 600 \(path)` (a Kubernetes secret: defaultMode 0400)
                    """)
            }
            if let problem = SecretStrength.ownerProblem(info) { throw CLIFailure(.permissionDenied, "\(path): the \(what) file: \(problem)") }
            guard let data = FileManager.default.contents(atPath: path), data.count <= 4_096 else {
                throw CLIFailure(.noInput, "\(path): cannot read the \(what) file (it must exist and hold one token)")
            }
            text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        } else if let value = environment[variable], !value.isEmpty {
            text = value
        }
        if let text, let problem = SecretStrength.problem(Array(text.utf8)) {
            throw CLIFailure(.usage, "the \(what) is too weak: \(problem); \(SecretStrength.advice)")
        }
        return text
    }

    /// The app API's token and who may open /ops, each token file read once.
    func access() throws -> (api: APIToken?, ops: OpsAccess, tokens: [(text: String, what: String)]) {
        let api = try Self.token(file: apiTokenFile, variable: "LIFECYCLE_API_TOKEN", what: "API token")
        let ops = try Self.token(file: opsTokenFile, variable: "LIFECYCLE_OPS_TOKEN", what: "operator token")
        // One token for both would let the app backend, which holds the API token, open /ops.
        if let api, api == ops {
            throw CLIFailure(.usage, "the API token and the operator token are the same: give /ops a token of its own (`openssl rand -hex 32`)")
        }
        guard let access = OpsAccess(token: ops, operatorName: operatorOption.operatorName) else {
            throw CLIFailure(.usage, "the operator token must be at least 32 characters (e.g. `openssl rand -hex 32`)")
        }
        let tokens = [(api, "API token"), (ops, "operator token")].compactMap { text, what in text.map { (text: $0, what: what) } }
        return (api.flatMap(APIToken.init), access, tokens)
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let (host, port) = try endpoint()
        let (token, opsAccess, tokens) = try access()
        // Refused now, not at the first download: without a key no link can be checked.
        let signer = services.exports.downloadURLLifetimeLimit == nil ? try services.linkSigner() : try? services.linkSigner()
        for (secret, what) in tokens {
            guard let signer, signer.isKey(Data(secret.utf8)) else { continue }
            throw CLIFailure(.usage, """
                the signing key is also the \(what): whoever holds that token could sign deletion and download links; \
                give each its own (`openssl rand -hex 32`)
                """)
        }
        if token == nil { services.logger.notice("no API token configured: /v1 is not served (set LIFECYCLE_API_TOKEN_FILE)") }
        // The deletion page finds an account by the address a visitor types: said now, not
        // discovered when no link ever goes out.
        do {
            let subject = try await services.directory().data.plan.subject
            if subject.email.map({ !subject.lookup.contains($0) }) ?? true {
                services.logger.notice("""
                    /account/delete cannot find an account by its address: the data map's subject needs `email:` naming a column \
                    that is also under `lookup:`; until then the page answers and sends nothing
                    """)
            }
        }
        try await LifecycleHTTPServer(services: services, apiToken: token, opsAccess: opsAccess, trustedProxies: try trustedProxies()).run(
            ServeOptions(host: host, port: port, withWorker: withWorker, workerConcurrency: concurrency, limits: try limits())
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
