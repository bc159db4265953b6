/// Strict RFC 4648 base64 decoding for the variants password tools write.
///
/// Strict on purpose: a hash cut short usually leaves a length or trailing
/// bits no encoder produces, and refusing those turns "truncated column" into
/// a clear malformed-hash error instead of a silent mismatch.
enum Base64 {
    enum Padding {
        /// Django (`base64.b64encode`): always padded to a multiple of 4.
        case required
        /// PHC strings and passlib: padding stripped.
        case forbidden
    }

    /// - Parameter dotForPlus: accept `.` as well as `+` for value 62 (passlib's "ab64").
    static func decode<Symbols: Collection<UInt8>>(_ text: Symbols, padding: Padding, dotForPlus: Bool = false) -> [UInt8]? {
        var symbols = Array(text)
        if padding == .required {
            guard symbols.count % 4 == 0 else { return nil }
            var stripped = 0
            while stripped < 2, symbols.last == UInt8(ascii: "=") {
                symbols.removeLast()
                stripped += 1
            }
        }
        guard symbols.count % 4 != 1 else { return nil }

        var bytes: [UInt8] = []
        bytes.reserveCapacity(symbols.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bitCount = 0
        for symbol in symbols {
            guard let value = value(of: symbol, dotForPlus: dotForPlus) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bitCount)))
                accumulator &= (1 << UInt32(bitCount)) - 1
            }
        }
        // An encoder always leaves the unused low bits zero.
        guard accumulator == 0 else { return nil }
        return bytes
    }

    static func isBase64Symbol(_ symbol: UInt8) -> Bool {
        value(of: symbol, dotForPlus: false) != nil
    }

    private static func value(of symbol: UInt8, dotForPlus: Bool) -> UInt8? {
        switch symbol {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): symbol - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): symbol - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): symbol - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "."): dotForPlus ? 62 : nil
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
