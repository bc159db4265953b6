import Foundation

/// Reads a file line by line in bounded chunks, so a large import never sits in memory
/// whole and a line is never longer than the caller allows.
///
/// Each byte is scanned for the newline once: a search resumes where the last one
/// stopped, so a line of n bytes costs O(n) however many chunks it spans (restarting
/// at the line's start made a 16 MB line take a minute). A line longer than
/// `maxLineBytes` is skipped to its end without being kept, and reported by length.
struct LineReader {
    enum Line: Equatable {
        case text(String)
        /// The line had more than `maxLineBytes` bytes (this many, without the newline).
        case tooLong(byteCount: Int)
        /// The line is not valid UTF-8; `offset` is the first bad byte, counted from 0.
        case notUTF8(offset: Int)
    }

    static let chunkSize = 1 << 20

    private let handle: FileHandle
    private let maxLineBytes: Int
    private var buffer: [UInt8] = []
    /// Where the current line begins in `buffer`.
    private var lineStart = 0
    /// Bytes after `lineStart` already known to hold no newline.
    private var scanned = 0
    /// Bytes of an over-long line dropped so far; nil while the line is within bounds.
    private var skipped: Int?
    private var finished = false

    init(handle: FileHandle, maxLineBytes: Int = .max) {
        self.handle = handle
        self.maxLineBytes = maxLineBytes
    }

    mutating func nextLine() throws -> Line? {
        while true {
            let searchFrom = lineStart + scanned
            let newline: Int? = buffer.withUnsafeBytes { bytes in
                guard searchFrom < bytes.count, let base = bytes.baseAddress,
                      let found = memchr(base + searchFrom, 0x0A, bytes.count - searchFrom)
                else { return nil }
                return UnsafeRawPointer(found) - base
            }
            if let newline {
                defer {
                    lineStart = newline + 1
                    scanned = 0
                    skipped = nil
                }
                return line(upTo: newline)
            }
            scanned = buffer.count - lineStart
            if skipped != nil || scanned > maxLineBytes {
                skipped = (skipped ?? 0) + scanned
                buffer.removeAll(keepingCapacity: true)
                lineStart = 0
                scanned = 0
            }
            if finished {
                guard lineStart < buffer.count || skipped != nil else { return nil }
                defer {
                    buffer.removeAll()
                    lineStart = 0
                    scanned = 0
                    skipped = nil
                }
                return line(upTo: buffer.count)
            }
            // Keep the unread part at the front, so the buffer never grows past one line plus a chunk.
            if lineStart > 0 {
                buffer.removeFirst(lineStart)
                lineStart = 0
            }
            if let chunk = try handle.read(upToCount: Self.chunkSize), !chunk.isEmpty {
                buffer.append(contentsOf: chunk)
            } else {
                finished = true
            }
        }
    }

    private func line(upTo end: Int) -> Line {
        if let skipped { return .tooLong(byteCount: skipped + (end - lineStart)) }
        var bytes = buffer[lineStart..<end]
        guard bytes.count <= maxLineBytes else { return .tooLong(byteCount: bytes.count) }
        if bytes.last == 0x0D { bytes = bytes.dropLast() }
        if let text = String(validating: bytes, as: UTF8.self) { return .text(text) }
        // Rare and only for the message: find the first byte the decoder stops at.
        var offset = 0
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        loop: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput, .error: break loop
            }
        }
        return .notUTF8(offset: offset)
    }

    /// The next line of a file this program wrote itself, where an over-long or
    /// undecodable line means the file is damaged.
    mutating func next() throws -> String? {
        switch try nextLine() {
        case nil: return nil
        case .text(let text): return text
        case .tooLong(let count): throw LifecycleError(.internalError, "a line of \(count) bytes is longer than allowed")
        case .notUTF8(let offset): throw LifecycleError(.internalError, "a line is not valid UTF-8 (byte \(offset))")
        }
    }
}
