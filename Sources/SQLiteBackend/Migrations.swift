import Foundation
import GRDB

/// Named, ordered migrations. A shipped migration is never edited: changes go in a new one.
enum Migrations {
    static var migrator: Migrator { migrator(referenceSchema: true) }

    /// `referenceSchema: false` for an app's own database: a fresh installation then gets
    /// lifecycle's tables only, never the reference app's (`accounts`, `photos`, …).
    static func migrator(referenceSchema: Bool) -> Migrator {
        var migrator = Migrator()

        migrator.registerMigration("v1-job-runner") { db in
            try db.execute(sql: """
                CREATE TABLE jobs (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    kind TEXT NOT NULL,
                    payload TEXT NOT NULL DEFAULT '{}',
                    unique_key TEXT,
                    state TEXT NOT NULL CHECK (state IN ('queued','running','retrying','succeeded','dead','cancelled')),
                    attempt INTEGER NOT NULL DEFAULT 0,
                    max_attempts INTEGER NOT NULL,
                    run_at DATETIME NOT NULL,
                    lease_owner TEXT,
                    lease_expires_at DATETIME,
                    last_error TEXT,
                    cancel_requested INTEGER NOT NULL DEFAULT 0,
                    created_at DATETIME NOT NULL,
                    updated_at DATETIME NOT NULL,
                    started_at DATETIME,
                    finished_at DATETIME
                );
                -- One live job per unique key; finished jobs release the key.
                CREATE UNIQUE INDEX jobs_live_unique_key ON jobs(unique_key)
                    WHERE unique_key IS NOT NULL AND state IN ('queued','running','retrying');
                -- Partial indexes keep claiming cheap however many finished jobs pile up.
                CREATE INDEX jobs_ready ON jobs(run_at, id) WHERE state IN ('queued','retrying');
                CREATE INDEX jobs_leased ON jobs(lease_expires_at) WHERE state = 'running';
                CREATE INDEX jobs_kind_state ON jobs(kind, state);

                CREATE TABLE job_steps (
                    job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
                    step TEXT NOT NULL,
                    output TEXT,
                    finished_at DATETIME NOT NULL,
                    PRIMARY KEY (job_id, step)
                ) WITHOUT ROWID;

                CREATE TABLE job_schedules (
                    name TEXT PRIMARY KEY,
                    last_slot DATETIME NOT NULL
                );

                CREATE TABLE runner_probe_effects (
                    id INTEGER PRIMARY KEY,
                    job_id INTEGER NOT NULL,
                    step TEXT NOT NULL,
                    recorded_at DATETIME NOT NULL
                );
                CREATE INDEX runner_probe_effects_job ON runner_probe_effects(job_id);
                """)
        }

        migrator.registerMigration("v1-reference-schema") { db in
            try db.execute(sql: """
                CREATE TABLE accounts (
                    id TEXT PRIMARY KEY,
                    email TEXT COLLATE NOCASE UNIQUE,
                    password_hash TEXT,
                    first_name TEXT,
                    last_name TEXT,
                    display_name TEXT,
                    bio TEXT,
                    profile_photo_id TEXT,
                    primary_sport TEXT,
                    morning_reminder_time TEXT,
                    timezone TEXT,
                    subscription_status TEXT,
                    integration_whoop INTEGER NOT NULL DEFAULT 0,
                    integration_strava INTEGER NOT NULL DEFAULT 0,
                    integration_apple_health INTEGER NOT NULL DEFAULT 0,
                    integration_fitness INTEGER NOT NULL DEFAULT 0,
                    state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active','pendingDeletion','purging','purged')),
                    deletion_requested_at DATETIME,
                    purge_after DATETIME,
                    purged_at DATETIME,
                    created_at DATETIME NOT NULL,
                    updated_at DATETIME NOT NULL
                );
                CREATE INDEX accounts_due_for_purge ON accounts(purge_after) WHERE state = 'pendingDeletion';

                CREATE TABLE preferences (
                    account_id TEXT PRIMARY KEY REFERENCES accounts(id),
                    theme TEXT NOT NULL DEFAULT 'system' CHECK (theme IN ('system','light','dark')),
                    font_size_offset INTEGER NOT NULL DEFAULT 0 CHECK (font_size_offset IN (-2, 0, 2, 4)),
                    notifications_enabled INTEGER NOT NULL DEFAULT 1,
                    daily_reminder_time TEXT
                );

                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    created_at DATETIME NOT NULL,
                    revoked_at DATETIME
                );
                CREATE INDEX sessions_account ON sessions(account_id);

                CREATE TABLE journal_entries (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    created_at DATETIME NOT NULL,
                    text TEXT NOT NULL
                );
                CREATE INDEX journal_entries_account ON journal_entries(account_id, created_at);

                CREATE TABLE photos (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    entry_id TEXT REFERENCES journal_entries(id),
                    role TEXT NOT NULL CHECK (role IN ('entry','profile')),
                    blob_key TEXT NOT NULL,
                    content_type TEXT NOT NULL,
                    byte_size INTEGER NOT NULL,
                    sha256 TEXT NOT NULL,
                    taken_at DATETIME,
                    created_at DATETIME NOT NULL,
                    normalization_state TEXT CHECK (normalization_state IN ('pending','normalized','rejected')),
                    normalization_reason TEXT,
                    recipe_version INTEGER
                );
                CREATE INDEX photos_account ON photos(account_id);
                CREATE INDEX photos_entry ON photos(entry_id);
                CREATE INDEX photos_pending ON photos(normalization_state) WHERE role = 'profile';

                CREATE TABLE mesocycles (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    status TEXT NOT NULL,
                    started_at DATETIME,
                    completed_at DATETIME
                );
                CREATE INDEX mesocycles_account ON mesocycles(account_id);

                CREATE TABLE meditation_sessions (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    started_at DATETIME NOT NULL,
                    duration_seconds INTEGER NOT NULL CHECK (duration_seconds >= 0)
                );
                CREATE INDEX meditation_sessions_account ON meditation_sessions(account_id);

                -- No foreign key: the audit trail outlives the rows it talks about.
                CREATE TABLE audit_events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at DATETIME NOT NULL,
                    actor TEXT NOT NULL,
                    action TEXT NOT NULL,
                    account_id TEXT,
                    outcome TEXT NOT NULL,
                    detail TEXT
                );
                CREATE INDEX audit_events_account ON audit_events(account_id, at);
                """)
        }
        // Later schema changes, one named migration each, registered in order by the
        // file that owns the feature (ExportQueries, DeletionQueries).
        ExportSchema.register(in: &migrator)
        DeletionSchema.register(in: &migrator)
        DeletionSchema.registerAttempts(in: &migrator)

        // Every migration above put lifecycle's own tables among the app's; from here on
        // they are `lifecycle_<name>`, and none refers to an app table.
        migrator.registerMigration("v4-lifecycle-namespace") { db in
            // Off is SQLite's default: renaming then rewrites the references to the table
            // (job_steps → jobs) instead of leaving them naming a table that no longer exists.
            try db.execute(sql: "PRAGMA legacy_alter_table = OFF")
            for table in ["jobs", "job_steps", "job_schedules", "runner_probe_effects", "audit_events", "purge_inventory", "deletion_attempts"] {
                try db.execute(sql: "ALTER TABLE \(table) RENAME TO lifecycle_\(table)")
            }
            // Index names share the file's namespace with the app's: renamed too (SQLite
            // cannot rename an index, so each is made again under its new name).
            try db.execute(sql: """
                DROP INDEX jobs_live_unique_key;
                DROP INDEX jobs_ready;
                DROP INDEX jobs_leased;
                DROP INDEX jobs_kind_state;
                DROP INDEX runner_probe_effects_job;
                DROP INDEX audit_events_account;
                DROP INDEX deletion_attempts_by_account;
                """)
            try db.execute(sql: OwnSchema.jobIndexes + OwnSchema.probeEffectIndexes + OwnSchema.auditIndexes + OwnSchema.deletionAttemptIndexes)
            // exports and outbox referred to accounts: rebuilt without the reference (SQLite
            // cannot drop a constraint), rows and ids kept. Nothing refers to either table.
            try db.execute(sql: OwnSchema.exports + """
                INSERT INTO lifecycle_exports (id, account_id, job_id, format, state, requested_by, cutoff_at, blob_key, byte_size,
                  omitted_photos, completed_at, expires_at, revoked_at, expired_at)
                SELECT id, account_id, job_id, format, state, requested_by, cutoff_at, blob_key, byte_size,
                  omitted_photos, completed_at, expires_at, revoked_at, expired_at FROM exports;
                DROP TABLE exports;
                """)
            try db.execute(sql: OwnSchema.outbox + """
                INSERT INTO lifecycle_outbox (id, unique_key, account_id, recipient, subject, body, state, attempts, last_error,
                  created_at, delivered_at)
                SELECT id, unique_key, account_id, recipient, subject, body, state, attempts, last_error, created_at, delivered_at
                FROM outbox;
                -- AUTOINCREMENT never hands out an id again, even one whose row is gone: the
                -- new table continues from the old one's counter, not from its largest id.
                DELETE FROM sqlite_sequence WHERE name = 'lifecycle_outbox';
                INSERT INTO sqlite_sequence (name, seq) SELECT 'lifecycle_outbox', seq FROM sqlite_sequence WHERE name = 'outbox';
                DROP TABLE outbox;
                """)
        }

        // A database with none of the migrations gets their sum at once: lifecycle's own
        // tables are created in its namespace, never created among the app's and moved.
        migrator.registerBaseline(upTo: "v4-lifecycle-namespace") { db in
            try db.execute(sql: (referenceSchema ? ReferenceSchema.tables : "") + OwnSchema.all)
        }

        // An app's own accounts: their deletion state and a purge's running counts, keyed by
        // the app's key as text, referring to none of the app's tables.
        migrator.registerMigration("v5-app-subjects") { db in
            try db.execute(sql: """
                CREATE TABLE lifecycle_subjects (
                    subject_key TEXT PRIMARY KEY,
                    state TEXT NOT NULL CHECK (state IN ('active','pendingDeletion','purging','purged')),
                    deletion_requested_at DATETIME,
                    purge_after DATETIME,
                    purged_at DATETIME,
                    updated_at DATETIME NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX lifecycle_subjects_due ON lifecycle_subjects(purge_after) WHERE state IN ('pendingDeletion','purging');

                CREATE TABLE lifecycle_purge_progress (
                    subject_key TEXT NOT NULL,
                    table_name TEXT NOT NULL,
                    deleted INTEGER NOT NULL DEFAULT 0,
                    masked INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (subject_key, table_name)
                ) WITHOUT ROWID;
                """)
        }

        // Operations: kinds an operator paused, holds on accounts (kept after they end, for
        // the audit and the purge receipt), the installation's own secret for hashing lookup
        // values, and those hashes of purged accounts so that `audit` still finds them.
        migrator.registerMigration("v6-operations") { db in
            try db.execute(sql: """
                CREATE TABLE lifecycle_paused_kinds (
                    kind TEXT PRIMARY KEY,
                    paused_at DATETIME NOT NULL,
                    paused_by TEXT NOT NULL,
                    reason TEXT
                ) WITHOUT ROWID;

                CREATE TABLE lifecycle_holds (
                    id INTEGER PRIMARY KEY,
                    subject_key TEXT NOT NULL,
                    reason TEXT NOT NULL,
                    held_by TEXT NOT NULL,
                    held_at DATETIME NOT NULL,
                    until DATETIME,
                    released_at DATETIME,
                    released_by TEXT
                );
                CREATE UNIQUE INDEX lifecycle_holds_active ON lifecycle_holds(subject_key) WHERE released_at IS NULL;

                CREATE TABLE lifecycle_settings (
                    name TEXT PRIMARY KEY,
                    value TEXT NOT NULL
                ) WITHOUT ROWID;
                INSERT INTO lifecycle_settings (name, value) VALUES ('lookup_salt', lower(hex(randomblob(32))));

                CREATE TABLE lifecycle_lookup_digests (
                    digest TEXT NOT NULL,
                    subject_key TEXT NOT NULL,
                    PRIMARY KEY (digest, subject_key)
                ) WITHOUT ROWID;
                """)
        }

        // Claims look for one kind's due jobs at a time. Keyed by run time alone, the ready
        // index lost to the (kind, state) index in SQLite's planner, which then read and
        // sorted every queued job of the kind on every claim: a backlog of 100,000 drained
        // at half the rate of one of 20,000. PostgreSQL's ready index has had this shape
        // from the start.
        migrator.registerMigration("v7-ready-by-kind") { db in
            try db.execute(sql: """
                DROP INDEX lifecycle_jobs_ready;
                CREATE INDEX lifecycle_jobs_ready ON lifecycle_jobs(kind, run_at, id) WHERE state IN ('queued','retrying');
                """)
        }

        // A job changes state twice in its life (claimed, finished), and SQLite rewrites every
        // index whose columns or condition name the state: measured, 2.5-4 µs a row each,
        // half of a claim's update. The live unique key's index named it only to leave
        // finished jobs out of its uniqueness; every enqueue and retry looks for a live job
        // with the key first, inside its write transaction, and SQLite runs one write
        // transaction at a time across processes, so nothing can come between the look and
        // the insert: the index now serves that look-up alone. (kind, state) stays: counting
        // jobs by kind and state (metrics, the dashboard) reads it alone, 70 ms for a million
        // jobs against 840 ms from the table.
        migrator.registerMigration("v8-unique-key-index-without-state") { db in
            try db.execute(sql: """
                DROP INDEX lifecycle_jobs_live_unique_key;
                CREATE INDEX lifecycle_jobs_unique_key ON lifecycle_jobs(unique_key) WHERE unique_key IS NOT NULL;
                """)
        }

        // (kind, state) over every job was rewritten on each claim (queued → running) and
        // again on each finish: four entry changes, and two or three more pages in every
        // group commit. Over the states a job ends in it changes once per job, on the finish.
        // The counts of waiting jobs by kind and state read the ready index instead, which
        // the claim rewrites anyway: it now holds the state too, so SQLite (which does not
        // take a partial index's condition as read from it) need not visit the table. The
        // look-ups of one kind's jobs (`jobs list --kind`, the attention report after a purge)
        // get an index on the kind alone, which no claim or finish rewrites.
        migrator.registerMigration("v9-kind-state-index-settled-only") { db in
            try db.execute(sql: """
                CREATE INDEX lifecycle_jobs_kind ON lifecycle_jobs(kind);
                DROP INDEX lifecycle_jobs_kind_state;
                CREATE INDEX lifecycle_jobs_kind_state_settled ON lifecycle_jobs(kind, state)
                  WHERE state IN ('succeeded','dead','cancelled');
                DROP INDEX lifecycle_jobs_ready;
                CREATE INDEX lifecycle_jobs_ready ON lifecycle_jobs(kind, run_at, id, state) WHERE state IN ('queued','retrying');
                """)
        }
        // SQLite (3.40) tests `x IN (three or more constants)` in a partial index's condition
        // or a CHECK constraint by building a temporary b-tree of the constants, each time:
        // twice for each row a claim or a finish changes (the row before and after). A replay
        // of the runner's statements in C cost 15.8 µs per job with the two IN tests below
        // and 11.4 µs with these comparisons, which SQLite tests in place. A list of two is
        // already turned into comparisons, so the ready index keeps its IN.
        migrator.registerMigration("v10-job-state-tests-without-in-lists") { db in
            try db.execute(sql: """
                DROP INDEX lifecycle_jobs_kind_state_settled;
                CREATE INDEX lifecycle_jobs_kind_state_settled ON lifecycle_jobs(kind, state)
                  WHERE \(OwnSchema.settledStates);
                """)
            try OwnSchema.rewriteJobStateCheck(db)
        }
        // The files a purge of an app account deletes once the rows naming them are gone:
        // recorded in the transaction that erases those rows, settled one by one after.
        migrator.registerMigration("v11-purge-files") { db in
            try db.execute(sql: """
                CREATE TABLE lifecycle_purge_files (
                    subject_key TEXT NOT NULL,
                    blob_key TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('pending','deleted','kept')),
                    bytes INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (subject_key, blob_key)
                ) WITHOUT ROWID;
                """)
        }
        // What an account's deletion request set in the app's tables (the map's
        // `on_deletion: set:`), kept until a restore puts it back or the purge starts.
        migrator.registerMigration("v12-grace-values") { db in
            try db.execute(sql: """
                CREATE TABLE lifecycle_grace_values (
                    subject_key TEXT NOT NULL,
                    table_name TEXT NOT NULL,
                    row_key TEXT NOT NULL,
                    column_name TEXT NOT NULL,
                    value TEXT,
                    PRIMARY KEY (subject_key, table_name, row_key, column_name)
                ) WITHOUT ROWID;
                """)
        }
        // Deleting part of an account (the web page's "photos") keeps every file a row
        // still names: found by blob key, which without this read the whole photos table
        // once for every batch of files (`lifecycle map check` said so of the reference map).
        // An app's own tables are left alone, a table of its own named photos too: an
        // installation whose map cannot be read is opened as the reference app's, so the
        // table must also have the reference app's columns.
        migrator.registerMigration("v13-photos-by-blob-key") { db in
            let columns = try columns(of: "photos", in: db)
            guard referenceSchema, columns.isSuperset(of: ReferenceSchema.photoColumns) else { return }
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS photos_blob_key ON photos(blob_key)")
        }
        // A part deletion erases the part as it was when asked for: the keys of its rows,
        // recorded in the request's transaction, one row each (a part may hold many
        // thousands), kept until the job ends (Lifecycle's RecordedRowsSQL.swift).
        migrator.registerMigration("v14-part-deletion-rows") { db in
            try db.execute(sql: """
                CREATE TABLE lifecycle_part_deletion_rows (
                    job_id INTEGER NOT NULL,
                    table_name TEXT NOT NULL,
                    row_key TEXT NOT NULL,
                    PRIMARY KEY (job_id, table_name, row_key)
                ) WITHOUT ROWID;
                """)
        }
        // Whose each row of a table that names its user only encoded (`django_session`) is,
        // so signing one user out reads her rows (Lifecycle's EncodedOwnersSQL.swift). The
        // owner is NULL for a row that names no one.
        migrator.registerMigration("v15-encoded-owners") { db in
            try db.execute(sql: """
                CREATE TABLE lifecycle_encoded_owners (
                    table_name TEXT NOT NULL,
                    row_key TEXT NOT NULL,
                    owner_key TEXT,
                    PRIMARY KEY (table_name, row_key)
                ) WITHOUT ROWID;
                CREATE INDEX lifecycle_encoded_owners_owner ON lifecycle_encoded_owners(table_name, owner_key) WHERE owner_key IS NOT NULL;
                CREATE TABLE lifecycle_encoded_indexes (
                    table_name TEXT PRIMARY KEY,
                    refreshed_at TEXT NOT NULL
                ) WITHOUT ROWID;
                """)
        }
        // A `worker --once` run's stops, recorded with each stopped job's done-mark until the
        // run reports them (JobQueue.takeUnreportedStops): a table of its own, rarely written,
        // instead of a column and an index on the jobs table every claim reads.
        migrator.registerMigration("v16-unreported-stops") { db in
            try db.execute(sql: """
                CREATE TABLE lifecycle_unreported_stops (
                    job_id INTEGER PRIMARY KEY,
                    kind TEXT NOT NULL,
                    reason TEXT NOT NULL,
                    stopped_at TEXT NOT NULL
                );
                """)
        }
        // The reference app's accounts keep their deletion state where every app's does, in
        // lifecycle's own records; the app keeps what it shows (`state`, which the data map's
        // `on_deletion: set:` and the purge's mask write), and a pending account's `active`
        // is kept for a restore to put back, as a deletion request keeps it.
        migrator.registerMigration("v17-reference-deletion-state") { db in
            let columns = try columns(of: "accounts", in: db)
            guard referenceSchema, columns.isSuperset(of: ["id", "state", "deletion_requested_at", "purge_after", "purged_at"]) else { return }
            try db.execute(sql: """
                INSERT INTO lifecycle_subjects (subject_key, state, deletion_requested_at, purge_after, purged_at, updated_at)
                SELECT id, state, deletion_requested_at, purge_after, purged_at, updated_at FROM accounts WHERE state <> 'active'
                ON CONFLICT (subject_key) DO NOTHING;
                INSERT INTO lifecycle_grace_values (subject_key, table_name, row_key, column_name, value)
                SELECT id, 'accounts', json_array(id), 'state', 'active' FROM accounts WHERE state = 'pendingDeletion'
                ON CONFLICT DO NOTHING;
                DROP INDEX IF EXISTS accounts_due_for_purge;
                ALTER TABLE accounts DROP COLUMN deletion_requested_at;
                ALTER TABLE accounts DROP COLUMN purge_after;
                ALTER TABLE accounts DROP COLUMN purged_at;
                """)
        }
        // The reference app's profile photo is a blob key in a column of the account row, as
        // in any app whose map says `profile_photo:`, where it was a row of the photos table
        // that `profile_photo_id` named: the row's key moves into `profile_photo_key` and the
        // row goes (a replaced photo's row, its file not yet retired, stays a photo of hers
        // until the photos part or the purge takes it); the normalisation state the rows kept
        // is the audit trail's now. A queued normalisation of the photo she has becomes the
        // column's job, started afresh; one of a photo she no longer has is cancelled.
        migrator.registerMigration("v18-reference-profile-photo-column") { db in
            let accounts = try columns(of: "accounts", in: db)
            let photos = try columns(of: "photos", in: db)
            guard referenceSchema, accounts.contains("profile_photo_id"), photos.isSuperset(of: ReferenceSchema.photoColumns) else { return }
            try db.execute(sql: """
                ALTER TABLE accounts ADD COLUMN profile_photo_key TEXT;
                UPDATE accounts SET profile_photo_key =
                    (SELECT blob_key FROM photos WHERE photos.id = accounts.profile_photo_id AND photos.account_id = accounts.id)
                WHERE profile_photo_id IS NOT NULL;
                CREATE TEMP TABLE moved_photo_jobs AS
                    SELECT j.id AS job_id, p.account_id, p.blob_key,
                           CASE WHEN a.id IS NOT NULL AND COALESCE(p.normalization_state, 'pending') = 'pending' THEN 1 ELSE 0 END AS converted
                    FROM lifecycle_jobs j
                    LEFT JOIN photos p ON p.id = json_extract(j.payload, '$.photo')
                    LEFT JOIN accounts a ON a.id = p.account_id AND a.profile_photo_id = p.id
                    WHERE j.kind = 'photos.normalize' AND j.state IN ('queued', 'running', 'retrying');
                DELETE FROM lifecycle_job_steps WHERE job_id IN (SELECT job_id FROM moved_photo_jobs WHERE converted = 1);
                """)
            let now = Date()
            try db.execute(sql: """
                UPDATE lifecycle_jobs SET
                    kind = 'photos.normalize-column', state = 'queued', lease_owner = NULL, lease_expires_at = NULL, updated_at = ?,
                    payload = (SELECT json_object('account', m.account_id, 'upload', m.blob_key) FROM moved_photo_jobs m WHERE m.job_id = lifecycle_jobs.id),
                    unique_key = (SELECT 'photo:' || m.blob_key FROM moved_photo_jobs m WHERE m.job_id = lifecycle_jobs.id)
                WHERE id IN (SELECT job_id FROM moved_photo_jobs WHERE converted = 1)
                """, arguments: [now])
            try db.execute(sql: """
                UPDATE lifecycle_jobs SET
                    state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = ?, updated_at = ?,
                    last_error = 'its photo is no longer the profile photo of its account (profile photos moved to accounts.profile_photo_key)'
                WHERE id IN (SELECT job_id FROM moved_photo_jobs WHERE converted = 0)
                """, arguments: [now, now])
            try db.execute(sql: """
                DROP TABLE moved_photo_jobs;
                DELETE FROM photos WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.profile_photo_id = photos.id AND a.id = photos.account_id);
                ALTER TABLE accounts DROP COLUMN profile_photo_id;
                DROP INDEX IF EXISTS photos_pending;
                ALTER TABLE photos DROP COLUMN normalization_state;
                ALTER TABLE photos DROP COLUMN normalization_reason;
                ALTER TABLE photos DROP COLUMN recipe_version;
                """)
        }
        // A purge asks whether a kept row still names each file it deletes, in every file
        // column of the map: the profile photo's column among them, which without this is read
        // whole for every account purged.
        migrator.registerMigration("v19-profile-photo-key-index") { db in
            let accounts = try columns(of: "accounts", in: db)
            guard referenceSchema, accounts.contains("profile_photo_key") else { return }
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS accounts_profile_photo_key ON accounts(profile_photo_key)")
        }
        return migrator
    }

    /// The columns a table has now (none when it does not exist): what tells the reference
    /// app's tables, as a migration finds them, from an app's own of the same name.
    private static func columns(of table: String, in db: Database) throws -> Set<String> {
        try Set(String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [table]))
    }
}

/// Lifecycle's own tables as `v4-lifecycle-namespace` leaves them, shared by that
/// migration and the baseline so that an upgraded installation and a fresh one match.
enum OwnSchema {
    /// A job has ended: what `lifecycle_jobs_kind_state_settled` holds, and what a query
    /// names, word for word, for SQLite to see that the index serves it.
    static let settledStates = "(state = 'succeeded' OR state = 'dead' OR state = 'cancelled')"

    /// The job table's CHECK on its state, as an OR of comparisons (v10). The table's text
    /// in the schema is changed in place, as SQLite documents for a CHECK constraint: every
    /// row already meets the new one, which accepts exactly what the old one did, so no
    /// row is rewritten (a rebuild would copy every job). A table whose text does not hold
    /// the old CHECK word for word is left as it is.
    static func rewriteJobStateCheck(_ db: Database) throws {
        let old = "CHECK (state IN ('queued','running','retrying','succeeded','dead','cancelled'))"
        let new = "CHECK (state = 'queued' OR state = 'running' OR state = 'retrying' OR state = 'succeeded' OR state = 'dead' OR state = 'cancelled')"
        guard let table = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'lifecycle_jobs'"),
              table.contains(old)
        else { return }
        let version = try Int.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
        try db.execute(sql: "PRAGMA writable_schema = ON")
        do {
            try db.execute(
                sql: "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'lifecycle_jobs'",
                arguments: [table.replacingOccurrences(of: old, with: new)])
            // A new schema version makes every connection, this one included, read the schema again.
            try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
        } catch {
            try? db.execute(sql: "PRAGMA writable_schema = OFF")
            throw error
        }
        try db.execute(sql: "PRAGMA writable_schema = OFF")
        db.clearSchemaCache()
    }

    static let jobs = """
        CREATE TABLE lifecycle_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}',
            unique_key TEXT,
            state TEXT NOT NULL CHECK (state IN ('queued','running','retrying','succeeded','dead','cancelled')),
            attempt INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL,
            run_at DATETIME NOT NULL,
            lease_owner TEXT,
            lease_expires_at DATETIME,
            last_error TEXT,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            created_at DATETIME NOT NULL,
            updated_at DATETIME NOT NULL,
            started_at DATETIME,
            finished_at DATETIME
        );
        CREATE TABLE lifecycle_job_steps (
            job_id INTEGER NOT NULL REFERENCES lifecycle_jobs(id) ON DELETE CASCADE,
            step TEXT NOT NULL,
            output TEXT,
            finished_at DATETIME NOT NULL,
            PRIMARY KEY (job_id, step)
        ) WITHOUT ROWID;
        CREATE TABLE lifecycle_job_schedules (
            name TEXT PRIMARY KEY,
            last_slot DATETIME NOT NULL
        );

        """

    static let jobIndexes = """
        -- One live job per unique key; finished jobs release the key.
        CREATE UNIQUE INDEX lifecycle_jobs_live_unique_key ON lifecycle_jobs(unique_key)
            WHERE unique_key IS NOT NULL AND state IN ('queued','running','retrying');
        -- Partial indexes keep claiming cheap however many finished jobs pile up.
        CREATE INDEX lifecycle_jobs_ready ON lifecycle_jobs(run_at, id) WHERE state IN ('queued','retrying');
        CREATE INDEX lifecycle_jobs_leased ON lifecycle_jobs(lease_expires_at) WHERE state = 'running';
        CREATE INDEX lifecycle_jobs_kind_state ON lifecycle_jobs(kind, state);

        """

    static let probeEffects = """
        CREATE TABLE lifecycle_runner_probe_effects (
            id INTEGER PRIMARY KEY,
            job_id INTEGER NOT NULL,
            step TEXT NOT NULL,
            recorded_at DATETIME NOT NULL
        );

        """

    static let probeEffectIndexes = """
        CREATE INDEX lifecycle_runner_probe_effects_job ON lifecycle_runner_probe_effects(job_id);

        """

    /// No foreign key: the audit trail outlives the rows it talks about.
    static let audit = """
        CREATE TABLE lifecycle_audit_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at DATETIME NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            account_id TEXT,
            outcome TEXT NOT NULL,
            detail TEXT
        );

        """

    static let auditIndexes = """
        CREATE INDEX lifecycle_audit_events_account ON lifecycle_audit_events(account_id, at);

        """

    /// account_id is the app's key as text, with no reference to the app's table: an
    /// installation need not have an `accounts` table at all. The purge deletes these rows.
    static let exports = """
        CREATE TABLE lifecycle_exports (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL,
            job_id INTEGER,
            format TEXT NOT NULL CHECK (format IN ('zip','tar.gz')),
            state TEXT NOT NULL CHECK (state IN ('building','ready','expired','revoked')),
            requested_by TEXT NOT NULL,
            cutoff_at DATETIME NOT NULL,
            blob_key TEXT,
            byte_size INTEGER,
            omitted_photos INTEGER NOT NULL DEFAULT 0,
            completed_at DATETIME,
            expires_at DATETIME,
            revoked_at DATETIME,
            expired_at DATETIME
        );
        CREATE INDEX lifecycle_exports_account ON lifecycle_exports(account_id, completed_at);
        CREATE INDEX lifecycle_exports_job ON lifecycle_exports(job_id);
        -- The expiry job's scan stays cheap however many expired exports pile up.
        CREATE INDEX lifecycle_exports_ready_expiry ON lifecycle_exports(expires_at) WHERE state = 'ready';

        """

    /// Messages to users, written with the event they report. The unique key makes a
    /// repeated job step find its message instead of writing a second one.
    static let outbox = """
        CREATE TABLE lifecycle_outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            unique_key TEXT NOT NULL UNIQUE,
            account_id TEXT NOT NULL,
            recipient TEXT,
            subject TEXT NOT NULL,
            body TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending','delivered')),
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            created_at DATETIME NOT NULL,
            delivered_at DATETIME
        );
        CREATE INDEX lifecycle_outbox_account ON lifecycle_outbox(account_id);
        CREATE INDEX lifecycle_outbox_pending ON lifecycle_outbox(created_at) WHERE state = 'pending';

        """

    /// No account_id column on purpose: the purge's own bookkeeping, removed when the
    /// tombstone is written.
    static let purgeInventory = """
        CREATE TABLE lifecycle_purge_inventory (
            account_ref TEXT PRIMARY KEY,
            rows TEXT NOT NULL,
            blob_count INTEGER,
            blob_bytes INTEGER,
            started_at DATETIME NOT NULL
        ) WITHOUT ROWID;

        """

    /// account_ref, not account_id: ids and times only, removed as each check ends.
    static let deletionAttempts = """
        CREATE TABLE lifecycle_deletion_attempts (
            id INTEGER PRIMARY KEY,
            account_ref TEXT NOT NULL,
            started_at DATETIME NOT NULL
        );

        """

    static let deletionAttemptIndexes = """
        CREATE INDEX lifecycle_deletion_attempts_by_account ON lifecycle_deletion_attempts (account_ref, started_at);

        """

    static let all = jobs + jobIndexes + probeEffects + probeEffectIndexes + audit + auditIndexes + exports + outbox
        + purgeInventory + deletionAttempts + deletionAttemptIndexes
}

/// The reference app's tables as `v1-reference-schema` makes them, less the audit trail,
/// which is lifecycle's own. They stay in the main namespace: they are the app's.
enum ReferenceSchema {
    /// What tells the reference app's photos table from an app's own of that name.
    static let photoColumns: Set<String> = ["account_id", "entry_id", "role", "blob_key", "normalization_state", "recipe_version"]

    static let tables = """
        CREATE TABLE accounts (
            id TEXT PRIMARY KEY,
            email TEXT COLLATE NOCASE UNIQUE,
            password_hash TEXT,
            first_name TEXT,
            last_name TEXT,
            display_name TEXT,
            bio TEXT,
            profile_photo_id TEXT,
            primary_sport TEXT,
            morning_reminder_time TEXT,
            timezone TEXT,
            subscription_status TEXT,
            integration_whoop INTEGER NOT NULL DEFAULT 0,
            integration_strava INTEGER NOT NULL DEFAULT 0,
            integration_apple_health INTEGER NOT NULL DEFAULT 0,
            integration_fitness INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active','pendingDeletion','purging','purged')),
            deletion_requested_at DATETIME,
            purge_after DATETIME,
            purged_at DATETIME,
            created_at DATETIME NOT NULL,
            updated_at DATETIME NOT NULL
        );
        CREATE INDEX accounts_due_for_purge ON accounts(purge_after) WHERE state = 'pendingDeletion';

        CREATE TABLE preferences (
            account_id TEXT PRIMARY KEY REFERENCES accounts(id),
            theme TEXT NOT NULL DEFAULT 'system' CHECK (theme IN ('system','light','dark')),
            font_size_offset INTEGER NOT NULL DEFAULT 0 CHECK (font_size_offset IN (-2, 0, 2, 4)),
            notifications_enabled INTEGER NOT NULL DEFAULT 1,
            daily_reminder_time TEXT
        );

        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            created_at DATETIME NOT NULL,
            revoked_at DATETIME
        );
        CREATE INDEX sessions_account ON sessions(account_id);

        CREATE TABLE journal_entries (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            created_at DATETIME NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX journal_entries_account ON journal_entries(account_id, created_at);

        CREATE TABLE photos (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            entry_id TEXT REFERENCES journal_entries(id),
            role TEXT NOT NULL CHECK (role IN ('entry','profile')),
            blob_key TEXT NOT NULL,
            content_type TEXT NOT NULL,
            byte_size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            taken_at DATETIME,
            created_at DATETIME NOT NULL,
            normalization_state TEXT CHECK (normalization_state IN ('pending','normalized','rejected')),
            normalization_reason TEXT,
            recipe_version INTEGER
        );
        CREATE INDEX photos_account ON photos(account_id);
        CREATE INDEX photos_entry ON photos(entry_id);
        CREATE INDEX photos_pending ON photos(normalization_state) WHERE role = 'profile';

        CREATE TABLE mesocycles (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            status TEXT NOT NULL,
            started_at DATETIME,
            completed_at DATETIME
        );
        CREATE INDEX mesocycles_account ON mesocycles(account_id);

        CREATE TABLE meditation_sessions (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            started_at DATETIME NOT NULL,
            duration_seconds INTEGER NOT NULL CHECK (duration_seconds >= 0)
        );
        CREATE INDEX meditation_sessions_account ON meditation_sessions(account_id);

        """
}

/// Applies named migrations in order, each together with its record in one transaction.
///
/// Not GRDB's `DatabaseMigrator`: that one records what it applied in a table it always
/// names `grdb_migrations`, a table of lifecycle's outside its `lifecycle_` namespace in
/// what is the app's database file (and one an app that uses GRDB itself already owns).
/// Its record is adopted from there once (`adoptGRDBRecord`).
struct Migrator {
    struct Migration {
        let name: String
        let apply: (Database) throws -> Void
    }

    private(set) var migrations: [Migration] = []
    /// What a database with none of the migrations gets instead of all of them up to `last`.
    private var baseline: (last: String, apply: (Database) throws -> Void)?

    mutating func registerMigration(_ name: String, _ apply: @escaping (Database) throws -> Void) {
        precondition(!migrations.contains { $0.name == name }, "migration \(name) registered twice")
        migrations.append(Migration(name: name, apply: apply))
    }

    mutating func registerBaseline(upTo last: String, _ apply: @escaping (Database) throws -> Void) {
        precondition(migrations.contains { $0.name == last }, "baseline up to unknown migration \(last)")
        baseline = (last, apply)
    }

    /// Applied migrations, in the order they are registered.
    func appliedMigrations(_ db: Database) throws -> [String] {
        let applied = try Set(String.fetchAll(db, sql: "SELECT name FROM lifecycle_migrations"))
        return migrations.map(\.name).filter(applied.contains)
    }

    func migrate(_ writer: some DatabaseWriter) throws {
        try writer.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                // applied_at is NULL for migrations adopted from GRDB's record, which kept no times.
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS lifecycle_migrations (name TEXT PRIMARY KEY, applied_at DATETIME)")
                try adoptGRDBRecord(db)
                return .commit
            }
            let recorded = try Set(String.fetchAll(db, sql: "SELECT name FROM lifecycle_migrations"))
            if let unknown = recorded.subtracting(migrations.map(\.name)).sorted().first {
                throw SQLiteStoreError(message: """
                    the database has migration '\(unknown)', which this version of lifecycle does not know: it was written by a newer version
                    """)
            }
            var pending = migrations.filter { !recorded.contains($0.name) }
            if recorded.isEmpty, let baseline, let last = migrations.firstIndex(where: { $0.name == baseline.last }) {
                try db.inTransaction(.immediate) {
                    try baseline.apply(db)
                    for migration in migrations[...last] { try record(migration.name, in: db) }
                    return .commit
                }
                pending = Array(migrations[(last + 1)...])
            }
            for migration in pending {
                try db.inTransaction(.immediate) {
                    try migration.apply(db)
                    try record(migration.name, in: db)
                    return .commit
                }
            }
        }
    }

    private func record(_ name: String, in db: Database) throws {
        try db.execute(sql: "INSERT INTO lifecycle_migrations (name, applied_at) VALUES (?, ?)", arguments: [name, Date()])
    }

    /// An installation made by a release that used GRDB's migrator: its applied names move
    /// to `lifecycle_migrations`, and `grdb_migrations` goes once nothing else is recorded
    /// there (an app's own GRDB migrations keep the table and their rows).
    private func adoptGRDBRecord(_ db: Database) throws {
        guard try db.tableExists("grdb_migrations") else { return }
        let ours = Set(migrations.map(\.name))
        let adopted = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations").filter(ours.contains)
        for name in adopted {
            try db.execute(sql: "INSERT OR IGNORE INTO lifecycle_migrations (name, applied_at) VALUES (?, NULL)", arguments: [name])
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = ?", arguments: [name])
        }
        if try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM grdb_migrations") == 0 {
            try db.execute(sql: "DROP TABLE grdb_migrations")
        }
    }
}
