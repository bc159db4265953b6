/// The scheme a stored password hash uses, as detected from its prefix.
///
/// Safe to write to audit logs: `name` identifies the scheme, never the hash.
public enum PasswordHashFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// `$2a$`, `$2b$`, `$2y$` (python-bcrypt, PHP, htpasswd, Ruby, libxcrypt).
    case bcrypt
    /// `$y$`, the default of Debian's /etc/shadow since Debian 11.
    case yescrypt
    /// `$7$`, scrypt in the crypt(3) encoding (libxcrypt, passlib).
    case scrypt
    /// `$6$` SHA-512 crypt.
    case sha512Crypt = "sha512crypt"
    /// `$5$` SHA-256 crypt.
    case sha256Crypt = "sha256crypt"
    /// `$argon2id$` PHC string (argon2-cffi, libsodium, PHP, Go, Rust).
    case argon2id
    /// `$argon2i$` PHC string.
    case argon2i
    /// `$scrypt$ln=…,r=…,p=…$salt$hash`, passlib's scrypt.
    case passlibScrypt = "passlib-scrypt"
    /// `$pbkdf2-sha256$rounds$salt$hash`, passlib's PBKDF2.
    case passlibPBKDF2SHA256 = "passlib-pbkdf2-sha256"
    /// `pbkdf2_sha256$iterations$salt$hash`, Django's default hasher.
    case djangoPBKDF2SHA256 = "django-pbkdf2-sha256"
    /// `pbkdf2_sha1$iterations$salt$hash`, Django's older hasher.
    case djangoPBKDF2SHA1 = "django-pbkdf2-sha1"

    /// A stable name for logs and metrics ("bcrypt", "argon2id", "django-pbkdf2-sha256", …).
    public var name: String { rawValue }

    public var description: String { rawValue }

    /// The format of `hash`, judged by its prefix only; `nil` when no
    /// supported scheme starts that way. Detection does not validate the
    /// rest of the hash: `PasswordVerifier.verify` does.
    public static func detect(_ hash: String) -> PasswordHashFormat? {
        // Bytes, not Characters: a combining mark after the prefix must not
        // change what the prefix is, and the schemes are ASCII.
        for (prefix, format) in prefixes where hash.utf8.starts(with: prefix.utf8) {
            return format
        }
        return nil
    }

    private static let prefixes: [(String, PasswordHashFormat)] = [
        ("$2a$", .bcrypt),
        ("$2b$", .bcrypt),
        ("$2y$", .bcrypt),
        ("$y$", .yescrypt),
        ("$7$", .scrypt),
        ("$6$", .sha512Crypt),
        ("$5$", .sha256Crypt),
        ("$argon2id$", .argon2id),
        ("$argon2i$", .argon2i),
        ("$scrypt$", .passlibScrypt),
        ("$pbkdf2-sha256$", .passlibPBKDF2SHA256),
        ("pbkdf2_sha256$", .djangoPBKDF2SHA256),
        ("pbkdf2_sha1$", .djangoPBKDF2SHA1),
    ]
}
