import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import LifecycleServer

/// Downloads go out with sendfile: the body Hummingbird writes is a stand-in that the
/// pipeline turns into a FileRegion, and whatever follows waits for the file.
struct FileRegionTests {
    /// Keeps every write it is given, with its promise, instead of passing it on (the test
    /// decides when a write has gone out), and counts the closes that reach it.
    final class HeldWrites: ChannelOutboundHandler {
        typealias OutboundIn = HTTPServerResponsePart
        var parts: [(part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?)] = []
        var closes = 0

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            parts.append((unwrapOutboundIn(data), promise))
        }

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            closes += 1
            context.close(mode: mode, promise: promise)
        }
    }

    static let logger = Logger(label: "file-region-test")

    private func withFile<T>(_ body: (String, stat) throws -> T) throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("region-\(UUID().uuidString)").path
        try Data(repeating: 7, count: 1_000).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        var status = stat()
        try #require(stat(path, &status) == 0)
        return try body(path, status)
    }

    private func region(_ path: String, _ file: stat, _ range: Range<Int>) -> FileRegionBody.Region {
        .init(path: path, range: range, device: UInt64(file.st_dev), inode: UInt64(file.st_ino), size: Int64(file.st_size))
    }

    /// An EmbeddedChannel is active only once connected: a close then shows.
    private func connected(_ channel: EmbeddedChannel) throws -> EmbeddedChannel {
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        return channel
    }

    private func markedHead(_ status: HTTPResponseStatus = .partialContent) -> HTTPServerResponsePart {
        var head = HTTPResponseHead(version: .http1_1, status: status)
        head.headers.add(name: "content-length", value: "250")
        head.headers.add(name: FileRegionBody.headerName, value: "1")
        return .head(head)
    }

    private func describe(_ held: HeldWrites) -> String {
        held.parts.map { part -> String in
            switch part.part {
            case .head(let head): return "head \(head.status.code)"
            case .body(.byteBuffer(let buffer)): return "bytes \(buffer.readableBytes)"
            case .body(.fileRegion(let region)): return "file \(region.readerIndex)..<\(region.endIndex)"
            case .end: return "end"
            }
        }.joined(separator: ", ")
    }

    @Test func aStandInBecomesAFileRegionAndWhatFollowsWaitsUntilTheFileHasGoneOut() throws {
        try withFile { path, file in
            let held = HeldWrites()
            let channel = try connected(EmbeddedChannel(handlers: [held, FileRegionHandler(logger: Self.logger)]))
            channel.write(markedHead(), promise: nil)
            let bodyWritten = channel.eventLoop.makePromise(of: Void.self)
            channel.write(HTTPServerResponsePart.body(.byteBuffer(FileRegionBody.standIn(region(path, file, 100..<350)))), promise: bodyWritten)
            channel.write(HTTPServerResponsePart.end(nil), promise: nil)
            // A pipelined next answer and a shutdown's close arrive before the file is out.
            channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)), promise: nil)
            channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)
            channel.close(promise: nil)

            #expect(describe(held) == "head 206, file 100..<350", "only the head and the file go before the file is out")
            #expect(held.closes == 0)
            let openWhileSending = channel.isActive
            #expect(openWhileSending)
            guard case .head(let head) = held.parts.first?.part, case .body(.fileRegion(let sent)) = held.parts.last?.part else { return }
            #expect(!head.headers.contains(name: FileRegionBody.headerName), "the marker header stays inside")
            #expect(sent.fileHandle.isOpen)

            held.parts[1].promise?.succeed()
            #expect(describe(held) == "head 206, file 100..<350, end, head 200, end")
            #expect(held.closes == 1)
            let openAfter = channel.isActive
            #expect(!openAfter, "the close that waited went through")
            #expect(!sent.fileHandle.isOpen, "the file is closed once sent")
            var succeeded = false
            bodyWritten.futureResult.assumeIsolated().whenSuccess { succeeded = true }
            #expect(succeeded)
        }
    }

    @Test func withoutTheMarkedHeadEvenATokenBodyPassesUntouched() throws {
        try withFile { path, file in
            let held = HeldWrites()
            let channel = try connected(EmbeddedChannel(handlers: [held, FileRegionHandler(logger: Self.logger)]))
            let standIn = FileRegionBody.standIn(region(path, file, 0..<10))
            channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)), promise: nil)
            channel.write(HTTPServerResponsePart.body(.byteBuffer(standIn)), promise: nil)
            channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)
            let expected = "head 200, bytes \(standIn.readableBytes), end"
            #expect(describe(held) == expected)
            let open = channel.isActive
            #expect(open)
        }
    }

    @Test(arguments: ["vanished", "grown", "not a stand-in"])
    func aMarkedBodyThatCannotBeSentAsPromisedClosesTheConnection(case name: String) throws {
        try withFile { path, file in
            let held = HeldWrites()
            let channel = try connected(EmbeddedChannel(handlers: [held, FileRegionHandler(logger: Self.logger)]))
            let body: ByteBuffer
            switch name {
            case "vanished": body = FileRegionBody.standIn(region(path + ".gone", file, 0..<10))
            case "grown":
                // Replaced after its headers were computed: another inode, another size.
                try Data(repeating: 8, count: 2_000).write(to: URL(fileURLWithPath: path))
                body = FileRegionBody.standIn(region(path, file, 0..<10))
            default: body = ByteBuffer(string: "an ordinary body")
            }
            channel.write(markedHead(), promise: nil)
            var failure: (any Error)?
            let written = channel.eventLoop.makePromise(of: Void.self)
            written.futureResult.assumeIsolated().whenFailure { failure = $0 }
            channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(body)), promise: written)
            #expect(failure != nil)
            let open = channel.isActive
            #expect(!open)
            #expect(describe(held) == "head 206")
        }
    }
}
