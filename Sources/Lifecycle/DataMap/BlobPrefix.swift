import Foundation

extension DataMap {
    /// A folder of the blob store that holds the user's files and nobody else's
    /// (`avatars/{key}/`, as Supabase Storage's policies lay out a bucket). After erasure the
    /// purge lists it and deletes every file no kept row names: an upload no row of the app
    /// named would otherwise stay in the bucket while its record went.
    public struct BlobPrefix: Sendable, Equatable, CustomStringConvertible {
        public var template: String
        public var line: Int

        public static let placeholder = "{key}"

        public var description: String { template }

        /// Why `template` cannot name one user's folder, or nil.
        static func problem(_ template: String) -> String? {
            let parts = template.components(separatedBy: placeholder)
            guard parts.count == 2 else {
                return "must name the user's folder with {key} exactly once, e.g. avatars/{key}/"
            }
            if parts.contains(where: { $0.contains("{") || $0.contains("}") }) {
                return "must hold no placeholder but {key} (the account's key)"
            }
            // Without the closing '/', avatars/{key} of account 1 would also be avatars/10/,
            // another account's folder.
            guard template.hasSuffix("/") else {
                return "must end with '/' (avatars/{key}/): without it, account 1's prefix avatars/1 would also cover avatars/10/"
            }
            let sample = String(template.replacingOccurrences(of: placeholder, with: "k").dropLast())
            if let problem = BlobKey.fileSystemProblem(sample) { return "must be a folder inside the blob store, but \(problem)" }
            let first = sample.split(separator: "/", omittingEmptySubsequences: false).first.map(String.init) ?? ""
            if first == "accounts" {
                return "must not be under accounts/, lifecycle's own folder, whose account folders the purge clears by itself"
            }
            return nil
        }

        /// The folder of the account `key`, or why it cannot be one: a key holding '/' would
        /// reach into another account's folder, and '.' or '..' out of the prefix.
        public func resolved(key: String) throws -> String {
            guard !key.isEmpty, !key.contains("/"), key != ".", key != ".." else {
                throw LifecycleError(.badInput, """
                    blob_prefixes: the account's key \(BlobKey.quoted(key)) cannot be one folder of \(template) \
                    (it is empty, '.', '..' or holds '/'): take the prefix out of the map for such keys
                    """)
            }
            let prefix = template.replacingOccurrences(of: Self.placeholder, with: key)
            if let problem = BlobKey.fileSystemProblem(String(prefix.dropLast())) {
                throw LifecycleError(.badInput, "blob_prefixes: \(template) for the account's key is \(BlobKey.quoted(prefix)), which is not allowed: \(problem)")
            }
            return prefix
        }
    }
}
