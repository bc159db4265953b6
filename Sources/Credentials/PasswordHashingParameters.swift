/// Argon2id cost for new hashes.
///
/// The default (t=3, m=64 MiB, p=1) is RFC 9106's second recommended option
/// and the same cost argon2-cffi uses apart from its 4 lanes; one hash takes
/// about 0.1–0.2 s here. Tests pass cheap values (e.g. t=1, m=1024).
public struct PasswordHashingParameters: Sendable, Hashable {
    /// Passes over memory (argon2 `t`).
    public var iterations: Int
    /// Memory in KiB (argon2 `m`).
    public var memoryKiB: Int
    /// Lanes (argon2 `p`); libargon2 runs one thread per lane.
    public var parallelism: Int
    /// Random salt length; 16 bytes is what the PHC and RFC 9106 recommend.
    public var saltByteCount: Int
    /// Hash length; 32 bytes, as every common argon2 binding writes.
    public var hashByteCount: Int

    public init(iterations: Int = 3, memoryKiB: Int = 65536, parallelism: Int = 1, saltByteCount: Int = 16, hashByteCount: Int = 32) {
        self.iterations = iterations
        self.memoryKiB = memoryKiB
        self.parallelism = parallelism
        self.saltByteCount = saltByteCount
        self.hashByteCount = hashByteCount
    }

    public static let `default` = PasswordHashingParameters()
}
