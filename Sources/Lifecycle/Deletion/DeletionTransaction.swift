import Foundation

/// What deletion, restore and purge reads and writes inside one database transaction.
public protocol DeletionTransaction {}
