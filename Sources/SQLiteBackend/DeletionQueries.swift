import Foundation
import GRDB
import JobRunner
import Lifecycle

extension SQLiteTransaction {
    public func columns(of table: OwnTable) throws -> [SchemaCatalog.Column] {
        try db.columns(in: dialect.table(table)).map { column in
            SchemaCatalog.Column(
                name: column.name, declaredType: column.type, kind: SQLiteStore.kind(ofDeclared: column.type), isNotNull: column.isNotNull)
        }
    }
}

enum DeletionSchema {
    static func register(in migrator: inout Migrator) {
        migrator.registerMigration("v2-deletion") { db in
            // No account_id column on purpose: it is the purge's own bookkeeping, not
            // account data, and it is removed when the tombstone is written.
            try db.execute(sql: """
                CREATE TABLE purge_inventory (
                    account_ref TEXT PRIMARY KEY,
                    rows TEXT NOT NULL,
                    blob_count INTEGER,
                    blob_bytes INTEGER,
                    started_at DATETIME NOT NULL
                ) WITHOUT ROWID;
                """)
        }
    }

    static func registerAttempts(in migrator: inout Migrator) {
        migrator.registerMigration("v3-deletion-attempts") { db in
            // account_ref, not account_id: ids and times only, removed as each check ends.
            try db.execute(sql: """
                CREATE TABLE deletion_attempts (
                    id INTEGER PRIMARY KEY,
                    account_ref TEXT NOT NULL,
                    started_at DATETIME NOT NULL
                );
                CREATE INDEX deletion_attempts_by_account ON deletion_attempts (account_ref, started_at);
                """)
        }
    }
}
