import ArgumentParser
import Foundation

struct PhotosCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(shouldDisplay: false) }
