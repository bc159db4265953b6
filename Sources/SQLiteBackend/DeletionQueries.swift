import GRDB
import Lifecycle

extension SQLiteTransaction: DeletionTransaction {}

enum DeletionSchema {
    static func register(in migrator: inout DatabaseMigrator) {}
}
