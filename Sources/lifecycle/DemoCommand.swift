import ArgumentParser
import Foundation
import JobRunner
import Lifecycle
import SQLiteBackend

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: "tour")
    @OptionGroup var options: GlobalOptions
    func run() async throws {}
}
