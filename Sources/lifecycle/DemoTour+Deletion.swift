import Foundation

extension DemoTour {
    func deletionChapter() async throws {}
}
