import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Lifecycle
import ObjectStorage
import Testing

struct S3LocationTests {
    @Test func aFullLocation() throws {
        let location = try S3Location(parsing: "s3://lifecycle-blobs/prod/eu?endpoint=http://127.0.0.1:9000&region=eu-west-1", environment: [:])
        #expect(location == S3Location(bucket: "lifecycle-blobs", prefix: "prod/eu", region: "eu-west-1", endpoint: URL(string: "http://127.0.0.1:9000")))
    }

    @Test func theRegionComesFromTheEnvironmentWhenTheLocationNamesNone() throws {
        #expect(try S3Location(parsing: "s3://bucket", environment: ["AWS_REGION": "ap-south-1"]).region == "ap-south-1")
        #expect(try S3Location(parsing: "s3://bucket/", environment: [:]) == S3Location(bucket: "bucket", prefix: "", region: "us-east-1"))
        // Supabase Storage answers S3 under a path, one bucket per Storage bucket.
        let supabase = try S3Location(parsing: "s3://*?endpoint=https://ref.supabase.co/storage/v1/s3&region=eu-west-1", environment: [:])
        #expect(supabase == S3Location(bucket: "*", prefix: "", region: "eu-west-1", endpoint: URL(string: "https://ref.supabase.co/storage/v1/s3")))
    }

    /// Supabase Storage answers S3 under /storage/v1/s3: that path begins every request's
    /// path, so it is what the signature covers, as an S3 client given that endpoint signs it.
    @Test func anEndpointsPathBeginsEveryRequestPathAndIsSigned() throws {
        let location = try S3Location(parsing: "s3://avatars?endpoint=https://ref.supabase.co/storage/v1/s3&region=eu-west-1", environment: [:])
        let store = try S3BlobStore(location: location, credentials: AWSCredentials(accessKeyID: "id", secretAccessKey: "secret"))
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let link = try #require(try store.downloadURL(key: "u1/Été.png", expiresAt: now.addingTimeInterval(3_600), now: now))
        #expect(link.hasPrefix("https://ref.supabase.co/storage/v1/s3/avatars/u1/%C3%89t%C3%A9.png?"), "\(link)")
        let bare = try S3BlobStore(
            location: try S3Location(parsing: "s3://avatars?endpoint=https://ref.supabase.co&region=eu-west-1", environment: [:]),
            credentials: AWSCredentials(accessKeyID: "id", secretAccessKey: "secret"))
        let other = try #require(try bare.downloadURL(key: "u1/Été.png", expiresAt: now.addingTimeInterval(3_600), now: now))
        func signature(_ url: String) -> String? { URLComponents(string: url)?.queryItems?.first { $0.name == "X-Amz-Signature" }?.value }
        #expect(signature(link) != nil && signature(link) != signature(other), "the path is part of what is signed")
    }

    @Test(arguments: [
        ("s3://", "names no bucket"),
        ("s3:///prefix", "names no bucket"),
        ("s3://Bad_Bucket/x", "not a valid S3 bucket name"),
        ("s3://bucket/../x", "key prefix"),
        ("s3://bucket/a b", "key prefix 'a b'"),
        ("s3://bucket?endpoint=ftp://host", "must be http:// or https://"),
        ("s3://bucket?endpoint=http://host/a%20b", "optional path of letters"),
        ("s3://*/prefix", "there is no prefix"),
        ("s3://bucket?endpoint=127.0.0.1:9000", "must be http:// or https://"),
        ("s3://bucket?endpoint=http://127.0.0.1:99999", "optional port (1 to 65535)"),
        ("s3://bucket?region=US%20EAST", "not a region name"),
        ("s3://bucket?regoin=us-east-1", "unknown parameter 'regoin'"),
        ("s3://bucket:9000/x", "goes in ?endpoint="),
        ("s3://key:secret@bucket/x", "carries credentials"),
        ("http://bucket/x", "not an S3 URL"),
    ])
    func badLocationsSayWhatIsWrong(_ text: String, _ expected: String) {
        #expect {
            try S3Location(parsing: text, environment: [:])
        } throws: { error in
            (error as? S3ConfigurationError)?.message.contains(expected) == true
        }
    }

    @Test func missingCredentialsNameTheVariables() throws {
        #expect {
            try AWSCredentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "AKID"])
        } throws: { error in
            let message = "\(error)"
            return message.contains("AWS_SECRET_ACCESS_KEY is not set") && !message.contains("AWS_ACCESS_KEY_ID is")
        }
        #expect(throws: S3ConfigurationError.self) { try AWSCredentials.fromEnvironment([:]) }
        let credentials = try AWSCredentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"])
        #expect(credentials == AWSCredentials(accessKeyID: "AKID", secretAccessKey: "secret", sessionToken: "token"))
    }

    @Test func partsGrowSoAHugeFileFitsInTenThousand() {
        let fiveGiB: Int64 = 5 << 30
        #expect(S3BlobStore.partSize(for: 100 << 20, preferred: 16 << 20) == 16 << 20)
        // 200 GiB in 16 MiB parts would be 12,800 parts.
        let huge: Int64 = 200 << 30
        let part = S3BlobStore.partSize(for: huge, preferred: 16 << 20)
        #expect((huge + part - 1) / part <= 10_000)
        #expect(part % (1 << 20) == 0)
        #expect(S3BlobStore.partSize(for: fiveGiB, preferred: 1) == 5 << 20)
    }
}
