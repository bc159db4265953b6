import Credentials
import Foundation
import Testing

/// Hashes from python-bcrypt, htpasswd, argon2-cffi, passlib, Django and
/// mkpasswd, checked the way a deletion request checks them.
struct VectorTests {
    let verifier = PasswordVerifier()

    @Test func vectorsCoverEveryFormat() {
        let covered = Set(Vector.all.map(\.format))
        for format in PasswordHashFormat.allCases {
            #expect(covered.contains(format.name), "no vector for \(format)")
        }
        #expect(Set(Vector.all.map { String($0.hash.prefix(4)) }).isSuperset(of: ["$2a$", "$2b$", "$2y$"]))
    }

    @Test(arguments: Vector.all)
    func verifiesWithItsPassword(_ vector: Vector) throws {
        #expect(PasswordHashFormat.detect(vector.hash)?.name == vector.format)
        #expect(try verifier.verify(password: vector.password, storedHash: vector.hash))
    }

    @Test(arguments: Vector.all)
    func rejectsWrongPasswords(_ vector: Vector) throws {
        var candidates = Self.wrongPasswords(near: vector.password)
        if vector.usesDefaultCost {
            candidates = Array(candidates.prefix(1))
        }
        for wrong in candidates {
            #expect(try verifier.verify(password: wrong, storedHash: vector.hash) == false, "accepted \(wrong.debugDescription)")
        }
    }

    /// The tools hash UTF-8 bytes as typed; so does the verifier, even though
    /// Swift's `==` calls the two spellings of "é" equal.
    @Test func decomposedAccentIsADifferentPassword() throws {
        let precomposed = try #require(Vector.all.first { $0.password.unicodeScalars.contains("\u{E9}") })
        let decomposed = precomposed.password.replacingOccurrences(of: "\u{E9}", with: "e\u{301}")
        #expect(decomposed == precomposed.password)
        #expect(Array(decomposed.utf8) != Array(precomposed.password.utf8))
        #expect(try verifier.verify(password: decomposed, storedHash: precomposed.hash) == false)
    }

    /// bcrypt reads 72 bytes and ignores the rest, in every implementation;
    /// answering otherwise would lock out PHP users with long passwords.
    @Test func bcryptIgnoresBytesAfterTheSeventySecond() throws {
        let vector = try #require(Vector.all.first { $0.format == "bcrypt" && $0.password.utf8.count == 72 })
        #expect(try verifier.verify(password: vector.password + "ignored", storedHash: vector.hash))
        // Past libxcrypt's 511-byte passphrase limit too.
        #expect(try verifier.verify(password: vector.password + String(repeating: "x", count: 600), storedHash: vector.hash))
        #expect(try verifier.verify(password: String(vector.password.dropLast()), storedHash: vector.hash) == false)
    }

    /// Too long to hash (over 4096 bytes, or over libxcrypt's 511 for the
    /// crypt formats) is a wrong password, not a broken hash.
    @Test(arguments: Vector.all.filter { !$0.usesDefaultCost })
    func overlongPasswordIsWrongNotAnError(_ vector: Vector) throws {
        let overlong = vector.password + String(repeating: "x", count: 4097)
        #expect(try verifier.verify(password: overlong, storedHash: vector.hash) == false)
        if vector.format != "bcrypt" {
            let pastCryptLimit = vector.password + String(repeating: "x", count: 600)
            #expect(try verifier.verify(password: pastCryptLimit, storedHash: vector.hash) == false)
        }
    }

    @Test func verifiesConcurrently() async throws {
        let cheap = Vector.all.filter { !$0.usesDefaultCost }
        let verifier = self.verifier
        try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for _ in 0..<2 {
                for vector in cheap {
                    group.addTask {
                        (vector.hash, try verifier.verify(password: vector.password, storedHash: vector.hash))
                    }
                    let wrong = Self.wrongPasswords(near: vector.password)[0]
                    group.addTask {
                        (vector.hash, try !verifier.verify(password: wrong, storedHash: vector.hash))
                    }
                }
            }
            for try await (hash, correct) in group {
                #expect(correct, "wrong answer under concurrency for \(PasswordHashFormat.detect(hash)?.name ?? "?")")
            }
        }
    }

    /// Near misses first: a password differing in one character, then
    /// others. "secret\0tail" matters for crypt(3), which would stop at NUL.
    static func wrongPasswords(near password: String) -> [String] {
        guard !password.isEmpty else { return ["a", " ", "\0"] }
        var candidates: [String] = []
        var characters = Array(password)
        characters[characters.count - 1] = characters.last == "x" ? "y" : "x"
        candidates.append(String(characters))
        candidates.append(password + "\0tail")
        characters = Array(password)
        characters[0] = characters[0] == "X" ? "Y" : "X"
        candidates.append(String(characters))
        candidates.append(String(password.dropLast()))
        if password.utf8.count < 72 {
            candidates.append(password + "1")
        }
        candidates.append(password.uppercased() == password ? password.lowercased() : password.uppercased())
        candidates.append("")
        return candidates.filter { $0 != password }
    }
}
