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
