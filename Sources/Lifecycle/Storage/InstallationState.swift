/// What a database holds before lifecycle opens it for work.
public enum InstallationState: Sendable, Equatable {
    /// No database there at all (a SQLite path with no file).
    case missing
    /// A database without lifecycle's tables: an app's own, or an empty one.
    case uninitialised
    case initialised
}
