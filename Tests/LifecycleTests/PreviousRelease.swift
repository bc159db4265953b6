import Foundation

/// The schema as the release before lifecycle's own namespace made it (commit 209251a),
/// copied verbatim from its migrations: the installations the upgrade must carry over
/// were built by exactly these statements. Never change them to match newer code.
enum PreviousRelease {
    /// Applied through GRDB's DatabaseMigrator, as that release did, under these names.
    static let sqlite: [(name: String, sql: String)] = [
        ("v1-job-runner", """
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
            """),
        ("v1-reference-schema", """
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
            """),
        ("v2-exports", """
            CREATE TABLE exports (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
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
            CREATE INDEX exports_account ON exports(account_id, completed_at);
            CREATE INDEX exports_job ON exports(job_id);
            -- The expiry job's scan stays cheap however many expired exports pile up.
            CREATE INDEX exports_ready_expiry ON exports(expires_at) WHERE state = 'ready';

            -- Messages to users, written with the event they report. The unique key makes
            -- a repeated job step find its message instead of writing a second one.
            CREATE TABLE outbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                unique_key TEXT NOT NULL UNIQUE,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                recipient TEXT,
                subject TEXT NOT NULL,
                body TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('pending','delivered')),
                attempts INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                created_at DATETIME NOT NULL,
                delivered_at DATETIME
            );
            CREATE INDEX outbox_account ON outbox(account_id);
            CREATE INDEX outbox_pending ON outbox(created_at) WHERE state = 'pending';
            """),
        ("v2-deletion", """
            CREATE TABLE purge_inventory (
                account_ref TEXT PRIMARY KEY,
                rows TEXT NOT NULL,
                blob_count INTEGER,
                blob_bytes INTEGER,
                started_at DATETIME NOT NULL
            ) WITHOUT ROWID;
            """),
        ("v3-deletion-attempts", """
            CREATE TABLE deletion_attempts (
                id INTEGER PRIMARY KEY,
                account_ref TEXT NOT NULL,
                started_at DATETIME NOT NULL
            );
            CREATE INDEX deletion_attempts_by_account ON deletion_attempts (account_ref, started_at);
            """),
    ]

    /// Applied one statement at a time, recorded in `schema_migrations` in the current schema.
    static let postgres: [(name: String, statements: [String])] = [
        ("v1-job-runner", [
            """
            CREATE TABLE jobs (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                kind TEXT NOT NULL,
                payload TEXT NOT NULL DEFAULT '{}',
                unique_key TEXT,
                state TEXT NOT NULL CHECK (state IN ('queued','running','retrying','succeeded','dead','cancelled')),
                attempt INTEGER NOT NULL DEFAULT 0,
                max_attempts INTEGER NOT NULL,
                run_at TIMESTAMPTZ NOT NULL,
                lease_owner TEXT,
                lease_expires_at TIMESTAMPTZ,
                last_error TEXT,
                cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
                created_at TIMESTAMPTZ NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL,
                started_at TIMESTAMPTZ,
                finished_at TIMESTAMPTZ
            )
            """,
            // One live job per unique key, enforced by the server: enqueue relies on it
            // (INSERT … ON CONFLICT) when workers on several machines race.
            "CREATE UNIQUE INDEX jobs_live_unique_key ON jobs(unique_key) WHERE state IN ('queued','running','retrying')",
            // Claims look up due jobs per kind; partial indexes stay small however many finished jobs pile up.
            "CREATE INDEX jobs_ready ON jobs(kind, run_at, id) WHERE state IN ('queued','retrying')",
            "CREATE INDEX jobs_leased ON jobs(lease_expires_at) WHERE state = 'running'",
            "CREATE INDEX jobs_kind_state ON jobs(kind, state)",
            """
            CREATE TABLE job_steps (
                job_id BIGINT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
                step TEXT NOT NULL,
                output TEXT,
                finished_at TIMESTAMPTZ NOT NULL,
                PRIMARY KEY (job_id, step)
            )
            """,
            "CREATE TABLE job_schedules (name TEXT PRIMARY KEY, last_slot TIMESTAMPTZ NOT NULL)",
            """
            CREATE TABLE runner_probe_effects (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                job_id BIGINT NOT NULL,
                step TEXT NOT NULL,
                recorded_at TIMESTAMPTZ NOT NULL
            )
            """,
            "CREATE INDEX runner_probe_effects_job ON runner_probe_effects(job_id)",
        ]),
        ("v1-reference-schema", [
            """
            CREATE TABLE accounts (
                id TEXT PRIMARY KEY,
                email TEXT,
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
                integration_whoop BOOLEAN NOT NULL DEFAULT FALSE,
                integration_strava BOOLEAN NOT NULL DEFAULT FALSE,
                integration_apple_health BOOLEAN NOT NULL DEFAULT FALSE,
                integration_fitness BOOLEAN NOT NULL DEFAULT FALSE,
                state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active','pendingDeletion','purging','purged')),
                deletion_requested_at TIMESTAMPTZ,
                purge_after TIMESTAMPTZ,
                purged_at TIMESTAMPTZ,
                created_at TIMESTAMPTZ NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL
            )
            """,
            // SQLite's `COLLATE NOCASE UNIQUE`: one account per email whatever its case.
            "CREATE UNIQUE INDEX accounts_email ON accounts(lower(email))",
            "CREATE INDEX accounts_due_for_purge ON accounts(purge_after) WHERE state = 'pendingDeletion'",
            """
            CREATE TABLE preferences (
                account_id TEXT PRIMARY KEY REFERENCES accounts(id),
                theme TEXT NOT NULL DEFAULT 'system' CHECK (theme IN ('system','light','dark')),
                font_size_offset INTEGER NOT NULL DEFAULT 0 CHECK (font_size_offset IN (-2, 0, 2, 4)),
                notifications_enabled BOOLEAN NOT NULL DEFAULT TRUE,
                daily_reminder_time TEXT
            )
            """,
            """
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                created_at TIMESTAMPTZ NOT NULL,
                revoked_at TIMESTAMPTZ
            )
            """,
            "CREATE INDEX sessions_account ON sessions(account_id)",
            """
            CREATE TABLE journal_entries (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                created_at TIMESTAMPTZ NOT NULL,
                text TEXT NOT NULL
            )
            """,
            "CREATE INDEX journal_entries_account ON journal_entries(account_id, created_at)",
            """
            CREATE TABLE photos (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                entry_id TEXT REFERENCES journal_entries(id),
                role TEXT NOT NULL CHECK (role IN ('entry','profile')),
                blob_key TEXT NOT NULL,
                content_type TEXT NOT NULL,
                byte_size BIGINT NOT NULL,
                sha256 TEXT NOT NULL,
                taken_at TIMESTAMPTZ,
                created_at TIMESTAMPTZ NOT NULL,
                normalization_state TEXT CHECK (normalization_state IN ('pending','normalized','rejected')),
                normalization_reason TEXT,
                recipe_version INTEGER
            )
            """,
            "CREATE INDEX photos_account ON photos(account_id)",
            "CREATE INDEX photos_entry ON photos(entry_id)",
            "CREATE INDEX photos_pending ON photos(normalization_state) WHERE role = 'profile'",
            """
            CREATE TABLE mesocycles (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                status TEXT NOT NULL,
                started_at TIMESTAMPTZ,
                completed_at TIMESTAMPTZ
            )
            """,
            "CREATE INDEX mesocycles_account ON mesocycles(account_id)",
            """
            CREATE TABLE meditation_sessions (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                started_at TIMESTAMPTZ NOT NULL,
                duration_seconds INTEGER NOT NULL CHECK (duration_seconds >= 0)
            )
            """,
            "CREATE INDEX meditation_sessions_account ON meditation_sessions(account_id)",
            // No foreign key: the audit trail outlives the rows it talks about.
            """
            CREATE TABLE audit_events (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                at TIMESTAMPTZ NOT NULL,
                actor TEXT NOT NULL,
                action TEXT NOT NULL,
                account_id TEXT,
                outcome TEXT NOT NULL,
                detail TEXT
            )
            """,
            "CREATE INDEX audit_events_account ON audit_events(account_id, at)",
        ]),
        ("v2-exports", [
            """
            CREATE TABLE exports (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                job_id BIGINT,
                format TEXT NOT NULL CHECK (format IN ('zip','tar.gz')),
                state TEXT NOT NULL CHECK (state IN ('building','ready','expired','revoked')),
                requested_by TEXT NOT NULL,
                cutoff_at TIMESTAMPTZ NOT NULL,
                blob_key TEXT,
                byte_size BIGINT,
                omitted_photos INTEGER NOT NULL DEFAULT 0,
                completed_at TIMESTAMPTZ,
                expires_at TIMESTAMPTZ,
                revoked_at TIMESTAMPTZ,
                expired_at TIMESTAMPTZ
            )
            """,
            "CREATE INDEX exports_account ON exports(account_id, completed_at)",
            "CREATE INDEX exports_job ON exports(job_id)",
            "CREATE INDEX exports_ready_expiry ON exports(expires_at) WHERE state = 'ready'",
            """
            CREATE TABLE outbox (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                unique_key TEXT NOT NULL UNIQUE,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                recipient TEXT,
                subject TEXT NOT NULL,
                body TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('pending','delivered')),
                attempts INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                created_at TIMESTAMPTZ NOT NULL,
                delivered_at TIMESTAMPTZ
            )
            """,
            "CREATE INDEX outbox_account ON outbox(account_id)",
            "CREATE INDEX outbox_pending ON outbox(created_at) WHERE state = 'pending'",
        ]),
        ("v2-deletion", [
            // No account_id column on purpose: the purge's own bookkeeping, not account data.
            """
            CREATE TABLE purge_inventory (
                account_ref TEXT PRIMARY KEY,
                rows TEXT NOT NULL,
                blob_count INTEGER,
                blob_bytes BIGINT,
                started_at TIMESTAMPTZ NOT NULL
            )
            """,
        ]),
        ("v3-deletion-attempts", [
            // account_ref, not account_id: ids and times only, removed as each check ends.
            """
            CREATE TABLE deletion_attempts (
                id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                account_ref TEXT NOT NULL,
                started_at TIMESTAMPTZ NOT NULL
            )
            """,
            "CREATE INDEX deletion_attempts_by_account ON deletion_attempts (account_ref, started_at)",
        ]),
    ]
}
