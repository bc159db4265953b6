import Foundation

/// What profile-photo normalisation reads and writes inside one database transaction.
public protocol PhotoTransaction {}
