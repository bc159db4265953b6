/// A stored hash that has been parsed and found well-formed and within
/// `Limits`; checking a password against it is the only expensive step.
protocol StoredHash: Sendable {
    /// - Returns: whether `password` (its UTF-8 bytes) produces this hash.
    /// - Throws: `CredentialsError` when the underlying library refuses the
    ///   hash's parameters or cannot compute it.
    func matches(_ password: [UInt8]) throws -> Bool
}
