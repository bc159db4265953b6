import CCrypt

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// bcrypt, yescrypt, `$7$` scrypt, sha512crypt and sha256crypt, verified by
/// libxcrypt: recomputing with the stored hash as the setting reproduces the
/// stored hash exactly when the password is right.
///
/// The structure is checked here first, even though libxcrypt would parse it
/// again, for two reasons: a hash cut short is still a valid *setting* to
/// libxcrypt (it would quietly answer "wrong password" instead of reporting a
/// damaged column), and the cost fields have to be bounded before libxcrypt
/// allocates memory for them.
struct CryptHash: StoredHash {
    let format: PasswordHashFormat
    private let text: String

    static func parse(_ hash: String, as format: PasswordHashFormat) throws -> CryptHash {
        let bytes = Array(hash.utf8)
        guard bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw CredentialsError.malformed(format, "contains a character that is not printable ASCII")
        }
        switch format {
        case .bcrypt: try checkBcrypt(bytes)
        case .sha512Crypt: try checkSHACrypt(bytes, format: format, checksumLength: 86)
        case .sha256Crypt: try checkSHACrypt(bytes, format: format, checksumLength: 43)
        case .yescrypt: try checkYescrypt(bytes)
        case .scrypt: try checkScrypt7(bytes)
        default: preconditionFailure("\(format) is not a crypt(3) format")
        }
        return CryptHash(format: format, text: hash)
    }

    func matches(_ password: [UInt8]) throws -> Bool {
        var phrase = password
        if format == .bcrypt {
            // Every bcrypt implementation reads only the first 72 bytes;
            // cutting here also keeps long passwords under libxcrypt's limit.
            phrase = Array(phrase.prefix(Limits.bcryptPasswordBytes))
        } else if phrase.count > Limits.maxCryptPasswordBytes {
            // libxcrypt refuses passphrases this long. The stored hash is not
            // at fault, so this is reported as a wrong password, not an error.
            return false
        }
        let computed = try crypt(phrase)
        return constantTimeEquals(computed, Array(text.utf8))
    }

    private func crypt(_ phrase: [UInt8]) throws -> [UInt8] {
        // crypt_rn with caller-owned scratch space is reentrant, unlike crypt().
        // 32 KiB: on the heap rather than on a cooperative-pool thread's stack.
        let size = MemoryLayout<crypt_data>.size
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<crypt_data>.alignment)
        scratch.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        defer {
            // The scratch area holds password-derived intermediate state.
            explicit_bzero(scratch, size)
            scratch.deallocate()
        }

        let cPhrase = phrase.map { CChar(bitPattern: $0) } + [0]
        errno = 0
        let output: [UInt8]? = cPhrase.withUnsafeBufferPointer { phrasePointer in
            text.withCString { setting in
                guard let result = crypt_rn(phrasePointer.baseAddress, setting, scratch, Int32(size)) else {
                    return nil
                }
                return Array(UnsafeRawBufferPointer(start: result, count: strlen(result)))
            }
        }
        guard let output else {
            if errno == ENOMEM {
                throw CredentialsError.hashingFailed("libxcrypt ran out of memory computing a \(format.name) hash")
            }
            throw CredentialsError.malformed(format, "libxcrypt rejected its settings")
        }
        // Failure tokens ("*0", "*1") start with a character no hash starts with.
        guard output.first != UInt8(ascii: "*") else {
            throw CredentialsError.malformed(format, "libxcrypt rejected its settings")
        }
        return output
    }

    // MARK: - Structure and bounds

    /// `$2b$` + two-digit cost + `$` + 22 salt and 31 checksum symbols.
    private static func checkBcrypt(_ bytes: [UInt8]) throws {
        guard bytes.count == 60 else {
            throw CredentialsError.malformed(.bcrypt, "has \(bytes.count) characters, expected 60 (truncated?)")
        }
        guard bytes[6] == UInt8(ascii: "$"),
              let tens = decimalDigit(bytes[4]), let ones = decimalDigit(bytes[5])
        else {
            throw CredentialsError.malformed(.bcrypt, "cost is not two digits followed by '$'")
        }
        let cost = tens * 10 + ones
        guard (4...31).contains(cost) else {
            throw CredentialsError.malformed(.bcrypt, "cost \(cost) is outside bcrypt's 4–31")
        }
        guard cost <= Limits.maxBcryptCost else {
            throw CredentialsError.malformed(.bcrypt, "cost \(cost) is above the limit of \(Limits.maxBcryptCost)")
        }
        guard bytes[7...].allSatisfy(Crypt64.isSymbol) else {
            throw CredentialsError.malformed(.bcrypt, "salt or checksum contains a character outside the crypt alphabet")
        }
    }

    /// `$6$[rounds=N$]salt$checksum`, salt at most 16 characters.
    private static func checkSHACrypt(_ bytes: [UInt8], format: PasswordHashFormat, checksumLength: Int) throws {
        var fields = bytes[3...].split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        let roundsPrefix = Array("rounds=".utf8)
        if let first = fields.first, first.starts(with: roundsPrefix) {
            let digits = first.dropFirst(roundsPrefix.count)
            guard let rounds = decimal(digits, maxDigits: 9) else {
                throw CredentialsError.malformed(format, "rounds is not a decimal number")
            }
            guard (1000...999_999_999).contains(rounds) else {
                throw CredentialsError.malformed(format, "rounds \(rounds) is outside sha-crypt's 1000–999999999")
            }
            guard rounds <= Limits.maxIterations else {
                throw CredentialsError.malformed(format, "rounds \(rounds) is above the limit of \(Limits.maxIterations)")
            }
            fields.removeFirst()
        }
        guard fields.count == 2 else {
            throw CredentialsError.malformed(format, "expected salt and checksum separated by '$'")
        }
        guard fields[0].count <= 16 else {
            throw CredentialsError.malformed(format, "salt is longer than 16 characters")
        }
        try checkChecksum(fields[1], format: format, length: checksumLength)
    }

    /// `$y$` + variable-length parameters + `$` + salt + `$` + 43-symbol checksum.
    private static func checkYescrypt(_ bytes: [UInt8]) throws {
        let fields = bytes[3...].split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count == 3 else {
            throw CredentialsError.malformed(.yescrypt, "expected parameters, salt and checksum separated by '$'")
        }
        var params = fields[0]
        func next(minimum: UInt32, _ name: String) throws -> UInt32 {
            guard let (value, consumed) = Crypt64.decodeVariableLength(params, minimum: minimum) else {
                throw CredentialsError.malformed(.yescrypt, "parameter \(name) is missing or not encoded correctly")
            }
            params = params.dropFirst(consumed)
            return value
        }
        _ = try next(minimum: 0, "flavor")
        let nLog2 = try next(minimum: 1, "N")
        let r = try next(minimum: 1, "r")
        var p: UInt32 = 1
        var t: UInt32 = 0
        if !params.isEmpty {
            let have = try next(minimum: 1, "flags")
            guard have <= 15 else {
                throw CredentialsError.malformed(.yescrypt, "unknown optional parameters")
            }
            if have & 1 != 0 { p = try next(minimum: 2, "p") }
            if have & 2 != 0 { t = try next(minimum: 1, "t") }
            if have & 4 != 0 { _ = try next(minimum: 1, "g") }
            if have & 8 != 0 { _ = try next(minimum: 1, "NROM") }
        }
        guard params.isEmpty else {
            throw CredentialsError.malformed(.yescrypt, "unexpected characters after the parameters")
        }
        try checkScryptCost(.yescrypt, nLog2: nLog2, r: r, p: p, timeFactor: UInt64(t) + 1)
        guard fields[1].allSatisfy(Crypt64.isSymbol) else {
            throw CredentialsError.malformed(.yescrypt, "salt contains a character outside the crypt alphabet")
        }
        try checkChecksum(fields[2], format: .yescrypt, length: 43)
    }

    /// `$7$` + N (1 symbol) + r (5) + p (5) + salt + `$` + 43-symbol checksum.
    private static func checkScrypt7(_ bytes: [UInt8]) throws {
        guard bytes.count >= 14,
              let nLog2 = Crypt64.value(of: bytes[3]),
              let r = Crypt64.decodeFixed30(bytes[4..<9]),
              let p = Crypt64.decodeFixed30(bytes[9..<14])
        else {
            throw CredentialsError.malformed(.scrypt, "parameters are missing or not encoded correctly")
        }
        try checkScryptCost(.scrypt, nLog2: nLog2, r: r, p: p)
        let fields = bytes[14...].split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count == 2 else {
            throw CredentialsError.malformed(.scrypt, "expected salt and checksum separated by '$'")
        }
        try checkChecksum(fields[1], format: .scrypt, length: 43)
    }

    private static func checkChecksum(_ checksum: ArraySlice<UInt8>, format: PasswordHashFormat, length: Int) throws {
        guard checksum.count == length else {
            throw CredentialsError.malformed(format, "checksum has \(checksum.count) characters, expected \(length) (truncated?)")
        }
        guard checksum.allSatisfy(Crypt64.isSymbol) else {
            throw CredentialsError.malformed(format, "checksum contains a character outside the crypt alphabet")
        }
    }
}

/// Bounds scrypt-family costs: memory 128·N·r bytes, work N·r·p blocks
/// (times yescrypt's time factor).
func checkScryptCost(_ format: PasswordHashFormat, nLog2: UInt32, r: UInt32, p: UInt32, timeFactor: UInt64 = 1) throws {
    guard nLog2 >= 1, nLog2 <= 63, r >= 1, p >= 1 else {
        throw CredentialsError.malformed(format, "N, r and p must be at least 2, 1 and 1")
    }
    let memoryLimitLog2 = UInt32(Limits.maxMemoryBytes.trailingZeroBitCount)
    let n = nLog2 < memoryLimitLog2 ? UInt64(1) << UInt64(nLog2) : UInt64(Limits.maxMemoryBytes)
    let (memory, memoryOverflow) = (128 * n).multipliedReportingOverflow(by: UInt64(r))
    guard nLog2 < memoryLimitLog2, !memoryOverflow, memory <= UInt64(Limits.maxMemoryBytes) else {
        throw CredentialsError.malformed(format, "N=2^\(nLog2), r=\(r) needs more than the 1 GiB memory limit")
    }
    let work = n * UInt64(r) * UInt64(p)  // n·r ≤ 2^23 here, p < 2^32: no overflow
    let (scaled, workOverflow) = work.multipliedReportingOverflow(by: timeFactor)
    guard !workOverflow, scaled <= UInt64(Limits.maxScryptBlockWork) else {
        throw CredentialsError.malformed(format, "N=2^\(nLog2), r=\(r), p=\(p) is above the work limit")
    }
}

func decimalDigit(_ byte: UInt8) -> Int? {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? Int(byte - UInt8(ascii: "0")) : nil
}

/// A plain decimal number (digits only, no sign), at most `maxDigits` long.
func decimal<C: Collection<UInt8>>(_ digits: C, maxDigits: Int) -> Int? {
    guard !digits.isEmpty, digits.count <= maxDigits else { return nil }
    var value = 0
    for byte in digits {
        guard let digit = decimalDigit(byte) else { return nil }
        value = value * 10 + digit
    }
    return value
}
