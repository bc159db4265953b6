import Archiving
import Crypto
import Foundation
import HTTPTypes
import Imaging
import Hummingbird
import JobRunner
import Lifecycle
import LifecycleRuntime
import NIOCore

/// The app backend's API under `/v1` (Sources/LifecycleServer/openapi.yaml describes it):
/// what the product's screens ask of the server, so the backend calls HTTP instead of a CLI.
/// Every request carries `Authorization: Bearer <token>`, the token from the server's
/// configuration, compared in constant time. Bodies and errors are JSON in the CLI's style
/// (snake_case); an error is `{"error": {"code": …, "message": …}}`, with the product's
/// own words where the screen shows them ("Incorrect password").
struct AppAPI<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>
    let token: APIToken
    /// The data map and the app database's catalog, read once for every request: on an
    /// app's own database, reading the catalog again for each request would be most of
    /// its time (a schema change needs a restart, as the map's check runs at start).
    let cache = AppDataCache()

    func register(on router: Router<ServerContext>) {
        let api = router.group("v1").add(middleware: BearerTokenMiddleware(token: token))
        api.get("accounts/:account") { _, context in try await answer { try await self.account(context) } }
        api.post("accounts/:account/exports") { request, context in try await answer { try await self.requestExport(request, context) } }
        api.get("accounts/:account/exports") { _, context in try await answer { try await self.exports(context) } }
        api.post("accounts/:account/deletion") { request, context in try await answer { try await self.requestDeletion(request, context) } }
        api.post("accounts/:account/restore") { request, context in try await answer { try await self.restore(request, context) } }
        api.get("parts") { _, _ in try await answer { try await self.parts() } }
        api.post("accounts/:account/part-deletions") { request, context in try await answer { try await self.requestPartDeletion(request, context) } }
        api.get("accounts/:account/part-deletions") { _, context in try await answer { try await self.partDeletions(context) } }
        api.put("accounts/:account/photo") { request, context in
            var response = try await answer { try await self.uploadPhoto(request, context) }
            // A refusal may leave the body unread: the connection is not reused.
            if response.status.code >= 400 { response.headers[.connection] = "close" }
            return response
        }
        api.delete("accounts/:account/photo") { _, context in try await answer { try await self.removePhoto(context) } }
    }

    /// Deletion as this installation's map has it, reading the map and catalog through the server's cache.
    private func deletionService() async throws -> DeletionService<Store> {
        try DeletionService(services: services, directory: try await services.directory(cache: cache))
    }

    // MARK: Routes

    private func account(_ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        do {
            let directory = try await services.directory(cache: cache)
            let now = services.clock.now()
            let photos = ProfilePhotoUpload(services: services, cache: cache)
            let found = try await services.store.read { tx -> (AccountDirectory<Store>.Entry, AccountHold?, ProfilePhotoState?)? in
                guard let entry = try Self.liveEntry(reference, directory: directory, in: tx, now: now) else { return nil }
                let id = entry.id
                let photo = try photos.state(of: id, directory: directory, in: tx)
                return (entry, try tx.openHold(key: id).flatMap { $0.isActive(at: now) ? $0 : nil }, photo)
            }
            guard let (entry, hold, photo) = found else { throw LifecycleError.noSuchAccount(reference) }
            return (.ok, AccountStatus(
                account: entry.id, state: entry.state, purgeAfter: entry.purgeAfter, held: hold != nil,
                profilePhoto: photo.map(ProfilePhotoStatus.init)))
        }
    }

    private func requestExport(_ request: Request, _ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        let body = try await Self.decodeOptional(ExportBody.self, from: request, context: context)
        do {
            var format: ArchiveFormat?
            if let name = body?.format {
                guard let known = ArchiveFormat(rawValue: name) else {
                    throw APIError(.badRequest, code: "bad_request", message: "format must be zip or tar.gz (got '\(name)')")
                }
                format = known
            }
            let outcome = try await services.requestExport(ExportRequest(account: reference, format: format), cache: cache)
            return (.accepted, ExportAccepted(account: outcome.accountID, jobID: outcome.job.id, state: outcome.job.state.rawValue, created: outcome.created))
        }
    }

    private func exports(_ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        do {
            let directory = try await services.directory(cache: cache)
            let now = services.clock.now()
            let (id, rows) = try await services.store.read { tx -> (String, [ExportRecord]) in
                guard let id = try Self.liveEntry(reference, directory: directory, in: tx, now: now)?.id else {
                    throw LifecycleError.noSuchAccount(reference)
                }
                return (id, try tx.exports(accountID: id))
            }
            let listed = try rows.map { export in
                ExportListed(
                    exportID: export.id, jobID: export.jobID, state: export.state.rawValue, format: export.format,
                    bytes: export.byteSize, expiresAt: export.expiresAt, link: try services.exportLink(for: export))
            }
            return (.ok, ExportsListed(account: id, exports: listed))
        }
    }

    private func requestDeletion(_ request: Request, _ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        let body = try await Self.decode(DeletionBody.self, from: request, context: context)
        do {
            let result = try await deletionService()
                .requestDeletion(account: reference, password: body.password)
            let status: HTTPResponse.Status = result.outcome == .requested ? .accepted : .ok
            return (status, result)
        }
    }

    /// The parts of an account's data a user may delete and keep the account (the data map's `parts:`).
    private func parts() async throws -> (HTTPResponse.Status, any Encodable) {
        let plan = try await deletionService().wholePlan
        return (.ok, PartsListed(parts: plan.parts.map { PartListed(name: $0.name, label: $0.label) }))
    }

    private func requestPartDeletion(_ request: Request, _ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        let body = try await Self.decode(PartDeletionBody.self, from: request, context: context)
        guard !body.parts.isEmpty, body.parts.count <= 64 else {
            throw APIError(.badRequest, code: "bad_request", message: "parts must name at least one part (GET /v1/parts lists them)")
        }
        let service = try await deletionService()
        let offered = Set(service.wholePlan.parts.map(\.name))
        if let unknown = body.parts.first(where: { !offered.contains($0) }) {
            throw APIError(.badRequest, code: "bad_request", message: "there is no part '\(unknown)' (GET /v1/parts lists them: \(offered.sorted().joined(separator: ", ")))")
        }
        let result = try await service.requestPartDeletion(account: reference, password: body.password, parts: body.parts)
        return (.accepted, result)
    }

    /// The account's part deletions that finished, newest first: each either `erased`, with
    /// its verified receipt, or `stopped` (a hold or the account's purge came first), with
    /// why. The outcome is its own field so that a stopped one can never be read as done.
    private func partDeletions(_ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        let directory = try await services.directory(cache: cache)
        let now = services.clock.now()
        let (id, events) = try await services.store.read { tx -> (String, [AuditEvent]) in
            guard let id = try Self.liveEntry(reference, directory: directory, in: tx, now: now)?.id else {
                throw LifecycleError.noSuchAccount(reference)
            }
            return (id, try tx.auditEvents(accountID: id))
        }
        let done = events.filter { $0.action == DeletionAudit.partDeletion }.sorted { $0.at > $1.at }
        return (.ok, PartDeletionsListed(account: id, deletions: done.map {
            PartDeletionListed(at: $0.at, actor: $0.actor, outcome: $0.outcome, receipt: $0.detailValue)
        }))
    }

    private func restore(_ request: Request, _ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        let session = try await Self.decodeOptional(RestoreBody.self, from: request, context: context)?.sessionKey
        if let session, session.isEmpty || session.unicodeScalars.count > 256 || AccountReference.controlCharacterProblem(session) != nil {
            throw APIError(.badRequest, code: "bad_request", message: "session_key must be the session's key: 1 to 256 printable characters")
        }
        let service = try await deletionService()
        let directory = try await services.directory(cache: cache)
        let now = services.clock.now()
        guard let key = try await services.store.read({ tx in try Self.liveEntry(reference, directory: directory, in: tx, now: now)?.id }) else {
            throw LifecycleError.noSuchAccount(reference)
        }
        // Whatever the restore answers: a session of an active user is as much hers, and a
        // refused sign-in saves no session under the key.
        if let session, directory.data.hasEncodedRemovals {
            let data = directory.data
            try await services.store.write { tx in try data.recordSignIn(key: key, session: session, in: tx) }
        }
        do {
            return (.ok, try await service.restore(account: reference, actor: "app"))
        } catch let error as LifecycleError {
            // Told apart from every other refusal (purging, past the purge date): a sign-in
            // hook ignores this one and must refuse the sign-in on the others.
            guard (try? await service.isActive(reference)) == true else { throw error }
            throw APIError(.conflict, code: "not_pending", message: error.message)
        }
    }

    /// The photo's bytes are the body. Refused at once when `Content-Length` is over the
    /// limit, else while streaming at the first byte past it, or at its first bytes when
    /// they are not a JPEG, PNG or HEIC; the connection is then closed, the rest unread.
    /// 202 once stored and queued; the normalisation job then makes it the product's JPEG.
    private func uploadPhoto(_ request: Request, _ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        let upload = ProfilePhotoUpload(services: services, cache: cache)
        let limit = try upload.maxBytes()
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw Self.tooLarge(limit)
        }
        let accountID = try await upload.checkAccount(reference)
        let spool = try PhotoUploadSpool()
        let staged: StagedPhotoUpload
        do {
            staged = try await spool.fill(from: request.body, limit: limit)
        } catch PhotoUploadSpool.Refusal.tooLarge {
            throw Self.tooLarge(limit)
        } catch PhotoUploadSpool.Refusal.unsupportedType(let type) {
            services.logger.info("photo upload refused by type", metadata: ["account": "\(accountID)", "content_type": "\(type)"])
            throw APIError(
                .unsupportedMediaType, code: "unsupported_photo_type", message: PhotoRejection.unsupportedType(type).userMessage)
        } catch PhotoUploadSpool.Refusal.empty {
            throw APIError(.badRequest, code: "bad_request", message: "the request body is empty: send the photo's bytes")
        }
        let accepted = try await upload.accept(account: accountID, staged: staged)
        spool.taken = true
        return (.accepted, accepted)
    }

    /// "Remove Photo": 200 with `removed` (false when she had none); the file's deletion is
    /// a job of its own, queued in the same commit.
    private func removePhoto(_ context: ServerContext) async throws -> (HTTPResponse.Status, any Encodable) {
        let reference = try Self.account(in: context)
        return (.ok, try await ProfilePhotoUpload(services: services, cache: cache).remove(account: reference))
    }

    static func tooLarge(_ limit: Int) -> APIError {
        APIError(.contentTooLarge, code: "photo_too_large", message: PhotoRejection.tooLarge(byteCount: limit + 1, limit: limit).userMessage)
    }

    // MARK: Plumbing

    /// The account the app may still ask about: none once it is purged, on every kind of
    /// database. An app's own rows go with the purge, so there the account is simply not
    /// found; the reference schema keeps a tombstone, which is lifecycle's record (the
    /// audit, the receipt), not an account the app can act on.
    static func liveEntry(
        _ reference: AccountReference, directory: AccountDirectory<Store>, in tx: Store.Transaction, now: Date
    ) throws -> AccountDirectory<Store>.Entry? {
        guard let id = try directory.find(reference, in: tx), let entry = try directory.entry(id: id, in: tx, locking: false, now: now),
              entry.state != .purged else { return nil }
        return entry
    }

    /// The account the path names: its key exactly, or `COLUMN:VALUE` for one lookup column
    /// of the data map. Never "the key or any lookup column": a user who chose another
    /// account's key as their username would otherwise make that account ambiguous, and
    /// block every call on it. The router hands the segment over still percent-encoded.
    static func account(in context: ServerContext) throws -> AccountReference {
        guard let raw = context.parameters.get("account"), let account = raw.removingPercentEncoding,
              !account.isEmpty, account.count <= 320 else {
            throw APIError(.badRequest, code: "bad_request", message: "the path names no account")
        }
        if let problem = AccountReference.controlCharacterProblem(account) { throw APIError(.badRequest, code: "bad_request", message: problem) }
        return .app(account)
    }

    /// Runs a route's work and turns its result or refusal into JSON with the status the
    /// refusal's category calls for.
    func answer(_ work: () async throws -> (HTTPResponse.Status, any Encodable)) async throws -> Response {
        do {
            let (status, value) = try await work()
            return try Self.json(status, value)
        } catch let error as APIError {
            return try error.response()
        } catch {
            let classified = LifecycleError(classifying: error)
            if LifecycleError.isTheServersTrouble(error) {
                let id = ServerErrors.requestID()
                services.logger.error("request refused: the server cannot serve it", metadata: ["request_id": "\(id)", "error": "\(classified.message)"])
                var refusal = APIError(
                    .serviceUnavailable, code: "unavailable",
                    message: "the server cannot do this right now; ask again later (request \(id): its operator finds the cause in the server's log)")
                refusal.requestID = id
                return try refusal.response()
            }
            guard classified.category == .internalError else { return try APIError(classified).response() }
            // The answer says only that it failed; the log says why, under the id the answer carries.
            let id = ServerErrors.requestID()
            services.logger.error("request failed", metadata: ["request_id": "\(id)", "error": "\(error)"])
            var refusal = APIError(.internalServerError, code: "internal_error", message: "an internal error (request \(id)); it is in the server's log")
            refusal.requestID = id
            return try refusal.response()
        }
    }

    static func json(_ status: HTTPResponse.Status, _ value: any Encodable) throws -> Response {
        try jsonResponse(status, value)
    }

    /// At most 64 KiB of JSON: these bodies hold a password or a format name.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, context: ServerContext) async throws -> T {
        guard let value = try await decodeOptional(type, from: request, context: context) else {
            throw APIError(.badRequest, code: "bad_request", message: "the request needs a JSON body")
        }
        return value
    }

    static func decodeOptional<T: Decodable>(_ type: T.Type, from request: Request, context: ServerContext) async throws -> T? {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: 65_536)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw APIError(.contentTooLarge, code: "body_too_large", message: "the request body is larger than 64 KiB")
        } catch {
            throw APIError(.badRequest, code: "bad_request", message: "the request body ended before its Content-Length (or could not be read)")
        }
        guard buffer.readableBytes > 0 else { return nil }
        do {
            return try JSONDecoder().decode(type, from: Data(buffer.readableBytesView))
        } catch {
            throw APIError(.badRequest, code: "bad_request", message: "the request body is not the JSON this endpoint takes: \(Self.describe(error))")
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "'\(key.stringValue)' is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type"
        default: return "it does not parse"
        }
    }
}

// MARK: Bodies

struct ExportBody: Decodable { var format: String? }

struct DeletionBody: Decodable { var password: String }

/// A sign-in's session, for a site whose sessions name their user only encoded
/// (`django_session`): signing her out later reads her sessions, not the whole table.
struct RestoreBody: Decodable {
    var sessionKey: String?

    enum CodingKeys: String, CodingKey { case sessionKey = "session_key" }
}

struct PartDeletionBody: Decodable {
    var password: String
    var parts: [String]
}

struct PartListed: Encodable {
    var name: String
    var label: String
}

struct PartsListed: Encodable { var parts: [PartListed] }

struct PartDeletionListed: Encodable {
    var at: Date
    var actor: String
    /// `erased` or `stopped`, as the audit event records it.
    var outcome: String
    var receipt: JSONValue?
}

struct PartDeletionsListed: Encodable {
    var account: String
    var deletions: [PartDeletionListed]
}

struct AccountStatus: Encodable {
    var account: String
    var state: Lifecycle.AccountState
    var purgeAfter: Date?
    var held: Bool
    var profilePhoto: ProfilePhotoStatus?

    enum CodingKeys: String, CodingKey {
        case account, state, purgeAfter = "purge_after", held, profilePhoto = "profile_photo"
    }
}

/// Where the account's profile photo stands: `pending` until its job has run, then
/// `normalized`, or `rejected` with the message the uploader is shown.
struct ProfilePhotoStatus: Encodable {
    var photoID: String
    var state: String
    var message: String?

    init(_ photo: ProfilePhotoState) {
        photoID = photo.photoID
        state = photo.state.rawValue
        message = photo.message
    }

    enum CodingKeys: String, CodingKey { case photoID = "photo_id", state, message }
}

struct ExportAccepted: Encodable {
    var account: String
    var jobID: JobID
    var state: String
    /// False when an export was already under way and this is it.
    var created: Bool

    enum CodingKeys: String, CodingKey { case account, jobID = "job_id", state, created }
}

struct ExportListed: Encodable {
    var exportID: String
    var jobID: JobID?
    var state: String
    var format: String
    var bytes: Int64?
    var expiresAt: Date?
    var link: String?

    enum CodingKeys: String, CodingKey {
        case exportID = "export_id", jobID = "job_id", state, format, bytes, expiresAt = "expires_at", link
    }
}

struct ExportsListed: Encodable {
    var account: String
    var exports: [ExportListed]
}

/// JSON in the CLI's style (snake_case keys, ISO-8601 UTC times), never cached.
func jsonResponse(_ status: HTTPResponse.Status, _ value: any Encodable, headers extra: HTTPFields = [:]) throws -> Response {
    let text = try JobJSON.encode(AnyEncodable(value)) + "\n"
    var headers = extra
    headers[.contentType] = "application/json"
    headers[.cacheControl] = "no-store"
    return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
}

struct AnyEncodable: Encodable {
    let value: any Encodable
    init(_ value: any Encodable) { self.value = value }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}

// MARK: Errors and the token

/// A refusal as the API sends it.
struct APIError: Error {
    let status: HTTPResponse.Status
    let code: String
    let message: String
    var retryAt: Date?
    /// For a 500: the id under which the server's log has the cause.
    var requestID: String?

    init(_ status: HTTPResponse.Status, code: String, message: String, retryAt: Date? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAt = retryAt
    }

    /// A domain refusal, by category; the product's own sentences pass through unchanged.
    /// Where the refusal's message advises the operator (a command, an option), the app
    /// hears its own wording and code instead.
    init(_ error: LifecycleError) {
        switch error.category {
        case .noSuchAccount: self.init(.notFound, code: "no_such_account", message: error.message)
        case .permissionDenied where error.message == DeletionMessages.incorrectPassword:
            self.init(.unauthorized, code: "incorrect_password", message: error.message)
        case .permissionDenied: self.init(.forbidden, code: "forbidden", message: error.message)
        case .tryLater: self.init(.tooManyRequests, code: "try_later", message: error.message, retryAt: error.retryAt)
        case .badInput: self.init(.conflict, code: "refused", message: error.message)
        case .badConfiguration, .inputMissing, .cannotCreate, .unavailable:
            self.init(.serviceUnavailable, code: "unavailable", message: error.message)
        case .internalError: self.init(.internalServerError, code: "internal_error", message: "an internal error; it is in the server's log")
        }
        if let forApp = error.forApp {
            self = APIError(status, code: forApp.code, message: forApp.message, retryAt: retryAt)
        }
    }

    func response() throws -> Response {
        struct Body: Encodable {
            struct Detail: Encodable {
                var code: String
                var message: String
                var retryAt: Date?
                var requestID: String?
                enum CodingKeys: String, CodingKey { case code, message, retryAt = "retry_at", requestID = "request_id" }
            }
            var error: Detail
        }
        var headers = HTTPFields()
        if let requestID { headers[ServerErrors.requestIDField] = requestID }
        if let retryAt { headers[.retryAfter] = "\(max(1, Int(retryAt.timeIntervalSinceNow.rounded(.up))))" }
        if status == .unauthorized, code == "unauthorized" { headers[.wwwAuthenticate] = "Bearer" }
        return try jsonResponse(status, Body(error: .init(code: code, message: message, retryAt: retryAt, requestID: requestID)), headers: headers)
    }
}

/// The API's shared secret, checked in constant time.
public struct APIToken: Sendable {
    private let key = SymmetricKey(size: .bits256)
    private let expected: HashedAuthenticationCode<SHA256>

    public init?(_ token: String) {
        guard token.count >= 32 else { return nil }
        expected = HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: key)
    }

    /// Both sides go through the same keyed hash, and the codes are compared in constant
    /// time: how long a wrong guess takes says nothing about how much of it was right.
    func matches(_ header: String?) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let presented = Data(header.dropFirst("Bearer ".count).utf8)
        return HMAC<SHA256>.isValidAuthenticationCode(expected, authenticating: presented, using: key)
    }
}

struct BearerTokenMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let token: APIToken

    func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        guard token.matches(request.headers[.authorization]) else {
            return try APIError(.unauthorized, code: "unauthorized", message: "this API needs Authorization: Bearer <the API token>").response()
        }
        return try await next(request, context)
    }
}
