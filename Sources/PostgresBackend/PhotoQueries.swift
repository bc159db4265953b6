import Foundation
import Lifecycle
import PostgresNIO

extension PostgresTransaction: PhotoTransaction {
    public func profilePhotosToNormalize(_ selection: PhotoSelection, after: String?, limit: Int) throws -> [PhotoRecord] {
        // Optional filters as "NULL means any": one statement with every value bound.
        // A profile photo written before states existed (NULL) counts as pending.
        try query("""
            SELECT p.* FROM photos p JOIN accounts a ON a.id = p.account_id
            WHERE p.role = 'profile' AND a.state IN ('active', 'pendingDeletion')
              AND (COALESCE(p.normalization_state, 'pending') = 'pending'
                   OR (p.normalization_state = 'normalized' AND COALESCE(p.recipe_version, 0) < \(Int32(clamping: selection.recipeVersion)))
                   OR (\(selection.includeRejected) AND p.normalization_state = 'rejected'))
              AND (\(selection.accountID)::text IS NULL OR p.account_id = \(selection.accountID)::text)
              AND (\(after)::text IS NULL OR p.id > \(after)::text)
            ORDER BY p.id LIMIT \(limit)
            """).map(PhotoRecord.init(row:))
    }

    public func profilePhotos(state: NormalizationState?, accountID: String?, after: String?, limit: Int) throws -> [PhotoRecord] {
        try query("""
            SELECT * FROM photos
            WHERE role = 'profile'
              AND (\(state?.rawValue)::text IS NULL OR COALESCE(normalization_state, 'pending') = \(state?.rawValue)::text)
              AND (\(accountID)::text IS NULL OR account_id = \(accountID)::text)
              AND (\(after)::text IS NULL OR id > \(after)::text)
            ORDER BY id LIMIT \(limit)
            """).map(PhotoRecord.init(row:))
    }

    public func switchToRendered(photoID: String, rendered: RenderedPhoto) throws {
        try execute("""
            UPDATE photos SET blob_key = \(rendered.blobKey), content_type = 'image/jpeg', byte_size = \(rendered.byteSize),
              sha256 = \(rendered.sha256), normalization_state = 'normalized', normalization_reason = NULL,
              recipe_version = \(Int32(clamping: rendered.recipeVersion))
            WHERE id = \(photoID)
            """)
    }

    public func markRejected(photoID: String, reason: String) throws {
        try execute("UPDATE photos SET normalization_state = 'rejected', normalization_reason = \(reason) WHERE id = \(photoID)")
    }

    public func deletePhotos(ids: [String]) throws {
        for id in ids { try execute("DELETE FROM photos WHERE id = \(id)") }
    }
}
