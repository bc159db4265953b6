import Foundation

public enum JobState: String, Sendable, Codable, CaseIterable {
    case queued, running, retrying, succeeded, dead, cancelled

    /// A live job holds its unique key: enqueueing the same key returns it.
    public var isLive: Bool { self == .queued || self == .running || self == .retrying }
    public var isFinal: Bool { !isLive }

    public static let liveStates: [JobState] = [.queued, .running, .retrying]
}

public typealias JobID = Int64

/// One row of the queue, as operators and tests see it.
public struct JobRecord: Sendable, Codable, Equatable {
    public var id: JobID
    public var kind: String
    public var payload: String
    public var uniqueKey: String?
    public var state: JobState
    public var attempt: Int
    public var maxAttempts: Int
    public var runAt: Date
    public var leaseOwner: String?
    public var leaseExpiresAt: Date?
    public var lastError: String?
    public var cancelRequested: Bool
    public var createdAt: Date
    public var updatedAt: Date
    public var finishedAt: Date?

    public init(
        id: JobID, kind: String, payload: String, uniqueKey: String?, state: JobState, attempt: Int,
        maxAttempts: Int, runAt: Date, leaseOwner: String?, leaseExpiresAt: Date?, lastError: String?,
        cancelRequested: Bool, createdAt: Date, updatedAt: Date, finishedAt: Date?
    ) {
        self.id = id
        self.kind = kind
        self.payload = payload
        self.uniqueKey = uniqueKey
        self.state = state
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.runAt = runAt
        self.leaseOwner = leaseOwner
        self.leaseExpiresAt = leaseExpiresAt
        self.lastError = lastError
        self.cancelRequested = cancelRequested
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.finishedAt = finishedAt
    }

    /// As every `--json` shows a job: snake_case keys, the payload as a nested object.
    enum CodingKeys: String, CodingKey {
        case id, kind, payload, uniqueKey = "unique_key", state, attempt, maxAttempts = "max_attempts", runAt = "run_at"
        case leaseOwner = "lease_owner", leaseExpiresAt = "lease_expires_at", lastError = "last_error"
        case cancelRequested = "cancel_requested", createdAt = "created_at", updatedAt = "updated_at", finishedAt = "finished_at"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try c.decode(JobID.self, forKey: .id), kind: try c.decode(String.self, forKey: .kind),
            payload: try JobJSON.encode(try c.decode(JSONValue.self, forKey: .payload)),
            uniqueKey: try c.decodeIfPresent(String.self, forKey: .uniqueKey), state: try c.decode(JobState.self, forKey: .state),
            attempt: try c.decode(Int.self, forKey: .attempt), maxAttempts: try c.decode(Int.self, forKey: .maxAttempts),
            runAt: try c.decode(Date.self, forKey: .runAt), leaseOwner: try c.decodeIfPresent(String.self, forKey: .leaseOwner),
            leaseExpiresAt: try c.decodeIfPresent(Date.self, forKey: .leaseExpiresAt), lastError: try c.decodeIfPresent(String.self, forKey: .lastError),
            cancelRequested: try c.decode(Bool.self, forKey: .cancelRequested), createdAt: try c.decode(Date.self, forKey: .createdAt),
            updatedAt: try c.decode(Date.self, forKey: .updatedAt), finishedAt: try c.decodeIfPresent(Date.self, forKey: .finishedAt))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(kind, forKey: .kind)
        try c.encode(JSONValue.parsing(payload).snakeCased(), forKey: .payload)
        try c.encode(uniqueKey, forKey: .uniqueKey)
        try c.encode(state, forKey: .state)
        try c.encode(attempt, forKey: .attempt)
        try c.encode(maxAttempts, forKey: .maxAttempts)
        try c.encode(runAt, forKey: .runAt)
        try c.encode(leaseOwner, forKey: .leaseOwner)
        try c.encode(leaseExpiresAt, forKey: .leaseExpiresAt)
        try c.encode(lastError, forKey: .lastError)
        try c.encode(cancelRequested, forKey: .cancelRequested)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(finishedAt, forKey: .finishedAt)
    }
}

/// A finished step and the small JSON output later steps may read.
public struct StepRecord: Sendable, Codable, Equatable {
    public var jobID: JobID
    public var step: String
    public var output: String?
    public var finishedAt: Date

    public init(jobID: JobID, step: String, output: String?, finishedAt: Date) {
        self.jobID = jobID
        self.step = step
        self.output = output
        self.finishedAt = finishedAt
    }

    /// Snake_case keys, the output as a nested value (null when the step recorded none).
    enum CodingKeys: String, CodingKey {
        case jobID = "job_id", step, output, finishedAt = "finished_at"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let output = try c.decodeIfPresent(JSONValue.self, forKey: .output)
        self.init(
            jobID: try c.decode(JobID.self, forKey: .jobID), step: try c.decode(String.self, forKey: .step),
            output: try output.map { try JobJSON.encode($0) }, finishedAt: try c.decode(Date.self, forKey: .finishedAt))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(jobID, forKey: .jobID)
        try c.encode(step, forKey: .step)
        try c.encode(output.map { JSONValue.parsing($0).snakeCased() }, forKey: .output)
        try c.encode(finishedAt, forKey: .finishedAt)
    }
}

public struct EnqueueRequest: Sendable {
    public var kind: String
    public var payload: String
    public var uniqueKey: String?
    public var runAt: Date?
    public var maxAttempts: Int?

    public init(kind: String, payload: String = "{}", uniqueKey: String? = nil, runAt: Date? = nil, maxAttempts: Int? = nil) {
        self.kind = kind
        self.payload = payload
        self.uniqueKey = uniqueKey
        self.runAt = runAt
        self.maxAttempts = maxAttempts
    }

    public init<P: Encodable>(kind: String, payload: P, uniqueKey: String? = nil, runAt: Date? = nil) throws {
        self.init(kind: kind, payload: try JobJSON.encode(payload), uniqueKey: uniqueKey, runAt: runAt)
    }
}

public struct EnqueueOutcome: Sendable, Equatable {
    public var job: JobRecord
    /// False when a live job with the same unique key already existed and was returned instead.
    public var created: Bool

    public init(job: JobRecord, created: Bool) {
        self.job = job
        self.created = created
    }
}

/// A job this worker now holds a lease on, with what earlier attempts finished.
public struct ClaimedJob: Sendable {
    public var record: JobRecord
    public var finishedSteps: [String: String?]

    public init(record: JobRecord, finishedSteps: [String: String?]) {
        self.record = record
        self.finishedSteps = finishedSteps
    }
}

/// A job kind an operator paused: no worker claims its jobs until it is resumed.
public struct PausedKind: Sendable, Codable, Equatable {
    public var kind: String
    public var pausedAt: Date
    public var pausedBy: String
    public var reason: String?

    public init(kind: String, pausedAt: Date, pausedBy: String, reason: String?) {
        self.kind = kind
        self.pausedAt = pausedAt
        self.pausedBy = pausedBy
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case kind, pausedAt = "paused_at", pausedBy = "paused_by", reason
    }
}

/// Which waiting jobs `jobsNeedingAttention` reports besides the dead ones.
public enum AttentionScope: Sendable {
    /// After a run: anything it left behind that is not done (backing off, leased by another process, due).
    case stuck(now: Date)
    /// For monitoring: waiting or abandoned since before this instant.
    case overdue(before: Date)
}

public struct JobFilter: Sendable {
    public var states: [JobState]
    public var kinds: [String]
    public var uniqueKey: String?
    public var limit: Int

    public init(states: [JobState] = [], kinds: [String] = [], uniqueKey: String? = nil, limit: Int = 100) {
        self.states = states
        self.kinds = kinds
        self.uniqueKey = uniqueKey
        self.limit = limit
    }
}

public enum JobJSON {
    // Shared: payloads and step outputs are coded several times per job, and making a
    // coder costs more than most of them take to code. Foundation's coders are thread-safe.
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601.format(date))
        }
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ISO8601.parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO-8601 date: \(text)")
            }
            return date
        }
        return decoder
    }()

    public static func encode<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try decoder.decode(type, from: Data(text.utf8))
    }
}
