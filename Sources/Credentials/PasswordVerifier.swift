import CArgon2

/// Checks a password against a stored hash in the formats real auth systems
/// write, and makes new hashes (argon2id).
///
/// Supported: bcrypt (`$2a$`, `$2b$`, `$2y$`), yescrypt (`$y$`), scrypt
/// (`$7$` and passlib's `$scrypt$`), sha512crypt (`$6$`), sha256crypt
/// (`$5$`), argon2id and argon2i PHC strings, PBKDF2-SHA256 as Django
/// (`pbkdf2_sha256$`) and passlib (`$pbkdf2-sha256$`) write it, and Django's
/// `pbkdf2_sha1$`. See `PasswordHashFormat`.
///
/// Passwords are hashed as their UTF-8 bytes with no Unicode normalisation,
/// because none of the tools that wrote the hashes normalise either.
///
/// Stored hashes asking for more than a fixed budget are refused as
/// malformed rather than computed: memory above 1 GiB (argon2 m, scrypt and
/// yescrypt 128·N·r), more than 10 million PBKDF2 iterations or sha-crypt
/// rounds, bcrypt cost above 16, argon2 t·m above 4 GiB or p above 64, and
/// scrypt N·r·p above 2^23. A password longer than 4096 bytes or containing
/// NUL is reported as wrong without hashing.
///
/// Thread-safe: every call uses its own scratch memory (libxcrypt's
/// `crypt_rn`, never `crypt`).
public struct PasswordVerifier: Sendable {
    /// The cost `hashNewPassword` uses.
    public var hashingParameters: PasswordHashingParameters

    /// The longest password any supported format is checked against; a longer one is
    /// wrong without hashing. Readers of a password can stop one byte past it.
    public static let maxPasswordBytes = Limits.maxPasswordBytes

    public init(hashingParameters: PasswordHashingParameters = .default) {
        self.hashingParameters = hashingParameters
    }

    /// Whether `password` is the one `storedHash` was made from.
    ///
    /// - Returns: `false` for a wrong password.
    /// - Throws: `CredentialsError.unknownFormat` when the hash is in no
    ///   supported format (including empty), `CredentialsError.malformedHash`
    ///   when it is truncated, corrupted or over the cost limits,
    ///   `CredentialsError.hashingFailed` when the hash could not be computed
    ///   (out of memory). Never returns `true` on any of those.
    public func verify(password: String, storedHash: String) throws -> Bool {
        let stored = try Self.parse(storedHash)
        let passwordBytes = Array(password.utf8)
        guard passwordBytes.count <= Limits.maxPasswordBytes else { return false }
        // NUL is never part of a real password (Django's form fields refuse
        // it) and would otherwise alias another one: crypt(3) stops at it, so
        // "secret\0x" would pass as "secret", and HMAC pads keys with zeros,
        // so PBKDF2 and scrypt take "secret\0" for "secret".
        guard !passwordBytes.contains(0) else { return false }
        return try stored.matches(passwordBytes)
    }

    /// A new argon2id PHC string for `password`
    /// (`$argon2id$v=19$m=65536,t=3,p=1$<salt>$<hash>` with the default
    /// parameters), with a fresh random salt.
    ///
    /// - Throws: `CredentialsError.unsupportedPassword` for a password
    ///   `verify` would never accept (over 4096 bytes, or containing NUL);
    ///   `CredentialsError.hashingFailed` if the parameters are out of range
    ///   or libargon2 fails.
    public func hashNewPassword(_ password: String) throws -> String {
        let parameters = hashingParameters
        try Self.checkHashingParameters(parameters)
        let passwordBytes = Array(password.utf8)
        // Refused rather than hashed: `verify` would never accept it.
        guard passwordBytes.count <= Limits.maxPasswordBytes else {
            throw CredentialsError.unsupportedPassword("the password is longer than \(Limits.maxPasswordBytes) bytes")
        }
        guard !passwordBytes.contains(0) else {
            throw CredentialsError.unsupportedPassword("the password contains a NUL character")
        }

        var generator = SystemRandomNumberGenerator()
        let salt = (0..<parameters.saltByteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) }

        let (t, m, p) = (UInt32(parameters.iterations), UInt32(parameters.memoryKiB), UInt32(parameters.parallelism))
        let encodedLength = argon2_encodedlen(t, m, p, UInt32(salt.count), UInt32(parameters.hashByteCount), Argon2_id)
        var encoded = [CChar](repeating: 0, count: encodedLength)
        let status = passwordBytes.withUnsafeBytes { passwordBuffer in
            salt.withUnsafeBytes { saltBuffer in
                argon2id_hash_encoded(
                    t, m, p,
                    passwordBuffer.baseAddress, passwordBuffer.count,
                    saltBuffer.baseAddress, saltBuffer.count,
                    parameters.hashByteCount, &encoded, encoded.count
                )
            }
        }
        guard status == ARGON2_OK.rawValue else {
            throw CredentialsError.hashingFailed("libargon2: \(String(cString: argon2_error_message(status)))")
        }
        return encoded.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    private static func parse(_ storedHash: String) throws -> any StoredHash {
        guard !storedHash.isEmpty else {
            throw CredentialsError.unknownFormat("the stored hash is empty")
        }
        guard let format = PasswordHashFormat.detect(storedHash) else {
            throw CredentialsError.unknownFormat("the stored hash does not start with a supported scheme prefix")
        }
        guard storedHash.utf8.count <= Limits.maxStoredHashBytes else {
            throw CredentialsError.malformed(format, "is longer than \(Limits.maxStoredHashBytes) bytes")
        }
        switch format {
        case .bcrypt, .yescrypt, .scrypt, .sha512Crypt, .sha256Crypt:
            return try CryptHash.parse(storedHash, as: format)
        case .argon2id, .argon2i:
            return try Argon2Hash.parse(storedHash, as: format)
        case .passlibScrypt:
            return try PasslibScryptHash.parse(storedHash)
        case .passlibPBKDF2SHA256:
            return try PBKDF2Hash.parsePasslib(storedHash)
        case .djangoPBKDF2SHA256, .djangoPBKDF2SHA1:
            return try PBKDF2Hash.parseDjango(storedHash, as: format)
        }
    }

    /// New hashes must be ones `verify` accepts, so they use the same bounds.
    private static func checkHashingParameters(_ parameters: PasswordHashingParameters) throws {
        do {
            try Argon2Hash.checkBounds(
                .init(memoryKiB: parameters.memoryKiB, passes: parameters.iterations, lanes: parameters.parallelism),
                format: .argon2id
            )
        } catch let error as CredentialsError {
            throw CredentialsError.hashingFailed("hashing parameters rejected: \(error.detail)")
        }
        guard (8...64).contains(parameters.saltByteCount) else {
            throw CredentialsError.hashingFailed("salt length must be 8–64 bytes")
        }
        guard (16...64).contains(parameters.hashByteCount) else {
            throw CredentialsError.hashingFailed("hash length must be 16–64 bytes")
        }
    }
}
