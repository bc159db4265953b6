#!/usr/bin/env bash
# Purge benchmark: `lifecycle purge` over N due accounts (default 10,000), each with 100
# rows across the account tables and 5 photo blobs, against a plain sqlite3 script doing
# the same deletes (one transaction per account, same pragmas) plus `rm` of the same
# files, on an identical copy of the data, in the same run. Target: ratio ≤ 1.5.
#
#   LIFECYCLE_BENCH_BIN=.build/release/lifecycle scripts/bench-purge.sh
#   BENCH_PURGE_ACCOUNTS=1000 scripts/bench-purge.sh      # a quicker look
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then scripts/build-release.sh >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
ACCOUNTS=${BENCH_PURGE_ACCOUNTS:-10000}
WORK=$(mktemp -d /tmp/lifecycle-bench-purge.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
now() { date +%s.%N; }

echo "== Purge: $ACCOUNTS due accounts × (100 rows + 5 photo blobs), $(nproc) cores =="

# Fixtures: rows written straight into a migrated database, blobs straight into the
# blob directory (much faster than an import), then the whole set copied for the reference.
"$BIN" migrate --database "$WORK/ours/lifecycle.sqlite" --blobs "$WORK/ours/blobs" --jobs-dir Jobs >/dev/null
python3 - "$WORK/ours" "$ACCOUNTS" <<'PY'
import os, sqlite3, sys
root, count = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(os.path.join(root, "lifecycle.sqlite"))
db.execute("PRAGMA synchronous=NORMAL")
ts = "2025-01-02 03:04:05.000"
past = "2020-01-01 00:00:00.000"
photo = os.urandom(2048)
# Per account: 1 preferences + 4 sessions + 40 journal entries + 5 photos + 10 mesocycles
# + 40 meditation sessions = 100 rows, and 5 photo blobs of 2 KiB.
with db:
    for a in range(count):
        aid = f"acct-{a:06d}"
        db.execute("""INSERT INTO accounts (id, email, password_hash, first_name, last_name, display_name, bio, timezone,
                      state, deletion_requested_at, purge_after, created_at, updated_at)
                      VALUES (?, ?, '$2b$04$Wd0dEsiS6/8yONvHwEEae.LfGSs/AKzG3YawF6CS.ukfXvr/45rre', 'Ada', 'Lovelace', 'Ada',
                      'Runs at dawn', 'Europe/London', 'pendingDeletion', ?, ?, ?, ?)""",
                   (aid, f"{aid}@example.com", past, past, ts, ts))
        db.execute("INSERT INTO preferences (account_id) VALUES (?)", (aid,))
        db.executemany("INSERT INTO sessions (id, account_id, created_at) VALUES (?, ?, ?)",
                       [(f"{aid}-t{i}", aid, ts) for i in range(4)])
        db.executemany("INSERT INTO journal_entries (id, account_id, created_at, text) VALUES (?, ?, ?, ?)",
                       [(f"{aid}-e{i}", aid, ts, f"Entry {i}: tempo run before work, then coffee.") for i in range(40)])
        db.executemany("""INSERT INTO photos (id, account_id, entry_id, role, blob_key, content_type, byte_size, sha256, created_at)
                          VALUES (?, ?, ?, 'entry', ?, 'image/jpeg', 2048, 'x', ?)""",
                       [(f"{aid}-p{i}", aid, f"{aid}-e{i}", f"accounts/{aid}/photos/{aid}-p{i}", ts) for i in range(5)])
        db.executemany("INSERT INTO mesocycles (id, account_id, status, started_at) VALUES (?, ?, 'completed', ?)",
                       [(f"{aid}-m{i}", aid, ts) for i in range(10)])
        db.executemany("INSERT INTO meditation_sessions (id, account_id, started_at, duration_seconds) VALUES (?, ?, ?, 600)",
                       [(f"{aid}-s{i}", aid, ts) for i in range(40)])
        folder = os.path.join(root, "blobs", "accounts", aid, "photos")
        os.makedirs(folder)
        for i in range(5):
            with open(os.path.join(folder, f"{aid}-p{i}"), "wb") as f:
                f.write(photo)
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
PY
cp -a "$WORK/ours" "$WORK/ref"

# Reference: the same per-account deletes and tombstone in one sqlite3 process, then rm.
python3 - "$ACCOUNTS" > "$WORK/reference.sql" <<'PY'
import sys
print("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
for a in range(int(sys.argv[1])):
    aid = f"acct-{a:06d}"
    print("BEGIN IMMEDIATE;")
    for table in ["photos", "journal_entries", "mesocycles", "meditation_sessions", "sessions", "preferences"]:
        print(f"DELETE FROM {table} WHERE account_id = '{aid}';")
    print(f"""UPDATE accounts SET state = 'purged', purged_at = '2026-01-01 00:00:00.000', email = NULL, password_hash = NULL,
 first_name = NULL, last_name = NULL, display_name = NULL, bio = NULL, profile_photo_id = NULL, primary_sport = NULL,
 morning_reminder_time = NULL, timezone = NULL, subscription_status = NULL, deletion_requested_at = NULL, purge_after = NULL
 WHERE id = '{aid}';""")
    print("COMMIT;")
PY
# Both sides start with the fixtures on disk, not in dirty page cache still being written back.
settle() { sync; sleep 2; }
settle
start=$(now)
/usr/bin/time -f "%U %S" -o "$WORK/ref-cpu" sh -c 'sqlite3 "$1/ref/lifecycle.sqlite" < "$1/reference.sql" >/dev/null && cd "$1/ref/blobs/accounts" && ls | xargs rm -rf' _ "$WORK"
end=$(now)
reference=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$end")

settle
start=$(now)
/usr/bin/time -f "%U %S" -o "$WORK/ours-cpu" "$BIN" purge --log-level warning --database "$WORK/ours/lifecycle.sqlite" --blobs "$WORK/ours/blobs" --jobs-dir Jobs > "$WORK/purge.out"
end=$(now)
ours=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$end")

# Both must have removed everything: no account rows left in any table, no blob files.
for side in ours ref; do
  left=$(sqlite3 "$WORK/$side/lifecycle.sqlite" "SELECT (SELECT COUNT(*) FROM photos) + (SELECT COUNT(*) FROM journal_entries)
    + (SELECT COUNT(*) FROM mesocycles) + (SELECT COUNT(*) FROM meditation_sessions) + (SELECT COUNT(*) FROM sessions)
    + (SELECT COUNT(*) FROM preferences) + (SELECT COUNT(*) FROM accounts WHERE state != 'purged' OR email IS NOT NULL)")
  files=$(find "$WORK/$side/blobs" -type f -not -path '*/.incoming/*' | wc -l)
  [ "$left" = 0 ] && [ "$files" = 0 ] || { echo "$side: $left rows and $files files left" >&2; cat "$WORK/purge.out" >&2; exit 1; }
done
grep -q "^purge: $ACCOUNTS purged, 0 skipped, 0 failed" "$WORK/purge.out" || { cat "$WORK/purge.out" >&2; exit 1; }

python3 - "$ACCOUNTS" "$ours" "$reference" "$(cat "$WORK/ours-cpu")" "$(cat "$WORK/ref-cpu")" <<'PY'
import sys
n, ours, ref = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
ours_cpu, ref_cpu = (sum(map(float, arg.split())) for arg in sys.argv[4:6])
print(f"lifecycle purge (sweep + purge jobs):      {ours:7.2f} s   {n / ours:7.0f} accounts/s   cpu {ours_cpu:6.2f} s")
print(f"sqlite3 deletes + rm of the same files:    {ref:7.2f} s   {n / ref:7.0f} accounts/s   cpu {ref_cpu:6.2f} s")
print(f"ratio: {ours / ref:.2f}   (target ≤ 1.5; cpu ratio {ours_cpu / ref_cpu:.2f}, disk and other load aside)")
PY
