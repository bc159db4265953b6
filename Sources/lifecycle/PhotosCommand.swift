import ArgumentParser
import Foundation
import LifecycleRuntime

struct PhotosCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photos",
        abstract: "Profile photos: normalise them to a square JPEG of at most 1024² with every metadata block removed.",
        discussion: """
            The recipe and its limits are in Jobs/policies/photos.yaml. Jobs/runbooks/photos.md says what to do \
            after a recipe change and how to investigate a rejected upload.
            """,
        subcommands: [NormalizePhotos.self, NormalizePhotoFile.self, ListPhotos.self])
}

struct NormalizePhotos: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "normalize",
        abstract: "Normalise profile photos not yet normalised under the current recipe version, as jobs.",
        usage: """
            lifecycle photos normalize [--account <id>] [--all] [--queue-only] [--concurrency <concurrency>]
                                       \(GlobalOptions.usage)
            """,
        discussion: """
            Queues one job per profile photo that is not yet a JPEG of the current recipe (in the column the data \
            map's `profile_photo:` names; a photo whose job is already queued or running keeps that job), then runs \
            every due photo job in this process, two at a time (uploads and import queue them too), and prints a \
            summary of this run's photos that lists every rejected one with the message its uploader sees. Running \
            it again renders nothing already done.
            A rejected photo is an outcome, not a failure: exit 0 when every job finished (rejections included), \
            75 when some are retrying, dead or still running elsewhere, 67 for an unknown account, 65 for a bad \
            photo policy.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(help: ArgumentHelp("Only this account's profile photo (id or email).", valueName: "id"))
    var account: String?
    @Flag(help: "Every account's profile photos.") var all = false
    @Flag(name: .customLong("queue-only"), help: "Only queue the jobs; a running `lifecycle worker` does them.")
    var queueOnly = false
    @Option(help: "Photos normalised at once in this process (the job policy caps it too).") var concurrency: Int = 2

    func validate() throws {
        guard (account != nil) != all else { throw ValidationError("pass either --account ID or --all") }
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 256") }
    }

    func run() async throws {
        try await guarded {
            quietLibvipsWarnings()
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let service = try PhotoNormalizationService(services: services)
        let queued = try await service.queue(account: account)
        let scope = account.map { "account \($0)" } ?? "all accounts"
        if queued.jobIDs.isEmpty {
            if options.json {
                try Terminal.printJSON(NormalizeReport(queue: queued, summary: nil))
            } else {
                Terminal.line("nothing to normalise for \(scope): every profile photo is a JPEG of recipe \(queued.recipe)")
            }
            return .ok
        }
        if !options.json {
            let existing = queued.alreadyQueued > 0 ? " (\(queued.alreadyQueued) already queued)" : ""
            Terminal.line("\(queued.jobIDs.count) profile photo(s) of \(scope) to normalise under recipe \(queued.recipe)\(existing)")
        }
        if queueOnly {
            if options.json { try Terminal.printJSON(NormalizeReport(queue: queued, summary: nil)) }
            return .ok
        }
        let started = Date()
        _ = try await runWorker(services: services, once: true, concurrency: concurrency, kinds: [PhotoJobs.normalizeColumnKind])
        let summary = try await service.summarize(jobIDs: queued.jobIDs)
        if options.json {
            try Terminal.printJSON(NormalizeReport(queue: queued, summary: summary))
        } else {
            printSummary(summary, seconds: Date().timeIntervalSince(started))
        }
        return summary.allFinished ? .ok : .tryLater
    }

    private func printSummary(_ summary: PhotoRunSummary, seconds: TimeInterval) {
        var counts = ["normalised \(summary.normalized)", "rejected \(summary.rejected)"]
        if summary.upToDate > 0 { counts.append("already done \(summary.upToDate)") }
        if summary.gone > 0 { counts.append("account deleted meanwhile \(summary.gone)") }
        for (label, count) in [("retrying", summary.retrying), ("failed", summary.failed), ("still running elsewhere", summary.waiting)] where count > 0 {
            counts.append("\(label) \(count)")
        }
        let size = summary.normalized > 0 ? "; \(summary.bytesBefore) → \(summary.bytesAfter) bytes" : ""
        Terminal.line(counts.joined(separator: ", ") + size + String(format: " (%.1f s)", seconds))
        for problem in summary.problems {
            let who = "\(problem.photoID)" + (problem.accountID.map { " (account \($0))" } ?? "")
            switch problem.outcome {
            case .rejected:
                Terminal.line("  rejected \(who): \(problem.userMessage ?? "") [\(problem.reason ?? "")]")
            default:
                Terminal.note("  \(problem.outcome.rawValue) \(who), job #\(problem.jobID): \(problem.reason ?? "")")
            }
        }
        if summary.failed > 0 || summary.retrying > 0 {
            Terminal.note("`lifecycle jobs show <id>` shows a job's steps and error; Jobs/runbooks/photos.md says what to do.")
        }
    }
}

struct NormalizeReport: Codable {
    var queue: PhotoQueueReport
    var summary: PhotoRunSummary?

    enum CodingKeys: String, CodingKey {
        case queue, summary
    }
}

struct NormalizePhotoFile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "normalize-file",
        abstract: "Normalise one photo file with the same checks and recipe as the job; touches no database.",
        discussion: """
            OUT is replaced atomically and only on success: a refused or failed photo leaves no partial file.
            Exit codes: 0 written, 65 the photo is refused (stderr has the message its uploader would see, then the \
            detail), 66 IN does not exist or cannot be read, 64 OUT's directory does not exist, 69 OUT cannot be written \
            or libvips (for a HEIC, its HEIF module) cannot be opened.
            """)

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The photo: JPG, PNG or HEIC, under 10MB.") var input: String
    @Argument(help: "Where to write the JPEG.") var output: String

    func run() async throws {
        try await guarded {
            quietLibvipsWarnings()
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: input, isDirectory: &isDirectory), !isDirectory.boolValue else {
                throw CLIFailure(.noInput, "\(input): no such file. Pass the photo to normalise (JPG, PNG or HEIC, under 10MB).")
            }
            let outputDirectory = PathText.parent(output)
            if !outputDirectory.isEmpty {
                var outputIsDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: outputDirectory, isDirectory: &outputIsDirectory), outputIsDirectory.boolValue else {
                    throw CLIFailure(.usage, "\(output): the directory \(outputDirectory) does not exist")
                }
            }
            let policy = try photoPolicy()
            do {
                try PhotoNormalizer.requireLibrary()
            } catch {
                throw CLIFailure(.unavailable, "cannot normalise photos: \(error); install libvips42 (Jobs/runbooks/install.md)")
            }
            let normalized: NormalizedPhoto
            do {
                normalized = try PhotoNormalizer(policy: policy).normalizeFile(at: input, to: output)
            } catch let rejection as PhotoRejection {
                if options.json {
                    try Terminal.printJSON(FileRejectionReport(input: input, code: "\(rejection.code)", message: rejection.userMessage, detail: rejection.operatorDetail))
                }
                Terminal.error(rejection.userMessage)
                Terminal.note("  \(input): \(rejection.code): \(rejection.operatorDetail)")
                return .dataError
            } catch let failure as PhotoFileError {
                throw CLIFailure(.unavailable, "cannot write \(output): \(failure)")
            } catch let unavailable as ImagingUnavailable {
                throw CLIFailure(.unavailable, "cannot normalise \(input): \(unavailable); install libheif1 and libvips42 (Jobs/runbooks/install.md)")
            } catch {
                throw CLIFailure(.noInput, "\(input) cannot be read: \(error.localizedDescription)")
            }
            let source = normalized.source
            if options.json {
                try Terminal.printJSON(FileNormalizedReport(
                    input: input, output: output, recipe: policy.recipeIdentifier, bytes: normalized.jpegData.count,
                    width: normalized.width, height: normalized.height, sourceFormat: source.format.rawValue,
                    sourceWidth: source.width, sourceHeight: source.height, sourceOrientation: source.orientation))
            } else {
                Terminal.line("\(output): JPEG \(normalized.width)×\(normalized.height), \(normalized.jpegData.count) bytes, no metadata (from \(source.format.rawValue) \(source.width)×\(source.height); recipe \(policy.recipeIdentifier))")
            }
            return .ok
        }
    }

    /// Only the policy files: normalising one file needs no database or blob store.
    private func photoPolicy() throws -> PhotoPolicy {
        do {
            return try PhotoPolicy(policies: try PolicyBook(jobsDirectory: options.jobsDirectory))
        } catch let error as JobRunnerError {
            throw CLIFailure(.dataError, "policy files in \(options.jobsDirectory)/policies: \(error.message)")
        }
    }
}

struct FileRejectionReport: Codable {
    var status = "rejected"
    var input: String
    var code: String
    var message: String
    var detail: String
}

struct FileNormalizedReport: Codable {
    var status = "normalized"
    var input: String
    var output: String
    var recipe: String
    var bytes: Int
    var width: Int
    var height: Int
    var sourceFormat: String
    var sourceWidth: Int
    var sourceHeight: Int
    var sourceOrientation: Int

    enum CodingKeys: String, CodingKey {
        case status, input, output, recipe, bytes, width, height
        case sourceFormat = "source_format", sourceWidth = "source_width", sourceHeight = "source_height"
        case sourceOrientation = "source_orientation"
    }
}

struct ListPhotos: AsyncParsableCommand, StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Profile photos: each account's file, whether it is normalised under the current recipe and, after a refused upload, the message its uploader saw.",
        discussion: """
            An account whose refused upload replaced no photo has none (`(no photo)`, no `file` with --json): she \
            is listed as rejected all the same, after the accounts with a photo.
            """)

    @OptionGroup var options: GlobalOptions
    @Option(help: "pending, normalized or rejected.") var state: NormalizationState?
    @Option(help: ArgumentHelp("Only this account (id or email).", valueName: "id")) var account: String?
    @Option(help: "At most this many photos.") var limit: Int = 100

    func run() async throws {
        try await guarded {
            return try await options.withServices(self)
        }
    }

    func run<Store: LifecycleStore>(services: LifecycleServices<Store>) async throws -> ExitStatus {
        let photos = try await ColumnProfilePhotos(services: services).list(account: account, state: state, limit: max(1, limit))
        if options.json {
            try Terminal.printJSON(photos)
            return .ok
        }
        if photos.isEmpty { Terminal.line("no profile photos" + (state.map { " in state \($0.rawValue)" } ?? "")) }
        for photo in photos {
            Terminal.line("account \(photo.account)  \(photo.state.rawValue)  \(photo.file ?? "(no photo)")" + (photo.message.map { "  \"\($0)\"" } ?? ""))
        }
        return .ok
    }
}

extension NormalizationState: ExpressibleByArgument {}

/// libvips prints "VIPS-WARNING … error in tile" lines for every damaged file it is
/// given; the refusal already says what was wrong, once, in our words. An operator
/// who wants libvips' own warnings sets VIPS_WARNING themselves (libvips reads it at
/// start-up, so this runs before the first photo).
func quietLibvipsWarnings() {
    setenv("VIPS_WARNING", "0", 0)
}
