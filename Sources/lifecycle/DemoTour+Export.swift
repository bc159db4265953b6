import Foundation

extension DemoTour {
    func exportChapter() async throws {}
}
