import Hummingbird
import NIOCore
import NIOHTTP1

/// A response body sent with sendfile(2), as nginx's `sendfile on` sends one: the file's
/// bytes go from the page cache to the socket without being copied through this process,
/// so a multi-GB download costs neither its CPU nor its memory.
///
/// Hummingbird's body writer takes only ByteBuffers. So the body written is a stand-in:
/// a small buffer that starts with this process's random token and names the file and the
/// range. ``FileRegionHandler`` sits where responses are HTTP/1 parts with `IOData` bodies,
/// recognises the stand-in and writes a `FileRegion` in its place. Only this file writes the
/// token, which is drawn at start-up and never leaves the process, so no other body (nor a
/// client) can be taken for a stand-in.
///
/// Plain HTTP only, which is all `lifecycle serve` speaks (TLS ends at the proxy in front).
enum FileRegionBody {
    static let token: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }()

    /// The bytes `range` of the file at `path`, which the caller has just checked is a
    /// regular file at least that long.
    static func body(path: String, range: Range<Int>) -> ResponseBody {
        ResponseBody(contentLength: range.count) { writer in
            try await writer.write(standIn(path: path, range: range))
            try await writer.finish(nil)
        }
    }

    static func standIn(path: String, range: Range<Int>) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeBytes(token)
        buffer.writeInteger(Int64(range.lowerBound))
        buffer.writeInteger(Int64(range.upperBound))
        buffer.writeString(path)
        return buffer
    }

    /// The file and range a stand-in names; nil for any other buffer.
    static func region(in buffer: ByteBuffer) -> (path: String, range: Range<Int>)? {
        guard buffer.readableBytes > token.count + 16,
            buffer.getBytes(at: buffer.readerIndex, length: token.count) == token,
            let lower = buffer.getInteger(at: buffer.readerIndex + token.count, as: Int64.self),
            let upper = buffer.getInteger(at: buffer.readerIndex + token.count + 8, as: Int64.self),
            lower >= 0, lower <= upper,
            let path = buffer.getString(at: buffer.readerIndex + token.count + 16, length: buffer.readableBytes - token.count - 16)
        else { return nil }
        return (path, Int(lower)..<Int(upper))
    }
}

/// Writes a ``FileRegionBody`` stand-in as a `FileRegion`, and holds the response's end
/// until the file has gone out: the keep-alive timer and a `Connection: close` both start
/// from the end, and must not start while most of the file is still to be sent.
final class FileRegionHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The file being sent, while it is.
    private var sending: EventLoopFuture<Void>?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .body(.byteBuffer(let buffer)):
            guard let (path, range) = FileRegionBody.region(in: buffer) else { return context.write(data, promise: promise) }
            let file: NIOFileHandle
            do {
                file = try NIOFileHandle(_deprecatedPath: path)
            } catch {
                // The head, with its Content-Length, is out: closing is how the client learns.
                promise?.fail(error)
                context.close(promise: nil)
                return
            }
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.whenComplete { _ in try? file.close() }
            written.futureResult.cascade(to: promise)
            sending = written.futureResult
            let region = FileRegion(fileHandle: file, readerIndex: range.lowerBound, endIndex: range.upperBound)
            context.write(wrapOutboundOut(.body(.fileRegion(region))), promise: written)
        case .end:
            guard let sent = sending else { return context.write(data, promise: promise) }
            sending = nil
            sent.assumeIsolated().whenComplete { result in
                switch result {
                case .success: context.writeAndFlush(data, promise: promise)
                case .failure(let error): promise?.fail(error)
                }
            }
        default:
            context.write(data, promise: promise)
        }
    }
}

/// The framework's extra-handler hook: places a ``FileRegionHandler`` right after the
/// HTTP/1 decoder and removes itself. Listed first among the installers, so that the
/// handlers placed after it see a response's end only once its file has gone out.
final class FileRegionInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            try? pipeline.addHandler(FileRegionHandler(), position: .after(decoder))
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
