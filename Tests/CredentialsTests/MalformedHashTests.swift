import Credentials
import Foundation
import Testing

/// A damaged, foreign or hostile hash column must never let a password
/// through, must say what is wrong, and must not repeat the hash.
struct MalformedHashTests {
    let verifier = PasswordVerifier()

    @Test(arguments: [
        "",
        "hunter2",
        "md5$abc$0123456789abcdef0123456789abcdef",
        "sha1$salt$0123456789abcdef0123456789abcdef01234567",
        "$1$saltsalt$2MvbqXGgwTprWDWZ0CYdO.",
        "{SSHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=",
        "$argon2d$v=19$m=1024,t=2,p=1$c29tZXNhbHQ$7Kj0jCnzhkSFBNHA2Gx2D0bd3B56XWSZg2mMm+pW4Mk",
        "$2x$05$usesomesillystringfore2uDLvp1Ii2e./U9C8sBjqp8I90dH6hi",
        " $2b$04$Iq7tQ94urew.StTmw8LJ6OsT.dKDMrBDTc2wY/JbxD8ey7W0yLgQi",
        "bcrypt_sha256$$2b$12$LZSJchsWG/DrBy1erNs4eeYo6tZNlLFQmHdvQXuq.5crh7uNRAmsy",
    ])
    func unknownFormatThrows(_ hash: String) {
        #expect(PasswordHashFormat.detect(hash) == nil)
        #expect(throws: CredentialsError.unknownFormat) {
            try verifier.verify(password: "hunter2", storedHash: hash)
        }
    }

    @Test(arguments: Vector.all)
    func truncatedHashNeverVerifies(_ vector: Vector) throws {
        let hash = Array(vector.hash)
        let cuts = Set([1, 3, 5, 8, 12, hash.count / 3, hash.count / 2, hash.count - 10, hash.count - 2, hash.count - 1])
            .filter { $0 > 0 && $0 < hash.count }
            .sorted()
        for cut in cuts {
            let truncated = String(hash.prefix(cut))
            do {
                let accepted = try verifier.verify(password: vector.password, storedHash: truncated)
                #expect(!accepted, "accepted the hash cut at \(cut)")
            } catch let error as CredentialsError {
                #expect(error == .malformedHash || error == .unknownFormat, "cut at \(cut): \(error)")
            }
        }
        // Losing the last character is the common database truncation. Every
        // format but argon2 can tell (argon2 may just fail to match, since the
        // hash length feeds its first block).
        if !vector.format.hasPrefix("argon2") {
            #expect(throws: CredentialsError.malformedHash) {
                try verifier.verify(password: vector.password, storedHash: String(hash.dropLast()))
            }
        }
    }

    /// A digest re-encoded to fewer whole bytes is valid base64. PBKDF2 and
    /// scrypt output cut short is a prefix of the full output, so comparing
    /// only the stored length would accept it; argon2 feeds the length into
    /// its first block, so there it must simply not match.
    @Test(arguments: Vector.all.filter { !$0.usesDefaultCost && ["argon2", "pbkdf2", "passlib-scrypt"].contains(where: $0.format.contains) })
    func digestShortenedToWholeBytesNeverVerifies(_ vector: Vector) throws {
        var fields = vector.hash.split(separator: "$", omittingEmptySubsequences: false).map(String.init)
        let encoded = fields[fields.count - 1]
        var standard = encoded.replacingOccurrences(of: ".", with: "+").replacingOccurrences(of: "=", with: "")
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        let digest = try #require(Data(base64Encoded: standard))
        var shortened = digest.prefix(16).base64EncodedString()
        if !encoded.hasSuffix("=") {
            shortened = shortened.replacingOccurrences(of: "=", with: "")
        }
        if vector.format == "passlib-pbkdf2-sha256" {
            shortened = shortened.replacingOccurrences(of: "+", with: ".")
        }
        fields[fields.count - 1] = shortened
        let hash = fields.joined(separator: "$")
        do {
            #expect(try verifier.verify(password: vector.password, storedHash: hash) == false)
            #expect(vector.format.hasPrefix("argon2"), "only argon2 may treat a shorter digest as a mismatch")
        } catch let error as CredentialsError {
            #expect(error == .malformedHash)
        }
    }

    @Test(arguments: Vector.all)
    func errorsDoNotRepeatTheHash(_ vector: Vector) {
        // Salts and checksums are the long '$'-separated fields.
        let secrets = vector.hash.split(separator: "$").filter { $0.count >= 16 }
        #expect(!secrets.isEmpty)
        let damaged = [String(vector.hash.dropLast()), vector.hash + "!", String(vector.hash.dropLast(3)) + "~~~"]
        for (index, hash) in damaged.enumerated() {
            do {
                let accepted = try verifier.verify(password: vector.password, storedHash: hash)
                // Only argon2 may read a digest one character short as a mismatch (the hash
                // length feeds its first block); every other damage must be named, or there
                // is no message whose secrecy this test could check.
                #expect(!accepted && index == 0 && vector.format.hasPrefix("argon2"), "damaged hash \(index) did not throw (accepted: \(accepted))")
            } catch let error as CredentialsError {
                #expect(error == .malformedHash, "damaged hash \(index): \(error)")
                let message = String(describing: error)
                for secret in secrets {
                    #expect(!message.contains(secret), "error message repeats part of the hash: \(message)")
                }
            } catch {
                Issue.record("damaged hash \(index) threw something other than a CredentialsError: \(error)")
            }
        }
    }

    @Test func errorNamesTheProblem() {
        let hash = "$2b$04$Iq7tQ94urew.StTmw8LJ6OsT.dKDMrBDTc2wY/JbxD8e"
        do {
            _ = try verifier.verify(password: "x", storedHash: hash)
            Issue.record("a truncated bcrypt hash did not throw")
        } catch let error as CredentialsError {
            #expect(error == .malformedHash)
            #expect(error.detail.contains("bcrypt"))
            #expect(error.detail.contains("expected 60"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    /// Refused before any hashing starts: each of these would take minutes
    /// or gigabytes if computed, so the test finishing at all is the check.
    @Test(arguments: [
        // argon2: 4 GiB of memory; 1 GiB × 10 passes; 1000 lanes
        "$argon2id$v=19$m=4194304,t=3,p=1$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
        "$argon2id$v=19$m=1048576,t=10,p=1$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
        "$argon2i$v=19$m=65536,t=3,p=1000$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
        "$argon2id$v=19$m=99999999999,t=3,p=1$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
        // bcrypt cost 31 (days)
        "$2b$31$Iq7tQ94urew.StTmw8LJ6OsT.dKDMrBDTc2wY/JbxD8ey7W0yLgQi",
        // sha512crypt with the format's maximum rounds
        "$6$rounds=999999999$Ld7IUIKx9Ln3NQXI$fTdlvTOzJOKMqnXDeZcEu08OlWT5JDFdSe6Y2LN0yJIUBLapALx4uzZrkxK5Jo/JxDb16n4OPh.OfqiVp2loO0",
        // PBKDF2: 100 million iterations, Django and passlib
        "pbkdf2_sha256$100000000$FPyADzUYfxwByThainAcB0$zh3P83vPCxmL73FmYlimE+cUf3kIM3F1fYQfXJShZaU=",
        "$pbkdf2-sha256$4294967295$oHRuTcnZm1MqBUBIaW1NKQ$8K9xR0rzRF3Uap9iaEpM1ICFt9GJt55tuWyxhGiE55Q",
        // passlib scrypt: N=2^30 (128 GiB); N·r·p far above the work limit
        "$scrypt$ln=30,r=8,p=1$eQ8BQKh1TglhTMk5B+A8Zw$SCnkNnKAeDkHIH093KwWvgSG1CqyZcADd8KlbPTa6p0",
        "$scrypt$ln=16,r=8,p=1000$eQ8BQKh1TglhTMk5B+A8Zw$SCnkNnKAeDkHIH093KwWvgSG1CqyZcADd8KlbPTa6p0",
        // yescrypt N=2^30, r=32 ("R" encodes log2 N = 30)
        "$y$jRT$2ZDA0E5JNGuAFKkx8h8NU0$yPodlfXBknwJpsfMtCjPX6ZjZtKb.RTeilvSe28YIw2",
        // $7$ scrypt N=2^37 ("Z")
        "$7$ZU..../....qD5BKTGRtBVwuNnReLmux0$n4zRly8xurRtJGL2NL2wn2iZxcehUdNckkOMQRPBkx6",
    ])
    func absurdCostIsRefused(_ hash: String) {
        #expect(throws: CredentialsError.malformedHash) {
            try verifier.verify(password: "correct horse battery staple", storedHash: hash)
        }
    }

    @Test(arguments: [
        "$argon2id$v=19$m=1024,t=2,p=1$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0=",
        "$argon2id$v=18$m=1024,t=2,p=1$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
        "$argon2id$v=19$t=2,m=1024,p=1$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
        "$argon2id$v=19$m=1024,t=2,p=1$$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
        "$2b$04$Iq7tQ94urew.StTmw8LJ6OsT.dKDMrBDTc2wY/JbxD8ey7W0yLgQ!",
        "$2b$4$Iq7tQ94urew.StTmw8LJ6OsT.dKDMrBDTc2wY/JbxD8ey7W0yLgQiX",
        "$6$Qt3NSc6lIKKltmhK$acuihpzeWWyMUgNwHST8uLSdbWcPWvWMu/dciE0Sg0bKIRlQS4RJ1NNLcicgEqOWg0U3i1ormjp3sBbm3Uzdp/ ",
        "$6$rounds=10$Qt3NSc6lIKKltmhK$acuihpzeWWyMUgNwHST8uLSdbWcPWvWMu/dciE0Sg0bKIRlQS4RJ1NNLcicgEqOWg0U3i1ormjp3sBbm3Uzdp/",
        "pbkdf2_sha256$1000$$zh3P83vPCxmL73FmYlimE+cUf3kIM3F1fYQfXJShZaU=",
        "pbkdf2_sha256$-1000$FPyADzUYfxwByThainAcB0$zh3P83vPCxmL73FmYlimE+cUf3kIM3F1fYQfXJShZaU=",
        "pbkdf2_sha256$1000$FPyADzUYfxwByThainAcB0$zh3P83vPCxmL73FmYlimE+cUf3kIM3F1fYQfXJSh",
        "pbkdf2_sha1$1000$1MThOAZ30XgWQbPlOiDYX5$zh3P83vPCxmL73FmYlimE+cUf3kIM3F1fYQfXJShZaU=",
        "$pbkdf2-sha256$1000$oHRuTcnZm1MqBUBIaW1NKQ$8K9xR0rzRF3Uap9iaEpM1ICFt9GJt55tuWyxhGiE55Q==",
        "$scrypt$ln=8,p=1,r=8$eQ8BQKh1TglhTMk5B+A8Zw$SCnkNnKAeDkHIH093KwWvgSG1CqyZcADd8KlbPTa6p0",
        "$y$j9T$2ZDA0E5JNGuAFKkx8h8NU0$yPodlfXBknwJpsfMtCjPX6ZjZtKb.RTeilvSe28YIw2$extra",
    ])
    func corruptedHashThrowsMalformed(_ hash: String) {
        #expect(throws: CredentialsError.malformedHash) {
            try verifier.verify(password: "correct horse battery staple", storedHash: hash)
        }
    }
}
