#!/usr/bin/env bash
# Regenerates platform.sql beside this script: Supabase's real `auth` and `storage` schemas,
# produced by applying the upstream migrations in order on a throwaway PostgreSQL 15 cluster
# and dumping the result. Run by hand only (the tests just load platform.sql):
#
#   Tests/Fixtures/supabase/regenerate.sh AUTH_GIT_DIR STORAGE_GIT_DIR [POSTGRES_GIT_DIR]
#
# AUTH_GIT_DIR and STORAGE_GIT_DIR are git directories (bare or not) of github.com/supabase/auth
# and github.com/supabase/storage; their HEAD is used (override with AUTH_REV / STORAGE_REV).
# POSTGRES_GIT_DIR (github.com/supabase/postgres) is only named in the header: the few roles,
# schemas and grants the Supabase image provides before GoTrue and Storage run their migrations
# are written out below (bootstrap_sql), taken from its migrations/db init scripts.
#
# What it does, as the two servers do it:
#   auth     GoTrue's `migrate` (gobuffalo/pop): every migrations/*.up.sql in file-name order,
#            with {{ index .Options "Namespace" }} rendered as `auth`, each in one transaction
#            with its version inserted into auth.schema_migrations; connected as
#            supabase_auth_admin, whose search_path is `auth`.
#   storage  storage-api's postgres-migrations runner: every migrations/tenant/*.sql in the
#            order of its numeric prefix, as supabase_storage_admin with search_path
#            storage,public,extensions and the storage.* settings the server sets (defaults:
#            single tenant, install_roles false; STORAGE_MULTITENANT=true for the hosted
#            platform's tenant databases, which lack the iceberg catalog tables). A file marked
#            `-- postgres-migrations ignore` runs as `SELECT 1`; one marked
#            `-- postgres-migrations disable-transaction` runs outside a transaction.
# Then `pg_dump --schema-only --schema=auth --schema=storage --no-owner`, with the roles
# prepended, and a replay check: platform.sql then Jobs/examples/supabase/schema.sql on two fresh databases.
set -euo pipefail

usage() { echo "usage: $0 AUTH_GIT_DIR STORAGE_GIT_DIR [POSTGRES_GIT_DIR]" >&2; exit 64; }
[ $# -ge 2 ] || usage
auth_git=$1
storage_git=$2
postgres_git=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
BIN=${LIFECYCLE_PG_BIN:-/usr/lib/postgresql/15/bin}
out=${OUT:-$here/platform.sql}
multitenant=${STORAGE_MULTITENANT:-false}

auth_rev=$(git --git-dir="$auth_git" rev-parse "${AUTH_REV:-HEAD}^{commit}")
storage_rev=$(git --git-dir="$storage_git" rev-parse "${STORAGE_REV:-HEAD}^{commit}")
postgres_rev=
[ -n "$postgres_git" ] && postgres_rev=$(git --git-dir="$postgres_git" rev-parse "HEAD^{commit}")

work=$(mktemp -d "${TMPDIR:-/tmp}/supabase-fixture.XXXXXX")
cluster=$work/pg
cleanup() { "$repo/scripts/pg-cluster.sh" stop "$cluster" || true; rm -rf "$work"; }
trap cleanup EXIT

# --- Roles: cluster-wide, so created idempotently; this block heads platform.sql too. -------
# Attributes as the Supabase image gives them (supabase/postgres migrations/db), except that
# none can log in (a test that wants to can ALTER ROLE ... LOGIN PASSWORD ...) and none has
# REPLICATION.
roles_sql=$(cat <<'SQL'
DO $$
DECLARE
    r text[];
BEGIN
    FOREACH r SLICE 1 IN ARRAY ARRAY[
        -- role name,            attributes
        ['anon',                   'NOLOGIN INHERIT'],
        ['authenticated',          'NOLOGIN INHERIT'],
        ['service_role',           'NOLOGIN INHERIT BYPASSRLS'],
        ['authenticator',          'NOLOGIN NOINHERIT'],
        ['postgres',               'NOLOGIN CREATEDB CREATEROLE BYPASSRLS'],
        ['dashboard_user',         'NOLOGIN CREATEDB CREATEROLE'],
        ['supabase_auth_admin',    'NOLOGIN NOINHERIT CREATEROLE'],
        ['supabase_storage_admin', 'NOLOGIN NOINHERIT CREATEROLE']
    ] LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I %s', r[1], r[2]);
        EXCEPTION WHEN duplicate_object THEN
            NULL;
        END;
    END LOOP;
END
$$;

-- Memberships (repeating a GRANT of a role only raises a notice).
SET client_min_messages = warning;
GRANT anon, authenticated, service_role TO authenticator;
GRANT supabase_auth_admin, supabase_storage_admin, anon, authenticated, service_role TO postgres;
GRANT authenticator TO supabase_storage_admin;
RESET client_min_messages;
SQL
)

# --- What the Supabase image provides before GoTrue and Storage migrate (per database). -----
bootstrap_sql=$(cat <<'SQL'
CREATE SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS "uuid-ossp" WITH SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA extensions;
GRANT USAGE ON SCHEMA extensions TO postgres, anon, authenticated, service_role;

CREATE SCHEMA auth AUTHORIZATION supabase_auth_admin;
GRANT USAGE ON SCHEMA auth TO anon, authenticated, service_role;
GRANT ALL ON SCHEMA auth TO postgres, dashboard_user;
ALTER DEFAULT PRIVILEGES FOR ROLE supabase_auth_admin IN SCHEMA auth GRANT ALL ON TABLES TO postgres, dashboard_user;
ALTER DEFAULT PRIVILEGES FOR ROLE supabase_auth_admin IN SCHEMA auth GRANT ALL ON SEQUENCES TO postgres, dashboard_user;
ALTER DEFAULT PRIVILEGES FOR ROLE supabase_auth_admin IN SCHEMA auth GRANT ALL ON ROUTINES TO postgres, dashboard_user;

CREATE SCHEMA storage AUTHORIZATION supabase_storage_admin;
GRANT USAGE ON SCHEMA storage TO postgres, anon, authenticated, service_role;
GRANT ALL ON SCHEMA storage TO postgres, dashboard_user;
SQL
)

eval "$("$repo/scripts/pg-cluster.sh" start "$cluster")"
export PGHOST=127.0.0.1 PGPORT=$PG_PORT PGUSER=lifecycle PGPASSWORD=$PG_PASSWORD
psql_() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
db=supabase
psql_ -d postgres -c "CREATE DATABASE $db"
printf '%s\n' "$roles_sql" | psql_ -d "$db"
printf '%s\n' "$bootstrap_sql" | psql_ -d "$db"

# --- auth -------------------------------------------------------------------------------
auth_files=$(git --git-dir="$auth_git" ls-tree --name-only "$auth_rev" migrations/ \
  | grep -E '^migrations/[0-9]+_[^.]+(\.postgres)?\.up\.sql$' | LC_ALL=C sort)
auth_count=0
for f in $auth_files; do
  version=$(basename "$f" | sed -E 's/^([0-9]+)_.*/\1/')
  sql=$(git --git-dir="$auth_git" show "$auth_rev:$f" \
    | sed -E 's/\{\{ *index +\.Options +"Namespace" *\}\}/auth/g')
  if grep -q '{{' <<<"$sql"; then echo "$f: template left unrendered" >&2; exit 1; fi
  { echo "SET ROLE supabase_auth_admin; SET search_path = auth;"
    printf '%s\n;\n' "$sql"
    echo "INSERT INTO auth.schema_migrations (version) VALUES ('$version');"
  } | psql_ -1 -d "$db" || { echo "auth migration $f failed" >&2; exit 1; }
  auth_count=$((auth_count + 1))
  auth_last=$(basename "$f")
done

# --- storage ----------------------------------------------------------------------------
storage_prelude="SET ROLE supabase_storage_admin;
SET search_path = storage, public, extensions;
SELECT set_config('storage.install_roles', 'false', false),
       set_config('storage.multitenant', '$multitenant', false),
       set_config('storage.anon_role', 'anon', false),
       set_config('storage.authenticated_role', 'authenticated', false),
       set_config('storage.service_role', 'service_role', false),
       set_config('storage.super_user', 'postgres', false),
       set_config('storage.iceberg_default_shard', '', false),
       set_config('storage.iceberg_shards', '{}', false),
       set_config('storage.vector_bucket_provider', 's3', false) \\g /dev/null"
# postgres-migrations' own first migration (id 0) creates the table in the first schema of
# the search_path.
{ echo "$storage_prelude"
  cat <<'SQL'
CREATE TABLE IF NOT EXISTS migrations (
  id integer PRIMARY KEY,
  name varchar(100) UNIQUE NOT NULL,
  hash varchar(40) NOT NULL, -- sha1 hex encoded hash of the file name and contents, to ensure it hasn't been altered since applying the migration
  executed_at timestamp DEFAULT current_timestamp
);
SQL
} | psql_ -1 -d "$db"
storage_files=$(git --git-dir="$storage_git" ls-tree --name-only "$storage_rev" migrations/tenant/ \
  | grep -E '^migrations/tenant/[0-9]+[-_]?[^/]*\.sql$' \
  | while read -r f; do b=$(basename "$f"); echo "$((10#${b%%[^0-9]*})) $f"; done \
  | sort -n -k1,1 | cut -d' ' -f2)
storage_count=0
expected_id=1
for f in $storage_files; do
  b=$(basename "$f")
  id=$((10#${b%%[^0-9]*}))
  [ "$id" = "$expected_id" ] || { echo "storage migrations: expected id $expected_id, found $b" >&2; exit 1; }
  expected_id=$((id + 1))
  name=$(sed -E 's/^[0-9]+[-_]?(.*)\.sql$/\1/' <<<"$b")
  git --git-dir="$storage_git" show "$storage_rev:$f" > "$work/migration.sql"
  hash=$({ printf '%s' "$b"; cat "$work/migration.sql"; } | sha1sum | cut -d' ' -f1)
  single=-1
  if grep -q -- '-- postgres-migrations ignore' "$work/migration.sql"; then
    echo 'SELECT 1;' > "$work/migration.sql"
  elif grep -q -- '-- postgres-migrations disable-transaction' "$work/migration.sql"; then
    single=
  fi
  { echo "$storage_prelude"
    cat "$work/migration.sql"; printf '\n;\n'
    echo "INSERT INTO storage.migrations (id, name, hash) VALUES ($id, '$name', '$hash');"
  } | psql_ $single -d "$db" || { echo "storage migration $b failed" >&2; exit 1; }
  storage_count=$((storage_count + 1))
  storage_last=$b
done

# --- dump ---------------------------------------------------------------------------------
"$BIN/pg_dump" --schema-only --schema=auth --schema=storage --no-owner -d "$db" > "$work/dump.sql"
pg_version=$("$BIN/pg_dump" --version)
server_version=$(psql_ -d "$db" -Atc 'SHOW server_version')
{
  cat <<EOF
-- Supabase's platform schemas, \`auth\` (GoTrue) and \`storage\` (Storage API), as a real
-- Supabase project has them: a test fixture for the purge tests, PostgreSQL 15.
--
-- It reproduces the schemas of
--   supabase/auth     at commit $auth_rev
--                     ($auth_count migrations, migrations/00_init_auth_schema.up.sql .. $auth_last)
--   supabase/storage  at commit $storage_rev
--                     ($storage_count tenant migrations, migrations/tenant/0001-initialmigration.sql .. $storage_last;
--                     storage.multitenant = $multitenant)
-- produced by applying their migrations in order, as the two servers do, on a database
-- prepared as the Supabase image prepares it (roles, the auth/storage/extensions schemas and
-- their grants, from supabase/postgres migrations/db${postgres_rev:+ at commit $postgres_rev}),
-- then dumped with
--   pg_dump --schema-only --schema=auth --schema=storage --no-owner
-- ($pg_version, server $server_version). Of the dump only its \\restrict lines, its version
-- comments and runs of blank lines were dropped; the roles block above it and the closing
-- RESET search_path were added.
--
-- Regenerate (by hand; the tests only load this file):
--   Tests/Fixtures/supabase/regenerate.sh AUTH_GIT_DIR STORAGE_GIT_DIR [POSTGRES_GIT_DIR]
--
-- Load it with psql -v ON_ERROR_STOP=1 into a fresh database, as a superuser: the roles are
-- cluster-wide and created only if missing, so it also loads into a second database of the
-- same cluster. Every object is owned by the loading user (--no-owner); the grants are
-- upstream's. Worth knowing for a purge:
--   * storage.objects and storage.buckets refuse DELETE (triggers protect_objects_delete and
--     protect_buckets_delete, storage.protect_delete()) unless the setting
--     storage.allow_delete_query is 'true', e.g. SET LOCAL storage.allow_delete_query = 'true'.
--   * storage.objects.owner (uuid, deprecated) and owner_id (text) have no foreign key.
--   * auth.refresh_tokens.user_id is varchar(255) without a foreign key; the audit log keeps
--     the actor in the JSON payload.

-- Roles -------------------------------------------------------------------------------------
$roles_sql

-- pg_dump -----------------------------------------------------------------------------------
EOF
  grep -v -E '^\\(un)?restrict ' "$work/dump.sql" \
    | grep -v -E '^-- Dumped (from database|by pg_dump) version' \
    | cat -s
  cat <<'EOF'

-- pg_dump emptied the search_path for the session: give it back.
RESET search_path;
EOF
} > "$out"
echo "wrote $out"

# --- replay check ---------------------------------------------------------------------------
for check in replay_a replay_b; do
  psql_ -d postgres -c "CREATE DATABASE $check"
  psql_ -d "$check" -f "$out" >/dev/null
  psql_ -d "$check" -f "$here/../../../Jobs/examples/supabase/schema.sql" >/dev/null
  echo "replayed on $check"
done
