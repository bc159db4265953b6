/// Ceilings on the work a stored hash may ask for.
///
/// A hash column is input: an imported table, a restored backup or an
/// attacker with write access to one row could hold `m=4194304` or
/// `rounds=999999999`, and every deletion attempt would then pin a core or
/// exhaust memory. Anything above these is refused as malformed before any
/// hashing starts. Each is far above what any tool writes by default (the
/// defaults need at most 64 MiB and under a second here); at a limit, one
/// verification takes several seconds on this project's 2-core machines.
enum Limits {
    /// Longer passwords are treated as wrong without hashing (Django used the
    /// same cut-off against long-password DoS); sha-crypt's work grows with
    /// the password's length.
    static let maxPasswordBytes = 4096
    /// libxcrypt refuses passphrases of 512 bytes or more (CRYPT_MAX_PASSPHRASE_SIZE).
    static let maxCryptPasswordBytes = 511
    /// bcrypt only ever reads this many bytes of the password.
    static let bcryptPasswordBytes = 72
    /// No supported format comes close; a longer value is not a password hash.
    static let maxStoredHashBytes = 1024

    /// Memory for one verification (argon2 m, scrypt/yescrypt 128·N·r).
    static let maxMemoryBytes = 1 << 30
    /// PBKDF2 iterations and sha-crypt rounds (10 million: about 5–6 s).
    static let maxIterations = 10_000_000
    /// bcrypt cost 16 takes about 4–6 s; each step doubles it.
    static let maxBcryptCost = 16
    /// argon2 passes × memory, in KiB: 4 GiB of memory traffic (libsodium's
    /// "sensitive" preset, 1 GiB × 4 passes, takes about 7 s).
    static let maxArgon2PassesTimesMemoryKiB = 4 << 20
    static let maxArgon2Parallelism = 64
    /// scrypt/yescrypt N·r·p (× yescrypt's extra time factor), in 128-byte
    /// blocks: the work of one pass over the 1 GiB memory limit. swift-crypto's
    /// scrypt is slow in debug builds (N=2^20, r=8 took 29 s here).
    static let maxScryptBlockWork = 1 << 23
}
