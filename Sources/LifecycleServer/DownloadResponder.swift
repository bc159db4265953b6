import Foundation
import HTTPTypes
import Hummingbird
import JobRunner
import Lifecycle
import NIOCore

/// `GET`/`HEAD /exports/<id>?expires=…&sig=…`: the link an export's email carries.
///
/// The link is checked as `exports verify-link` checks it: 403 when the signature does not
/// match (forged or altered; nothing said about the export), 404 for an export that does
/// not exist (deleted with its account) or is not published, 410 once the link expired or
/// the export was revoked. A good link sends the archive with sendfile(2)
/// (``FileRegionBody``: constant memory and no copy through the process, whatever its
/// size), with `Range`, `If-Range`, a strong `ETag` (an export's archive never changes),
/// `Content-Length` and `Content-Disposition`, so a
/// download manager resumes a multi-GB archive where it stopped. On a blob store that
/// signs its own URLs (S3) links point at the store, which serves ranges itself.
/// Every answer about a known export is audited, the client as a keyed hash of its address.
struct DownloadResponder<Store: LifecycleStore>: Sendable {
    let services: LifecycleServices<Store>

    func respond(to request: Request, context: ServerContext, sendBody: Bool) async throws -> Response {
        let exportID = context.parameters.get("id") ?? ""
        let decision = try await services.exportDownload(exportID: exportID, query: request.uri.query ?? "")
        let client = context.remoteAddress?.ipAddress
        switch decision {
        case .forbidden(let reason):
            context.logger.notice("download refused", metadata: ["export": "\(exportID)", "reason": "\(reason)"])
            return Self.problem(.forbidden, "This download link is not valid.", sendBody: sendBody)
        case .notFound(let id, let reason):
            context.logger.notice("download of an unknown export", metadata: ["export": "\(id)", "reason": "\(reason)"])
            return Self.problem(.notFound, "There is no such export.", sendBody: sendBody)
        case .gone(let export, let id, let reason):
            context.logger.notice("download of an expired or revoked export", metadata: ["export": "\(id)", "reason": "\(reason)"])
            if let export { try await services.auditDownload(export, status: 410, bytes: 0, range: nil, client: client) }
            return Self.problem(.gone, "This download link has expired. Ask for a new export of your data.", sendBody: sendBody)
        case .redirect(let export, let url):
            try await services.auditDownload(export, status: 302, bytes: 0, range: nil, client: client)
            var headers = HTTPFields()
            headers[.location] = url
            headers[.cacheControl] = "private, no-store"
            return Response(status: .found, headers: headers)
        case .file(let export, let path):
            return try await serve(export, path: path, request: request, context: context, sendBody: sendBody, client: client)
        }
    }

    private func serve(
        _ export: ExportRecord, path: String, request: Request, context: ServerContext, sendBody: Bool, client: String?
    ) async throws -> Response {
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            context.logger.error("a ready export's archive is missing", metadata: ["export": "\(export.id)", "path": "\(path)"])
            return Self.problem(.notFound, "There is no such export.", sendBody: sendBody)
        }
        let size = Int(status.st_size)
        let eTag = "\"\(export.id)-\(size)\""
        var headers = HTTPFields()
        headers[.contentType] = export.contentType
        headers[.acceptRanges] = "bytes"
        headers[.eTag] = eTag
        if let completed = export.completedAt { headers[.lastModified] = Self.httpDate(completed) }
        headers[.contentDisposition] = "attachment; filename=\"\(export.downloadFileName)\""
        // The link is a secret: no shared cache keeps the archive, no page it leads to learns it.
        headers[.cacheControl] = "private, no-store"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"

        // If-Range: a range only while the archive is the one the client started on.
        var rangeHeader = request.headers[.range]
        if let ifRange = request.headers[.ifRange], ifRange != eTag, ifRange != headers[.lastModified] { rangeHeader = nil }
        switch ByteRange.parse(rangeHeader, size: size) {
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            headers[.contentLength] = "0"
            try await services.auditDownload(export, status: 416, bytes: 0, range: rangeHeader, client: client)
            return Response(status: .rangeNotSatisfiable, headers: headers)
        case .part(let range):
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
            headers[.contentLength] = "\(range.count)"
            if sendBody { try await services.auditDownload(export, status: 206, bytes: Int64(range.count), range: rangeHeader, client: client) }
            let body = sendBody
                ? FileRegionBody.body(path: path, range: range.lowerBound..<(range.upperBound + 1), file: status, headers: &headers) : ResponseBody()
            return Response(status: .partialContent, headers: headers, body: body)
        case .whole:
            headers[.contentLength] = "\(size)"
            if sendBody { try await services.auditDownload(export, status: 200, bytes: Int64(size), range: nil, client: client) }
            let body = sendBody && size > 0 ? FileRegionBody.body(path: path, range: 0..<size, file: status, headers: &headers) : ResponseBody()
            return Response(status: .ok, headers: headers, body: body)
        }
    }

    /// A short plain-text answer a person reads in the browser (why exactly goes to the log).
    static func problem(_ status: HTTPResponse.Status, _ message: String, sendBody: Bool) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        headers[.cacheControl] = "no-store"
        let text = message + "\n"
        headers[.contentLength] = "\(text.utf8.count)"
        return Response(status: status, headers: headers, body: sendBody ? .init(byteBuffer: ByteBuffer(string: text)) : .init())
    }

    static func httpDate(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        var buffer = [Int8](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
