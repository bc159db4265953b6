import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import LifecycleServer

/// Downloads go out with sendfile: the body Hummingbird writes is a stand-in that the
/// pipeline turns into a FileRegion, and the response's end waits for the file.
struct FileRegionTests {
    /// Keeps every write it is given, with its promise, instead of passing it on: the test
    /// decides when a write has gone out.
    final class HeldWrites: ChannelOutboundHandler {
        typealias OutboundIn = HTTPServerResponsePart
        var parts: [(part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?)] = []

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            parts.append((unwrapOutboundIn(data), promise))
        }
    }

    private func withFile<T>(_ body: (String) throws -> T) throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("region-\(UUID().uuidString)").path
        try Data(repeating: 7, count: 1_000).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try body(path)
    }

    @Test func aStandInBecomesAFileRegionOfItsRangeAndTheEndWaitsUntilTheFileHasGoneOut() throws {
        try withFile { path in
            let held = HeldWrites()
            let channel = EmbeddedChannel(handlers: [held, FileRegionHandler()])
            let head = HTTPResponseHead(version: .http1_1, status: .partialContent)
            channel.write(HTTPServerResponsePart.head(head), promise: nil)
            let bodyWritten = channel.eventLoop.makePromise(of: Void.self)
            channel.write(HTTPServerResponsePart.body(.byteBuffer(FileRegionBody.standIn(path: path, range: 100..<350))), promise: bodyWritten)
            channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)

            #expect(held.parts.count == 2, "the end must wait for the file")
            guard held.parts.count == 2, case .body(.fileRegion(let region)) = held.parts[1].part else {
                Issue.record("no file region: \(held.parts.map(\.part))")
                return
            }
            #expect(region.readerIndex == 100 && region.endIndex == 350)
            #expect(region.fileHandle.isOpen)

            held.parts[1].promise?.succeed()
            #expect(held.parts.count == 3)
            if case .end = held.parts.last?.part {} else { Issue.record("the end did not follow the file: \(held.parts.map(\.part))") }
            #expect(!region.fileHandle.isOpen, "the file is closed once sent")
            var succeeded = false
            bodyWritten.futureResult.assumeIsolated().whenSuccess { succeeded = true }
            #expect(succeeded)
            _ = try channel.finish(acceptAlreadyClosed: true)
        }
    }

    @Test func anyOtherBodyPassesUntouchedAndAStandInForAVanishedFileClosesTheConnection() throws {
        let held = HeldWrites()
        let channel = EmbeddedChannel(handlers: [held, FileRegionHandler()])
        // Starts like a stand-in's layout but not with this process's token.
        var lookalike = ByteBuffer(bytes: [UInt8](repeating: 0, count: 32))
        lookalike.writeInteger(Int64(0))
        lookalike.writeInteger(Int64(10))
        lookalike.writeString("/etc/passwd")
        channel.write(HTTPServerResponsePart.body(.byteBuffer(lookalike)), promise: nil)
        channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)
        #expect(held.parts.count == 2)
        if case .body(.byteBuffer(let passed)) = held.parts.first?.part {
            #expect(passed == lookalike)
        } else {
            Issue.record("the body was changed: \(held.parts.map(\.part))")
        }

        let failed = channel.eventLoop.makePromise(of: Void.self)
        var failure: (any Error)?
        failed.futureResult.assumeIsolated().whenFailure { failure = $0 }
        channel.write(HTTPServerResponsePart.body(.byteBuffer(FileRegionBody.standIn(path: "/nonexistent/\(UUID().uuidString)", range: 0..<10))), promise: failed)
        #expect(failure != nil)
        #expect(!channel.isActive)
        #expect(held.parts.count == 2)
    }
}
