import Foundation
import Imaging
import JobRunner

/// What `lifecycle photos normalize` and an app backend call: queue normalisation
/// for the profile photos not yet normalised under the current recipe version, and
/// read back how each job ended.
public struct PhotoNormalizationService<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    public let policy: PhotoPolicy
    /// Photos enqueued per transaction: the write lock is held for one page at a time.
    public var pageSize = 500

    public init(services: LifecycleServices<Store>) throws {
        self.services = services
        do {
            policy = try PhotoPolicy(policies: services.policies)
        } catch let error as JobRunnerError {
            throw LifecycleError(.badInput, "photo policy: \(error.message)")
        }
    }

    // MARK: - Queue

    /// Enqueues one job per profile photo still to do (a file in the map's photo column
    /// that is not a JPEG rendered under the current recipe: an upload not yet normalised,
    /// a photo the app stored itself, or one rendered under an older recipe), for one
    /// account (id or email) or for all when `account` is nil. A photo whose job is already
    /// queued or running gets that job back, not a second one.
    public func queue(account reference: String?) async throws -> PhotoQueueReport {
        try await ColumnProfilePhotos(services: services).queue(account: reference, policy: policy, pageSize: pageSize)
    }

    // MARK: - Results

    /// How one normalisation job ended, from its state and its steps' outputs.
    public func result(ofJob id: JobID) async throws -> PhotoJobResult? {
        guard let job = try await services.store.job(id: id) else { return nil }
        let steps = try await services.store.steps(of: id)
        return try Self.result(job: job, steps: steps)
    }

    /// Counts for many jobs; every photo that did not end normalised, up to date or gone is
    /// listed, so the summary names each rejection.
    public func summarize(jobIDs: [JobID]) async throws -> PhotoRunSummary {
        var summary = PhotoRunSummary()
        for id in jobIDs {
            guard let result = try await result(ofJob: id) else { continue }
            summary.add(result)
        }
        return summary
    }

    static func result(job: JobRecord, steps: [StepRecord]) throws -> PhotoJobResult {
        typealias Column = ColumnPhotoJob<Store>
        let payload = try? JobJSON.decode(ColumnPhotoPayload.self, from: job.payload)
        var result = PhotoJobResult(jobID: job.id, photoID: payload?.upload ?? "?", outcome: .waiting)
        result.accountID = payload?.account
        let outputs = Dictionary(steps.map { ($0.step, $0.output) }, uniquingKeysWith: { first, _ in first })
        func output<T: Decodable>(_ step: String, _ type: T.Type) throws -> T? {
            guard let stored = outputs[step], let text = stored else { return nil }
            return try JobJSON.decode(type, from: text)
        }
        let checked = try output("validate", Column.Checked.self)
        let rendered = try output("render", Column.Rendered.self)
        if let payload, let bytes = checked?.bytes {
            result.original = PhotoSummary(format: checked?.format, width: checked?.width, height: checked?.height, bytes: bytes, blobKey: payload.upload)
        }
        switch job.state {
        case .succeeded:
            if let refusal = rendered?.refusal ?? checked?.refusal {
                result.outcome = .rejected
                result.userMessage = refusal.userMessage
                result.reason = "\(refusal.code): \(refusal.detail)"
            } else if checked?.upToDate == true {
                result.outcome = .upToDate
            } else if try checked?.gone == true || rendered?.gone == true || output("switch", Column.Let.self)?.outcome == "abandoned" {
                result.outcome = .gone
            } else {
                result.outcome = .normalized
                if let key = rendered?.key {
                    result.rendered = PhotoSummary(format: "jpeg", width: rendered?.side, height: rendered?.side, bytes: rendered?.bytes ?? 0, blobKey: key)
                }
            }
        default:
            result.setUnfinished(job)
        }
        return result
    }
}

extension PhotoJobResult {
    /// Where a job that has not ended as it should stands: failed, retrying or waiting.
    mutating func setUnfinished(_ job: JobRecord) {
        switch job.state {
        case .dead, .cancelled:
            outcome = .failed
            reason = job.state == .cancelled ? "cancelled" : job.lastError
        case .retrying:
            outcome = .retrying
            reason = "\(job.lastError ?? "failed"); retries at \(ISO8601.format(job.runAt))"
        case .queued, .running, .succeeded:
            outcome = .waiting
            reason = job.leaseOwner.map { "running in worker \($0)" } ?? "queued for \(ISO8601.format(job.runAt))"
        }
    }
}

public struct PhotoQueueReport: Sendable, Codable, Equatable {
    public var recipe: String
    public var recipeVersion: Int
    /// Newly created jobs.
    public var queued = 0
    /// Photos whose job was already queued or running.
    public var alreadyQueued = 0
    /// One per photo, in photo id order.
    public var jobIDs: [JobID] = []

    public init(recipe: String, recipeVersion: Int) {
        self.recipe = recipe
        self.recipeVersion = recipeVersion
    }

    enum CodingKeys: String, CodingKey {
        case recipe, recipeVersion = "recipe_version", queued, alreadyQueued = "already_queued", jobIDs = "job_ids"
    }
}

/// A photo as stored before or after normalisation.
public struct PhotoSummary: Sendable, Codable, Equatable {
    /// jpeg, png or heic; nil for an upload refused before its header was read.
    public var format: String?
    public var width: Int?
    public var height: Int?
    public var bytes: Int64
    public var blobKey: String

    enum CodingKeys: String, CodingKey {
        case format, width, height, bytes, blobKey = "blob_key"
    }
}

public struct PhotoJobResult: Sendable, Codable, Equatable {
    public enum Outcome: String, Sendable, Codable {
        /// Rendered and switched; the upload is deleted.
        case normalized
        /// Refused: the column gets back the photo the upload replaced (or none), the upload
        /// is deleted, and the audit trail and the job's steps keep the reason.
        case rejected
        /// Already a JPEG of the current recipe version (or a later one): nothing rendered.
        case upToDate = "up-to-date"
        /// Replaced, removed or purged meanwhile: the job left her column alone.
        case gone
        /// The job failed this attempt and will try again.
        case retrying
        /// The job is dead (or cancelled): see `reason` and `lifecycle jobs show`.
        case failed
        /// Not finished: queued for later or running in another worker.
        case waiting
    }

    public var jobID: JobID
    public var photoID: String
    public var accountID: String?
    public var outcome: Outcome
    public var original: PhotoSummary?
    public var rendered: PhotoSummary?
    /// For a rejection: the product's message, what the uploader is shown.
    public var userMessage: String?
    /// For operators: the rejection code and detail, or the job's error.
    public var reason: String?

    public init(jobID: JobID, photoID: String, outcome: Outcome) {
        self.jobID = jobID
        self.photoID = photoID
        self.outcome = outcome
    }
}

public struct PhotoRunSummary: Sendable, Codable, Equatable {
    public var normalized = 0
    public var rejected = 0
    public var upToDate = 0
    public var gone = 0
    public var retrying = 0
    public var failed = 0
    public var waiting = 0
    public var bytesBefore: Int64 = 0
    public var bytesAfter: Int64 = 0
    /// Every job that did not end normalised, up to date or gone.
    public var problems: [PhotoJobResult] = []

    public init() {}

    /// Rejections are outcomes the summary reports; failures and unfinished jobs are not done.
    public var allFinished: Bool { retrying == 0 && failed == 0 && waiting == 0 }

    public mutating func add(_ result: PhotoJobResult) {
        switch result.outcome {
        case .normalized:
            normalized += 1
            bytesBefore += result.original?.bytes ?? 0
            bytesAfter += result.rendered?.bytes ?? 0
        case .rejected: rejected += 1
        case .upToDate: upToDate += 1
        case .gone: gone += 1
        case .retrying: retrying += 1
        case .failed: failed += 1
        case .waiting: waiting += 1
        }
        if ![.normalized, .upToDate, .gone].contains(result.outcome) { problems.append(result) }
    }
}
