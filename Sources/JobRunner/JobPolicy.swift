import Foundation
import Yams

/// How the runner treats one job kind. Every field has a documented default,
/// so a kind without a policy file still runs sensibly.
public struct JobPolicy: Sendable, Equatable {
    /// Attempts before the job is `dead` (default 5).
    public var maxAttempts: Int = 5
    /// First retry delay (default 15 s); doubles per attempt up to `backoffCap`.
    public var backoffBase: TimeInterval = 15
    /// Longest retry delay (default 1 h).
    public var backoffCap: TimeInterval = 3_600
    /// How long a claim holds the job without a heartbeat (default 60 s).
    public var lease: TimeInterval = 60
    /// Most jobs of this kind one worker process runs at once (default 2, the core count here).
    public var concurrency: Int = 2
    /// Cron expression (UTC) on which a worker enqueues this kind by itself; nil for on-demand kinds.
    public var schedule: CronSchedule?

    public init() {}

    /// Exponential backoff with "equal jitter": half the delay is fixed, half random,
    /// so retries of many jobs that failed together spread out but never come back at once.
    public func retryDelay(afterAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> TimeInterval {
        let exponent = Double(max(0, min(attempt - 1, 30)))
        let delay = min(backoffCap, backoffBase * pow(2, exponent))
        return delay / 2 + delay / 2 * random
    }
}

/// One named section of a policy file, read by the domain (rate limits, grace days, …).
public struct PolicySection: Sendable {
    public let name: String
    public let file: String
    private let values: [String: PolicyValue]

    enum PolicyValue: Sendable { case int(Int), double(Double), string(String), bool(Bool) }

    init(name: String, file: String, values: [String: PolicyValue]) {
        self.name = name
        self.file = file
        self.values = values
    }

    public static func empty(_ name: String) -> PolicySection { .init(name: name, file: "(defaults)", values: [:]) }

    public var keys: [String] { values.keys.sorted() }

    /// Rejects keys the reader does not know, so a typo in a policy file is an error, not a silent default.
    public func requireOnly(_ allowed: Set<String>) throws {
        let unknown = Set(values.keys).subtracting(allowed)
        guard unknown.isEmpty else {
            throw JobRunnerError.invalidPolicy(
                "\(file): section '\(name)' has unknown key(s) \(unknown.sorted().joined(separator: ", ")); known keys: \(allowed.sorted().joined(separator: ", "))")
        }
    }

    public func int(_ key: String, default fallback: Int, in range: ClosedRange<Int>? = nil) throws -> Int {
        guard let value = values[key] else { return fallback }
        guard case .int(let number) = value else { throw wrongType(key, "a whole number") }
        if let range, !range.contains(number) {
            throw JobRunnerError.invalidPolicy("\(file): \(name).\(key) = \(number) is outside \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    public func double(_ key: String, default fallback: Double) throws -> Double {
        guard let value = values[key] else { return fallback }
        switch value {
        case .int(let number): return Double(number)
        case .double(let number): return number
        default: throw wrongType(key, "a number")
        }
    }

    public func string(_ key: String, default fallback: String?) throws -> String? {
        guard let value = values[key] else { return fallback }
        guard case .string(let text) = value else { throw wrongType(key, "text") }
        return text
    }

    public func bool(_ key: String, default fallback: Bool) throws -> Bool {
        guard let value = values[key] else { return fallback }
        guard case .bool(let flag) = value else { throw wrongType(key, "true or false") }
        return flag
    }

    private func wrongType(_ key: String, _ expected: String) -> JobRunnerError {
        .invalidPolicy("\(file): \(name).\(key) must be \(expected)")
    }
}

/// All policy files of a Jobs/ directory: `Jobs/policies/*.yaml`. Each file may hold
/// a `job:` section (runner settings for one kind, named by its `kind:` key) and any
/// number of other sections the domain reads by name.
///
/// A file that cannot be used (bad YAML, an unknown key, a value out of range) fails only
/// what reads it: asking for a kind or section it defines throws its error, every other
/// kind and section is served from the good files, and read-only commands never ask. A
/// file too broken to tell what it defines fails every kind and section no good file defines.
public struct PolicyBook: Sendable {
    private var jobPolicies: [String: JobPolicy] = [:]
    private var sections: [String: PolicySection] = [:]
    public private(set) var brokenFiles: [BrokenPolicyFile] = []
    public let directory: String?

    public init() { directory = nil }

    public init(jobsDirectory: String) throws {
        directory = jobsDirectory
        let folder = (jobsDirectory as NSString).appendingPathComponent("policies")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            return  // No policy files: every kind runs on the documented defaults.
        }
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: folder)
                .filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }
                .sorted()
        } catch {
            throw JobRunnerError.invalidPolicy("\(folder): cannot be listed: \(error.localizedDescription)")
        }
        for file in files {
            load(path: (folder as NSString).appendingPathComponent(file))
        }
    }

    private static let jobKeys: Set<String> = [
        "kind", "max_attempts", "backoff_base_seconds", "backoff_cap_seconds", "lease_seconds", "concurrency", "schedule",
    ]

    /// What one file defines, checked whole before any of it is used: a file is good or broken as a unit.
    private struct FileContents {
        var jobs: [String: JobPolicy] = [:]
        var sections: [String: PolicySection] = [:]
    }

    private mutating func load(path: String) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            brokenFiles.append(BrokenPolicyFile(path: path, message: "\(path): cannot be read: \(error.localizedDescription)", claims: nil))
            return
        }
        let document: Any?
        do {
            document = try YAMLDocument.load(text)
        } catch {
            brokenFiles.append(BrokenPolicyFile(path: path, message: "\(path): not valid YAML: \(error)", claims: Self.claims(scanning: text)))
            return
        }
        guard let document else { return }
        guard let top = document as? [String: Any] else {
            brokenFiles.append(BrokenPolicyFile(path: path, message: "\(path): expected sections (a mapping at the top level)", claims: nil))
            return
        }
        do {
            let contents = try parse(top, path: path)
            jobPolicies.merge(contents.jobs) { first, _ in first }
            sections.merge(contents.sections) { first, _ in first }
        } catch let error as JobRunnerError {
            brokenFiles.append(BrokenPolicyFile(path: path, message: error.message, claims: Self.claims(of: top)))
        } catch {
            brokenFiles.append(BrokenPolicyFile(path: path, message: "\(path): \(error)", claims: Self.claims(of: top)))
        }
    }

    private func parse(_ top: [String: Any], path: String) throws -> FileContents {
        var contents = FileContents()
        for (sectionName, raw) in top.sorted(by: { $0.key < $1.key }) {
            guard let mapping = raw as? [String: Any] else {
                throw JobRunnerError.invalidPolicy("\(path): section '\(sectionName)' must be a mapping of key: value")
            }
            let section = PolicySection(name: sectionName, file: path, values: try Self.values(mapping, path, sectionName))
            if sectionName == "job" {
                try section.requireOnly(Self.jobKeys)
                guard let kind = try section.string("kind", default: nil), !kind.isEmpty else {
                    throw JobRunnerError.invalidPolicy("\(path): the job section needs 'kind: <job kind name>'")
                }
                guard jobPolicies[kind] == nil else {
                    throw JobRunnerError.invalidPolicy("\(path): a policy for job kind '\(kind)' is already defined in another file")
                }
                contents.jobs[kind] = try Self.jobPolicy(section)
            } else {
                if let existing = sections[sectionName] {
                    throw JobRunnerError.invalidPolicy("\(path): section '\(sectionName)' is already defined in \(existing.file)")
                }
                contents.sections[sectionName] = section
            }
        }
        return contents
    }

    /// What a file that parsed but failed its checks meant to define.
    private static func claims(of top: [String: Any]) -> BrokenPolicyFile.Claims {
        var claims = BrokenPolicyFile.Claims()
        for (name, raw) in top {
            if name == "job" {
                if let kind = (raw as? [String: Any])?["kind"] as? String { claims.kinds.insert(kind) } else { return BrokenPolicyFile.Claims(unknown: true) }
            } else {
                claims.sections.insert(name)
            }
        }
        return claims
    }

    /// What a file that is not even YAML seems to define, read off its lines: top-level
    /// `name:` keys (quoted or not) and a `kind:` under `job:`. Anything it cannot read
    /// makes the claims unknown, which fails every kind and section no good file defines:
    /// a guess that misses a section would hand that section's defaults to a command.
    private static func claims(scanning text: String) -> BrokenPolicyFile.Claims {
        var claims = BrokenPolicyFile.Claims()
        var inJob = false
        let unquote = CharacterSet(charactersIn: " \t\"'")
        // isNewline splits CRLF files too (a CRLF pair is one Character to Swift).
        for line in text.split(whereSeparator: \.isNewline) {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            guard !content.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            if let first = content.first, !first.isWhitespace {
                guard let colon = content.firstIndex(of: ":") else { return BrokenPolicyFile.Claims(unknown: true) }
                let name = content[..<colon].trimmingCharacters(in: unquote)
                guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "_.-".contains($0) }) else {
                    return BrokenPolicyFile.Claims(unknown: true)
                }
                inJob = name == "job"
                if !inJob { claims.sections.insert(name) }
            } else if inJob {
                let trimmed = content.trimmingCharacters(in: unquote)
                if trimmed.hasPrefix("kind") {
                    let kind = trimmed.drop { $0 != ":" }.dropFirst().trimmingCharacters(in: unquote)
                    if !kind.isEmpty { claims.kinds.insert(kind) }
                }
            }
        }
        if text.contains("job") && claims.kinds.isEmpty { claims.unknown = true }
        return claims
    }

    private static func values(_ mapping: [String: Any], _ path: String, _ section: String) throws -> [String: PolicySection.PolicyValue] {
        var result: [String: PolicySection.PolicyValue] = [:]
        for (key, value) in mapping {
            switch value {
            case let flag as Bool: result[key] = .bool(flag)
            case let number as Int: result[key] = .int(number)
            case let number as Double: result[key] = .double(number)
            case let text as String: result[key] = .string(text)
            case is NSNull: continue
            default:
                throw JobRunnerError.invalidPolicy("\(path): \(section).\(key) must be a number, text or true/false")
            }
        }
        return result
    }

    private static func jobPolicy(_ section: PolicySection) throws -> JobPolicy {
        var policy = JobPolicy()
        policy.maxAttempts = try section.int("max_attempts", default: policy.maxAttempts, in: 1...1_000)
        policy.backoffBase = try section.double("backoff_base_seconds", default: policy.backoffBase)
        policy.backoffCap = try section.double("backoff_cap_seconds", default: policy.backoffCap)
        policy.lease = try section.double("lease_seconds", default: policy.lease)
        policy.concurrency = try section.int("concurrency", default: policy.concurrency, in: 1...1024)
        if let schedule = try section.string("schedule", default: nil), !schedule.isEmpty {
            policy.schedule = try CronSchedule(schedule)
        }
        guard policy.backoffBase > 0, policy.backoffCap >= policy.backoffBase else {
            throw JobRunnerError.invalidPolicy("\(section.file): backoff_base_seconds must be > 0 and <= backoff_cap_seconds")
        }
        guard policy.lease >= 1 else {
            throw JobRunnerError.invalidPolicy("\(section.file): lease_seconds must be at least 1")
        }
        return policy
    }

    /// The runner's settings for `kind`: its file's, or the defaults when no file names it.
    /// Throws the error of a broken file that defines it (or may: one too broken to tell).
    public func policy(for kind: String) throws -> JobPolicy {
        // A broken file that names the kind wins over a good one that does too: which of
        // the two was meant cannot be told.
        if let broken = brokenFiles.first(where: { $0.claims?.kinds.contains(kind) ?? false }) {
            throw JobRunnerError.invalidPolicy(broken.message + " (needed for job kind '\(kind)')")
        }
        if let policy = jobPolicies[kind] { return policy }
        if let broken = brokenFiles.first(where: { $0.claims == nil || $0.claims?.unknown == true }) {
            throw JobRunnerError.invalidPolicy(broken.message + " (needed for job kind '\(kind)')")
        }
        return JobPolicy()
    }

    public mutating func setPolicy(_ policy: JobPolicy, for kind: String) { jobPolicies[kind] = policy }

    /// The named section, or an empty one (every key at its default) when no file has it.
    public func section(_ name: String) throws -> PolicySection {
        if let broken = brokenFiles.first(where: { $0.claims?.sections.contains(name) ?? false }) {
            throw JobRunnerError.invalidPolicy(broken.message + " (needed for the '\(name)' settings)")
        }
        if let section = sections[name] { return section }
        if let broken = brokenFiles.first(where: { $0.claims == nil || $0.claims?.unknown == true }) {
            throw JobRunnerError.invalidPolicy(broken.message + " (needed for the '\(name)' settings)")
        }
        return .empty(name)
    }

    public var configuredKinds: [String] { jobPolicies.keys.sorted() }
}

/// A policy file that cannot be used, and what it seems to define.
public struct BrokenPolicyFile: Sendable, Equatable {
    public struct Claims: Sendable, Equatable {
        public var kinds: Set<String> = []
        public var sections: Set<String> = []
        /// Part of it could not be attributed (a `job:` without a readable kind).
        public var unknown = false
    }

    public var path: String
    /// Names the file and what is wrong in it.
    public var message: String
    /// Nil: nothing could be read off the file at all.
    public var claims: Claims?
}
