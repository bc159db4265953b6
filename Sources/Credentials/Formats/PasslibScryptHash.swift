import Crypto
import CryptoExtras

/// `$scrypt$ln=16,r=8,p=1$<salt>$<hash>` as passlib writes it, computed by
/// swift-crypto. passlib writes the salt and hash in unpadded base64 (its
/// "ab64" variant with `.` for `+` is accepted too); the salt is decoded.
struct PasslibScryptHash: StoredHash {
    private let nLog2: Int
    private let r: Int
    private let p: Int
    private let salt: [UInt8]
    private let expected: [UInt8]

    static func parse(_ hash: String) throws -> PasslibScryptHash {
        let format = PasswordHashFormat.passlibScrypt
        let fields = hash.utf8.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count == 5 else {
            throw CredentialsError.malformed(format, "expected parameters, salt and hash separated by '$'")
        }
        let pairs = fields[2].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        var values: [Int] = []
        for (pair, key) in zip(pairs, ["ln=", "r=", "p="]) {
            guard pair.starts(with: key.utf8), let value = decimal(pair.dropFirst(key.utf8.count), maxDigits: 10), value <= UInt32.max else {
                throw CredentialsError.malformed(format, "parameters are not ln=<log2 N>,r=<block size>,p=<parallelism>")
            }
            values.append(value)
        }
        guard pairs.count == 3, values.count == 3 else {
            throw CredentialsError.malformed(format, "parameters are not ln=<log2 N>,r=<block size>,p=<parallelism>")
        }
        try checkScryptCost(format, nLog2: UInt32(values[0]), r: UInt32(values[1]), p: UInt32(values[2]))

        guard let salt = Base64.decode(fields[3], padding: .forbidden, dotForPlus: true), !salt.isEmpty else {
            throw CredentialsError.malformed(format, "salt is not unpadded base64")
        }
        // Exactly passlib's 32 bytes: scrypt output cut short is a prefix of
        // the full output, so a truncated hash must not be compared as shorter.
        guard let expected = Base64.decode(fields[4], padding: .forbidden, dotForPlus: true), expected.count == 32 else {
            throw CredentialsError.malformed(format, "hash is not unpadded base64 of 32 bytes (truncated?)")
        }
        return PasslibScryptHash(nLog2: values[0], r: values[1], p: values[2], salt: salt, expected: expected)
    }

    func matches(_ password: [UInt8]) throws -> Bool {
        let derived: SymmetricKey
        do {
            derived = try KDF.Scrypt.deriveKey(
                from: password, salt: salt, outputByteCount: expected.count,
                rounds: 1 << nLog2, blockSize: r, parallelism: p
            )
        } catch {
            // BoringSSL refuses some combinations the bounds allow (e.g. a
            // large r with tiny N exceeds the memory budget swift-crypto sets).
            throw CredentialsError.malformed(.passlibScrypt, "scrypt refused N=2^\(nLog2), r=\(r), p=\(p)")
        }
        return derived == SymmetricKey(data: expected)
    }
}
