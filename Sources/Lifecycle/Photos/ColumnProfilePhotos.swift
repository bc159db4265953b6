import Foundation
import Imaging
import JobRunner

/// The profile photo of an app whose map says where it lives (`profile_photo:`): a blob
/// key in a column of the user row or of her one row of an owned table. The upload stores
/// the bytes under the map's prefix and points the column at them in one transaction with
/// the normalisation job (ColumnPhotoJob), which replaces them with the product's JPEG;
/// removal empties the column in one transaction with the job that deletes the file. The
/// column is only ever changed compare-and-set (from the value read, under the account's
/// lock): an app writing it meanwhile wins, and lifecycle's change is refused, never
/// written over the app's.
public struct ColumnProfilePhotos<Store: LifecycleStore>: Sendable {
    public let services: LifecycleServices<Store>
    private let cache: AppDataCache

    public init(services: LifecycleServices<Store>, cache: AppDataCache = AppDataCache()) {
        self.services = services
        self.cache = cache
    }

    public struct Removed: Sendable, Encodable {
        public var account: String
        /// false: she had no photo; nothing changed.
        public var removed: Bool
        /// The job that deletes the file (its own, so a crash never leaves it behind).
        public var jobID: JobID?

        enum CodingKeys: String, CodingKey { case account, removed, jobID = "job_id" }
    }

    /// The map's photo column, or a refusal naming what to add.
    func place() async throws -> (AppData, DataMapPlan.ProfilePhotoPlace) {
        let data = try await cache.appData(services)
        guard let place = data.plan.profilePhoto else {
            throw LifecycleError(.badInput, """
                the data map (\(data.map.source)) says nowhere where a profile photo lives: add `profile_photo: {column: COLUMN}` \
                naming the user table's file column that holds its key (Jobs/README.md, "Profile photos")
                """)
        }
        return (data, place)
    }

    /// Stores the staged upload (moving it) and points her photo column at it, with its
    /// normalisation job. The photo it replaces stays until that job has settled the new
    /// one; a refused upload puts it back. Nothing half-done stays: a failure before the
    /// commit deletes the stored upload again.
    public func accept(account accountID: String, staged: StagedPhotoUpload) async throws -> ProfilePhotoUpload<Store>.Accepted {
        guard StagedPhotoUpload.acceptedContentTypes.contains(staged.contentType) else {
            throw PhotoRejection.unsupportedType("content is \(staged.contentType)")
        }
        let (data, place) = try await place()
        let directory = try await services.directory(cache: cache)
        let jobPolicy = try services.policies.policy(for: PhotoJobs.normalizeColumnKind)
        let upload = Self.uploadName(UUID().uuidString.lowercased(), contentType: staged.contentType)
        let key = place.prefix + BlobKey.segment(forID: accountID) + "/" + upload
        let stored = try await services.blobs.put(key: key, fromFile: staged.path, moving: true)
        let now = services.clock.now()
        let store = services.store
        let sql = data.sql
        do {
            return try await store.write { tx in
                guard let entry = try directory.entry(id: accountID, in: tx, locking: true, now: now) else {
                    throw LifecycleError.noSuchAccount(accountID)
                }
                // Checked again under the account's lock: a purge that began meanwhile wins.
                try ProfilePhotoUpload<Store>.refuseUnlessActive(entry.id, entry.state)
                let current = try Self.current(accountID, sql: sql, in: tx)
                guard try tx.execute(sql.replaceProfilePhoto(key: accountID, from: current ?? .null, to: .text(key))) == 1 else {
                    throw LifecycleError(.badInput, """
                        account \(accountID) has no row in \(place.table) to hold the photo (the map's profile_photo); \
                        the app creates that row, and the upload can be sent again once it has
                        """)
                }
                let replaces = current.flatMap { $0.text }.flatMap { $0.isEmpty ? nil : $0 }
                let job = try store.enqueue(
                    try PhotoJobs.normalizeRequest(account: accountID, upload: key, replaces: replaces), policy: jobPolicy, now: now, in: tx).job
                try tx.recordAudit(AuditEvent(
                    at: now, actor: "app", action: "photo.upload", accountID: accountID, outcome: "queued",
                    detail: [
                        "photo": .string(upload), "key": .string(key), "bytes": .int(Int(stored.size)), "content_type": .string(staged.contentType),
                        "job": .int(job.id),
                    ]))
                return .init(
                    account: accountID, photoID: upload, jobID: job.id, bytes: stored.size, contentType: staged.contentType,
                    state: NormalizationState.pending.rawValue)
            }
        } catch {
            // Removed only when the column is known not to name it: a commit whose answer
            // was lost may have landed, and then the file is her photo.
            let named = try? await store.read { tx in try Self.current(accountID, sql: sql, in: tx) == .text(key) }
            if named == false { try? await services.blobs.delete(keys: [key]) }
            throw error
        }
    }

    /// "Remove Photo": the column emptied and the file's deletion queued, in one
    /// transaction; the job deletes the file unless a row still names it.
    public func remove(account reference: AccountReference) async throws -> Removed {
        let (data, place) = try await place()
        let directory = try await services.directory(cache: cache)
        let jobPolicy = try services.policies.policy(for: PhotoJobs.deleteFileKind)
        let now = services.clock.now()
        let store = services.store
        let sql = data.sql
        return try await store.write { tx in
            guard let id = try directory.find(reference, in: tx), let entry = try directory.entry(id: id, in: tx, locking: true, now: now) else {
                throw LifecycleError.noSuchAccount(reference)
            }
            try ProfilePhotoUpload<Store>.refuseUnlessActive(entry.id, entry.state)
            guard let current = try Self.current(id, sql: sql, in: tx), let key = current.text, !key.isEmpty else {
                return Removed(account: id, removed: false, jobID: nil)
            }
            guard try tx.execute(sql.replaceProfilePhoto(key: id, from: current, to: place.empty.sqlValue)) == 1 else {
                throw LifecycleError(.badInput, "account \(id)'s photo changed while it was being removed; ask again")
            }
            let job = try store.enqueue(
                try EnqueueRequest(kind: PhotoJobs.deleteFileKind, payload: ColumnPhotoPayload(account: id, upload: key, replaces: nil)),
                policy: jobPolicy, now: now, in: tx).job
            try tx.recordAudit(AuditEvent(
                at: now, actor: "app", action: "photo.remove", accountID: id, outcome: "queued", detail: ["job": .int(job.id)]))
            return Removed(account: id, removed: true, jobID: job.id)
        }
    }

    /// `photos normalize` on an app's own database: one job per photo column holding a file
    /// that is not yet a JPEG of the current recipe (photos the app stored itself, or
    /// rendered under an older recipe), for one account or for all.
    public func queue(account reference: String?, policy: PhotoPolicy, pageSize: Int = 500) async throws -> PhotoQueueReport {
        let (data, place) = try await place()
        let directory = AccountDirectory<Store>(data: data)
        var chosen: String?
        if let reference {
            let now = services.clock.now()
            chosen = try await services.store.read { tx in
                guard let id = try directory.find(.operator(reference), in: tx), let entry = try directory.entry(id: id, in: tx, locking: false, now: now) else {
                    throw LifecycleError.noSuchAccount(reference)
                }
                guard entry.state == .active || entry.state == .pendingDeletion else {
                    throw LifecycleError(.noSuchAccount, "account \(id) is deleted (\(entry.state.rawValue)); its photos are gone with it")
                }
                return id
            }
        }
        let only = chosen
        let jobPolicy = try services.policies.policy(for: PhotoJobs.normalizeColumnKind)
        let (store, sql, limit) = (services.store, data.sql, max(1, pageSize))
        let rendered = Self.renderedPattern(place, policy: policy)
        // A page per transaction: the write lock is held for one page at a time.
        var report = PhotoQueueReport(recipe: policy.recipeIdentifier, recipeVersion: policy.recipeVersion)
        var after: String?
        while true {
            let now = services.clock.now()
            let start = after
            let enqueued = try await store.write { tx in
                try tx.rows(sql.profilePhotoFiles(notLike: rendered, only: only, after: start, limit: limit)).compactMap { row -> (String, EnqueueOutcome)? in
                    guard let key = row.first?.text, let file = row.last?.text else { return nil }
                    let request = try PhotoJobs.normalizeRequest(account: key, upload: file, replaces: nil)
                    return (key, try store.enqueue(request, policy: jobPolicy, now: now, in: tx))
                }
            }
            for (_, outcome) in enqueued {
                report.jobIDs.append(outcome.job.id)
                if outcome.created { report.queued += 1 } else { report.alreadyQueued += 1 }
            }
            guard enqueued.count == limit, let last = enqueued.last else { break }
            after = last.0
        }
        return report
    }

    /// Whether `key` is a JPEG `render` made (PREFIX<account>/v<version>-…-<digest>.jpg) under
    /// the current recipe version or a later one: a worker not yet upgraded to a new recipe
    /// leaves the newer rendering alone rather than render a JPEG of it again.
    static func isRendered(_ key: String, prefix: String, policy: PhotoPolicy) -> Bool {
        guard key.hasPrefix(prefix), key.hasSuffix(".jpg"), let name = key.split(separator: "/").last, name.first == "v" else { return false }
        guard let version = Int(name.dropFirst().prefix { $0.isNumber }), name.dropFirst().drop(while: { $0.isNumber }).first == "-" else { return false }
        return version >= policy.recipeVersion
    }

    /// The file name an upload is stored under in her folder, the one `isUpload` knows:
    /// `upload-<stem>.<ext>`, with its type's extension, so an export taken before its job
    /// has run hands it out as a photo.
    static func uploadName(_ stem: String, contentType: String) -> String {
        "upload-" + stem + "." + ContentSniffer.fileExtension(for: contentType)
    }

    /// Whether `key` is an upload lifecycle stored (PREFIX<account>/upload-…) and no job has
    /// turned into a JPEG yet.
    static func isUpload(_ key: String, prefix: String) -> Bool {
        key.hasPrefix(prefix) && key.split(separator: "/").last?.hasPrefix("upload-") == true
    }

    /// What `render` names a JPEG, as a LIKE pattern: PREFIX<account>/<recipe>-<digest>.jpg.
    private static func renderedPattern(_ place: DataMapPlan.ProfilePhotoPlace, policy: PhotoPolicy) -> String {
        likeEscaped(place.prefix) + "%/" + likeEscaped(policy.recipeIdentifier) + "-%.jpg"
    }

    /// `photos list`: the first `limit` accounts whose photo column names a file, in key
    /// order, with where the photo stands (`ProfilePhotoListing.state`); then, unless another
    /// state is asked for, those a refused upload left without one, in the byte order of
    /// their ids. `--state rejected` lists only in the latter order, both kinds.
    public func list(account reference: String?, state: NormalizationState?, limit: Int) async throws -> [ProfilePhotoListing] {
        let (data, place) = try await place()
        let policy = try PhotoPolicy(policies: services.policies)
        let directory = AccountDirectory<Store>(data: data)
        let (sql, now, page) = (data.sql, services.clock.now(), min(max(limit, 1), 500))
        return try await services.store.read { tx in
            var only: String?
            if let reference {
                guard let id = try directory.find(.operator(reference), in: tx) else { throw LifecycleError.noSuchAccount(reference) }
                only = id
            }
            func isListed(_ key: String) throws -> Bool {
                let lifecycleState = try directory.entry(id: key, in: tx, locking: false, now: now)?.state
                return lifecycleState == .active || lifecycleState == .pendingDeletion
            }
            var listed: [ProfilePhotoListing] = []
            // Every photo her column holds, unless only the rejected are asked for.
            var cursor: String?
            while state != .rejected, listed.count < limit {
                let rows = try tx.rows(sql.profilePhotoFiles(notLike: nil, only: only, after: cursor, limit: page))
                for row in rows {
                    guard let key = row.first?.text, let file = row.last?.text else { continue }
                    cursor = key
                    guard try isListed(key) else { continue }
                    var listing = ProfilePhotoListing(account: key, file: file, state: .pending)
                    if let known = try Self.state(of: key, data: data, in: tx), known.state == .rejected {
                        listing.state = .rejected
                        listing.message = known.message
                    } else if Self.isRendered(file, prefix: place.prefix, policy: policy) {
                        listing.state = .normalized
                    }
                    if state == nil || listing.state == state { listed.append(listing) }
                    if listed.count == limit { break }
                }
                if rows.count < page { break }
            }
            guard state == nil || state == .rejected else { return listed }
            // A refused upload that replaced no photo leaves her column empty: only the audit
            // trail knows of it, and the uploader still needs an answer.
            cursor = nil
            while listed.count < limit {
                let candidates = try only.map { [$0] }
                    ?? tx.accountsWithAuditEvent(action: "photo.normalize", outcome: "rejected", after: cursor, limit: page)
                for key in candidates {
                    cursor = key
                    let file = try Self.current(key, sql: sql, in: tx)?.text.flatMap { $0.isEmpty ? nil : $0 }
                    // Listed above with the file her column holds.
                    if state == nil, file != nil { continue }
                    guard try isListed(key), let known = try Self.state(of: key, data: data, in: tx), known.state == .rejected else { continue }
                    listed.append(ProfilePhotoListing(account: key, file: file, state: .rejected, message: known.message))
                    if listed.count == limit { break }
                }
                if only != nil || candidates.count < page { break }
            }
            return listed
        }
    }

    private static func likeEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
    }

    /// An upload's photo id, as the upload's answer gave it: the last part of its key.
    static func photoID(ofKey key: String) -> String {
        key.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? key
    }

    /// Her photo as the trail of its upload and its job has it: `pending` while her column
    /// names the upload, then `normalized`, or `rejected` with the message the uploader is
    /// shown, while her column holds what the job left there (the JPEG, or the photo the
    /// upload replaced). A photo the app stored itself is `normalized` once a `photos
    /// normalize` job rendered what her column holds. nil after a removal, for a photo no
    /// job has rendered, or once anything else changed the column (the app itself, a part
    /// deletion): the trail no longer speaks for what is there.
    static func state(of accountID: String, data: AppData, in tx: Store.Transaction) throws -> ProfilePhotoState? {
        guard data.plan.profilePhoto != nil else { return nil }
        let current = try Self.current(accountID, sql: data.sql, in: tx)?.text ?? ""
        let latest = try tx.latestAuditEvents(accountID: accountID, actions: ["photo.upload", "photo.remove"], limit: 1).first
        if let latest, latest.action == "photo.upload", let latestID = latest.id,
           case .string(let photoID)? = member(latest, "photo"), case .number(let job)? = member(latest, "job"),
           case .string(let uploadKey)? = member(latest, "key") {
            // Its job's one settling event comes soon after the upload, whatever runs beside it.
            let settled = try tx.auditEvents(accountID: accountID, action: "photo.normalize", afterID: latestID, limit: 100)
                .first { member($0, "job") == .number(job) }
            if settled == nil, current == uploadKey { return ProfilePhotoState(photoID: photoID, state: .pending) }
            if let settled, case .string(let left)? = member(settled, "key"), left == current {
                switch settled.outcome {
                case "normalized": return ProfilePhotoState(photoID: photoID, state: .normalized)
                case "rejected":
                    if case .string(let message)? = member(settled, "user_message") {
                        return ProfilePhotoState(photoID: photoID, state: .rejected, message: message)
                    }
                default: break
                }
            }
        }
        // Rendered by a later job than the upload's (`photos normalize` after a recipe change,
        // or over a photo the app stored itself).
        guard !current.isEmpty, let rendered = try tx.latestAuditEvents(accountID: accountID, actions: ["photo.normalize"], limit: 1).first,
              rendered.outcome == "normalized", (rendered.id ?? 0) > (latest?.id ?? 0),
              member(rendered, "key") == .string(current), case .string(let photoID)? = member(rendered, "photo")
        else { return nil }
        return ProfilePhotoState(photoID: photoID, state: .normalized)
    }

    private static func member(_ event: AuditEvent, _ name: String) -> JSONValue? {
        guard case .object(let members)? = event.detailValue else { return nil }
        return members[name]
    }

    /// Her photo column's value; nil when she has no row holding it.
    static func current(_ key: String, sql: DataMapSQL, in tx: Store.Transaction) throws -> SQLValue? {
        try tx.rows(sql.profilePhotoKey(key: key)).first?.first
    }
}

/// Where an account's profile photo stands, as the app API shows it.
public struct ProfilePhotoState: Sendable, Equatable {
    public var photoID: String
    public var state: NormalizationState
    /// The message for the uploader, when it was rejected.
    public var message: String?
}

/// One account's profile photo, as `photos list` shows it.
public struct ProfilePhotoListing: Sendable, Encodable, Equatable {
    public var account: String
    /// The blob key her photo column holds; nil when a refused upload left it empty.
    public var file: String?
    /// pending: not yet a JPEG of the current recipe (`photos normalize` takes it); rejected:
    /// her latest upload was refused, and her column holds what the job left (the photo
    /// the upload would have replaced, or none).
    public var state: NormalizationState
    /// For a rejection: the message the uploader was shown.
    public var message: String?
}

/// A column photo job's payload: the account and blob keys, no personal data.
struct ColumnPhotoPayload: Codable, Sendable, Equatable {
    var account: String
    /// The file the job works on: the upload to normalise, or the file to delete.
    var upload: String
    /// The photo the upload replaced: deleted once the upload is settled, put back if it is refused.
    var replaces: String?
}

extension DataMapSQL {
    private var photoPlace: DataMapPlan.ProfilePhotoPlace {
        // Built only from a plan whose map has `profile_photo:` (ColumnProfilePhotos.place).
        plan.profilePhoto!
    }

    /// Her photo column's value, as text.
    public func profilePhotoKey(key: String) -> SQLStatement {
        let place = photoPlace
        var builder = SQLBuilder(dialect)
        let keyColumn = column(place.table, place.keyColumn)
        let value = dialect == .postgres ? "CAST(\(q(place.column)) AS text)" : q(place.column)
        builder.append("SELECT \(value) FROM \(dialect.table(place.table)) WHERE \(q(place.keyColumn)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        return builder.statement([.text])
    }

    /// Users whose photo column names a file (one that is not `notLike`, a LIKE pattern with
    /// `\` escaping, when given), in key order after `after`: their key and the file, as text.
    public func profilePhotoFiles(notLike pattern: String?, only: String?, after: String?, limit: Int) -> SQLStatement {
        let place = photoPlace
        var builder = SQLBuilder(dialect)
        let keyColumn = column(place.table, place.keyColumn)
        let (key, photo) = (q(place.keyColumn), q(place.column))
        let asText = { (name: String) in self.dialect == .postgres ? "CAST(\(name) AS text)" : name }
        builder.append("SELECT \(asText(key)), \(asText(photo)) FROM \(dialect.table(place.table))")
        builder.append(" WHERE \(photo) IS NOT NULL AND \(photo) <> ''")
        if let pattern { builder.append(" AND \(photo) NOT LIKE \(builder.bind(.text(pattern))) ESCAPE '\\'") }
        if let only { builder.append(" AND \(key) = \(builder.bind(keyValue(only, for: keyColumn), as: keyColumn))") }
        if let after { builder.append(" AND \(key) > \(builder.bind(keyValue(after, for: keyColumn), as: keyColumn))") }
        builder.append(" ORDER BY \(key) LIMIT \(limit)")
        return builder.statement([.text, .text])
    }

    /// Sets her photo column to `to` where it still holds `from`: 1 row, or 0 when the app changed it meanwhile.
    public func replaceProfilePhoto(key: String, from: SQLValue, to: SQLValue) -> SQLStatement {
        let place = photoPlace
        var builder = SQLBuilder(dialect)
        let keyColumn = column(place.table, place.keyColumn)
        let photoColumn = column(place.table, place.column)
        builder.append("UPDATE \(dialect.table(place.table)) SET \(q(place.column)) = \(builder.bind(to, as: photoColumn))")
        builder.append(" WHERE \(q(place.keyColumn)) = \(builder.bind(keyValue(key, for: keyColumn), as: keyColumn))")
        builder.append(" AND " + builder.nullSafeEquals(q(place.column), from, as: photoColumn))
        return builder.statement()
    }
}
