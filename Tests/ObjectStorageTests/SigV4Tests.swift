import Foundation
import ObjectStorage
import Testing

/// Expected values are AWS's, never computed here:
/// * the SigV4 test suite ("aws-sig-v4-test-suite", requests dated 20150830T123600Z,
///   key AKIDEXAMPLE, region us-east-1, service "service"), as published in the AWS
///   General Reference and shipped with the AWS SDKs' signer tests;
/// * the S3 API Reference's "Signature Calculations for the Authorization Header" and
///   "Authenticating Requests: Using Query Parameters" examples (examplebucket, 20130524).
struct SigV4TestSuiteTests {
    static let signer = SigV4Signer(
        credentials: AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1", service: "service")
    static let date = Date(timeIntervalSince1970: 1_440_938_160)  // 2015-08-30T12:36:00Z

    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var method: String
        var path: String
        var query: [(name: String, value: String)] = []
        var headers: [(name: String, value: String)] = []
        var body = ""
        var signedHeaders: String
        var signature: String
        var testDescription: String { name }
    }

    static let vectors: [Vector] = [
        Vector(name: "get-vanilla", method: "GET", path: "/", signedHeaders: "host;x-amz-date",
               signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        Vector(name: "get-vanilla-query-order-key-case", method: "GET", path: "/", query: [("Param2", "value2"), ("Param1", "value1")],
               signedHeaders: "host;x-amz-date", signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
        Vector(name: "get-vanilla-query-unreserved", method: "GET", path: "/",
               query: [("-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")],
               signedHeaders: "host;x-amz-date", signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
        Vector(name: "get-vanilla-utf8-query", method: "GET", path: "/", query: [("ሴ", "bar")],
               signedHeaders: "host;x-amz-date", signature: "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
        Vector(name: "get-unreserved", method: "GET", path: "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
               signedHeaders: "host;x-amz-date", signature: "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
        Vector(name: "get-utf8", method: "GET", path: "/ሴ",
               signedHeaders: "host;x-amz-date", signature: "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
        Vector(name: "get-header-value-trim", method: "GET", path: "/", headers: [("My-Header1", " value1"), ("My-Header2", " \"a   b   c\"")],
               signedHeaders: "host;my-header1;my-header2;x-amz-date", signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
        Vector(name: "post-vanilla", method: "POST", path: "/",
               signedHeaders: "host;x-amz-date", signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        Vector(name: "post-vanilla-query", method: "POST", path: "/", query: [("Param1", "value1")],
               signedHeaders: "host;x-amz-date", signature: "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"),
        Vector(name: "post-vanilla-query-nonunreserved", method: "POST", path: "/", query: [("@#$%^", ""), ("+", "/,?><`\";:\\|][{}")],
               signedHeaders: "host;x-amz-date", signature: "66c82657c86e26fb25238d0e69f011edc4c6df5ae71119d7cb98ed9b87393c1e"),
        Vector(name: "post-header-key-sort", method: "POST", path: "/", headers: [("My-Header1", "value1")],
               signedHeaders: "host;my-header1;x-amz-date", signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"),
        Vector(name: "post-header-value-case", method: "POST", path: "/", headers: [("My-Header1", "VALUE1")],
               signedHeaders: "host;my-header1;x-amz-date", signature: "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"),
        Vector(name: "post-x-www-form-urlencoded", method: "POST", path: "/", headers: [("Content-Type", "application/x-www-form-urlencoded")],
               body: "Param1=value1", signedHeaders: "content-type;host;x-amz-date",
               signature: "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
    ]

    @Test(arguments: vectors)
    func matchesTheSuite(_ vector: Vector) {
        let signature = Self.signer.sign(
            SigV4Signer.Request(
                method: vector.method, path: vector.path, query: vector.query,
                headers: [("Host", "example.amazonaws.com")] + vector.headers, payloadHash: SigV4Signer.sha256Hex(Data(vector.body.utf8))),
            at: Self.date)
        #expect(signature.signedHeaders == vector.signedHeaders)
        #expect(signature.signature == vector.signature, "canonical request:\n\(signature.canonicalRequest)")
        #expect(signature.authorization == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=\(vector.signedHeaders), Signature=\(vector.signature)")
    }

    /// get-vanilla's published intermediate files (.creq and .sts), not only its result.
    @Test func getVanillaCanonicalRequestAndStringToSign() {
        let signature = Self.signer.sign(
            SigV4Signer.Request(method: "GET", path: "/", headers: [("Host", "example.amazonaws.com")], payloadHash: SigV4Signer.emptyPayloadHash),
            at: Self.date)
        #expect(signature.canonicalRequest == "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(signature.stringToSign == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63")
    }

    /// post-sts-header-before: a session token is a signed header.
    @Test func aSessionTokenIsSigned() {
        let token = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="
        let signer = SigV4Signer(
            credentials: AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", sessionToken: token),
            region: "us-east-1", service: "service")
        let signature = signer.sign(
            SigV4Signer.Request(method: "POST", path: "/", headers: [("Host", "example.amazonaws.com")], payloadHash: SigV4Signer.emptyPayloadHash),
            at: Self.date)
        #expect(signature.signedHeaders == "host;x-amz-date;x-amz-security-token")
        #expect(signature.signature == "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead")
        #expect(signature.addedHeaders.contains { $0.name == "x-amz-security-token" && $0.value == token })
    }
}

struct S3DocumentationExampleTests {
    static let signer = SigV4Signer(
        credentials: AWSCredentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1")
    static let date = Date(timeIntervalSince1970: 1_369_353_600)  // 2013-05-24T00:00:00Z
    static let host = "examplebucket.s3.amazonaws.com"

    @Test func getObjectWithRange() {
        let signature = Self.signer.sign(
            SigV4Signer.Request(method: "GET", path: "/test.txt", headers: [("Host", Self.host), ("Range", "bytes=0-9")], payloadHash: SigV4Signer.emptyPayloadHash),
            at: Self.date)
        #expect(signature.canonicalRequest == """
            GET
            /test.txt

            host:examplebucket.s3.amazonaws.com
            range:bytes=0-9
            x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            x-amz-date:20130524T000000Z

            host;range;x-amz-content-sha256;x-amz-date
            e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            """)
        #expect(signature.stringToSign.hasSuffix("\n7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"))
        #expect(signature.authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    /// The key `test$file.text` shows S3's path encoding: `$` becomes `%24`.
    @Test func putObjectWithAnEncodedKey() {
        let body = Data("Welcome to Amazon S3.".utf8)
        let signature = Self.signer.sign(
            SigV4Signer.Request(
                method: "PUT", path: "/test$file.text",
                headers: [("Host", Self.host), ("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
                payloadHash: SigV4Signer.sha256Hex(body)),
            at: Self.date)
        #expect(signature.canonicalRequest.hasPrefix("PUT\n/test%24file.text\n\n"))
        #expect(signature.signedHeaders == "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class")
        #expect(signature.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    @Test func getBucketLifecycleAndListObjects() {
        let lifecycle = Self.signer.sign(
            SigV4Signer.Request(method: "GET", path: "/", query: [("lifecycle", "")], headers: [("Host", Self.host)], payloadHash: SigV4Signer.emptyPayloadHash),
            at: Self.date)
        #expect(lifecycle.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
        let list = Self.signer.sign(
            SigV4Signer.Request(method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")], headers: [("Host", Self.host)], payloadHash: SigV4Signer.emptyPayloadHash),
            at: Self.date)
        #expect(list.canonicalRequest.split(separator: "\n", omittingEmptySubsequences: false)[2] == "max-keys=2&prefix=J")
        #expect(list.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    @Test func presignedGetObject() {
        let (query, signature) = Self.signer.presign(method: "GET", host: Self.host, path: "/test.txt", expiresIn: 86_400, at: Self.date)
        #expect(signature.signature == "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
        #expect(query == "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
    }

    /// Changing any signed part changes the signature: the tests above cannot pass by accident.
    @Test func anyChangeChangesTheSignature() {
        func sign(_ path: String, _ expires: Int, _ date: Date) -> String {
            Self.signer.presign(method: "GET", host: Self.host, path: path, expiresIn: expires, at: date).signature.signature
        }
        let reference = sign("/test.txt", 86_400, Self.date)
        #expect(sign("/test.txt", 86_401, Self.date) != reference)
        #expect(sign("/test.tx", 86_400, Self.date) != reference)
        #expect(sign("/test.txt", 86_400, Self.date.addingTimeInterval(1)) != reference)
    }
}
