import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1

/// A response body sent with sendfile(2), as nginx's `sendfile on` sends one: the file's
/// bytes go from the page cache to the socket without being copied through this process,
/// so a multi-GB download costs neither its CPU nor its memory.
///
/// Hummingbird's body writer takes only ByteBuffers. So the body written is a stand-in:
/// a small buffer that starts with this process's random token and names the file and the
/// range, behind a head carrying ``header``. ``FileRegionHandler`` sits where responses are
/// HTTP/1 parts with `IOData` bodies, takes the header off, and writes a `FileRegion` in
/// place of the stand-in. Only the first body part after such a head is read as one, and
/// only with the token, which is drawn at start-up and never leaves the process: no other
/// body can be taken for a stand-in.
///
/// Plain HTTP only, which is all `lifecycle serve` speaks (TLS ends at the proxy in front).
enum FileRegionBody {
    static let token: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }()

    /// The header the responder sets on a response whose body is a stand-in. The handler
    /// removes it: a stand-in is taken only as the first body part after such a head.
    static let headerName = "x-lifecycle-sendfile"
    static let header = HTTPField.Name(headerName)!

    /// What the stand-in names: the file, the range, and the file as the responder found it
    /// (device, inode, size), so a file replaced or cut short since is refused, not sent
    /// under the length and ETag computed for the old one.
    struct Region: Equatable {
        var path: String
        var range: Range<Int>
        var device: UInt64
        var inode: UInt64
        var size: Int64
    }

    /// The bytes `range` of the regular file at `path`, whose `stat` the caller just read;
    /// marks `headers` as the response's, since a stand-in behind an unmarked head would go
    /// out as it is.
    static func body(path: String, range: Range<Int>, file: stat, headers: inout HTTPFields) -> ResponseBody {
        headers[header] = "1"
        let region = Region(
            path: path, range: range, device: UInt64(file.st_dev), inode: UInt64(file.st_ino), size: Int64(file.st_size))
        return ResponseBody(contentLength: range.count) { writer in
            try await writer.write(standIn(region))
            try await writer.finish(nil)
        }
    }

    static func standIn(_ region: Region) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeBytes(token)
        buffer.writeInteger(Int64(region.range.lowerBound))
        buffer.writeInteger(Int64(region.range.upperBound))
        buffer.writeInteger(region.device)
        buffer.writeInteger(region.inode)
        buffer.writeInteger(region.size)
        buffer.writeString(region.path)
        return buffer
    }

    /// The region a stand-in names; nil for any other buffer.
    static func region(in buffer: ByteBuffer) -> Region? {
        var buffer = buffer
        guard buffer.readableBytes > token.count + 40, buffer.readBytes(length: token.count) == token,
            let lower = buffer.readInteger(as: Int64.self), let upper = buffer.readInteger(as: Int64.self),
            let device = buffer.readInteger(as: UInt64.self), let inode = buffer.readInteger(as: UInt64.self),
            let size = buffer.readInteger(as: Int64.self), lower >= 0, lower <= upper, upper <= size,
            let path = buffer.readString(length: buffer.readableBytes)
        else { return nil }
        return Region(path: path, range: Int(lower)..<Int(upper), device: device, inode: inode, size: size)
    }
}

/// Writes a ``FileRegionBody`` stand-in as a `FileRegion`. While the file goes out, every
/// later write (the response's end, a pipelined next response) and a close wait behind it,
/// in order: the keep-alive timer and a `Connection: close` start from the response's end,
/// and neither may start, nor a shutdown cut the file short, while most of it is unsent.
final class FileRegionHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let logger: Logger
    /// The last head carried the stand-in header: its first body part must be a stand-in.
    private var expectingStandIn = false
    /// The file going out, while it is.
    private var sending: EventLoopFuture<Void>?
    private var waiting: [(data: NIOAny, promise: EventLoopPromise<Void>?)] = []
    private var flushWaiting = false
    private var closeWaiting: (mode: CloseMode, promise: EventLoopPromise<Void>?)?

    init(logger: Logger) {
        self.logger = logger
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if sending != nil { return waiting.append((data, promise)) }
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.headers.contains(name: FileRegionBody.headerName):
            head.headers.remove(name: FileRegionBody.headerName)
            expectingStandIn = true
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .body(.byteBuffer(let buffer)) where expectingStandIn:
            expectingStandIn = false
            send(FileRegionBody.region(in: buffer), context: context, promise: promise)
        default:
            expectingStandIn = false
            context.write(data, promise: promise)
        }
    }

    func flush(context: ChannelHandlerContext) {
        if sending != nil { flushWaiting = true }
        // What went down before (the file itself among it) goes out now either way.
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard sending != nil else { return context.close(mode: mode, promise: promise) }
        closeWaiting = (mode, promise)
    }

    private func send(_ region: FileRegionBody.Region?, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard let region else {
            return fail(context, promise: promise, "a response marked for sendfile carried no file")
        }
        let file: NIOFileHandle
        do {
            // A local file: open(2) does not wait on the disk.
            file = try NIOFileHandle(_deprecatedPath: region.path)
        } catch {
            return fail(context, promise: promise, "cannot open \(region.path): \(error)")
        }
        var now = stat()
        let found = (try? file.withUnsafeFileDescriptor { fstat($0, &now) }) == 0
        guard found, UInt64(now.st_dev) == region.device, UInt64(now.st_ino) == region.inode, Int64(now.st_size) == region.size else {
            try? file.close()
            return fail(context, promise: promise, "\(region.path) was replaced or changed size after its headers were sent")
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        sending = written.futureResult
        written.futureResult.assumeIsolated().whenComplete { result in
            try? file.close()
            self.sending = nil
            switch result {
            case .success:
                promise?.succeed()
                self.resume(context)
            case .failure(let error):
                promise?.fail(error)
                self.abandon(context, error)
            }
        }
        let body = FileRegion(fileHandle: file, readerIndex: region.range.lowerBound, endIndex: region.range.upperBound)
        context.write(wrapOutboundOut(.body(.fileRegion(body))), promise: written)
    }

    /// The file went out: what waited goes on, in order (a next stand-in among it waits again).
    private func resume(_ context: ChannelHandlerContext) {
        while sending == nil, !waiting.isEmpty {
            let next = waiting.removeFirst()
            write(context: context, data: next.data, promise: next.promise)
        }
        if flushWaiting {
            flushWaiting = sending != nil
            context.flush()
        }
        if sending == nil, let close = closeWaiting {
            closeWaiting = nil
            context.close(mode: close.mode, promise: close.promise)
        }
    }

    /// The connection broke (the client left) or the file could not be read: what waited fails with it.
    private func abandon(_ context: ChannelHandlerContext, _ error: any Error) {
        for next in waiting { next.promise?.fail(error) }
        waiting = []
        flushWaiting = false
        let close = closeWaiting
        closeWaiting = nil
        context.close(mode: close?.mode ?? .all, promise: close?.promise)
    }

    /// The head, with its Content-Length, is out: closing is how the client learns.
    private func fail(_ context: ChannelHandlerContext, promise: EventLoopPromise<Void>?, _ reason: String) {
        logger.error("download cut short", metadata: ["reason": "\(reason)"])
        promise?.fail(ChannelError.ioOnClosedChannel)
        context.close(promise: nil)
    }
}

/// The framework's extra-handler hook: places a ``FileRegionHandler`` right after the
/// HTTP/1 decoder and removes itself. Listed first among the installers, so that the
/// handlers placed after it see a response's end only once its file has gone out. A
/// pipeline it cannot find its place in is closed: its stand-ins would go out as they are.
final class FileRegionInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        do {
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(FileRegionHandler(logger: logger), position: .after(decoder))
        } catch {
            logger.critical("cannot set up sendfile on a connection; closing it", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
