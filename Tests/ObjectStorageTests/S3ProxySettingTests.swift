import AsyncHTTPClient
@testable import ObjectStorage
import Testing

@Suite struct S3ProxySettingTests {
    @Test func theSchemesOwnVariableWinsThenAllProxy() throws {
        let environment = ["https_proxy": "http://proxy.internal:3128", "http_proxy": "other:8080", "ALL_PROXY": "fallback:9"]
        #expect(try S3Client.proxy(scheme: "https", host: "bucket.s3.eu-west-1.amazonaws.com", environment: environment)
            == .server(host: "proxy.internal", port: 3128))
        #expect(try S3Client.proxy(scheme: "http", host: "minio.local", environment: environment) == .server(host: "other", port: 8080))
        #expect(try S3Client.proxy(scheme: "https", host: "s3.amazonaws.com", environment: ["ALL_PROXY": "fallback:9"])
            == .server(host: "fallback", port: 9))
    }

    @Test func upperCaseHTTPProxyIsIgnoredAsLibcurlDoes() throws {
        #expect(try S3Client.proxy(scheme: "http", host: "minio.local", environment: ["HTTP_PROXY": "evil:80"]) == nil)
        #expect(try S3Client.proxy(scheme: "https", host: "s3.amazonaws.com", environment: ["HTTPS_PROXY": "proxy:3128"])
            == .server(host: "proxy", port: 3128))
    }

    @Test func noProxyListsHostsAndDomains() throws {
        let environment = ["https_proxy": "proxy:3128", "no_proxy": "localhost, .amazonaws.com,minio.local"]
        #expect(try S3Client.proxy(scheme: "https", host: "bucket.s3.us-east-1.amazonaws.com", environment: environment) == nil)
        #expect(try S3Client.proxy(scheme: "https", host: "minio.local", environment: environment) == nil)
        #expect(try S3Client.proxy(scheme: "https", host: "notamazonaws.com", environment: environment) == .server(host: "proxy", port: 3128))
        #expect(try S3Client.proxy(scheme: "https", host: "anything", environment: ["https_proxy": "proxy:3128", "no_proxy": "*"]) == nil)
    }

    @Test func noProxyMatchesAddressesInTheRangesItLists() throws {
        let environment = ["http_proxy": "proxy:3128", "no_proxy": "10.0.0.0/8, 192.168.1.0/24,fd00::/8"]
        #expect(try S3Client.proxy(scheme: "http", host: "10.1.2.3", environment: environment) == nil)
        #expect(try S3Client.proxy(scheme: "http", host: "192.168.1.200", environment: environment) == nil)
        #expect(try S3Client.proxy(scheme: "http", host: "192.168.2.1", environment: environment) == .server(host: "proxy", port: 3128))
        #expect(try S3Client.proxy(scheme: "http", host: "[fd12::1]", environment: environment) == nil)
        #expect(try S3Client.proxy(scheme: "http", host: "11.0.0.1", environment: environment) == .server(host: "proxy", port: 3128))
        #expect(try S3Client.proxy(scheme: "http", host: "minio.internal", environment: environment) == .server(host: "proxy", port: 3128))
    }

    @Test func aSocks5ProxyWithoutAPasswordIsUsed() throws {
        #expect(try S3Client.proxy(scheme: "https", host: "s3.amazonaws.com", environment: ["all_proxy": "socks5h://gate:1081"])
            == .socksServer(host: "gate", port: 1081))
        #expect(throws: S3ConfigurationError.self) {
            try S3Client.proxy(scheme: "https", host: "s3.amazonaws.com", environment: ["all_proxy": "socks5://u:p@gate:1081"])
        }
    }

    @Test func credentialsAndTheDefaultPortComeFromTheURL() throws {
        let proxy = try S3Client.proxy(scheme: "https", host: "s3.amazonaws.com", environment: ["https_proxy": "http://ops:s3cret@proxy"])
        #expect(proxy == .server(host: "proxy", port: 1080, authorization: .basic(username: "ops", password: "s3cret")))
    }

    @Test func aProxyOverTLSOrNotAURLIsAClearError() {
        #expect(throws: S3ConfigurationError.self) {
            try S3Client.proxy(scheme: "https", host: "s3.amazonaws.com", environment: ["https_proxy": "https://proxy:443"])
        }
        #expect(throws: S3ConfigurationError.self) {
            try S3Client.proxy(scheme: "https", host: "s3.amazonaws.com", environment: ["https_proxy": "http://"])
        }
    }
}
