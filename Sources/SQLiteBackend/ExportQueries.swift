import GRDB
import Lifecycle

extension SQLiteTransaction: ExportTransaction {}

enum ExportSchema {
    static func register(in migrator: inout DatabaseMigrator) {}
}
