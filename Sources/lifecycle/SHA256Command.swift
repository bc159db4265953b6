import ArgumentParser
import LifecycleRuntime

/// `lifecycle sha256 FILE…`, left out of the help: the export's own SHA-256 of a file
/// (same library, same reads), run on its own. `make bench` times it over the photos an
/// export copies: the floor the export is compared with, whatever the CPU's SHA speed.
struct SHA256Command: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sha256",
        abstract: "Print each file's SHA-256 the way the export computes it, in sha256sum's format (exit 66 for a file that cannot be read).",
        shouldDisplay: false)

    @Argument(help: "The files to hash.") var files: [String]

    func run() async throws {
        try await guarded {
            for file in files {
                do {
                    print("\(try FileDigest.sha256(ofFile: file).hex)  \(file)")
                } catch let error as BlobStoreError {
                    throw LifecycleError(.inputMissing, error.description)
                }
            }
            return .ok
        }
    }
}
