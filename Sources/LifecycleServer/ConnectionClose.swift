import NIOCore
import NIOHTTP1

/// Closes a connection when HTTP/1.1 says it must be, which the server framework does not
/// do by itself: after answering an HTTP/1.0 request that did not ask to be kept alive
/// (terminal browsers, nginx's default upstream protocol; they read until the connection
/// closes), and after an answer that says `Connection: close` (a refused upload: the rest
/// of its body is never read). Added to the pipeline through the framework's extra-handler
/// hook, it moves itself next to the HTTP/1 decoder, where request and response heads
/// still carry their version and connection headers.
final class ConnectionCloseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var closeAfterResponse = false
    /// The answer that closes the connection is out: the rest of the request is dropped.
    private var draining = false
    static let lingering = TimeAmount.seconds(5)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if draining { return }
        if case .head(var head) = unwrapInboundIn(data), !head.isKeepAlive, !head.headers.contains(name: "connection") {
            // The framework ends its connection loop on a request that says close.
            head.headers.add(name: "connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            if head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "close" }) { closeAfterResponse = true }
            context.write(data, promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            guard closeAfterResponse else { return context.write(data, promise: promise) }
            closeAfterResponse = false
            // Only once the last byte has gone out: closing earlier would cut the answer short.
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.cascade(to: promise)
            let channel = context.channel
            // A lingering close, as nginx's: the client may still be sending the body this
            // answer refused. Closing with its bytes unread makes the kernel reset the
            // connection, and the reset can reach the client before it has read the answer
            // (curl: "failed sending data", exit 55, and no 413). So only the sending side is
            // shut; what still arrives is read and dropped until the client closes, for at
            // most `lingering`.
            draining = true
            written.futureResult.whenComplete { result in
                guard case .success = result else { return channel.close(promise: nil) }
                let shut = channel.eventLoop.makePromise(of: Void.self)
                shut.futureResult.whenFailure { _ in channel.close(promise: nil) }
                channel.close(mode: .output, promise: shut)
                channel.eventLoop.scheduleTask(in: Self.lingering) { channel.close(promise: nil) }
            }
            context.writeAndFlush(data, promise: written)
        }
    }
}

/// The hook's handler: it only places a `ConnectionCloseHandler` beside the HTTP/1 decoder
/// and removes itself.
final class ConnectionCloseInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        // After the request decoder (inbound: parsed heads) and, the encoder being earlier
        // in the pipeline, before it on the way out (response heads not yet encoded).
        if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            try? pipeline.addHandler(ConnectionCloseHandler(), position: .after(decoder))
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
