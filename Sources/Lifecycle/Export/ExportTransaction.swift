import Foundation

/// What the export job reads and writes inside one database transaction.
public protocol ExportTransaction {}
