/// The "./0-9A-Za-z" alphabet of crypt(3) hashes, and the parameter encodings
/// yescrypt and `$7$` scrypt use, so their costs can be bounded before
/// libxcrypt allocates anything.
enum Crypt64 {
    static func value(of symbol: UInt8) -> UInt32? {
        switch symbol {
        case UInt8(ascii: "."): 0
        case UInt8(ascii: "/"): 1
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(symbol - UInt8(ascii: "0")) + 2
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(symbol - UInt8(ascii: "A")) + 12
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(symbol - UInt8(ascii: "a")) + 38
        default: nil
        }
    }

    static func isSymbol(_ symbol: UInt8) -> Bool {
        value(of: symbol) != nil
    }

    /// yescrypt's variable-length integer (libxcrypt `decode64_uint32`): the
    /// first symbol says how many follow. Returns the value and the symbols
    /// consumed, or nil if the text ends early or the value overflows 32 bits.
    static func decodeVariableLength(_ symbols: ArraySlice<UInt8>, minimum: UInt32) -> (value: UInt32, consumed: Int)? {
        var index = symbols.startIndex
        guard index < symbols.endIndex, let first = value(of: symbols[index]) else { return nil }
        index += 1

        var start: UInt32 = 0
        var end: UInt32 = 47
        var extraSymbols = 0
        var shift: UInt32 = 0
        var result = UInt64(minimum)
        while first > end {
            result += UInt64(end + 1 - start) << UInt64(shift)
            start = end + 1
            end = start + (62 - end) / 2
            extraSymbols += 1
            shift += 6
        }
        result += UInt64(first - start) << UInt64(shift)
        while extraSymbols > 0 {
            guard index < symbols.endIndex, let next = value(of: symbols[index]) else { return nil }
            index += 1
            shift -= 6
            result += UInt64(next) << UInt64(shift)
            extraSymbols -= 1
        }
        guard result <= UInt64(UInt32.max) else { return nil }
        return (UInt32(result), index - symbols.startIndex)
    }

    /// `$7$`'s fixed-width little-endian 30-bit integer: five symbols.
    static func decodeFixed30(_ symbols: ArraySlice<UInt8>) -> UInt32? {
        guard symbols.count == 5 else { return nil }
        var result: UInt32 = 0
        for (offset, symbol) in symbols.enumerated() {
            guard let value = value(of: symbol) else { return nil }
            result |= value << UInt32(6 * offset)
        }
        return result
    }
}
