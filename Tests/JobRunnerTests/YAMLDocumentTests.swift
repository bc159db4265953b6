import Foundation
import JobRunner
import Testing
import Yams

/// `YAMLDocument` types plain scalars by hand where Yams's default resolver uses regular
/// expressions; these tests hold the two to the same answers.
struct YAMLDocumentTests {
    /// What Yams's default resolver says of an untagged plain scalar.
    private func yamsTag(_ text: String) -> Yams.Tag.Name {
        Resolver.default.resolveTag(of: Node(text))
    }

    /// Each rule's alternatives, at and just past their edges.
    @Test(arguments: [
        // bool
        "yes", "Yes", "YES", "yEs", "no", "NO", "true", "True", "tRUE", "false", "FALSE", "on", "ON", "oN", "off", "Off", "y", "n",
        // int
        "0", "-0", "+0", "7", "-7", "+12", "1_000", "1__", "01", "007", "0_", "08", "09", "0o17", "0o", "0o8", "-0o7", "0b101",
        "0b", "0b2", "-0b1_0", "0x1F", "0xff_FF", "0x", "0xg", "+0xA", "1:30", "1:30:59", "1:60", "1:5", "1:05", "1:123",
        "0:30", "1_0:30", "1:30:", ":30",
        // float
        "1.5", "-1.5", "+.5", ".5", "._", ".5e+3", ".5e3", "1e3", "1E-3", "1.e3", "1.", "-1.", "1.2.3", "1_0.0_1", "1e", "1e+",
        "1:30.5", "1:30:00.", "1:60.5", "0:00.0", ".inf", "-.inf", "+.Inf", ".INF", ".iNf", "inf", ".nan", ".NaN", "-.nan", "nan",
        "1..2", ".", "-", "+", "-.", "e3",
        // merge, null, value
        "<<", "<", "~", "null", "Null", "NULL", "nULL", "", " ", "=", "==",
        // timestamp
        "2024-01-02", "2024-1-2", "2024-01-2", "20240-01-02", "2024-01-02T03:04:05", "2024-1-2t3:04:05", "2024-01-02 03:04:05",
        "2024-01-02 \t 03:04:05.123", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.5 Z", "2024-01-02T03:04:05+01",
        "2024-01-02T03:04:05-1:30", "2024-01-02T03:04:05+01:3", "2024-01-02T03:04:05+013", "2024-01-02T3:4:05",
        "2024-01-02T003:04:05", "2024-01-02T03:04:050", "2024-01-02T", "2024-01-02T03:04:05 ", "2024-01-02T03:04:05.",
        // text
        "export", "0 3 * * *", "hello world", "12 MB", "1 2", "١٢", "５", "yes!", "true\u{301}",
    ])
    func eachRuleAtItsEdges(_ text: String) {
        #expect(YAMLDocument.implicitTag(of: text) == yamsTag(text), "\(text.debugDescription)")
    }

    /// Scalars put together from the pieces the rules are made of, so that near misses of
    /// every pattern come up; the generator is seeded, so a failure names a reproducible text.
    @Test func generatedScalarsGetTheSameTag() {
        let pieces = ["0", "1", "5", "6", "9", "12", "_", "-", "+", ".", ":", "e", "E", "x", "b", "o", "a", "F", "inf", "nan", "NaN",
                      "T", "t", " ", "\t", "Z", "2024", "-01", "-1", "2024-01-02", "03:04:05", "3:04:05", ":30", "yes", "~", "null", "<<", "=", "é"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        var mismatches: [String] = []
        var tags: Set<String> = []
        for _ in 0..<20_000 {
            let text = (0..<next(6)).map { _ in pieces[next(pieces.count)] }.joined()
            let expected = yamsTag(text)
            tags.insert(expected.rawValue)
            if YAMLDocument.implicitTag(of: text) != expected, mismatches.count < 10 { mismatches.append(text) }
        }
        #expect(mismatches.isEmpty, "\(mismatches.map(\.debugDescription))")
        // The generator reaches every type, or agreeing on it would prove little.
        #expect(tags == Set([Yams.Tag.Name.bool, .int, .float, .merge, .null, .timestamp, .value, .str].map(\.rawValue)))
    }

    /// Whole documents load to the same values as `Yams.load`: the repository's own
    /// policies, data maps and examples, and one with quoting, explicit tags, anchors and merges.
    @Test func documentsLoadToTheSameValues() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var documents: [(String, String)] = []
        let jobs = repository.appendingPathComponent("Jobs")
        let walker = FileManager.default.enumerator(at: jobs, includingPropertiesForKeys: nil)
        while let file = walker?.nextObject() as? URL {
            guard file.pathExtension == "yaml" else { continue }
            documents.append((file.path, try String(contentsOf: file, encoding: .utf8)))
        }
        #expect(documents.count >= 10)
        // Anchors take Yams's own path (an aliased node shares its tag with its anchor).
        documents.append(("anchors", """
            defaults: &defaults {retries: 3, ratio: 0.5, on: yes, when: 2024-01-02}
            ports: {&port 8080: web, admin: *port}
            job:
              <<: *defaults
              kind: *port
            """))
        documents.append(("crafted", """
            job:
              <<: {retries: 3, ratio: 0.5, on: yes, when: 2024-01-02}
              kind: "5"
              quoted: '0x1F'
              tagged: !!str 1.5
              forced: !!int "42"
              empty:
              tilde: ~
              list: [1, 1.0, .inf, true, off, text, "null", 1:30, 0o17]
              nested: {a: {b: [-.5e+3, 2024-01-02 03:04:05]}}
            """))
        for (name, text) in documents {
            let ours = try YAMLDocument.load(text)
            let theirs = try Yams.load(yaml: text)
            #expect(same(ours, theirs), "\(name)")
        }
    }

    /// Two keys with the same text are refused, quoted or not; Yams's resolver let a plain
    /// `1` and a quoted `"1"` through as different keys of which a dictionary keeps one.
    @Test func keysWithTheSameTextAreRefusedWhateverTheirQuoting() throws {
        for text in ["{1: a, \"1\": b}", "x: 1\nsection:\n  on: 1\n  'on': 2\n", "{!!int 1: a, 1: b}", "[{a: 1}, {b: 1, b: 2}]"] {
            #expect(throws: (any Error).self, "\(text)") { try YAMLDocument.load(text) }
        }
        // Tagged apart, they pass the parser's own check; the text is the same all the same.
        let error = try #require(throws: YAMLDocument.DuplicateKey.self) { try YAMLDocument.load("x: 1\nsection:\n  !!int 1: a\n  1: b\n") }
        #expect(error.description == "line 4: the key '1' appears more than once in the same mapping")
        #expect(try YAMLDocument.load("{1: a, 2: b}") as? [AnyHashable: Any] != nil)
    }

    /// A malformed document fails the same way.
    @Test func badYAMLFailsAsYamsFails() {
        for text in ["a: [1, 2", "a: 1\na: 2", "\tkey: value", "a: *nowhere"] {
            #expect(throws: (any Error).self) { try YAMLDocument.load(text) }
            #expect(throws: (any Error).self) { try Yams.load(yaml: text) }
        }
    }

    private func same(_ left: Any?, _ right: Any?) -> Bool {
        switch (left, right) {
        case (nil, nil): return true
        case (let left as [AnyHashable: Any], let right as [AnyHashable: Any]):
            return left.count == right.count && left.allSatisfy { key, value in right[key].map { same(value, $0) } ?? false }
        case (let left as [Any], let right as [Any]):
            return left.count == right.count && zip(left, right).allSatisfy { same($0, $1) }
        case (let left as Bool, let right as Bool): return left == right
        case (let left as Int, let right as Int): return left == right
        case (let left as Double, let right as Double): return left == right || (left.isNaN && right.isNaN)
        case (let left as String, let right as String): return left == right
        case (let left as Date, let right as Date): return left == right
        case (is NSNull, is NSNull): return true
        default: return false
        }
    }
}
