import Imaging
import JobRunner

/// Reads every settings section the domain uses, the way the commands that need it do,
/// so `jobs check` finds what `purge`, `export`, `import` or a photo job would refuse
/// (an unknown key, a value out of range) before they run. The policy book checks the
/// files' YAML and their `job:` sections itself; a section it already reports broken is
/// not reported twice.
public enum PolicySettingsCheck {
    private struct Reader: Sendable {
        var section: String
        var usedBy: String
        var read: @Sendable (PolicyBook) throws -> Void
    }

    private static let readers: [Reader] = [
        Reader(section: DeletionPolicy.sectionName, usedBy: "delete, restore, purge, the deletion jobs") { _ = try DeletionPolicy(policies: $0) },
        Reader(section: ExportSettings.sectionName, usedBy: "export, the export jobs") { _ = try ExportSettings(policies: $0) },
        Reader(section: ImportSettings.sectionName, usedBy: "import") { _ = try ImportSettings(policies: $0) },
        Reader(section: PhotoPolicy.sectionName, usedBy: "photos, the photo jobs") { _ = try PhotoPolicy(policies: $0) },
    ]

    /// One sentence per unusable section: the file, what is wrong, and what refuses to run.
    public static func problems(in policies: PolicyBook) -> [String] {
        readers.compactMap { reader in
            // A section a broken file holds (or may hold) is the book's to report.
            guard (try? policies.section(reader.section)) != nil else { return nil }
            do {
                try reader.read(policies)
                return nil
            } catch {
                let message = (error as? LifecycleError)?.message ?? (error as? JobRunnerError)?.message ?? "\(error)"
                return "\(message); until it is corrected these refuse to run: \(reader.usedBy)"
            }
        }
    }
}
