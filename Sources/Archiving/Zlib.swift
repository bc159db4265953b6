import CArchive
import Foundation

/// zlib's raw inflate of a small, untrusted buffer (a value some other program compressed
/// into a database column), bounded: nil for data that is not a zlib stream, or that
/// would inflate beyond `limit` bytes.
public enum Zlib {
    public static func inflate(_ input: [UInt8], limit: Int) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit_(&stream, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var input = input
        return input.withUnsafeMutableBufferPointer { source -> [UInt8]? in
            stream.next_in = source.baseAddress
            stream.avail_in = uInt(source.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { buffer -> (Int32, Int) in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = uInt(buffer.count)
                    let status = CArchive.inflate(&stream, Z_NO_FLUSH)
                    return (status, buffer.count - Int(stream.avail_out))
                }
                output += chunk[..<produced]
                guard output.count <= limit else { return nil }
                switch status {
                case Z_STREAM_END: return output
                case Z_OK where produced > 0 || stream.avail_in > 0: continue
                default: return nil
                }
            }
        }
    }
}
