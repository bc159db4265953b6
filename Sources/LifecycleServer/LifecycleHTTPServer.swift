import Foundation
import Hummingbird
import JobRunner
import Lifecycle
import LifecycleRuntime
import Logging
import NIOCore
import ServiceLifecycle

/// Where `lifecycle serve` listens and what it runs beside the server.
public struct ServeOptions: Sendable {
    public var host: String
    public var port: Int
    /// Also run a job worker in the same process (exports, photos, purges as they fall due).
    public var withWorker: Bool
    public var workerConcurrency: Int
    public var limits: ServerLimits

    public init(
        host: String = "127.0.0.1", port: Int = 8080, withWorker: Bool = false, workerConcurrency: Int = 2, limits: ServerLimits = .standard
    ) {
        self.host = host
        self.port = port
        self.withWorker = withWorker
        self.workerConcurrency = workerConcurrency
        self.limits = limits
    }
}

/// A request's context: Hummingbird's own plus the peer's address, for the audit's
/// keyed hash of who downloaded.
public struct ServerContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// `lifecycle serve`: the export download links over HTTP, on Hummingbird, shut down
/// gracefully on SIGTERM or SIGINT (requests in flight finish; a worker in the same
/// process finishes its steps in flight and hands its jobs back).
public struct LifecycleHTTPServer<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    /// The app API's token; without one `/v1` is not served.
    public let apiToken: APIToken?
    /// Who may open `/ops`.
    public let opsAccess: OpsAccess
    /// Proxies whose `X-Forwarded-For` names the client (the deletion page's per-client limit).
    public let trustedProxies: TrustedProxies

    public init(
        services: LifecycleServices<Store>, apiToken: APIToken? = nil, opsAccess: OpsAccess = OpsAccess(token: nil)!, trustedProxies: TrustedProxies = .none
    ) {
        self.services = services
        self.apiToken = apiToken
        self.opsAccess = opsAccess
        self.trustedProxies = trustedProxies
    }

    public func router() -> Router<ServerContext> {
        let router = Router(context: ServerContext.self)
        router.add(middleware: ServerErrorMiddleware(logger: services.logger))
        router.add(middleware: UnknownRouteMiddleware())
        if let apiToken { AppAPI(services: services, token: apiToken).register(on: router) }
        OpsDashboard(services: services, access: opsAccess).register(on: router)
        // The confirmation links are signed with the download links' key: without one (an S3
        // store's presigned links need none) the page is not served.
        if (try? services.linkSigner()) != nil { DeletionPage(services: services, trustedProxies: trustedProxies).register(on: router) }
        let downloads = DownloadResponder(services: services)
        router.get("/exports/:id") { request, context in try await downloads.respond(to: request, context: context, sendBody: true) }
        router.head("/exports/:id") { request, context in try await downloads.respond(to: request, context: context, sendBody: false) }
        router.get("/healthz") { _, _ in Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: "ok\n"))) }
        return router
    }

    /// Serves until SIGTERM or SIGINT. `onListening` gets the address the server bound
    /// (port 0 picks a free one), once it accepts connections.
    public func run(_ options: ServeOptions, onListening: @escaping @Sendable (String) -> Void) async throws {
        var services: [any Service] = []
        if options.withWorker {
            services.append(WorkerService(services: self.services, options: WorkerOptions(concurrency: options.workerConcurrency)))
        }
        let (limits, connections) = (options.limits, OpenConnections())
        let app = Application(
            router: router(),
            server: .http1(configuration: .init(additionalChannelHandlers: [
                FileRegionInstaller(logger: self.services.logger), ConnectionCloseInstaller(), ServerLimitsInstaller(limits: limits, connections: connections),
            ])),
            configuration: ApplicationConfiguration(address: .hostname(options.host, port: options.port), serverName: nil),
            services: services,
            onServerRunning: { channel in
                let address = channel.localAddress
                onListening("\(address?.ipAddress ?? options.host):\(address?.port ?? options.port)")
            },
            logger: self.services.logger)
        try await app.runService()
    }
}

/// A path no route serves answers as the API's errors do (`{"error": {"code": "not_found",
/// …}}`), not with Hummingbird's empty 404: an app reading the API's errors reads this one
/// too. Hummingbird sends a known path with another method here as well (it does not tell
/// the two apart), so that is a 404 too. A route's own 404 (an unknown export) is left as it is.
/// Told apart by the endpoint path Hummingbird's router sets when no route matched
/// ("NotFound", Router.swift; no public constant names it): should a Hummingbird update
/// change it, APIErrorTests' unknown-path test fails rather than the API going back silently.
struct UnknownRouteMiddleware: RouterMiddleware {
    typealias Context = ServerContext

    func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && context.endpointPath == "NotFound" {
            let path = String(request.uri.path.prefix(200))
            return try APIError(
                .notFound, code: "not_found",
                message: "nothing is served at \(request.method) \(path); the app API is under /v1 (Sources/LifecycleServer/openapi.yaml)"
            ).response()
        }
    }
}

