import Crypto
import Foundation
import Lifecycle
import NIOCore

/// The body of a photo upload, written to a private file as it arrives: never held in
/// memory, never read past the limit, its type decided by its first bytes (JPEG, PNG or
/// HEIC by content, whatever `Content-Type` says) before the rest is read.
final class PhotoUploadSpool {
    enum Refusal: Error {
        case tooLarge
        case unsupportedType(String)
        case empty
    }

    /// Enough of the file's start to tell its type (an ISO media `ftyp` box names its brand by byte 12).
    private static let sniffLength = 32

    let path: String
    private let descriptor: Int32
    /// Set once the blob store has taken the file: its name is then no longer ours to unlink.
    var taken = false

    init() throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/lifecycle-upload-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw LifecycleError.fileSystem(errno, "creating a file for an upload in", FileManager.default.temporaryDirectory.path)
        }
        self.descriptor = descriptor
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    deinit {
        close(descriptor)
        // Whatever the blob store did not take (a refusal, a failure) goes.
        if !taken { unlink(path) }
    }

    /// Reads the body chunk by chunk into the file. Throws `Refusal` at the first byte past
    /// `limit`, or as soon as the first bytes show a type the product does not take.
    func fill<Body: AsyncSequence>(from body: Body, limit: Int) async throws -> StagedPhotoUpload where Body.Element == ByteBuffer {
        var hasher = SHA256()
        var header: [UInt8] = []
        var contentType: String?
        var size = 0
        for try await buffer in body {
            size += buffer.readableBytes
            guard size <= limit else { throw Refusal.tooLarge }
            if contentType == nil {
                header.append(contentsOf: buffer.readableBytesView.prefix(Self.sniffLength - header.count))
                if header.count >= Self.sniffLength { contentType = try Self.accepted(header) }
            }
            try buffer.withUnsafeReadableBytes { bytes in
                hasher.update(bufferPointer: bytes)
                try write(bytes)
            }
        }
        guard size > 0 else { throw Refusal.empty }
        let type = try contentType ?? Self.accepted(header)
        guard fsync(descriptor) == 0 else { throw LifecycleError.fileSystem(errno, "writing", path) }
        return StagedPhotoUpload(path: path, size: Int64(size), sha256: FileDigest.hex(hasher.finalize()), contentType: type)
    }

    private static func accepted(_ header: [UInt8]) throws -> String {
        let type = ContentSniffer.contentType(of: header)
        guard StagedPhotoUpload.acceptedContentTypes.contains(type) else { throw Refusal.unsupportedType(type) }
        return type
    }

    private func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let written = Foundation.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw LifecycleError.fileSystem(errno, "writing", path)
            }
            offset += written
        }
    }
}
