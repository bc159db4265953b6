import Foundation
import JobRunner
import Testing

struct CronScheduleTests {
    let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    func date(_ text: String) -> Date { ISO8601.parse(text)! }

    @Test func latestSlotOfANightlySchedule() throws {
        let nightly = try CronSchedule("30 3 * * *")
        #expect(nightly.latestSlot(atOrBefore: date("2026-03-10T12:00:00Z")) == date("2026-03-10T03:30:00Z"))
        #expect(nightly.latestSlot(atOrBefore: date("2026-03-10T03:29:59Z")) == date("2026-03-09T03:30:00Z"))
        #expect(nightly.nextSlot(after: date("2026-03-10T03:30:00Z")) == date("2026-03-11T03:30:00Z"))
    }

    @Test func stepsListsRangesAndWeekdays() throws {
        let schedule = try CronSchedule("*/15 8-10 * * 1-5")
        #expect(schedule.matches(date("2026-03-10T08:45:00Z")))  // a Tuesday
        #expect(!schedule.matches(date("2026-03-10T08:50:00Z")))
        #expect(!schedule.matches(date("2026-03-14T08:45:00Z")))  // a Saturday
        #expect(try CronSchedule("@hourly").matches(date("2026-03-10T05:00:00Z")))
    }

    @Test(arguments: ["", "* * * *", "61 * * * *", "a * * * *", "5-1 * * * *", "*/0 * * * *"])
    func invalidExpressionsAreRefused(_ expression: String) {
        #expect(throws: JobRunnerError.self) { try CronSchedule(expression) }
    }
}

struct PolicyBookTests {
    func writePolicies(_ files: [String: String]) throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("policies-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/policies", withIntermediateDirectories: true)
        for (name, text) in files { try text.write(toFile: root + "/policies/" + name, atomically: true, encoding: .utf8) }
        return root
    }

    @Test func readsJobSectionsAndDomainSections() throws {
        let root = try writePolicies(["export.yaml": """
            job:
              kind: export
              max_attempts: 7
              lease_seconds: 120
              schedule: "0 * * * *"
            export:
              rate_limit_hours: 24
            """])
        let book = try PolicyBook(jobsDirectory: root)
        #expect(try book.policy(for: "export").maxAttempts == 7)
        #expect(try book.policy(for: "export").lease == 120)
        #expect(try book.policy(for: "export").schedule?.expression == "0 * * * *")
        #expect(try book.section("export").int("rate_limit_hours", default: 1) == 24)
        // Kinds without a file run on the documented defaults.
        #expect(try book.policy(for: "other") == JobPolicy())
    }

    @Test func aTypoInAPolicyFileIsAnErrorNamingTheKeyWhereItsKindIsNeeded() throws {
        let root = try writePolicies(["purge.yaml": "job:\n  kind: purge\n  max_atempts: 3\npurge:\n  batch: 3\n"])
        let book = try PolicyBook(jobsDirectory: root)
        #expect {
            try book.policy(for: "purge")
        } throws: { error in
            "\(error)".contains("max_atempts") && "\(error)".contains("purge.yaml")
        }
        // The whole file is unusable, its other sections too: half a file is not applied.
        #expect(throws: JobRunnerError.self) { try book.section("purge") }
    }

    @Test func aBrokenFileFailsOnlyWhatItDefines() throws {
        let root = try writePolicies([
            "noop.yaml": "job:\n  kind: runner.noop\n  concurency: 64\n",
            "export.yaml": "job:\n  kind: export\n  max_attempts: 9\nexport:\n  rate_limit_hours: 24\n",
            "photos.yaml": "job:\n  kind: photos.normalize\n  max_attempts: [\n",
        ])
        let book = try PolicyBook(jobsDirectory: root)
        #expect(try book.policy(for: "export").maxAttempts == 9)
        #expect(try book.section("export").int("rate_limit_hours", default: 1) == 24)
        #expect(try book.policy(for: "deletion.purge") == JobPolicy())
        #expect { try book.policy(for: "runner.noop") } throws: { "\($0)".contains("noop.yaml") && "\($0)".contains("concurency") }
        // Not even YAML: what it defines is read off its lines.
        #expect { try book.policy(for: "photos.normalize") } throws: { "\($0)".contains("photos.yaml") && "\($0)".contains("not valid YAML") }
        #expect(book.brokenFiles.map { ($0.path as NSString).lastPathComponent }.sorted() == ["noop.yaml", "photos.yaml"])
    }

    @Test func aBrokenFileWithWindowsLineEndingsOrQuotedKeysStillFailsEverySectionItDefines() throws {
        let root = try writePolicies([
            "crlf.yaml": "export:\r\n  rate_limit_hours: 24\r\ndeletion:\r\n  grace_days: 60\r\n  oops: [\r\n",
            "quoted.yaml": "\"photos\":\n  max_side: 10\n'job':\n  \"kind\": 'photos.normalize'\n  bad: [\n",
        ])
        let book = try PolicyBook(jobsDirectory: root)
        // Defaults here would purge 30 days after a request the policy gives 60.
        #expect(throws: JobRunnerError.self) { try book.section("deletion") }
        #expect(throws: JobRunnerError.self) { try book.section("export") }
        #expect(throws: JobRunnerError.self) { try book.section("photos") }
        #expect(throws: JobRunnerError.self) { try book.policy(for: "photos.normalize") }
        #expect(try book.policy(for: "deletion.purge") == JobPolicy())
    }

    @Test func aBrokenFileNamingAKindAGoodFileDefinesMakesTheKindUnusable() throws {
        let root = try writePolicies([
            "a-export.yaml": "job:\n  kind: export\n  max_attempts: 9\n",
            "b-export.yaml": "job:\n  kind: export\n  max_attempts: 2\n",
        ])
        let book = try PolicyBook(jobsDirectory: root)
        #expect { try book.policy(for: "export") } throws: { "\($0)".contains("b-export.yaml") && "\($0)".contains("already defined") }
    }

    @Test func aFileTooBrokenToTellWhatItDefinesFailsEveryKindNoGoodFileDefines() throws {
        let root = try writePolicies(["a.yaml": "- just\n- a list\n", "export.yaml": "job:\n  kind: export\n"])
        let book = try PolicyBook(jobsDirectory: root)
        #expect(try book.policy(for: "export") == JobPolicy())
        #expect { try book.policy(for: "deletion.purge") } throws: { "\($0)".contains("a.yaml") }
    }

    @Test func aMissingPoliciesFolderMeansDefaults() throws {
        let book = try PolicyBook(jobsDirectory: "/nonexistent-\(UUID().uuidString)")
        #expect(try book.policy(for: "anything") == JobPolicy())
    }
}
