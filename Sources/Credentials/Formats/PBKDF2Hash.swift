import Crypto
import CryptoExtras

/// PBKDF2-HMAC as Django and passlib store it, computed by swift-crypto.
///
/// - Django: `pbkdf2_sha256$<iterations>$<salt>$<base64 hash>`; the salt is
///   used as its UTF-8 text, not decoded; the hash is padded base64.
/// - passlib: `$pbkdf2-sha256$<rounds>$<ab64 salt>$<ab64 hash>`; "ab64" is
///   base64 with `.` for `+` and no padding, and the salt is decoded.
struct PBKDF2Hash: StoredHash {
    let format: PasswordHashFormat
    private let iterations: Int
    private let salt: [UInt8]
    private let expected: [UInt8]
    private let hashFunction: KDF.Insecure.PBKDF2.HashFunction

    static func parseDjango(_ hash: String, as format: PasswordHashFormat) throws -> PBKDF2Hash {
        let (hashFunction, digestSize) = format == .djangoPBKDF2SHA1 ? (KDF.Insecure.PBKDF2.HashFunction.insecureSHA1, 20) : (.sha256, 32)
        let fields = hash.utf8.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count == 4 else {
            throw CredentialsError.malformed(format, "expected algorithm, iterations, salt and hash separated by '$'")
        }
        let iterations = try checkIterations(fields[1], format: format)
        guard !fields[2].isEmpty else {
            throw CredentialsError.malformed(format, "salt is empty")
        }
        // Django pads: a complete hash is never cut at a multiple of 4.
        guard let expected = Base64.decode(fields[3], padding: .required), expected.count == digestSize else {
            throw CredentialsError.malformed(format, "hash is not padded base64 of \(digestSize) bytes (truncated?)")
        }
        return PBKDF2Hash(format: format, iterations: iterations, salt: Array(fields[2]), expected: expected, hashFunction: hashFunction)
    }

    static func parsePasslib(_ hash: String) throws -> PBKDF2Hash {
        let format = PasswordHashFormat.passlibPBKDF2SHA256
        let fields = hash.utf8.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count == 5 else {
            throw CredentialsError.malformed(format, "expected rounds, salt and hash separated by '$'")
        }
        let iterations = try checkIterations(fields[2], format: format)
        guard let salt = Base64.decode(fields[3], padding: .forbidden, dotForPlus: true), !salt.isEmpty else {
            throw CredentialsError.malformed(format, "salt is not passlib base64")
        }
        // Exactly the digest size: PBKDF2 output cut short is a prefix of the
        // full output, so a truncated hash must not be compared as shorter.
        guard let expected = Base64.decode(fields[4], padding: .forbidden, dotForPlus: true), expected.count == 32 else {
            throw CredentialsError.malformed(format, "hash is not passlib base64 of 32 bytes (truncated?)")
        }
        return PBKDF2Hash(format: format, iterations: iterations, salt: salt, expected: expected, hashFunction: .sha256)
    }

    func matches(_ password: [UInt8]) throws -> Bool {
        let derived: SymmetricKey
        do {
            // The "unchecked" variant because stored hashes legitimately use
            // fewer rounds than swift-crypto's 210,000 floor for new keys.
            derived = try KDF.Insecure.PBKDF2.deriveKey(
                from: password, salt: salt, using: hashFunction,
                outputByteCount: expected.count, unsafeUncheckedRounds: iterations
            )
        } catch {
            throw CredentialsError.hashingFailed("PBKDF2 failed for a \(format.name) hash")
        }
        return derived == SymmetricKey(data: expected)
    }

    private static func checkIterations(_ field: Substring.UTF8View, format: PasswordHashFormat) throws -> Int {
        guard let iterations = decimal(field, maxDigits: 10) else {
            throw CredentialsError.malformed(format, "iteration count is not a decimal number")
        }
        guard iterations >= 1 else {
            throw CredentialsError.malformed(format, "iteration count is zero")
        }
        guard iterations <= Limits.maxIterations else {
            throw CredentialsError.malformed(format, "\(iterations) iterations is above the limit of \(Limits.maxIterations)")
        }
        return iterations
    }
}
