import CArgon2

/// `$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>` (and `$argon2i$`), the PHC
/// string every maintained argon2 binding writes, verified by libargon2.
///
/// libargon2 parses the string itself and compares in constant time; it is
/// parsed here as well only to bound m, t and p before libargon2 allocates
/// m KiB and starts p threads.
struct Argon2Hash: StoredHash {
    let format: PasswordHashFormat
    private let text: String

    static func parse(_ hash: String, as format: PasswordHashFormat) throws -> Argon2Hash {
        var fields = hash.utf8.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false).dropFirst(2)
        // The version field is optional: hashes from before v1.3 (0x13) omit it.
        if let version = fields.first, version.starts(with: "v=".utf8) {
            guard let number = decimal(version.dropFirst(2), maxDigits: 3), number == 16 || number == 19 else {
                throw CredentialsError.malformed(format, "version is not 16 or 19")
            }
            fields.removeFirst()
        }
        guard fields.count == 3 else {
            throw CredentialsError.malformed(format, "expected parameters, salt and hash separated by '$'")
        }
        let parameters = try parseParameters(fields[fields.startIndex], format: format)
        try checkBounds(parameters, format: format)

        // libargon2's ARGON2_MIN_SALT_LENGTH and ARGON2_MIN_OUTLEN (UINT32_C macros Swift does not import).
        let salt = Base64.decode(fields[fields.startIndex + 1], padding: .forbidden)
        guard let salt, salt.count >= 8 else {
            throw CredentialsError.malformed(format, "salt is not unpadded base64 of at least 8 bytes")
        }
        let digest = Base64.decode(fields[fields.startIndex + 2], padding: .forbidden)
        guard let digest, digest.count >= 4 else {
            throw CredentialsError.malformed(format, "hash is not unpadded base64 of at least 4 bytes (truncated?)")
        }
        return Argon2Hash(format: format, text: hash)
    }

    func matches(_ password: [UInt8]) throws -> Bool {
        let status = password.withUnsafeBytes { passwordBytes in
            text.withCString { encoded in
                switch format {
                case .argon2id: argon2id_verify(encoded, passwordBytes.baseAddress, passwordBytes.count)
                default: argon2i_verify(encoded, passwordBytes.baseAddress, passwordBytes.count)
                }
            }
        }
        switch Argon2_ErrorCodes(status) {
        case ARGON2_OK:
            return true
        case ARGON2_VERIFY_MISMATCH:
            return false
        case ARGON2_MEMORY_ALLOCATION_ERROR, ARGON2_THREAD_FAIL:
            throw CredentialsError.hashingFailed("libargon2: \(String(cString: argon2_error_message(status)))")
        default:
            throw CredentialsError.malformed(format, "libargon2: \(String(cString: argon2_error_message(status)))")
        }
    }

    struct Parameters {
        var memoryKiB: Int
        var passes: Int
        var lanes: Int
    }

    /// Exactly `m=…,t=…,p=…`, in that order, as libargon2 requires.
    private static func parseParameters(_ field: Substring.UTF8View, format: PasswordHashFormat) throws -> Parameters {
        let pairs = field.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        var values: [Int] = []
        for (pair, key) in zip(pairs, ["m=", "t=", "p="]) {
            guard pair.starts(with: key.utf8), let value = decimal(pair.dropFirst(2), maxDigits: 10), value <= UInt32.max else {
                throw CredentialsError.malformed(format, "parameters are not m=<memory>,t=<passes>,p=<lanes>")
            }
            values.append(value)
        }
        guard pairs.count == 3, values.count == 3 else {
            throw CredentialsError.malformed(format, "parameters are not m=<memory>,t=<passes>,p=<lanes>")
        }
        return Parameters(memoryKiB: values[0], passes: values[1], lanes: values[2])
    }

    static func checkBounds(_ parameters: Parameters, format: PasswordHashFormat) throws {
        let (m, t, p) = (parameters.memoryKiB, parameters.passes, parameters.lanes)
        guard t >= 1, p >= 1, m >= 8 * p else {
            throw CredentialsError.malformed(format, "m=\(m), t=\(t), p=\(p) is below argon2's minimums (t ≥ 1, p ≥ 1, m ≥ 8·p)")
        }
        guard m <= Limits.maxMemoryBytes / 1024 else {
            throw CredentialsError.malformed(format, "memory m=\(m) KiB is above the 1 GiB limit")
        }
        let (work, overflow) = t.multipliedReportingOverflow(by: m)
        guard !overflow, work <= Limits.maxArgon2PassesTimesMemoryKiB else {
            throw CredentialsError.malformed(format, "t=\(t) passes over m=\(m) KiB is above the work limit")
        }
        guard p <= Limits.maxArgon2Parallelism else {
            throw CredentialsError.malformed(format, "parallelism p=\(p) is above the limit of \(Limits.maxArgon2Parallelism)")
        }
    }
}
