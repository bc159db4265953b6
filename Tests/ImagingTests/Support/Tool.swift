import ChildProcesses
import Foundation

/// Runs the command-line tools the tests use to make inputs and to read
/// outputs independently of the code under test.
enum Tool {
    struct Failure: Error, CustomStringConvertible {
        let command: [String]
        let status: Int32
        let stderr: String
        var description: String {
            // env exits 127 when the program is not installed.
            let hint = status == 127
                ? " (the tests need Debian packages libvips-tools and libimage-exiftool-perl)" : ""
            return "\(command.joined(separator: " ")) exited \(status): \(stderr)\(hint)"
        }
    }

    /// Runs `arguments` (the first found on PATH) and returns its stdout.
    @discardableResult
    static func run(_ arguments: String...) async throws -> Data {
        try await run(arguments)
    }

    @discardableResult
    static func run(_ arguments: [String]) async throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        // The CLIs share the machine's two cores with the test process.
        environment["VIPS_CONCURRENCY"] = "1"
        process.environment = environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()

        // Each pipe is read to its end on a thread of its own: a chatty tool cannot fill
        // stderr and stall while stdout is being read, and neither read holds a thread of
        // the cooperative pool while the tool runs.
        async let errorText = onThreadOfItsOwn { errors.fileHandleForReading.readDataToEndOfFile() }
        let data = await onThreadOfItsOwn { output.fileHandleForReading.readDataToEndOfFile() }
        await process.exited()
        let stderr = await errorText

        guard process.terminationStatus == 0 else {
            throw Failure(
                command: arguments, status: process.terminationStatus,
                stderr: String(decoding: stderr, as: UTF8.self))
        }
        return data
    }
}
