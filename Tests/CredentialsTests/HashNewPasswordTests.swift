import Credentials
import Testing

struct HashNewPasswordTests {
    /// Cheap enough to hash many times in a test; the default is tested once.
    let verifier = PasswordVerifier(hashingParameters: .init(iterations: 1, memoryKiB: 1024, parallelism: 1))

    @Test(arguments: ["correct horse battery staple", "mot de passe é", "日本語", "🔐😀", ""])
    func roundTrips(_ password: String) throws {
        let hash = try verifier.hashNewPassword(password)
        #expect(hash.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$"))
        #expect(PasswordHashFormat.detect(hash) == .argon2id)
        #expect(try verifier.verify(password: password, storedHash: hash))
        for wrong in VectorTests.wrongPasswords(near: password) {
            #expect(try verifier.verify(password: wrong, storedHash: hash) == false)
        }
    }

    @Test func samePasswordHashesDifferently() throws {
        let first = try verifier.hashNewPassword("correct horse battery staple")
        let second = try verifier.hashNewPassword("correct horse battery staple")
        #expect(first != second)
        let salts = [first, second].map { $0.split(separator: "$")[3] }
        #expect(salts[0] != salts[1])
    }

    @Test func defaultParameters() throws {
        let verifier = PasswordVerifier()
        #expect(verifier.hashingParameters == .default)
        let hash = try verifier.hashNewPassword("correct horse battery staple")
        #expect(hash.hasPrefix("$argon2id$v=19$m=65536,t=3,p=1$"))
        let fields = hash.split(separator: "$")
        #expect(fields.count == 5)
        #expect(fields[3].count == 22)  // 16-byte salt, unpadded base64
        #expect(fields[4].count == 43)  // 32-byte hash
        #expect(try verifier.verify(password: "correct horse battery staple", storedHash: hash))
    }

    @Test(arguments: [
        PasswordHashingParameters(iterations: 0, memoryKiB: 1024),
        PasswordHashingParameters(iterations: 1, memoryKiB: 4),
        PasswordHashingParameters(iterations: 1, memoryKiB: 2 << 20),
        PasswordHashingParameters(iterations: .max, memoryKiB: 1024),
        PasswordHashingParameters(iterations: 1, memoryKiB: -1024),
        PasswordHashingParameters(iterations: 1, memoryKiB: 1024, parallelism: 0),
        PasswordHashingParameters(iterations: 1, memoryKiB: 1024, saltByteCount: 4),
        PasswordHashingParameters(iterations: 1, memoryKiB: 1024, hashByteCount: 8),
    ])
    func refusesParametersVerifyWouldRefuse(_ parameters: PasswordHashingParameters) {
        #expect(throws: CredentialsError.hashingFailed) {
            try PasswordVerifier(hashingParameters: parameters).hashNewPassword("x")
        }
    }

    @Test func refusesPasswordsVerifyWouldNeverAccept() {
        #expect(throws: CredentialsError.unsupportedPassword) {
            try verifier.hashNewPassword("secret\0tail")
        }
        #expect(throws: CredentialsError.unsupportedPassword) {
            try verifier.hashNewPassword(String(repeating: "a", count: 4097))
        }
    }
}
