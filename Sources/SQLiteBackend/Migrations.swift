import GRDB

/// Named, ordered migrations. A shipped migration is never edited: changes go in a new one.
enum Migrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()

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
        // file that owns the feature (ExportQueries, DeletionQueries, PhotoQueries).
        ExportSchema.register(in: &migrator)
        DeletionSchema.register(in: &migrator)
        PhotoSchema.register(in: &migrator)
        DeletionSchema.registerAttempts(in: &migrator)
        return migrator
    }
}
