import ArgumentParser
import Foundation

struct DeleteCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(shouldDisplay: false) }
struct RestoreCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(shouldDisplay: false) }
struct PurgeCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(shouldDisplay: false) }
struct SetPasswordCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(shouldDisplay: false) }
