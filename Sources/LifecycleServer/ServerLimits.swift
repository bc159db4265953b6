import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// How long `lifecycle serve` waits on a client, and how many connections it holds: the
/// link in every export email points at it, so a client that sends half a header, trickles
/// a body or keeps an idle connection open must not hold a file descriptor for ever, and a
/// flood of connections must be refused, not let the process run out of descriptors.
public struct ServerLimits: Sendable, Equatable {
    /// From a connection's start (or the end of its previous answer) to a complete request head.
    public var headerTimeout: Duration
    /// The longest pause between two reads of a request body.
    public var bodyIdleTimeout: Duration
    /// How long a kept-alive connection may wait for its next request.
    public var keepAliveTimeout: Duration
    /// Connections served at once; those beyond get 503 (or, for `/healthz`, an answer).
    public var maxConnections: Int
    /// Connections one peer may hold at once (a trusted proxy: any number up to
    /// `maxConnections`): twenty slow clients from one address no longer hold every slot.
    public var connectionsPerPeer: Int
    /// Bytes a second a request body must average once `headerTimeout` has passed since its
    /// head: a body trickled a byte at a time, each within the pause allowed, is closed.
    public var minBodyRate: Int
    /// Proxies whose connections carry many clients: not held to `connectionsPerPeer`.
    public var trustedProxies: TrustedProxies

    public init(
        headerTimeout: Duration, bodyIdleTimeout: Duration, keepAliveTimeout: Duration, maxConnections: Int,
        connectionsPerPeer: Int? = nil, minBodyRate: Int = Self.defaultMinBodyRate, trustedProxies: TrustedProxies = .none
    ) {
        self.headerTimeout = headerTimeout
        self.bodyIdleTimeout = bodyIdleTimeout
        self.keepAliveTimeout = keepAliveTimeout
        self.maxConnections = maxConnections
        self.connectionsPerPeer = connectionsPerPeer ?? Self.defaultConnectionsPerPeer(maxConnections: maxConnections)
        self.minBodyRate = minBodyRate
        self.trustedProxies = trustedProxies
    }

    /// A quarter of the slots, at most 64: a browser opens six, an app fewer.
    public static func defaultConnectionsPerPeer(maxConnections: Int) -> Int { max(2, min(64, maxConnections / 4)) }
    /// 1 KiB/s: a 10 MB photo on the slowest mobile link still arrives; a trickle does not.
    public static let defaultMinBodyRate = 1_024

    /// nginx's order of magnitude (client_header_timeout and client_body_timeout 60 s,
    /// keepalive_timeout 75 s), shorter: the clients are apps and browsers on one request
    /// each, not proxies multiplexing many.
    public static let defaultHeaderTimeout = Duration.seconds(10)
    public static let defaultBodyIdleTimeout = Duration.seconds(30)
    public static let defaultKeepAliveTimeout = Duration.seconds(60)

    /// Half the process's open-file limit, at most 1,024: the other half is left for the
    /// database, the blob store, the files served and the connections being refused.
    public static func defaultMaxConnections(openFileLimit: Int = Self.openFileLimit()) -> Int {
        max(8, min(1_024, openFileLimit / 2))
    }

    public static func openFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1_024 }
        return Int(clamping: min(limit.rlim_cur, 1_048_576))
    }

    public static let standard = ServerLimits(
        headerTimeout: defaultHeaderTimeout, bodyIdleTimeout: defaultBodyIdleTimeout, keepAliveTimeout: defaultKeepAliveTimeout,
        maxConnections: defaultMaxConnections())

    /// A connection beyond `maxConnections` is refused quickly: this long for its request
    /// head, then closed, so refused connections cannot pile up either.
    static let refusedHeaderTimeout = Duration.seconds(1)
}

/// Connections open now, in all and per peer, shared by every connection's handler.
final class OpenConnections: Sendable {
    private let count = Atomic<Int>(0)
    private let perPeer = Mutex<[String: Int]>([:])

    /// The numbers of connections with this one: in all, and from its peer.
    func opened(peer: String?) -> (total: Int, fromPeer: Int) {
        let total = count.wrappingAdd(1, ordering: .relaxed).newValue
        guard let peer else { return (total, 1) }
        return (total, perPeer.withLock { peers in
            peers[peer, default: 0] += 1
            return peers[peer] ?? 1
        })
    }

    func closed(peer: String?) {
        count.wrappingSubtract(1, ordering: .relaxed)
        guard let peer else { return }
        perPeer.withLock { peers in
            let left = (peers[peer] ?? 1) - 1
            peers[peer] = left > 0 ? left : nil
        }
    }

    var total: Int { count.load(ordering: .relaxed) }
}

/// Enforces `ServerLimits` on one connection, next to the HTTP/1 decoder: a timer runs
/// whenever the server waits on the client (for a request head, between body reads,
/// between kept-alive requests) and closes the connection when it fires; none runs while
/// the server itself is answering (a long download is the client reading at its pace,
/// which TCP's own flow control handles). The first byte of a kept-alive connection's next
/// request starts the header timeout, as for a new connection; a body must also keep up
/// `minBodyRate` on average. A connection beyond the limit, or beyond its peer's share,
/// reads its request head only: `/healthz` is answered, anything else gets 503 with
/// `Retry-After`. `/readyz` is answered here on every connection: 503 while the server is at
/// its limit and refusing, 200 otherwise.
final class ServerLimitsHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let limits: ServerLimits
    private let connections: OpenConnections
    private var counted = false
    private var overLimit = false
    /// The request in hand was answered here (over the limit): the rest of it is dropped.
    private var refusing = false
    /// Requests whose answer has not ended: more than one when the client pipelines.
    private var unanswered = 0
    /// Between a request's head and the end of its body.
    private var readingBody = false
    private var timer: Scheduled<Void>?
    /// Between an answer and the next request's first byte on a kept-alive connection.
    private var awaitingNextRequest = false
    private var peer: String?
    private var bodyStarted: NIODeadline?
    private var bodyBytes = 0
    private var overPeerLimit = false

    init(limits: ServerLimits, connections: OpenConnections) {
        self.limits = limits
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard !counted else { return }
        counted = true
        peer = context.channel.remoteAddress?.ipAddress.flatMap(TrustedProxies.normalised)
        let proxied = peer.map(limits.trustedProxies.addresses.contains) ?? false
        let open = connections.opened(peer: peer)
        overPeerLimit = !proxied && open.fromPeer > limits.connectionsPerPeer
        overLimit = open.total > limits.maxConnections || overPeerLimit
        wait(context, overLimit ? ServerLimits.refusedHeaderTimeout : limits.headerTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        if counted {
            counted = false
            connections.closed(peer: peer)
        }
    }

    /// Raw bytes reached the decoder (`RequestStartObserver`): on a kept-alive connection
    /// waiting for its next request, that request's head now has the header timeout.
    func requestBytesArrived(context: ChannelHandlerContext) {
        guard awaitingNextRequest else { return }
        awaitingNextRequest = false
        wait(context, overLimit ? ServerLimits.refusedHeaderTimeout : limits.headerTimeout)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    /// Closes the connection unless the client does its part within `timeout`.
    private func wait(_ context: ChannelHandlerContext, _ timeout: Duration) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: TimeAmount(timeout)) { channel.close(promise: nil) }
    }

    private func stopWaiting() {
        timer?.cancel()
        timer = nil
        awaitingNextRequest = false
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refusing { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            awaitingNextRequest = false
            unanswered += 1
            readingBody = true
            let path = head.uri.split(separator: "?", maxSplits: 1).first
            if path == "/readyz" {
                refusing = true
                stopWaiting()
                let busy = overLimit || connections.total >= limits.maxConnections
                answer(
                    context, version: head.version, status: busy ? .serviceUnavailable : .ok,
                    text: busy ? "refusing: at the limit of \(limits.maxConnections) connections\n" : "ready\n", retryAfter: busy)
                return
            }
            if overLimit && path != "/healthz" {
                refusing = true
                stopWaiting()
                let text = overPeerLimit
                    ? "lifecycle serve holds \(limits.connectionsPerPeer) connections from one address at most; close one, or try again shortly\n"
                    : "lifecycle serve is at its limit of \(limits.maxConnections) connections; try again shortly\n"
                answer(context, version: head.version, status: .serviceUnavailable, text: text, retryAfter: true)
                return
            }
            bodyStarted = .now()
            bodyBytes = 0
            wait(context, limits.bodyIdleTimeout)
        case .body(let chunk):
            bodyBytes += chunk.readableBytes
            if let started = bodyStarted {
                let elapsed = NIODeadline.now() - started
                let grace = TimeAmount(limits.headerTimeout)
                if elapsed > grace, Double(bodyBytes) < Double(limits.minBodyRate) * Double(elapsed.nanoseconds) / 1e9 {
                    context.close(promise: nil)
                    return
                }
            }
            wait(context, limits.bodyIdleTimeout)
        case .end:
            readingBody = false
            bodyStarted = nil
            // Answered already (a refusal before its body came): the client's turn again.
            if unanswered == 0 { waitForNextRequest(context) } else { stopWaiting() }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), context.channel.isActive {
            unanswered = max(0, unanswered - 1)
            if readingBody {
                // Answered before its body came in: the body may still take its pauses.
                wait(context, limits.bodyIdleTimeout)
            } else if unanswered == 0 {
                waitForNextRequest(context)
            }
            // Else a pipelined request is being answered: the server's turn, no timer.
        }
        context.write(data, promise: promise)
    }

    /// Nothing in hand: a kept-alive connection may take this long to send its next request.
    private func waitForNextRequest(_ context: ChannelHandlerContext) {
        wait(context, overLimit ? ServerLimits.refusedHeaderTimeout : limits.keepAliveTimeout)
        awaitingNextRequest = true
    }

    /// An answer with `Connection: close`, written past the server framework, which never sees the request.
    private func answer(_ context: ChannelHandlerContext, version: HTTPVersion, status: HTTPResponseStatus, text: String, retryAfter: Bool) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "text/plain; charset=utf-8")
        headers.add(name: "content-length", value: String(text.utf8.count))
        if retryAfter { headers.add(name: "retry-after", value: "5") }
        headers.add(name: "connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// The framework's extra-handler hook: places a `ServerLimitsHandler` right after the
/// HTTP/1 decoder (where heads still carry their version, and before the framework reads
/// them) and removes itself.
final class ServerLimitsInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    private let limits: ServerLimits
    private let connections: OpenConnections

    init(limits: ServerLimits, connections: OpenConnections) {
        self.limits = limits
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            let handler = ServerLimitsHandler(limits: limits, connections: connections)
            try? pipeline.addHandler(handler, position: .after(decoder))
            try? pipeline.addHandler(RequestStartObserver(limits: handler), position: .before(decoder))
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// Before the HTTP/1 decoder, which says nothing until a whole head is in: tells the
/// connection's `ServerLimitsHandler` when bytes arrive, so a kept-alive connection's next
/// request gets the header timeout from its first byte, not the keep-alive's minute.
final class RequestStartObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let limits: ServerLimitsHandler

    init(limits: ServerLimitsHandler) { self.limits = limits }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        limits.requestBytesArrived(context: context)
        context.fireChannelRead(data)
    }
}

/// A 500 is answered with an id and logged under it: the answer says only that something
/// failed, the log says what, and the id joins the two.
public enum ServerErrors {
    static let requestIDField = HTTPField.Name("X-Request-Id")!

    static func requestID() -> String {
        String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16)).lowercased()
    }
}

/// Every route's unexpected failure, wherever it comes from (the operator page, a
/// download, the framework): logged with an id, answered 500 with the same id. Refusals a
/// route means (4xx, and 503 with its reason) pass through as they are.
struct ServerErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError where error.status.code < 500 || error.status == .serviceUnavailable {
            throw error
        } catch {
            let id = ServerErrors.requestID()
            logger.error("request failed", metadata: [
                "request_id": "\(id)", "method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)",
            ])
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; charset=utf-8"
            headers[ServerErrors.requestIDField] = id
            return Response(
                status: .internalServerError, headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: "An internal error (request \(id)); it is in the server's log.\n")))
        }
    }
}
