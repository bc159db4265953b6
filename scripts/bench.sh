#!/usr/bin/env bash
# make bench: speed and memory figures, each against a reference measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then scripts/build-release.sh >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
WORK=$(mktemp -d /tmp/lifecycle-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
JOBS=${BENCH_JOBS:-20000}

seconds() { python3 -c "import sys; print(f'{float(sys.argv[1]):.3f}')" "$1"; }
now() { date +%s.%N; }
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}')" "$1" "$2"; }

echo "== Job runner on SQLite (WAL, synchronous=NORMAL), $(nproc) cores =="

# A worker that finds the queue empty while another process still holds jobs exits 75
# (work left undone, by someone else): with several processes that is expected. What
# counts is that every job succeeded, which each case checks.
wait_workers() {
  local pid status
  for pid in "$@"; do
    status=0; wait "$pid" || status=$?
    [ "$status" = 0 ] || [ "$status" = 75 ] || { echo "a worker exited $status" >&2; exit 1; }
  done
}

runner_case() {  # name, processes, kind-flag, concurrency per process
  local name=$1 processes=$2 flag=$3 concurrency=$4 db="$WORK/$1.sqlite"
  "$BIN" init --database "$db" --blobs "$WORK/blobs" --jobs-dir Jobs >/dev/null
  "$BIN" jobs probe $flag --count "$JOBS" --database "$db" --blobs "$WORK/blobs" --jobs-dir Jobs >/dev/null
  local start end pids=()
  start=$(now)
  for _ in $(seq "$processes"); do
    "$BIN" worker --once --concurrency "$concurrency" --log-level warning --database "$db" --blobs "$WORK/blobs" --jobs-dir Jobs >/dev/null 2>&1 & pids+=($!)
  done
  wait_workers "${pids[@]}"
  end=$(now)
  local done_count
  done_count=$(sqlite3 "$db" "SELECT COUNT(*) FROM lifecycle_jobs WHERE state='succeeded' AND kind LIKE 'runner.%'")
  [ "$done_count" = "$JOBS" ] || { echo "only $done_count of $JOBS jobs succeeded" >&2; exit 1; }
  python3 -c "import sys; print(f'{float(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])):.0f}')" "$JOBS" "$start" "$end"
}

# No-op jobs wait on nothing, so Jobs/policies/noop.yaml lets 64 run at once per process.
noop1=$(runner_case noop-1p 1 --noop 64)
noop2=$(runner_case noop-2p 2 --noop 64)
noop4=$(runner_case noop-4p 4 --noop 64)
probe1=$(runner_case probe-1p 1 "" 4)

# Reference floor: the same two writes per job (claim, then done), each its own
# transaction, issued by the sqlite3 shell with no runner around them, on a table of
# the same name as the runner's.
floor_db="$WORK/floor.sqlite"
sqlite3 "$floor_db" "PRAGMA journal_mode=WAL; CREATE TABLE lifecycle_jobs(id INTEGER PRIMARY KEY, state TEXT, lease_owner TEXT, updated_at TEXT);" >/dev/null
python3 - "$JOBS" > "$WORK/floor.sql" <<'PY'
import sys
n = int(sys.argv[1])
print("PRAGMA synchronous=NORMAL;")
print("BEGIN; " + " ".join(f"INSERT INTO lifecycle_jobs VALUES({i},'queued',NULL,NULL);" for i in range(1, n + 1)) + " COMMIT;")
for i in range(1, n + 1):
    print(f"BEGIN IMMEDIATE; UPDATE lifecycle_jobs SET state='running', lease_owner='w' WHERE id={i}; COMMIT;")
    print(f"BEGIN IMMEDIATE; UPDATE lifecycle_jobs SET state='succeeded', updated_at='x' WHERE id={i} AND lease_owner='w'; COMMIT;")
PY
start=$(now); sqlite3 "$floor_db" < "$WORK/floor.sql" >/dev/null; end=$(now)
floor=$(python3 -c "import sys; print(f'{float(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])):.0f}')" "$JOBS" "$start" "$end")

# A probe job adds two database steps, each committed with its done-mark in its own transaction.
per_step_us=$(python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{(1e6/b-1e6/a)/2:.0f}')" "$noop1" "$probe1")
echo "no-op single-step jobs, 1 worker process:   $noop1 jobs/s   (target ≥ 5000)"
echo "no-op single-step jobs, 2 worker processes: $noop2 jobs/s"
echo "no-op single-step jobs, 4 worker processes: $noop4 jobs/s"
echo "sqlite3 shell, claim + done UPDATEs only:    $floor jobs/s   → runner/floor = $(ratio "$noop1" "$floor")"
echo "three-step probe jobs, 1 process:           $probe1 jobs/s   → each extra checkpointed database step ≈ ${per_step_us} µs"

echo
echo "== Job runner on PostgreSQL 15 (throwaway loopback cluster, default durability), $(nproc) cores =="
PG_BIN=${LIFECYCLE_PG_BIN:-/usr/lib/postgresql/15/bin}
cluster=$(scripts/pg-cluster.sh start "$WORK/pg")
eval "$cluster"
trap 'scripts/pg-cluster.sh stop "$WORK/pg" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
pg() { PGOPTIONS="-c client_min_messages=warning" PGPASSWORD=$PG_PASSWORD "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U lifecycle -qAt "$@"; }

pg_case() {  # name, processes, concurrency per process: every case on a fresh database
  local name=$1 processes=$2 concurrency=$3
  pg -d postgres -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name"
  local url="postgres://lifecycle:$PG_PASSWORD@127.0.0.1:$PG_PORT/$name?sslmode=disable"
  "$BIN" init --database "$url" --blobs "$WORK/blobs" --jobs-dir Jobs >/dev/null
  "$BIN" jobs probe --noop --count "$JOBS" --database "$url" --blobs "$WORK/blobs" --jobs-dir Jobs >/dev/null
  local start end pids=()
  start=$(now)
  for _ in $(seq "$processes"); do
    "$BIN" worker --once --concurrency "$concurrency" --log-level warning --database "$url" --blobs "$WORK/blobs" --jobs-dir Jobs >/dev/null 2>&1 & pids+=($!)
  done
  wait_workers "${pids[@]}"
  end=$(now)
  local done_count
  done_count=$(pg -d "$name" -c "SELECT COUNT(*) FROM lifecycle.jobs WHERE state='succeeded' AND kind = 'runner.noop'")
  [ "$done_count" = "$JOBS" ] || { echo "only $done_count of $JOBS jobs succeeded on PostgreSQL" >&2; exit 1; }
  python3 -c "import sys; print(f'{float(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])):.0f}')" "$JOBS" "$start" "$end"
}
pg4=$(pg_case noop_pg_4p 4 64)
pg1=$(pg_case noop_pg_1p 1 64)

# Reference floor: pgbench doing only the claim and done UPDATEs, each its own
# transaction, on 4 connections, with no runner around them.
pg -d postgres -c "DROP DATABASE IF EXISTS floor" -c "CREATE DATABASE floor"
pg -d floor -c "CREATE SCHEMA lifecycle" -c "CREATE TABLE lifecycle.jobs(id int PRIMARY KEY, state text, lease_owner text, updated_at timestamptz)" \
  -c "INSERT INTO lifecycle.jobs SELECT g, 'queued', NULL, NULL FROM generate_series(1, $JOBS) g"
cat > "$WORK/floor.pgbench" <<'SQL'
\set id random(1, :jobs)
BEGIN;
UPDATE lifecycle.jobs SET state = 'running', lease_owner = 'w' WHERE id = :id;
COMMIT;
BEGIN;
UPDATE lifecycle.jobs SET state = 'succeeded', updated_at = now() WHERE id = :id AND lease_owner = 'w';
COMMIT;
SQL
pg_floor=$(PGPASSWORD=$PG_PASSWORD "$PG_BIN/pgbench" -h 127.0.0.1 -p "$PG_PORT" -U lifecycle -n -c 4 -j 2 -t $((JOBS / 4)) \
  -D jobs="$JOBS" -f "$WORK/floor.pgbench" floor 2>/dev/null | awk '/^tps/ { printf "%.0f", $3 }')
echo "no-op single-step jobs, 4 worker processes: $pg4 jobs/s   (target ≥ 3000; SQLite, same run, 4 processes: $noop4, 1 process: $noop1)"
echo "no-op single-step jobs, 1 worker process:   $pg1 jobs/s"
echo "pgbench, claim + done UPDATEs only, 4 conns: $pg_floor jobs/s   → runner/floor = $(ratio "$pg4" "$pg_floor")"
scripts/pg-cluster.sh stop "$WORK/pg" >/dev/null 2>&1 || true

for extra in scripts/bench-*.sh; do
  [ -x "$extra" ] || continue
  echo
  LIFECYCLE_BENCH_BIN="$BIN" "$extra"
done
