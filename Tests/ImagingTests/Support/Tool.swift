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
    static func run(_ arguments: String...) throws -> Data {
        try run(arguments)
    }

    @discardableResult
    static func run(_ arguments: [String]) throws -> Data {
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

        // stderr is drained on another thread so a chatty tool cannot fill
        // that pipe and stall while stdout is being read here.
        let errorText = ErrorText()
        let drained = DispatchGroup()
        drained.enter()
        DispatchQueue.global().async {
            errorText.value = errors.fileHandleForReading.readDataToEndOfFile()
            drained.leave()
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        drained.wait()

        guard process.terminationStatus == 0 else {
            throw Failure(
                command: arguments, status: process.terminationStatus,
                stderr: String(decoding: errorText.value, as: UTF8.self))
        }
        return data
    }

    /// Written by the drain thread before `leave()`, read after `wait()`:
    /// the group orders the two accesses.
    private final class ErrorText: @unchecked Sendable {
        var value = Data()
    }
}
