import Foundation

extension DemoTour {
    func photosChapter() async throws {}
}
