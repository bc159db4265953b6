import Foundation
import Testing

/// One hash written by a third-party tool (Vectors/make-vectors.sh).
struct Vector: Decodable, Sendable, CustomTestStringConvertible {
    let tool: String
    let format: String
    let password: String
    let hash: String

    /// Written with the tool's default cost (0.1–0.8 s to verify here):
    /// checked against one wrong password and left out of the repeated
    /// checks, to keep the suite fast.
    var usesDefaultCost: Bool { tool.hasSuffix("defaults") }

    var testDescription: String { "\(format) from \(tool), password \(password.debugDescription)" }

    static let all: [Vector] = {
        do {
            guard let url = Bundle.module.url(forResource: "vectors", withExtension: "json", subdirectory: "Vectors") else {
                fatalError("Vectors/vectors.json is missing from the test bundle")
            }
            return try JSONDecoder().decode([Vector].self, from: Data(contentsOf: url))
        } catch {
            fatalError("Vectors/vectors.json does not decode: \(error)")
        }
    }()
}
