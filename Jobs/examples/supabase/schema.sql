-- The product's app as deployed on Supabase (PostgreSQL): the app's own tables in `public`.
-- Supabase owns the `auth` and `storage` schemas, which every project has as its migrations
-- make them (Tests/Fixtures/supabase/platform.sql reproduces both, for the tests: load it
-- first). Photos live in Supabase Storage; rows keep their object keys.
--
-- As Supabase's docs recommend for a profile table, public.users.id references auth.users(id)
-- ON DELETE CASCADE. As Supabase does for app tables, every table has row level security
-- enabled, with a policy letting a signed-in user (role authenticated, auth.uid() from the
-- JWT) reach only their own rows; the grants are those Supabase's default privileges give
-- tables in public. lifecycle connects as a role that bypasses row level security (the
-- `postgres` role of a Supabase project does): `map check` refuses one that does not.

CREATE TABLE public.users (
    id uuid PRIMARY KEY REFERENCES auth.users(id) ON DELETE CASCADE,
    email text NOT NULL UNIQUE,
    first_name text,
    last_name text,
    display_name text,
    bio text,
    avatar_path text,
    primary_sport text,
    morning_reminder_time time,
    timezone text,
    subscription_status text NOT NULL DEFAULT 'free',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE public.user_preferences (
    user_id uuid PRIMARY KEY REFERENCES public.users(id),
    theme text NOT NULL DEFAULT 'system',
    font_size_offset integer NOT NULL DEFAULT 0,
    notifications_enabled boolean NOT NULL DEFAULT true,
    daily_reminder_time time
);

-- One row per connected service: a composite key, no id.
CREATE TABLE public.user_integrations (
    user_id uuid NOT NULL REFERENCES public.users(id),
    provider text NOT NULL,
    connected_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, provider)
);

CREATE TABLE public.journal_entries (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES public.users(id),
    created_at timestamptz NOT NULL,
    body text NOT NULL
);

-- Owned through the entry: no user column of its own.
CREATE TABLE public.journal_photos (
    id uuid PRIMARY KEY,
    entry_id uuid NOT NULL REFERENCES public.journal_entries(id),
    storage_path text NOT NULL,
    taken_at timestamptz
);

CREATE TABLE public.mesocycles (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES public.users(id),
    status text NOT NULL,
    started_at timestamptz,
    completed_at timestamptz
);

CREATE TABLE public.meditation_sessions (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES public.users(id),
    started_at timestamptz NOT NULL,
    duration_seconds integer NOT NULL
);

-- Row level security: a user sees and changes only their own rows. `(SELECT auth.uid())`
-- rather than a bare auth.uid() is the form Supabase's docs recommend (evaluated once per
-- statement).
ALTER TABLE public.users ENABLE ROW LEVEL SECURITY;
CREATE POLICY "Users reach their own profile" ON public.users
    FOR ALL TO authenticated
    USING ((SELECT auth.uid()) = id)
    WITH CHECK ((SELECT auth.uid()) = id);

ALTER TABLE public.user_preferences ENABLE ROW LEVEL SECURITY;
CREATE POLICY "Users reach their own preferences" ON public.user_preferences
    FOR ALL TO authenticated
    USING ((SELECT auth.uid()) = user_id)
    WITH CHECK ((SELECT auth.uid()) = user_id);

ALTER TABLE public.user_integrations ENABLE ROW LEVEL SECURITY;
CREATE POLICY "Users reach their own integrations" ON public.user_integrations
    FOR ALL TO authenticated
    USING ((SELECT auth.uid()) = user_id)
    WITH CHECK ((SELECT auth.uid()) = user_id);

ALTER TABLE public.journal_entries ENABLE ROW LEVEL SECURITY;
CREATE POLICY "Users reach their own journal entries" ON public.journal_entries
    FOR ALL TO authenticated
    USING ((SELECT auth.uid()) = user_id)
    WITH CHECK ((SELECT auth.uid()) = user_id);

-- No user column: owned through the entry.
ALTER TABLE public.journal_photos ENABLE ROW LEVEL SECURITY;
CREATE POLICY "Users reach the photos of their own entries" ON public.journal_photos
    FOR ALL TO authenticated
    USING (EXISTS (SELECT 1 FROM public.journal_entries e
                   WHERE e.id = journal_photos.entry_id AND e.user_id = (SELECT auth.uid())))
    WITH CHECK (EXISTS (SELECT 1 FROM public.journal_entries e
                        WHERE e.id = journal_photos.entry_id AND e.user_id = (SELECT auth.uid())));

ALTER TABLE public.mesocycles ENABLE ROW LEVEL SECURITY;
CREATE POLICY "Users reach their own mesocycles" ON public.mesocycles
    FOR ALL TO authenticated
    USING ((SELECT auth.uid()) = user_id)
    WITH CHECK ((SELECT auth.uid()) = user_id);

ALTER TABLE public.meditation_sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY "Users reach their own meditation sessions" ON public.meditation_sessions
    FOR ALL TO authenticated
    USING ((SELECT auth.uid()) = user_id)
    WITH CHECK ((SELECT auth.uid()) = user_id);

-- What Supabase's default privileges in public give every new table (the policies above
-- then narrow what anon and authenticated see; service_role and postgres bypass them).
GRANT USAGE ON SCHEMA public TO postgres, anon, authenticated, service_role;
GRANT ALL ON public.users, public.user_preferences, public.user_integrations,
    public.journal_entries, public.journal_photos, public.mesocycles, public.meditation_sessions
    TO postgres, anon, authenticated, service_role;
