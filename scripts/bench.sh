#!/usr/bin/env bash
# make bench: speed and memory figures, each against a reference measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then scripts/build-release.sh >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
WORK=$(mktemp -d /tmp/lifecycle-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
JOBS=${BENCH_JOBS:-20000}
# Each drain, the runner's and the reference queue's alike, runs this many times in
# interleaved rounds and counts its best: consecutive runs of the same binary on a shared
# machine differ by 10-20 %, enough to move a ratio across its line. With 3 rounds the
# same code's three-step/one-step ratio read 0.40 in one full run and 0.65 in the next.
ROUNDS=${BENCH_ROUNDS:-5}

seconds() { python3 -c "import sys; print(f'{float(sys.argv[1]):.3f}')" "$1"; }
now() { date +%s.%N; }
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}')" "$1" "$2"; }

REFERENCE="$PWD/.build-tools/venv/bin/python scripts/reference-queues.py"
best() { printf '%s\n' "$@" | sort -n | tail -1; }
rate() { python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.0f}')" "$1" "$2"; }
# The three-step probe runs at the no-op job's concurrency, so the two differ only in
# their steps: a copy of Jobs/ whose probe policy allows 64 at once.
cp -r Jobs "$WORK/jobs"
sed -i 's/^  concurrency: .*/  concurrency: 64/' "$WORK/jobs/policies/runner.yaml"
grep -q '^  concurrency: 64' "$WORK/jobs/policies/runner.yaml" || { echo "bench: cannot set the probe's concurrency" >&2; exit 1; }

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

# drain STORE-ARGS COUNT-SQL PROCESSES KIND-FLAG JOB-COUNT: enqueue (not timed), start the
# workers at once, time until all exit, check every job succeeded; prints jobs/s.
drain() {
  local store=$1 count_sql=$2 processes=$3 flag=$4 jobs=$5
  # shellcheck disable=SC2086
  "$BIN" jobs probe $flag --count "$jobs" $store >/dev/null
  local start end pids=()
  start=$(now)
  for _ in $(seq "$processes"); do
    # shellcheck disable=SC2086
    "$BIN" worker --once --concurrency 64 --log-level warning $store >/dev/null 2>&1 & pids+=($!)
  done
  wait_workers "${pids[@]}"
  end=$(now)
  local done_count
  done_count=$(eval "$count_sql")
  [ "$done_count" = "$jobs" ] || { echo "only $done_count of $jobs jobs succeeded ($store)" >&2; exit 1; }
  python3 -c "import sys; print(f'{float(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])):.0f}')" "$jobs" "$start" "$end"
}

# latency STORE-ARGS WAITING-SQL DELAYS-SQL CLEAR-SQL: a long-running worker, idle; 300 jobs
# enqueued one at a time by separate processes (an app's requests); prints p50 and p99 of
# the time from a job's enqueue to its start (its claim), in ms, by nearest rank. With
# 100 jobs the p99 was the slowest one, which a single stall of the machine decides. A
# first job, not measured (CLEAR-SQL removes it), waits until the worker has started: a
# worker still starting (loading, connecting, listening) is not an idle one.
latency() {
  local store=$1 waiting_sql=$2 delays_sql=$3 clear_sql=$4 worker
  # shellcheck disable=SC2086
  "$BIN" worker --concurrency 4 --log-level warning $store >/dev/null 2>&1 & worker=$!
  # shellcheck disable=SC2086
  "$BIN" jobs probe --noop --one-by-one --count 1 $store >/dev/null
  until [ "$(eval "$waiting_sql")" = 0 ]; do :; done
  eval "$clear_sql" >/dev/null
  for _ in $(seq 300); do
    # shellcheck disable=SC2086
    "$BIN" jobs probe --noop --one-by-one --count 1 $store >/dev/null
  done
  until [ "$(eval "$waiting_sql")" = 0 ]; do :; done
  kill -TERM "$worker"; wait "$worker" || true
  eval "$delays_sql" | python3 -c '
import math, sys
delays = sorted(float(line) for line in sys.stdin if line.strip())
assert len(delays) == 300, f"{len(delays)} jobs measured, expected 300"
pick = lambda q: delays[math.ceil(q * len(delays)) - 1]
print(f"{pick(0.5):.1f} {pick(0.99):.1f}")'
}

# peak_rss STORE-ARGS COUNT-SQL JOBS: one worker process draining JOBS no-op jobs; prints MB.
peak_rss() {
  local store=$1 count_sql=$2 jobs=$3
  # shellcheck disable=SC2086
  "$BIN" jobs probe --noop --count "$jobs" $store >/dev/null
  # shellcheck disable=SC2086
  /usr/bin/time -f %M -o "$WORK/rss" "$BIN" worker --once --concurrency 64 --log-level warning $store >/dev/null 2>&1
  local done_count
  done_count=$(eval "$count_sql")
  [ "$done_count" -ge "$jobs" ] || { echo "only $done_count of $jobs jobs succeeded ($store)" >&2; exit 1; }
  python3 -c "import sys; print(f'{int(open(sys.argv[1]).read().split()[-1])/1024:.0f}')" "$WORK/rss"
}

# enqueue_rates STORE-ARGS: bulk (JOBS in one call) and single (2,000 one by one) jobs/s,
# timed inside the process (start-up and connecting excluded, as for pgqueuer's figures).
enqueue_rates() {
  local store=$1 bulk single
  # shellcheck disable=SC2086
  bulk=$("$BIN" jobs probe --noop --count "$JOBS" --json $store | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["created"]/r["seconds"]))')
  # shellcheck disable=SC2086
  single=$("$BIN" jobs probe --noop --one-by-one --count 2000 --json $store | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["created"]/r["seconds"]))')
  echo "$bulk $single"
}

echo "== Job runner on SQLite (WAL, synchronous=NORMAL), $(nproc) cores, $JOBS jobs per drain, best of $ROUNDS interleaved rounds =="
sqlite_store() {  # NAME: a fresh SQLite installation; prints its arguments
  local db="$WORK/$1.sqlite"
  "$BIN" init --database "$db" --blobs "$WORK/blobs" --jobs-dir "$WORK/jobs" >/dev/null
  echo "--database $db --blobs $WORK/blobs --jobs-dir $WORK/jobs"
}
sqlite_count() { echo "sqlite3 $WORK/$1.sqlite \"SELECT COUNT(*) FROM lifecycle_jobs WHERE state='succeeded' AND kind LIKE 'runner.%'\""; }
noop1_runs=() noop2_runs=() noop4_runs=() probe1_runs=() huey1_runs=() huey2_runs=()
for round in $(seq "$ROUNDS"); do
  noop1_runs+=("$(drain "$(sqlite_store noop-1p-$round)" "$(sqlite_count noop-1p-$round)" 1 --noop "$JOBS")")
  noop2_runs+=("$(drain "$(sqlite_store noop-2p-$round)" "$(sqlite_count noop-2p-$round)" 2 --noop "$JOBS")")
  noop4_runs+=("$(drain "$(sqlite_store noop-4p-$round)" "$(sqlite_count noop-4p-$round)" 4 --noop "$JOBS")")
  probe1_runs+=("$(drain "$(sqlite_store probe-1p-$round)" "$(sqlite_count probe-1p-$round)" 1 "" "$JOBS")")
  huey1_runs+=("$($REFERENCE huey-drain "$WORK/huey" "$JOBS" 1)")
  huey2_runs+=("$($REFERENCE huey-drain "$WORK/huey" "$JOBS" 2)")
done
noop1=$(best "${noop1_runs[@]}") noop2=$(best "${noop2_runs[@]}") noop4=$(best "${noop4_runs[@]}") probe1=$(best "${probe1_runs[@]}")
huey1=$(best "${huey1_runs[@]}") huey2=$(best "${huey2_runs[@]}")
# best_pair COMMAND...: runs COMMAND (printing two figures) in ROUNDS rounds; prints the best of each.
best_pair() {
  local first=() second=() a b
  for _ in $(seq "$ROUNDS"); do
    read -r a b < <("$@")
    first+=("$a") second+=("$b")
  done
  echo "$(best "${first[@]}") $(best "${second[@]}")"
}
sqlite_enqueue_rates() { enqueue_rates "$(sqlite_store "enqueue-$BASHPID")"; }
read -r sqlite_bulk sqlite_single < <(best_pair sqlite_enqueue_rates)
# The host's stalls of the whole VM, which no code here causes, measured just before.
sqlite_steadiness=$(python3 scripts/cpu-steadiness.py 5)
read -r sqlite_p50 sqlite_p99 < <(latency "$(sqlite_store latency)" \
  "sqlite3 $WORK/latency.sqlite \"SELECT COUNT(*) FROM lifecycle_jobs WHERE kind = 'runner.noop' AND state <> 'succeeded'\"" \
  "sqlite3 $WORK/latency.sqlite \"SELECT (julianday(started_at) - julianday(created_at)) * 86400000.0 FROM lifecycle_jobs WHERE kind = 'runner.noop'\"" \
  "sqlite3 $WORK/latency.sqlite \"PRAGMA foreign_keys = ON; DELETE FROM lifecycle_jobs WHERE kind = 'runner.noop'\"")
sqlite_rss=$(peak_rss "$(sqlite_store rss)" "$(sqlite_count rss)" 100000)

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

echo "no-op jobs, 1 / 2 / 4 worker processes:     $noop1 / $noop2 / $noop4 jobs/s"
echo "huey (SqliteHuey, process workers), 1 / 2:  $huey1 / $huey2 jobs/s   → best/best = $(ratio "$(best "$noop1" "$noop2" "$noop4")" "$(best "$huey1" "$huey2")")× (target ≥ 2.5)"
echo "sqlite3 shell, claim + done UPDATEs only:    $floor jobs/s   → runner (1 process)/floor = $(ratio "$noop1" "$floor")"
echo "three-step jobs (2 database steps + no-op), 1 process, same concurrency (64): $probe1 jobs/s → three-step/one-step = $(ratio "$probe1" "$noop1") (target ≥ 0.5)"
echo "enqueue: bulk $sqlite_bulk jobs/s, one by one $sqlite_single jobs/s"
echo "enqueue → start on an idle worker (the kernel tells it: inotify on the database's folder; a 1 s poll as the fallback): p50 $sqlite_p50 ms, p99 $sqlite_p99 ms (target p99 ≤ 20)"
echo "$sqlite_steadiness"
echo "peak RSS of one worker draining 100,000 jobs: $sqlite_rss MB"

echo
echo "== Job runner on PostgreSQL 15 (throwaway loopback cluster, default durability), $(nproc) cores, $JOBS jobs per drain, best of $ROUNDS interleaved rounds =="
PG_BIN=${LIFECYCLE_PG_BIN:-/usr/lib/postgresql/15/bin}
cluster=$(scripts/pg-cluster.sh start "$WORK/pg")
eval "$cluster"
trap 'scripts/pg-cluster.sh stop "$WORK/pg" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
pg() { PGOPTIONS="-c client_min_messages=warning" PGPASSWORD=$PG_PASSWORD "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U lifecycle -qAt "$@"; }
pg_database() {  # NAME: a fresh database; prints its URL
  pg -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"
  echo "postgres://lifecycle:$PG_PASSWORD@127.0.0.1:$PG_PORT/$1?sslmode=disable"
}
pg_store() {  # NAME: a fresh installation in a fresh database; prints its arguments
  local url
  url=$(pg_database "$1")
  "$BIN" init --database "$url" --blobs "$WORK/blobs" --jobs-dir "$WORK/jobs" >/dev/null
  echo "--database $url --blobs $WORK/blobs --jobs-dir $WORK/jobs"
}
pg_count() { echo "pg -d $1 -c \"SELECT COUNT(*) FROM lifecycle.jobs WHERE state='succeeded' AND kind LIKE 'runner.%'\""; }
pgq_dsn="postgresql://lifecycle:$PG_PASSWORD@127.0.0.1:$PG_PORT/pgqueuer"
pg_database pgqueuer >/dev/null
pg1_runs=() pg2_runs=() pg4_runs=() pgprobe1_runs=() pgq1_runs=() pgq2_runs=() pgq4_runs=()
for round in $(seq "$ROUNDS"); do
  pg1_runs+=("$(drain "$(pg_store noop_1p_$round)" "$(pg_count noop_1p_$round)" 1 --noop "$JOBS")")
  pg2_runs+=("$(drain "$(pg_store noop_2p_$round)" "$(pg_count noop_2p_$round)" 2 --noop "$JOBS")")
  pg4_runs+=("$(drain "$(pg_store noop_4p_$round)" "$(pg_count noop_4p_$round)" 4 --noop "$JOBS")")
  pgprobe1_runs+=("$(drain "$(pg_store probe_1p_$round)" "$(pg_count probe_1p_$round)" 1 "" "$JOBS")")
  pgq1_runs+=("$($REFERENCE pgqueuer-drain "$pgq_dsn" "$JOBS" 1)")
  pgq2_runs+=("$($REFERENCE pgqueuer-drain "$pgq_dsn" "$JOBS" 2)")
  pgq4_runs+=("$($REFERENCE pgqueuer-drain "$pgq_dsn" "$JOBS" 4)")
done
pg1=$(best "${pg1_runs[@]}") pg2=$(best "${pg2_runs[@]}") pg4=$(best "${pg4_runs[@]}") pgprobe1=$(best "${pgprobe1_runs[@]}")
pgq1=$(best "${pgq1_runs[@]}") pgq2=$(best "${pgq2_runs[@]}") pgq4=$(best "${pgq4_runs[@]}")
pg_enqueue_rates() { enqueue_rates "$(pg_store "enqueue_$BASHPID")"; }
pgq_enqueue_rates() { $REFERENCE pgqueuer-enqueue "$pgq_dsn" "$JOBS" 2000; }
# Interleaved, as the drains are.
pg_single_runs=() pg_bulk_runs=() pgq_single_runs=() pgq_bulk_runs=()
for round in $(seq "$ROUNDS"); do
  read -r bulk single < <(pg_enqueue_rates); pg_bulk_runs+=("$bulk") pg_single_runs+=("$single")
  read -r bulk single < <(pgq_enqueue_rates); pgq_bulk_runs+=("$bulk") pgq_single_runs+=("$single")
done
pg_bulk=$(best "${pg_bulk_runs[@]}") pg_single=$(best "${pg_single_runs[@]}")
pgq_bulk=$(best "${pgq_bulk_runs[@]}") pgq_single=$(best "${pgq_single_runs[@]}")
pg_steadiness=$(python3 scripts/cpu-steadiness.py 5)
read -r pg_p50 pg_p99 < <(latency "$(pg_store latency)" \
  "pg -d latency -c \"SELECT COUNT(*) FROM lifecycle.jobs WHERE kind = 'runner.noop' AND state <> 'succeeded'\"" \
  "pg -d latency -c \"SELECT EXTRACT(EPOCH FROM started_at - created_at) * 1000 FROM lifecycle.jobs WHERE kind = 'runner.noop'\"" \
  "pg -d latency -c \"DELETE FROM lifecycle.jobs WHERE kind = 'runner.noop'\"")
pg_rss=$(peak_rss "$(pg_store rss)" "$(pg_count rss)" 100000)

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
echo "no-op jobs, 1 / 2 / 4 worker processes:     $pg1 / $pg2 / $pg4 jobs/s"
echo "pgqueuer (asyncpg, batch 10), 1 / 2 / 4:    $pgq1 / $pgq2 / $pgq4 jobs/s   → best/best = $(ratio "$(best "$pg1" "$pg2" "$pg4")" "$(best "$pgq1" "$pgq2" "$pgq4")")× (target ≥ 1.2)"
echo "pgbench, claim + done UPDATEs only, 4 conns: $pg_floor jobs/s   → runner (4 processes)/floor = $(ratio "$pg4" "$pg_floor")"
echo "three-step jobs (2 database steps + no-op), 1 process, same concurrency (64): $pgprobe1 jobs/s → three-step/one-step = $(ratio "$pgprobe1" "$pg1") (target ≥ 0.5)"
echo "enqueue, bulk:       $pg_bulk jobs/s, pgqueuer $pgq_bulk → $(ratio "$pg_bulk" "$pgq_bulk")× (target ≥ 1)"
echo "enqueue, one by one: $pg_single jobs/s, pgqueuer $pgq_single → $(ratio "$pg_single" "$pgq_single")× (target ≥ 1)"
echo "enqueue → start on an idle worker (LISTEN/NOTIFY): p50 $pg_p50 ms, p99 $pg_p99 ms (target p99 ≤ 20)"
echo "$pg_steadiness"
echo "peak RSS of one worker draining 100,000 jobs: $pg_rss MB"
scripts/pg-cluster.sh stop "$WORK/pg" >/dev/null 2>&1 || true

for extra in scripts/bench-*.sh; do
  [ -x "$extra" ] || continue
  echo
  LIFECYCLE_BENCH_BIN="$BIN" "$extra"
done
