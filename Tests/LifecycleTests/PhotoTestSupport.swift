import ChildProcesses
import Crypto
import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend
import Testing

/// The repository's Jobs/ folder and the demo photos in it.
let photoJobsDirectory: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path + "/Jobs"
}()

/// Real encoded uploads: the demo's HEIC (1200², EXIF), PNG with alpha (640×480),
/// JPEG (1024×768) and a JPEG with GPS tags and EXIF orientation 6 (stored 1600×1200).
enum PhotoUpload {
    static func demo(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: photoJobsDirectory + "/demo/photos/" + name))
    }

    static var heic: Data { get throws { try demo("portrait.heic") } }
    static var png: Data { get throws { try demo("avatar-alpha.png") } }
    static var jpeg: Data { get throws { try demo("trail.jpg") } }
    static var jpegWithGPS: Data { get throws { try demo("run.jpg") } }
    /// Passes the header checks; only decoding the pixels finds the damage.
    static var truncatedJPEG: Data { get throws { let whole = try jpegWithGPS; return whole.prefix(whole.count / 2) } }
    static let gif = Data("GIF89a".utf8) + Data([0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x2C,
                                                 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B])
}

/// One throwaway installation on the given store, with a hand-driven clock, the shipped
/// policies (or the shipped ones with another `photos:` section) and the normalisation service.
struct PhotoFixture<Store: LifecycleStore> {
    let directory: String
    let store: Store
    let blobs: FileSystemBlobStore
    let clock: ManualTimeSource
    let jobsDirectory: String
    let services: LifecycleServices<Store>

    init(store: Store, directory: String? = nil, photosSection: String? = nil) throws {
        let directory = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("photos-\(UUID().uuidString)").path
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var jobs = photoJobsDirectory
        if let photosSection {
            jobs = directory + "/Jobs-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: jobs + "/policies", withIntermediateDirectories: true)
            for file in try FileManager.default.contentsOfDirectory(atPath: photoJobsDirectory + "/policies") where file != "photos.yaml" {
                try FileManager.default.copyItem(atPath: photoJobsDirectory + "/policies/" + file, toPath: jobs + "/policies/" + file)
            }
            try FileManager.default.copyItem(atPath: photoJobsDirectory + "/account-data.yaml", toPath: jobs + "/account-data.yaml")
            let shipped = try String(contentsOfFile: photoJobsDirectory + "/policies/photos.yaml", encoding: .utf8)
            let jobSection = shipped.components(separatedBy: "\nphotos:")[0]
            try (jobSection + "\nphotos:\n" + photosSection + "\n").write(toFile: jobs + "/policies/photos.yaml", atomically: true, encoding: .utf8)
        }
        jobsDirectory = jobs
        self.store = store
        blobs = try FileSystemBlobStore(root: directory + "/blobs")
        clock = ManualTimeSource(Date(timeIntervalSince1970: 1_767_225_600))
        services = LifecycleServices(
            store: store, blobs: blobs, policies: try PolicyBook(jobsDirectory: jobs), jobsDirectory: jobs, clock: clock,
            logger: .init(label: "test"))
    }

    /// The same installation read with other policies (a recipe change).
    func withPhotosSection(_ section: String) throws -> PhotoFixture {
        try PhotoFixture(store: store, directory: directory, photosSection: section)
    }

    var service: PhotoNormalizationService<Store> { get throws { try PhotoNormalizationService(services: services) } }

    /// An account whose profile photo was uploaded as `upload` (in her photo column, not yet
    /// normalised, as import leaves it), plus one journal photo that normalisation must leave alone.
    func addAccount(_ id: String, upload: Data, state: AccountState = .active) async throws {
        let now = clock.now()
        let account = Account(
            id: id, email: "\(id)@example.com", passwordHash: "x", firstName: "Ada", lastName: nil, displayName: nil, bio: nil,
            profilePhotoKey: importedUploadKey(id), primarySport: nil, morningReminderTime: nil, timezone: nil, subscriptionStatus: nil,
            integrations: Integrations(), state: state == .active ? .active : .pendingDeletion, createdAt: now, updatedAt: now)
        let entryPhoto = try PhotoUpload.jpegWithGPS
        let photo = PhotoRecord(
            id: "\(id)-p1", accountID: id, entryID: "\(id)-e1", role: .entry, blobKey: BlobKey.photo(accountID: id, photoID: "\(id)-p1"),
            contentType: "image/jpeg", byteSize: Int64(entryPhoto.count), sha256: photoSHA256(entryPhoto), takenAt: now, createdAt: now)
        _ = try await blobs.put(key: importedUploadKey(id), data: upload)
        _ = try await blobs.put(key: photo.blobKey, data: entryPhoto)
        try await store.write { tx in
            _ = try tx.insertAccount(account, preferences: nil)
            _ = try tx.insertEntry(JournalEntry(id: "\(id)-e1", accountID: id, createdAt: now, text: "entry"))
            _ = try tx.insertPhoto(photo)
            // Lifecycle's record of a deletion (`state` past active): requested, and its purge begun when purging.
            let moved = try tx.moveDeletion(key: id, to: state, at: now)
            #expect(moved)
        }
    }

    /// `lifecycle photos normalize --all` in-process: queue, drain the photo jobs, summarise.
    @discardableResult
    func normalizeAll(account: String? = nil) async throws -> (queued: PhotoQueueReport, summary: PhotoRunSummary) {
        let service = try self.service
        let queued = try await service.queue(account: account)
        _ = try await drain()
        return (queued, try await service.summarize(jobIDs: queued.jobIDs))
    }

    func drain() async throws -> DrainSummary {
        try await Worker(
            store: store, registry: services.registry, policies: services.policies, clock: clock,
            options: WorkerOptions(concurrency: 2, kinds: [PhotoJobs.normalizeColumnKind])
        ).drain()
    }

    /// What her photo column holds.
    func profileKey(_ id: String) async throws -> String? {
        try await store.read { tx in try tx.account(id: id)?.profilePhotoKey }
    }

    func photo(_ id: String) async throws -> PhotoRecord {
        try #require(try await store.read { tx in try tx.photo(id: id) })
    }

    /// The normalisation jobs of one file.
    func jobs(upload key: String) async throws -> [JobRecord] {
        try await store.jobs(matching: JobFilter(kinds: [PhotoJobs.normalizeColumnKind], uniqueKey: "photo:\(key)"))
    }

    func stepNames(ofJob id: JobID) async throws -> [String] {
        let order = ["validate", "render", "switch", "delete-files"]
        return try await store.steps(of: id).map(\.step).sorted { order.firstIndex(of: $0)! < order.firstIndex(of: $1)! }
    }

    /// Every blob under the account with its modification time, to show nothing was rewritten.
    func blobStamps(_ accountID: String) throws -> [String: Date] {
        let root = blobs.root + "/accounts/" + accountID
        var stamps: [String: Date] = [:]
        for case let relative as String in FileManager.default.enumerator(atPath: root) ?? .init() {
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/" + relative)
            if attributes[.type] as? FileAttributeType == .typeRegular { stamps[relative] = attributes[.modificationDate] as? Date }
        }
        return stamps
    }
}

extension PhotoFixture where Store == SQLiteStore {
    /// On a SQLite file of its own: for what does not depend on the backend (the policy file).
    init(photosSection: String? = nil) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("photos-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try self.init(store: try SQLiteStore(path: directory + "/lifecycle.sqlite"), directory: directory, photosSection: photosSection)
    }
}

/// An upload in her folder of the map's photo prefix, where the import and the app API put
/// one (the fixture stores each type under this one name).
func importedUploadKey(_ id: String) -> String { "accounts/\(id)/upload-import" }

func photoSHA256(_ data: Data) -> String { FileDigest.hex(SHA256.hash(data: data)) }

/// Reads a rendered JPEG back with tools that share no code with the recipe's save
/// path: `vipsheader -a` for the header fields, exiftool for metadata.
enum IndependentReader {
    struct Report {
        var fields: [String: String]
        var exifTags: [String: Any]
    }

    static func read(_ jpeg: Data) async throws -> Report {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("out-\(UUID().uuidString).jpg").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        _ = FileManager.default.createFile(atPath: file, contents: jpeg)
        let header = try await run(["vipsheader", "-a", file])
        let fields = Dictionary(header.split(separator: "\n").compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }, uniquingKeysWith: { first, _ in first })
        let exif = try JSONSerialization.jsonObject(with: Data(try await run(["exiftool", "-j", "-G", "-a", "-u", file]).utf8)) as? [[String: Any]]
        return Report(fields: fields, exifTags: exif?.first ?? [:])
    }

    /// A square sRGB JPEG of `side` with no metadata block left, as the recipe promises.
    static func expectNormalized(_ jpeg: Data, side: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(jpeg.starts(with: [0xFF, 0xD8, 0xFF]), "not a JPEG", sourceLocation: sourceLocation)
        let report = try await read(jpeg)
        #expect(report.fields["vips-loader"] == "jpegload", sourceLocation: sourceLocation)
        #expect(report.fields["width"] == "\(side)" && report.fields["height"] == "\(side)",
                "\(report.fields["width"] ?? "?")×\(report.fields["height"] ?? "?"), expected \(side)²", sourceLocation: sourceLocation)
        #expect(side <= 1024, sourceLocation: sourceLocation)
        #expect(report.fields["interpretation"] == "srgb" && report.fields["bands"] == "3", sourceLocation: sourceLocation)
        for field in ["exif-data", "xmp-data", "iptc-data", "icc-profile-data", "jpeg-comment", "orientation"] {
            #expect(report.fields[field] == nil, "vipsheader shows \(field)", sourceLocation: sourceLocation)
        }
        let groups = Set(report.exifTags.keys.compactMap { $0.split(separator: ":").first.map(String.init) })
        let allowed: Set<String> = ["SourceFile", "ExifTool", "File", "JFIF", "Composite"]
        #expect(groups.isSubset(of: allowed), "metadata left: \(groups.subtracting(allowed).sorted())", sourceLocation: sourceLocation)
        #expect(!report.exifTags.keys.contains { $0.localizedCaseInsensitiveContains("GPS") }, sourceLocation: sourceLocation)
    }

    private static func run(_ arguments: [String]) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString)").path
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: output) }
        process.standardOutput = FileHandle(forWritingAtPath: output)
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        await process.exited()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "\(arguments.joined(separator: " ")) exited \(process.terminationStatus) (needs libvips-tools and libimage-exiftool-perl)"])
        }
        return try String(contentsOfFile: output, encoding: .utf8)
    }
}
