import Foundation

extension BlobKey {
    /// Keys lifecycle itself writes in a store it shares with an app: export archives
    /// (`accounts/<account>/exports/…`) and the filesystem store's uploads in flight
    /// (`.incoming/…`). A row of the app that names one is never followed: an export does
    /// not hand it out and a purge does not delete it, whoever the row belongs to.
    public static func isLifecycleOwn(_ key: String) -> Bool {
        if key.hasPrefix(".incoming/") { return true }
        let parts = key.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        return parts.count >= 3 && parts[0] == "accounts" && parts[2] == "exports"
    }
}
