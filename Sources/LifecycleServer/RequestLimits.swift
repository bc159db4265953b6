import Crypto
import Foundation
import Synchronization

/// Who sent a request: the connection's peer, or, when the peer is a proxy the operator
/// named (`serve --trusted-proxy`), the client it says it forwarded for. Anyone can write
/// `X-Forwarded-For`: from any other peer it is ignored, or a flood could claim a new
/// address per request and never meet a per-client limit.
public struct TrustedProxies: Sendable, Equatable {
    public let addresses: Set<String>

    public static let none = TrustedProxies(checked: [])

    private init(checked: Set<String>) { addresses = checked }

    /// Each an IPv4 or IPv6 address, as the peer's is written.
    public init(_ addresses: [String]) throws(InvalidAddress) {
        var checked = Set<String>()
        for text in addresses {
            guard let normalised = Self.normalised(text) else { throw InvalidAddress(text: text) }
            checked.insert(normalised)
        }
        self.init(checked: checked)
    }

    public struct InvalidAddress: Error, CustomStringConvertible {
        public let text: String
        public var description: String { "'\(text)' is not an IP address (a trusted proxy is named by its address, like 10.0.0.5 or ::1)" }
    }

    /// inet_pton then inet_ntop: `::0001` and `::1` are one address.
    static func normalised(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var v4 = in_addr(), v6 = in6_addr()
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        func written() -> String { String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        if inet_pton(AF_INET, trimmed, &v4) == 1, inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count)) != nil { return written() }
        if inet_pton(AF_INET6, trimmed, &v6) == 1, inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count)) != nil { return written() }
        return nil
    }

    /// The rightmost `X-Forwarded-For` entry that is not itself a trusted proxy, when the
    /// peer is one; otherwise the peer. An entry that is not an address ends the walk there.
    func client(peer: String?, forwardedFor: String?) -> String {
        guard let peer = peer.flatMap(Self.normalised), addresses.contains(peer) else { return peer ?? "unknown" }
        var client = peer
        for entry in (forwardedFor ?? "").split(separator: ",").reversed() {
            guard let address = Self.normalised(String(entry)) else { break }
            client = address
            if !addresses.contains(address) { break }
        }
        return client
    }
}

/// At most `perHour` admissions per key in any hour, for at most `capacity` keys: past that
/// the keys seen longest ago are forgotten. A flood of invented keys (addresses, clients)
/// then costs the flooder their own limit, never everyone else's: the limiter before this
/// refused every new key once full, and one client silenced the page for an hour.
/// Keys are kept as keyed hashes: the process holds no list of addresses.
final class SlidingLimiter: Sendable {
    enum Admission: Equatable {
        case admitted
        /// Over the limit; the first admission that counts expires in this many seconds.
        case limited(retryAfter: Int)
    }

    private struct Entry {
        var times: [Date]
        var lastSeen: Date
    }

    let perHour: Int
    let capacity: Int
    private let key = SymmetricKey(size: .bits256)
    private let entries = Mutex<[Data: Entry]>([:])

    init(perHour: Int, capacity: Int = 10_000) {
        self.perHour = perHour
        self.capacity = capacity
    }

    func admit(_ text: String, now: Date = Date()) -> Admission {
        let id = Data(HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: key))
        let hourAgo = now.addingTimeInterval(-3_600)
        let perHour = self.perHour
        let capacity = self.capacity
        return entries.withLock { entries in
            var entry = entries[id] ?? Entry(times: [], lastSeen: now)
            entry.times.removeAll { $0 <= hourAgo }
            entry.lastSeen = now
            defer { entries[id] = entry }
            if entry.times.count >= perHour {
                let expires = (entry.times.first ?? now).addingTimeInterval(3_600)
                return .limited(retryAfter: max(1, Int(expires.timeIntervalSince(now).rounded(.up))))
            }
            entry.times.append(now)
            if entries[id] == nil && entries.count >= capacity {
                // Forgotten in tenths, not one per admission: a full limiter stays cheap.
                entries = entries.filter { $0.value.times.contains { $0 > hourAgo } }
                if entries.count >= capacity {
                    let oldest = entries.sorted { $0.value.lastSeen < $1.value.lastSeen }.prefix(max(1, capacity / 10)).map(\.key)
                    for key in oldest { entries.removeValue(forKey: key) }
                }
            }
            return .admitted
        }
    }
}

/// Work that outlives its request (a link's look-up and mail): `running` at once, up to
/// `waiting` more queued for a turn. Past that the page says it is busy; it never answers
/// "we've sent an email" for a request it dropped. Each piece starts a random
/// `startDelay` after it is taken: begun at once, a known address's heavier work (the
/// outbox, the mail) ran on the cores while its own answer was being written, and the
/// answer's time told a known address from an unknown one.
final class BoundedWork: Sendable {
    private struct State {
        var admitted = 0
        var running = 0
        var queue: [CheckedContinuation<Void, Never>] = []
    }

    let running: Int
    let waiting: Int
    let startDelay: ClosedRange<Int>
    private let state = Mutex(State())

    /// `startDelay` in milliseconds.
    init(running: Int, waiting: Int, startDelay: ClosedRange<Int> = 0...0) {
        self.running = running
        self.waiting = waiting
        self.startDelay = startDelay
    }

    /// Starts `work` in the background, or returns false when the queue is full.
    func start(_ work: @escaping @Sendable () async -> Void) -> Bool {
        let limit = running + waiting
        let admitted = state.withLock { state in
            guard state.admitted < limit else { return false }
            state.admitted += 1
            return true
        }
        guard admitted else { return false }
        let delay = Int.random(in: startDelay)
        Task.detached {
            if delay > 0 { try? await Task.sleep(for: .milliseconds(delay)) }
            await self.turn()
            await work()
            self.finished()
        }
        return true
    }

    private func turn() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.running < running {
                    state.running += 1
                    return true
                }
                state.queue.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func finished() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.admitted -= 1
            guard !state.queue.isEmpty else {
                state.running -= 1
                return nil
            }
            return state.queue.removeFirst()  // Its turn is this one's: running stays as it is.
        }
        next?.resume()
    }
}
