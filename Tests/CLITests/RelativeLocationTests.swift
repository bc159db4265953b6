import ChildProcesses
import Foundation
import Testing

/// Locations as an operator types them, relative to the working directory: one-letter
/// names included, which once crashed the process inside Foundation's path handling.
struct RelativeLocationTests {
    @Test func oneLetterDatabaseAndBlobFoldersWorkFromTheCurrentDirectory() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let lines = folder.appendingPathComponent("a")
        try #"{"id":"ada","email":"ada@example.com","password_hash":"$2b$04$abcdefghijklmnopqrstuu","created_at":"2025-01-02T03:04:05Z"}"#.write(to: lines, atomically: true, encoding: .utf8)
        func lifecycle(_ arguments: [String]) async throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: lifecycleBinary)
            process.arguments = arguments + ["--database", "d", "--blobs", "b", "--jobs-dir", repositoryRoot + "/Jobs"]
            process.currentDirectoryURL = folder
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            await process.exited()
            return (process.terminationStatus, String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        }
        let (initialised, initMessage) = try await lifecycle(["init"])
        #expect(initialised == 0, "\(initMessage)")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("d").path))
        let (status, message) = try await lifecycle(["accounts", "import", "a"])
        #expect(status == 0, "\(message)")
    }
}
