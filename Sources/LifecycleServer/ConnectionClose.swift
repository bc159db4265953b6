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

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
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
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
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
