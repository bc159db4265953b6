import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file-system step of `PhotoNormalizer.normalizeFile` failed.
public struct PhotoFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public let operation: String
    public let path: String
    public let errorNumber: Int32

    public var description: String {
        "\(operation) \(path): \(String(cString: strerror(errorNumber)))"
    }
}

extension PhotoNormalizer {
    /// Normalises the photo at `inputPath` and writes the JPEG to
    /// `outputPath`, replacing it atomically.
    ///
    /// The output (a person's photo: mode 0600) is written to `outputPath.tmp-<random>`, flushed to disk,
    /// then renamed: a crash or refusal never leaves a partial or stale file
    /// at `outputPath`, and running it again after a crash simply redoes the
    /// work. Throws `PhotoRejection` for the photo, `ImagingUnavailable` when
    /// libvips (or, for a HEIC, its HEIF module) cannot open, `PhotoFileError`
    /// or a Foundation error for file-system trouble.
    @discardableResult
    public func normalizeFile(at inputPath: String, to outputPath: String) throws -> NormalizedPhoto {
        let input = try readInput(at: inputPath)
        try Self.requireLibrary(for: input)
        let photo = try normalize(input)
        try writeReplacing(photo.jpegData, at: outputPath)
        return photo
    }

    /// Refuses an oversized regular file by its size, without reading it,
    /// and never reads more than one byte past the limit from anything else
    /// (a pipe, a file still growing). A regular file is read in one buffer
    /// sized from its length: Foundation's `FileHandle.read(upToCount:)` reads
    /// 4 KB per system call and grows its buffer as it goes, which for a 10 MB
    /// PNG costs more than a tenth of the whole normalisation's margin.
    private func readInput(at path: String) throws -> Data {
        let limit = policy.maxInputBytes
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let isRegular = (status.st_mode & S_IFMT) == S_IFREG
        if isRegular, Int(status.st_size) > limit {
            throw PhotoRejection.tooLarge(byteCount: Int(status.st_size), limit: limit)
        }
        // One byte past the limit tells "at the limit" from "over it".
        let ceiling = limit + 1
        var data = Data(count: isRegular ? min(Int(status.st_size) + 1, ceiling) : min(1 << 20, ceiling))
        var filled = 0
        while filled < ceiling {
            if filled == data.count { data.count = min(data.count * 2, ceiling) }
            let count = data.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            if count == 0 { break }
            filled += count
        }
        data.count = filled
        return data
    }

    private func writeReplacing(_ data: Data, at path: String) throws {
        let temporary = path + ".tmp-" + String(UInt64.random(in: .min ... .max), radix: 16)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw PhotoFileError(operation: "creating", path: temporary, errorNumber: errno) }
        var committed = false
        defer {
            if !committed { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            try data.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        throw PhotoFileError(operation: "writing", path: temporary, errorNumber: errno)
                    }
                    offset += written
                }
            }
            guard fsync(fd) == 0 else {
                throw PhotoFileError(operation: "flushing", path: temporary, errorNumber: errno)
            }
        }
        guard rename(temporary, path) == 0 else {
            throw PhotoFileError(operation: "renaming onto", path: path, errorNumber: errno)
        }
        committed = true
    }
}
