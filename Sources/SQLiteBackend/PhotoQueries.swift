import GRDB
import Lifecycle

extension SQLiteTransaction: PhotoTransaction {}

enum PhotoSchema {
    static func register(in migrator: inout DatabaseMigrator) {}
}
