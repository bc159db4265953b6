import Credentials
import Testing
@Test func zzTiming() throws {
    let v = PasswordVerifier()
    for vector in Vector.all where vector.usesDefaultCost || vector.format == "yescrypt" {
        let start = ContinuousClock.now
        _ = try v.verify(password: vector.password, storedHash: vector.hash)
        print("TIMING", vector.format, vector.tool, ContinuousClock.now - start)
    }
    let hashes = ["pbkdf2_sha256$10000000$FPyADzUYfxwByThainAcB0$zh3P83vPCxmL73FmYlimE+cUf3kIM3F1fYQfXJShZaU=",
                  "$6$rounds=10000000$Ld7IUIKx9Ln3NQXI$fTdlvTOzJOKMqnXDeZcEu08OlWT5JDFdSe6Y2LN0yJIUBLapALx4uzZrkxK5Jo/JxDb16n4OPh.OfqiVp2loO0",
                  "$2b$16$Iq7tQ94urew.StTmw8LJ6OsT.dKDMrBDTc2wY/JbxD8ey7W0yLgQi",
                  "$argon2id$v=19$m=1048576,t=4,p=1$MAazQuUlVsaaRoQw2WOSFA$XjHY+5OzsyQ3f+EkBY490+C7RtI3bpixzPtCsKBJtG0",
                  "$scrypt$ln=20,r=8,p=1$eQ8BQKh1TglhTMk5B+A8Zw$SCnkNnKAeDkHIH093KwWvgSG1CqyZcADd8KlbPTa6p0",
                  "$scrypt$ln=17,r=8,p=32$eQ8BQKh1TglhTMk5B+A8Zw$SCnkNnKAeDkHIH093KwWvgSG1CqyZcADd8KlbPTa6p0"]
    for h in hashes {
        let start = ContinuousClock.now
        let r = Result { try v.verify(password: "x", storedHash: h) }
        print("TIMING", h.prefix(24), r, ContinuousClock.now - start)
    }
}
