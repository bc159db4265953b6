import Foundation

/// Whether a configured secret (the link-signing key, the API and operator tokens) can
/// keep anyone out. Length alone let 32 spaces sign deletion links, and a token of one
/// repeated character guard /v1: a secret must not repeat a shorter pattern, and must hold
/// about 96 bits by its own characters' spread (`openssl rand -hex 32` gives some 240).
public enum SecretStrength {
    public static let minimumBytes = 32
    public static let minimumBits = 96.0
    /// What to run for a good one, named in every refusal.
    public static let advice = "make one with `openssl rand -hex 32`"

    /// Why `secret` is too weak, or nil. Read as bytes, as it is used.
    public static func problem(_ secret: some Collection<UInt8>) -> String? {
        let bytes = Array(secret)
        guard bytes.count >= minimumBytes else { return "it is \(bytes.count) bytes; use at least \(minimumBytes)" }
        if let period = (1...(bytes.count / 2)).first(where: { period in bytes.indices.allSatisfy { bytes[$0] == bytes[$0 % period] } }) {
            return "it repeats a pattern of \(period) character\(period == 1 ? "" : "s")"
        }
        var counts: [UInt8: Int] = [:]
        for byte in bytes { counts[byte, default: 0] += 1 }
        let total = Double(bytes.count)
        let bitsPerByte = counts.values.reduce(0.0) { sum, count in
            let share = Double(count) / total
            return sum - share * log2(share)
        }
        let bits = bitsPerByte * total
        guard bits >= minimumBits else {
            return "it holds too little randomness (about \(Int(bits)) bits by the spread of its characters; at least \(Int(minimumBits)))"
        }
        return nil
    }

    /// A secret file must be the running user's own: another user could replace it. (Its
    /// mode, private to its owner, is checked apart.)
    public static func ownerProblem(_ info: stat) -> String? {
        guard info.st_uid != geteuid() else { return nil }
        return "it belongs to uid \(info.st_uid), not to the user lifecycle runs as (uid \(geteuid())), who alone should be able to change it; `chown` it"
    }
}
