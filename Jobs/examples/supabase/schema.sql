-- The product's app as deployed on Supabase (PostgreSQL), abridged to what the data map
-- names. Supabase owns the auth schema; the app's tables live in public. Photos live in
-- Supabase Storage (S3-compatible); rows keep their object keys.
CREATE SCHEMA IF NOT EXISTS auth;

CREATE TABLE auth.users (
    id uuid PRIMARY KEY,
    email text UNIQUE,
    encrypted_password text,
    phone text,
    raw_user_meta_data jsonb,
    last_sign_in_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE public.users (
    id uuid PRIMARY KEY REFERENCES auth.users(id),
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
