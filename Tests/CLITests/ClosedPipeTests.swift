import ChildProcesses
import Foundation
import Testing

/// `lifecycle map check | head -2`: a reader that goes away ends the output, not the
/// command. The pipes here have their read ends closed before the command starts, so
/// its very first write meets EPIPE, whatever the machine's speed.
struct ClosedPipeTests {
    /// Runs `command` with stdout (and, if asked, stderr) into pipes nobody reads.
    /// SIGPIPE is reset to its default in the child, as a shell gives it, so only the
    /// command's own handling keeps it alive.
    func runIntoClosedPipes(_ workspace: Workspace, _ command: [String], closingStderr: Bool) async throws -> Process {
        func closedPipe() throws -> FileHandle {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw CLITestFailure("pipe: \(String(cString: strerror(errno)))") }
            close(ends[0])
            return FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["--default-signal=PIPE", lifecycleBinary] + workspace.arguments(command)
        let stdout = try closedPipe()
        let stderr = closingStderr ? try closedPipe() : FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        try stdout.close()
        try stderr?.close()
        await process.exited()
        return process
    }

    @Test func aCommandWhoseReaderIsGoneEndsWithItsOwnStatus() async throws {
        let workspace = try Workspace()
        try await workspace.ensureInitialised()
        let check = try await workspace.run(["map", "check"])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.split(separator: "\n").count >= 10, "the command writes many lines: \(check.stdout)")

        for closingStderr in [false, true] {
            let process = try await runIntoClosedPipes(workspace, ["map", "check"], closingStderr: closingStderr)
            #expect(process.terminationReason == .exit, "killed by signal \(process.terminationStatus)")
            #expect(process.terminationStatus == 0)
        }
        // A failing command still fails with its own status when nobody reads its error.
        let missing = try await runIntoClosedPipes(workspace, ["accounts", "show", "nobody-at-all"], closingStderr: true)
        #expect(missing.terminationReason == .exit, "killed by signal \(missing.terminationStatus)")
        #expect(missing.terminationStatus == 67)
    }
}
