/// Why an uploaded photo was refused.
///
/// `userMessage` is the product's own wording and safe to show in the app;
/// `operatorDetail` says exactly what was wrong with the bytes, for logs and
/// job errors, and is never shown to the uploader.
public struct PhotoRejection: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable code to branch on. New codes can be added without breaking
    /// callers, which an exhaustive public enum would not allow.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case tooLarge
            case unsupportedType
            case dimensionsTooLarge
            case corrupt
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// More bytes than `PhotoPolicy.maxInputBytes`.
        public static let tooLarge = Code(.tooLarge)
        /// Not JPEG, PNG or HEIC by content.
        public static let unsupportedType = Code(.unsupportedType)
        /// The header declares more pixels, or a longer side, than the policy
        /// allows.
        public static let dimensionsTooLarge = Code(.dimensionsTooLarge)
        /// The bytes claim a supported format but cannot be decoded in full.
        public static let corrupt = Code(.corrupt)

        public var description: String { value.rawValue }
    }

    public let code: Code
    public let operatorDetail: String

    private init(code: Code, operatorDetail: String) {
        self.code = code
        self.operatorDetail = operatorDetail
    }

    public static func tooLarge(byteCount: Int, limit: Int) -> PhotoRejection {
        .init(code: .tooLarge, operatorDetail: "input is \(byteCount) bytes, limit \(limit)")
    }

    public static func unsupportedType(_ detail: String) -> PhotoRejection {
        .init(code: .unsupportedType, operatorDetail: detail)
    }

    /// The header declares more than `pixelLimit` pixels.
    public static func dimensionsTooLarge(width: Int, height: Int, pixelLimit: Int) -> PhotoRejection {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        let count = overflow ? "more than \(Int.max)" : "\(pixels)"
        return .init(
            code: .dimensionsTooLarge,
            operatorDetail: "header declares \(width)×\(height) = \(count) pixels, limit \(pixelLimit)")
    }

    /// The header declares a side longer than `sideLimit`.
    public static func dimensionsTooLarge(width: Int, height: Int, sideLimit: Int) -> PhotoRejection {
        .init(code: .dimensionsTooLarge, operatorDetail: "header declares \(width)×\(height), side limit \(sideLimit)")
    }

    public static func corrupt(_ detail: String) -> PhotoRejection {
        .init(code: .corrupt, operatorDetail: detail)
    }

    /// The message for the person who uploaded the photo. The first two are
    /// the product specification's exact text.
    public var userMessage: String {
        switch code {
        case .tooLarge: "Photo must be under 10MB."
        case .unsupportedType: "This file type is not supported. Please use JPG, PNG, or HEIC."
        case .dimensionsTooLarge: "This photo is too large to process. Please choose a smaller photo."
        default: "This photo could not be read. Please choose another photo."
        }
    }

    public var description: String { "photo rejected (\(code)): \(operatorDetail)" }

    /// The uploader's message for a stored rejection reason (`<code>: <detail>`, as the
    /// normalisation job records it).
    public static func userMessage(forReason reason: String) -> String {
        let code = reason.prefix { $0 != ":" }
        let known: [Code] = [.tooLarge, .unsupportedType, .dimensionsTooLarge, .corrupt]
        let match = known.first { $0.description == code } ?? .corrupt
        return PhotoRejection(code: match, operatorDetail: "").userMessage
    }
}
