import ArgumentParser
import Foundation

struct ExportCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(shouldDisplay: false) }
struct ExportsCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(shouldDisplay: false) }
