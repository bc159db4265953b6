import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// What the server's HTML pages (the operations page, the account deletion page) share:
/// how a document is answered and how their forms are read and guarded.
enum HTMLPages {
    /// A whole document, never cached, under a policy that lets it load nothing but its own
    /// inline style, post its forms only to this site, and be framed by none.
    static func response(_ document: String, status: HTTPResponse.Status) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Content-Security-Policy")!] = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        // frame-ancestors for browsers that read the policy, X-Frame-Options for those that
        // do not: no other site may frame the deletion button under a decoy (clickjacking).
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        // A confirmation page's address holds its link's signature: it goes to no other site.
        // Not `no-referrer`, with which browsers send `Origin: null` on the page's own forms.
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: document)))
    }

    /// A form posted from another site (cross-site request forgery): browsers say where a
    /// POST comes from (`Sec-Fetch-Site`, `Origin`); terminal browsers send neither. An
    /// `Origin` must name the Host the request came to, or `publicOrigin` (the site's name
    /// behind a proxy that does not pass the Host on).
    static func isCrossSite(_ request: Request, publicOrigin: String? = nil) -> Bool {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site != "same-origin", site != "none" { return true }
        guard let origin = request.headers[HTTPField.Name("Origin")!], origin != publicOrigin else { return false }
        let host = request.head.authority ?? ""
        return origin != "http://\(host)" && origin != "https://\(host)"
    }

    /// The fields of an `application/x-www-form-urlencoded` body; the first of a repeated name.
    static func formFields(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = String(parts[0]).removingPercentEncoding, fields[name] == nil,
                  let value = String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding else { continue }
            fields[name] = value
        }
        return fields
    }
}
