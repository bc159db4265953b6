import GRDB
import Lifecycle

extension SQLiteTransaction: PhotoTransaction {
    public func profilePhotosToNormalize(_ selection: PhotoSelection, after: String?, limit: Int) throws -> [PhotoRecord] {
        // A profile photo written before states existed (NULL) counts as pending.
        var states = ["COALESCE(p.normalization_state, 'pending') = 'pending'",
                      "(p.normalization_state = 'normalized' AND COALESCE(p.recipe_version, 0) < ?)"]
        var arguments: StatementArguments = [selection.recipeVersion]
        if selection.includeRejected { states.append("p.normalization_state = 'rejected'") }
        var clauses = ["p.role = 'profile'", "a.state IN ('active', 'pendingDeletion')", "(" + states.joined(separator: " OR ") + ")"]
        if let accountID = selection.accountID {
            clauses.append("p.account_id = ?")
            arguments += [accountID]
        }
        if let after {
            clauses.append("p.id > ?")
            arguments += [after]
        }
        arguments += [limit]
        return try Row.fetchAll(
            db,
            sql: "SELECT p.* FROM photos p JOIN accounts a ON a.id = p.account_id WHERE \(clauses.joined(separator: " AND ")) ORDER BY p.id LIMIT ?",
            arguments: arguments
        ).map(PhotoRecord.init(row:))
    }

    public func profilePhotos(state: NormalizationState?, accountID: String?, after: String?, limit: Int) throws -> [PhotoRecord] {
        var clauses = ["role = 'profile'"]
        var arguments = StatementArguments()
        if let state {
            clauses.append(state == .pending ? "COALESCE(normalization_state, 'pending') = ?" : "normalization_state = ?")
            arguments += [state.rawValue]
        }
        if let accountID {
            clauses.append("account_id = ?")
            arguments += [accountID]
        }
        if let after {
            clauses.append("id > ?")
            arguments += [after]
        }
        arguments += [limit]
        return try Row.fetchAll(
            db, sql: "SELECT * FROM photos WHERE \(clauses.joined(separator: " AND ")) ORDER BY id LIMIT ?", arguments: arguments
        ).map(PhotoRecord.init(row:))
    }

    public func switchToRendered(photoID: String, rendered: RenderedPhoto) throws {
        try db.execute(
            sql: """
                UPDATE photos SET blob_key = ?, content_type = 'image/jpeg', byte_size = ?, sha256 = ?,
                  normalization_state = 'normalized', normalization_reason = NULL, recipe_version = ?
                WHERE id = ?
                """,
            arguments: [rendered.blobKey, rendered.byteSize, rendered.sha256, rendered.recipeVersion, photoID])
    }

    public func markRejected(photoID: String, reason: String) throws {
        try db.execute(
            sql: "UPDATE photos SET normalization_state = 'rejected', normalization_reason = ? WHERE id = ?",
            arguments: [reason, photoID])
    }

    public func deletePhotos(ids: [String]) throws {
        for id in ids { try db.execute(sql: "DELETE FROM photos WHERE id = ?", arguments: [id]) }
    }
}

/// The v1 reference schema already has the photo columns normalisation needs
/// (`normalization_state`, `normalization_reason`, `recipe_version`): no migration yet.
enum PhotoSchema {
    static func register(in migrator: inout Migrator) {}
}
