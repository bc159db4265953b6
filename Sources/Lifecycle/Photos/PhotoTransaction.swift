import Foundation

/// Which profile photos a normalisation run looks at.
public struct PhotoSelection: Sendable, Equatable {
    /// One account's profile photos, or every account's when nil.
    public var accountID: String?
    /// Photos whose state is `pending`, or `normalized` under an older recipe version
    /// than this one, are the ones still to do.
    public var recipeVersion: Int
    /// Also take photos an earlier run rejected (after an operator raised a limit).
    public var includeRejected: Bool

    public init(accountID: String?, recipeVersion: Int, includeRejected: Bool = false) {
        self.accountID = accountID
        self.recipeVersion = recipeVersion
        self.includeRejected = includeRejected
    }
}

/// The rendered photo a profile photo row is switched to.
public struct RenderedPhoto: Sendable, Codable, Equatable {
    public var blobKey: String
    public var byteSize: Int64
    /// Of the rendered JPEG, so export and verification check the bytes that are stored.
    public var sha256: String
    public var recipeVersion: Int

    public init(blobKey: String, byteSize: Int64, sha256: String, recipeVersion: Int) {
        self.blobKey = blobKey
        self.byteSize = byteSize
        self.sha256 = sha256
        self.recipeVersion = recipeVersion
    }
}

