import Foundation
import JobRunner

/// The `import:` section of `Jobs/policies/import.yaml`, with documented defaults.
public struct ImportSettings: Sendable, Equatable {
    /// Longest accepted line of an import file, in bytes (default 64 MiB). A longer line
    /// is refused by its number without being held in memory; the others are imported.
    public var maxLineBytes = 64 << 20
    /// Largest photo file an import copies, in bytes (default 100 MiB), checked on the
    /// opened file before a byte is read.
    public var maxPhotoBytes: Int64 = 100 << 20

    public static let sectionName = "import"
    static let keys: Set<String> = ["max_line_bytes", "max_photo_bytes"]

    public init() {}

    public init(policies: PolicyBook) throws {
        let section = try policies.section(Self.sectionName)
        do {
            try section.requireOnly(Self.keys)
            maxLineBytes = try section.int("max_line_bytes", default: maxLineBytes, in: 1_024...(1 << 30))
            maxPhotoBytes = Int64(try section.int("max_photo_bytes", default: Int(maxPhotoBytes), in: 1...(1 << 40)))
        } catch let error as JobRunnerError {
            throw LifecycleError(.badInput, error.message)
        }
    }
}
