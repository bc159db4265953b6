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

    public init(headerTimeout: Duration, bodyIdleTimeout: Duration, keepAliveTimeout: Duration, maxConnections: Int) {
        self.headerTimeout = headerTimeout
        self.bodyIdleTimeout = bodyIdleTimeout
        self.keepAliveTimeout = keepAliveTimeout
        self.maxConnections = maxConnections
    }

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

/// Connections open now, shared by every connection's handler.
final class OpenConnections: Sendable {
    private let count = Atomic<Int>(0)

    /// The number of connections with this one.
    func opened() -> Int { count.wrappingAdd(1, ordering: .relaxed).newValue }
    func closed() { count.wrappingSubtract(1, ordering: .relaxed) }
}

/// Enforces `ServerLimits` on one connection, next to the HTTP/1 decoder: a timer runs
/// whenever the server waits on the client (for a request head, between body reads,
/// between kept-alive requests) and closes the connection when it fires; none runs while
/// the server itself is answering (a long download is the client reading at its pace,
/// which TCP's own flow control handles). A connection beyond the limit reads its request
/// head only: `/healthz` is answered, anything else gets 503 with `Retry-After`.
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

    init(limits: ServerLimits, connections: OpenConnections) {
        self.limits = limits
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard !counted else { return }
        counted = true
        overLimit = connections.opened() > limits.maxConnections
        wait(context, overLimit ? ServerLimits.refusedHeaderTimeout : limits.headerTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        if counted {
            counted = false
            connections.closed()
        }
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
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refusing { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            unanswered += 1
            readingBody = true
            if overLimit && head.uri.split(separator: "?", maxSplits: 1).first != "/healthz" {
                refusing = true
                stopWaiting()
                refuse(context, version: head.version)
                return
            }
            wait(context, limits.bodyIdleTimeout)
        case .body:
            wait(context, limits.bodyIdleTimeout)
        case .end:
            readingBody = false
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
    }

    /// 503 with `Connection: close`, written past the server framework, which never sees the request.
    private func refuse(_ context: ChannelHandlerContext, version: HTTPVersion) {
        let text = "lifecycle serve is at its limit of \(limits.maxConnections) connections; try again shortly\n"
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "text/plain; charset=utf-8")
        headers.add(name: "content-length", value: String(text.utf8.count))
        headers.add(name: "retry-after", value: "5")
        headers.add(name: "connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .serviceUnavailable, headers: headers))), promise: nil)
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
            try? pipeline.addHandler(ServerLimitsHandler(limits: limits, connections: connections), position: .after(decoder))
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
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
