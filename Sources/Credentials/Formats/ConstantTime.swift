import Crypto

/// Compares secrets without an early exit. swift-crypto's `SymmetricKey`
/// equality is its constant-time comparison (only the lengths, which are not
/// secret, are compared first).
func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    SymmetricKey(data: lhs) == SymmetricKey(data: rhs)
}
