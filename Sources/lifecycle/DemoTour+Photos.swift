import Foundation
import LifecycleRuntime

extension DemoTour {
    func photosChapter() async throws {
        heading("Profile photos: square, at most 1024², JPEG q85, metadata stripped")
        let service = try PhotoNormalizationService(services: services)
        // The import queued one job per profile photo; the runner tour's worker may
        // already have run them, in which case this finds nothing left to queue.
        let queued = try await service.queue(account: nil)
        if queued.jobIDs.isEmpty {
            say("the import queued one normalisation job per profile photo, and the worker above ran them (recipe \(queued.recipe)):")
        } else {
            say("lifecycle photos normalize --all: \(queued.jobIDs.count) profile photo(s) to normalise under recipe \(queued.recipe), jobs queued by the import")
            _ = try await runWorker(services: services, once: true, concurrency: 2, kinds: [PhotoJobs.normalizeColumnKind])
        }

        let normalizer = PhotoNormalizer(policy: service.policy)
        for (accountID, upload) in try demoProfileUploads() {
            // The import's upload event names the job that normalised it.
            let (account, uploaded) = try await services.store.read { tx in
                (try tx.account(id: accountID), try tx.latestAuditEvents(accountID: accountID, actions: ["photo.upload"], limit: 1).first)
            }
            guard let account, case .object(let detail)? = uploaded?.detailValue, case .number(let job)? = detail["job"] else { continue }
            let result = try await service.result(ofJob: JobID(job))

            let before = try Data(contentsOf: URL(fileURLWithPath: upload))
            say("\(accountID)  \((upload as NSString).lastPathComponent)  (job #\(Int(job)): \(result?.outcome.rawValue ?? "not run"))")
            say("    before: \(describe(before, normalizer))")
            guard result?.outcome == .normalized, let key = account.profilePhotoKey else {
                say("    \(result?.outcome.rawValue ?? "pending"): \(result?.userMessage ?? result?.reason ?? "")")
                continue
            }
            let after = try await services.blobs.readAll(key: key)
            say("    after:  \(describe(after, normalizer))  → \(key)")
            var uploadLeft = false
            if let key = result?.original?.blobKey { uploadLeft = try await services.blobs.info(key: key) != nil }
            say("    upload deleted: \(uploadLeft ? "no" : "yes")")
        }

        let again = try await service.queue(account: nil)
        say("lifecycle photos normalize --all again: \(again.jobIDs.count) to do (nothing is rendered twice)")
    }

    /// Account id and uploaded profile photo file of each demo account, from the import file.
    private func demoProfileUploads() throws -> [(String, String)] {
        let folder = (PathText.parent(services.store.path) as NSString).appendingPathComponent("demo-input")
        let lines = try String(contentsOfFile: folder + "/accounts.jsonl", encoding: .utf8).split(separator: "\n")
        return lines.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let id = object["id"] as? String, let file = object["profile_photo"] as? String else { return nil }
            return (id, (folder as NSString).appendingPathComponent(file))
        }
    }

    private func describe(_ bytes: Data, _ normalizer: PhotoNormalizer) -> String {
        let metadata = MetadataBlocks.names(in: bytes)
        let shape: String
        if let info = try? normalizer.inspect(bytes) {
            let turned = info.orientation != 1 ? ", EXIF orientation \(info.orientation)" : ""
            shape = "\(info.format.rawValue.uppercased()) \(info.width)×\(info.height)\(turned)"
        } else {
            shape = "not a photo the recipe accepts"
        }
        return "\(shape), \(bytes.count) bytes, metadata: \(metadata.isEmpty ? "none" : metadata.joined(separator: ", "))"
    }
}
