#!/usr/bin/env bash
# Purge benchmarks, each against a plain sqlite3 script doing the same deletes (one
# transaction per account, same pragmas) plus `rm` of the same files, on an identical
# copy of the data, in the same run:
#
# 1. the reference app (lifecycle's own schema): `lifecycle purge` over N due accounts
#    (default 10,000), each with 100 rows across the account tables and 5 photo blobs.
#    Target: ratio ≤ 1.3, the residue scan included.
# 2. an app's own database purged through its data map (format 2): the social schema of
#    the tests (Tests/CLITests/Schemas/social.sql, .yaml) with the indexes an app keeps
#    on its foreign keys, N due accounts (default 5,000) of about 100 rows and 5 files
#    each, with neighbours (accounts not due) whose replies keep some posts (masked) and
#    whose favourites go with the rest. Target: ratio ≤ 1.3, the residue scan included.
#
#   LIFECYCLE_BENCH_BIN=.build/release/lifecycle scripts/bench-purge.sh
#   BENCH_PURGE_ACCOUNTS=1000 BENCH_APP_PURGE_ACCOUNTS=1000 scripts/bench-purge.sh   # a quicker look
#   BENCH_PURGE_CASES=app scripts/bench-purge.sh                                     # one of the two
#   BENCH_KEEP=1 scripts/bench-purge.sh                             # leaves the work folder in /tmp to look into
#
# Each side runs BENCH_PURGE_RUNS times (default 3) on a fresh copy of the same fixtures,
# in interleaved rounds (the reference first in odd rounds, lifecycle first in even ones),
# and each side's best round is compared: a round slowed by the machine (page-cache
# write-back, another process, the CPU's clock) says nothing about either tool, and the
# sqlite3 baseline alone moved by 15 % between single runs on one machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# The app databases made here are private, as lifecycle asks of a SQLite file it keeps secrets in.
umask 077
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then scripts/build-release.sh >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
ACCOUNTS=${BENCH_PURGE_ACCOUNTS:-10000}
APP_ACCOUNTS=${BENCH_APP_PURGE_ACCOUNTS:-5000}
APP_CONCURRENCY=${BENCH_APP_PURGE_CONCURRENCY:-1024}
CASES=${BENCH_PURGE_CASES:-reference app}
RUNS=${BENCH_PURGE_RUNS:-3}
WORK=$(mktemp -d /tmp/lifecycle-bench-purge.XXXXXX)
trap '[ -n "${BENCH_KEEP:-}" ] || rm -rf "$WORK"' EXIT
now() { date +%s.%N; }
# Both sides start with the fixtures on disk, not in dirty page cache still being written back.
settle() { sync; sleep 2; }
seconds_between() { python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$1" "$2"; }
# `fresh NAME`: $WORK/NAME as the pristine fixtures were (lifecycle's side keeps the path it was made at).
fresh() { rm -rf "${WORK:?}/$1"; cp -a "$WORK/pristine-$2" "$WORK/$1"; }
# Appends "seconds cpu_user cpu_sys" of the best round (least wall time) so far to a summary.
best_of() { sort -n "$1" | head -1; }

reference_app_case() {
echo "== Purge: $ACCOUNTS due accounts × (100 rows + 5 photo blobs), $(nproc) cores =="

# Fixtures: rows written straight into a migrated database, blobs straight into the
# blob directory (much faster than an import), then the whole set copied for the reference.
"$BIN" init --database "$WORK/ours/lifecycle.sqlite" --blobs "$WORK/ours/blobs" --jobs-dir Jobs >/dev/null
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
                      state, created_at, updated_at)
                      VALUES (?, ?, '$2b$04$Wd0dEsiS6/8yONvHwEEae.LfGSs/AKzG3YawF6CS.ukfXvr/45rre', 'Ada', 'Lovelace', 'Ada',
                      'Runs at dawn', 'Europe/London', 'pendingDeletion', ?, ?)""",
                   (aid, f"{aid}@example.com", ts, ts))
        # Lifecycle's record of the request (the app shows `state`).
        db.execute("""INSERT INTO lifecycle_subjects (subject_key, state, deletion_requested_at, purge_after, updated_at)
                      VALUES (?, 'pendingDeletion', ?, ?, ?)""", (aid, past, past, past))
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
cp -a "$WORK/ours" "$WORK/pristine-reference"

# Reference: the same per-account deletes and tombstone in one sqlite3 process, then rm.
python3 - "$ACCOUNTS" > "$WORK/reference.sql" <<'PY'
import sys
print("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
for a in range(int(sys.argv[1])):
    aid = f"acct-{a:06d}"
    print("BEGIN IMMEDIATE;")
    for table in ["photos", "journal_entries", "mesocycles", "meditation_sessions", "sessions", "preferences"]:
        print(f"DELETE FROM {table} WHERE account_id = '{aid}';")
    print(f"""UPDATE accounts SET state = 'purged', email = NULL, password_hash = NULL,
 first_name = NULL, last_name = NULL, display_name = NULL, bio = NULL, profile_photo_key = NULL, primary_sport = NULL,
 morning_reminder_time = NULL, timezone = NULL, subscription_status = NULL
 WHERE id = '{aid}';""")
    print(f"UPDATE lifecycle_subjects SET state = 'purged', purged_at = '2026-01-01 00:00:00.000' WHERE subject_key = '{aid}';")
    print("COMMIT;")
PY
run_reference() {
  fresh ref reference
  settle
  local start end
  start=$(now)
  /usr/bin/time -f "%U %S" -o "$WORK/ref-cpu" sh -c 'sqlite3 "$1/ref/lifecycle.sqlite" < "$1/reference.sql" >/dev/null && cd "$1/ref/blobs/accounts" && ls | xargs rm -rf' _ "$WORK"
  end=$(now)
  echo "$(seconds_between "$start" "$end") $(cat "$WORK/ref-cpu")" >> "$WORK/ref-rounds"
}
run_ours() {
  fresh ours reference
  settle
  local start end
  start=$(now)
  /usr/bin/time -f "%U %S" -o "$WORK/ours-cpu" "$BIN" purge --log-level warning --database "$WORK/ours/lifecycle.sqlite" --blobs "$WORK/ours/blobs" --jobs-dir Jobs > "$WORK/purge.out"
  end=$(now)
  echo "$(seconds_between "$start" "$end") $(cat "$WORK/ours-cpu")" >> "$WORK/ours-rounds"
}
check_round() {
  # Both must have removed everything: no account rows left in any table, no blob files.
  local side left files
  for side in ours ref; do
    left=$(sqlite3 "$WORK/$side/lifecycle.sqlite" "SELECT (SELECT COUNT(*) FROM photos) + (SELECT COUNT(*) FROM journal_entries)
      + (SELECT COUNT(*) FROM mesocycles) + (SELECT COUNT(*) FROM meditation_sessions) + (SELECT COUNT(*) FROM sessions)
      + (SELECT COUNT(*) FROM preferences) + (SELECT COUNT(*) FROM accounts WHERE state != 'purged' OR email IS NOT NULL)")
    files=$(find "$WORK/$side/blobs" -type f -not -path '*/.incoming/*' | wc -l)
    [ "$left" = 0 ] && [ "$files" = 0 ] || { echo "$side: $left rows and $files files left" >&2; cat "$WORK/purge.out" >&2; exit 1; }
  done
  grep -q "^purge: $ACCOUNTS purged, 0 skipped, 0 failed" "$WORK/purge.out" || { cat "$WORK/purge.out" >&2; exit 1; }
}
rm -f "$WORK/ref-rounds" "$WORK/ours-rounds"
for round in $(seq 1 "$RUNS"); do
  if [ $((round % 2)) = 1 ]; then run_reference; run_ours; else run_ours; run_reference; fi
  check_round
done
read -r ours ours_user ours_sys < <(best_of "$WORK/ours-rounds")
read -r reference ref_user ref_sys < <(best_of "$WORK/ref-rounds")

python3 - "$ACCOUNTS" "$ours" "$reference" "$ours_user $ours_sys" "$ref_user $ref_sys" "$RUNS" <<'PY'
import sys
n, ours, ref = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
ours_cpu, ref_cpu = (sum(map(float, arg.split())) for arg in sys.argv[4:6])
print(f"(best of {sys.argv[6]} interleaved rounds, each on a fresh copy)")
print(f"lifecycle purge (sweep + purge jobs):      {ours:7.2f} s   {n / ours:7.0f} accounts/s   cpu {ours_cpu:6.2f} s")
print(f"sqlite3 deletes + rm of the same files:    {ref:7.2f} s   {n / ref:7.0f} accounts/s   cpu {ref_cpu:6.2f} s")
print(f"ratio: {ours / ref:.2f}   (target ≤ 1.3; cpu ratio {ours_cpu / ref_cpu:.2f}, disk and other load aside)")
PY
}

app_map_case() {
local n=$APP_ACCOUNTS
echo "== App-map purge: $n due accounts of the social schema × (~100 rows + 5 files), $(nproc) cores, purge --concurrency $APP_CONCURRENCY =="

# The app's database: its own DDL, lifecycle's tables added by `migrate` (the map in
# the jobs folder says it is an app's database), rows and files written straight in.
mkdir -p "$WORK/app-ours/jobs"
cp Tests/CLITests/Schemas/social.yaml "$WORK/app-ours/jobs/account-data.yaml"
cp -r Jobs/policies "$WORK/app-ours/jobs/policies"
# The purge's default concurrency (1024), set here too so BENCH_APP_PURGE_CONCURRENCY can
# try another: the residue scan serves the purges that reach it together in one pass, so
# more of them at once means fewer passes over every table (16 at once: 12 accounts a pass,
# ratio 6.4; 256: about 110, ratio 1.5 to 1.75; 1024: about 600).
sed -i "s/^  concurrency: .*/  concurrency: $APP_CONCURRENCY/" "$WORK/app-ours/jobs/policies/deletion.yaml"
grep -q "^  concurrency: $APP_CONCURRENCY\$" "$WORK/app-ours/jobs/policies/deletion.yaml" || { echo "bench: cannot set the purge's concurrency" >&2; exit 1; }
{ cat Tests/CLITests/Schemas/social.sql; cat <<'SQL'; } | sqlite3 "$WORK/app-ours/app.sqlite"
-- What an app keeps on its foreign keys (Django makes every one of these itself).
CREATE INDEX statuses_member ON statuses(member_id);
CREATE INDEX statuses_reply ON statuses(in_reply_to_id);
CREATE INDEX media_status ON media(status_id);
CREATE INDEX media_variants_media ON media_variants(media_id);
CREATE INDEX favourites_status ON favourites(status_id);
CREATE INDEX follows_followee ON follows(followee_id);
CREATE INDEX messages_sender ON messages(sender_id);
CREATE INDEX messages_recipient ON messages(recipient_id);
-- And on its file columns: before deleting a file the purge looks whether a row it keeps
-- still names it (`map check` notes a file column without one).
CREATE INDEX members_avatar ON members(avatar_key);
CREATE INDEX media_file ON media(file_key);
CREATE INDEX media_variants_file ON media_variants(file_key);
SQL
"$BIN" init --database "$WORK/app-ours/app.sqlite" --blobs "$WORK/app-ours/blobs" --jobs-dir "$WORK/app-ours/jobs" >/dev/null
python3 - "$WORK/app-ours" "$n" "$WORK" <<'PY'
import os, random, sqlite3, sys
root, due, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(7)
neighbours = max(due // 10, 10)
members = range(1, due + neighbours + 1)
db = sqlite3.connect(os.path.join(root, "app.sqlite"))
db.execute("PRAGMA synchronous=NORMAL")
ts = "2025-01-02 03:04:05"
past = "2020-01-01 00:00:00.000"
blob = os.urandom(2048)
files, folders = [], []
def put(key, mine):
    path = os.path.join(root, "blobs", key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(blob)
    if mine:
        files.append(key)

statuses, media, variants, favourites, follows, messages = [], [], [], [], [], []
next_status = next_media = next_message = 1
with db:
    for m in members:
        is_due = m <= due
        db.execute("INSERT INTO members (id, handle, email, pw, avatar_key, created_at) VALUES (?, ?, ?, NULL, ?, ?)",
                   (m, f"m{m}", f"m{m}@example.com", f"avatars/{m}.jpg", ts))
        put(f"avatars/{m}.jpg", is_due)
        # A due account: 30 posts and 10 answers to its own first posts; a neighbour: 5 posts.
        first = next_status
        roots = 30 if is_due else 5
        for i in range(roots):
            statuses.append((first + i, m, None, f"post {i} by m{m}: tempo run before work, then coffee.", ts))
        if is_due:
            for i in range(10):
                statuses.append((first + roots + i, m, first + i, f"more on post {i}", ts))
        next_status += roots + (10 if is_due else 0)
        # Files on two posts (one of which a neighbour answers below, so it stays masked), each with a variant.
        for status in ([first, first + 20] if is_due else [first]):
            media.append((next_media, status, f"media/{m}/{next_media}.jpg"))
            variants.append((next_media, "small", f"media/{m}/{next_media}-s.jpg"))
            put(f"media/{m}/{next_media}.jpg", is_due)
            put(f"media/{m}/{next_media}-s.jpg", is_due)
            next_media += 1
        if is_due:
            folders.append(f"media/{m}")
    by_member = {}
    for s in statuses:
        by_member.setdefault(s[1], []).append(s[0])
    # Neighbours answer two posts of each due account (the 4th, answered by the account
    # itself too, and the 21st, with files): those stay, emptied. They favourite three.
    for m in range(1, due + 1):
        neighbour = due + 1 + (m % neighbours)
        for target in (by_member[m][3], by_member[m][20]):
            statuses.append((next_status, neighbour, target, f"m{neighbour} answers", ts))
            next_status += 1
        for target in (by_member[m][3], by_member[m][7], by_member[m][35]):
            favourites.append((neighbour, target, ts))
    all_statuses = [s[0] for s in statuses]
    for m in range(1, due + 1):
        # 20 favourites, 15 follows and 8 messages sent, to anyone (due or not).
        for target in rng.sample(all_statuses, 20):
            favourites.append((m, target, ts))
        follows += [(m, other) for other in [o for o in rng.sample(members, 16) if o != m][:15]]
        for _ in range(8):
            other = rng.choice(members)
            messages.append((next_message, m, other if other != m else None, "see you at the track", ts))
            next_message += 1
    favourites = list(dict.fromkeys((f[0], f[1]) for f in favourites))
    db.executemany("INSERT INTO statuses (id, member_id, in_reply_to_id, body, created_at) VALUES (?, ?, ?, ?, ?)", statuses)
    db.executemany("INSERT INTO media (id, status_id, file_key) VALUES (?, ?, ?)", media)
    db.executemany("INSERT INTO media_variants (media_id, size, file_key) VALUES (?, ?, ?)", variants)
    db.executemany("INSERT INTO favourites (member_id, status_id, created_at) VALUES (?, ?, ?)", [(a, b, ts) for a, b in favourites])
    db.executemany("INSERT INTO follows (follower_id, followee_id) VALUES (?, ?)", follows)
    db.executemany("INSERT INTO messages (id, sender_id, recipient_id, body, sent_at) VALUES (?, ?, ?, ?, ?)", messages)
    # Lifecycle's record of each due account: deletion requested, grace period over.
    db.executemany("""INSERT INTO lifecycle_subjects (subject_key, state, deletion_requested_at, purge_after, updated_at)
                      VALUES (?, 'pendingDeletion', ?, ?, ?)""", [(str(m), past, past, past) for m in range(1, due + 1)])
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
with open(os.path.join(work, "app-files"), "w") as f:
    f.write("\n".join(files) + "\n")
with open(os.path.join(work, "app-folders"), "w") as f:
    f.write("\n".join(folders) + "\n")
PY
cp -a "$WORK/app-ours" "$WORK/pristine-app"

# Reference: what the engine does for each account, written by hand for this schema, in
# the map's erase order, one transaction per account; then rm of the same files and of
# the folders they leave empty.
python3 - "$n" > "$WORK/app-reference.sql" <<'PY'
import sys
print("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY;")
deletable = "SELECT s.id FROM statuses s WHERE s.member_id = {m} AND NOT EXISTS (SELECT 1 FROM statuses r WHERE r.in_reply_to_id = s.id)"
for m in range(1, int(sys.argv[1]) + 1):
    print("BEGIN IMMEDIATE;")
    print(f"DELETE FROM media_variants WHERE media_id IN (SELECT id FROM media WHERE status_id IN (SELECT id FROM statuses WHERE member_id = {m}));")
    print(f"DELETE FROM media WHERE status_id IN (SELECT id FROM statuses WHERE member_id = {m});")
    print(f"DELETE FROM favourites WHERE member_id = {m};")
    # Answers first, then the posts they answered; others' favourites go with each.
    for _ in range(2):
        print(f"DELETE FROM favourites WHERE status_id IN ({deletable.format(m=m)});")
        print(f"DELETE FROM statuses WHERE id IN ({deletable.format(m=m)});")
    print(f"UPDATE statuses SET member_id = NULL, body = NULL WHERE member_id = {m};")
    print(f"DELETE FROM follows WHERE follower_id = {m};")
    print(f"DELETE FROM follows WHERE followee_id = {m};")
    print(f"UPDATE messages SET sender_id = NULL WHERE sender_id = {m};")
    print(f"UPDATE messages SET recipient_id = NULL WHERE recipient_id = {m};")
    print(f"DELETE FROM members WHERE id = {m};")
    print(f"UPDATE lifecycle_subjects SET state = 'purged', purged_at = '2026-01-01 00:00:00.000', updated_at = '2026-01-01 00:00:00.000' WHERE subject_key = '{m}';")
    print("COMMIT;")
PY
run_app_reference() {
  fresh app-ref app
  settle
  local start end
  start=$(now)
  /usr/bin/time -f "%U %S" -o "$WORK/app-ref-cpu" sh -c 'sqlite3 "$1/app-ref/app.sqlite" < "$1/app-reference.sql" >/dev/null && cd "$1/app-ref/blobs" && xargs rm -- < "$1/app-files" && xargs rmdir -- < "$1/app-folders"' _ "$WORK"
  end=$(now)
  echo "$(seconds_between "$start" "$end") $(cat "$WORK/app-ref-cpu")" >> "$WORK/app-ref-rounds"
}
run_app_ours() {
  fresh app-ours app
  settle
  local start end
  start=$(now)
  /usr/bin/time -f "%U %S" -o "$WORK/app-ours-cpu" "$BIN" purge --concurrency "$APP_CONCURRENCY" --log-level warning --database "$WORK/app-ours/app.sqlite" --blobs "$WORK/app-ours/blobs" --jobs-dir "$WORK/app-ours/jobs" > "$WORK/app-purge.out"
  end=$(now)
  local took
  took=$(seconds_between "$start" "$end")
  # The verification's share: the read's own time, which each receipt records, summed over
  # every purge, against the whole run.
  local share scan
  share=$(sqlite3 "$WORK/app-ours/app.sqlite" "
    SELECT printf('%.3f', SUM(json_extract(detail, '$.verification.milliseconds')) / 1000.0 / $took)
    FROM lifecycle_audit_events WHERE action = 'account.purge' AND outcome = 'purged'")
  # The residue scan's share: each pass's time once (every receipt of a pass holds it, with
  # how many accounts the pass served), and the rows it read per second.
  scan=$(sqlite3 -separator ' ' "$WORK/app-ours/app.sqlite" "
    SELECT printf('%.3f', SUM(json_extract(detail, '$.residue.milliseconds') / json_extract(detail, '$.residue.pass_accounts')) / 1000.0 / $took),
           printf('%.0f', SUM(json_extract(detail, '$.residue.rows_scanned') * 1.0 / json_extract(detail, '$.residue.pass_accounts'))
             / (SUM(json_extract(detail, '$.residue.milliseconds') / json_extract(detail, '$.residue.pass_accounts')) / 1000.0)),
           printf('%.1f', AVG(json_extract(detail, '$.residue.pass_accounts')))
    FROM lifecycle_audit_events WHERE action = 'account.purge' AND outcome = 'purged'")
  echo "$took $(cat "$WORK/app-ours-cpu") $share $scan" >> "$WORK/app-ours-rounds"
}
check_app_round() {
  # Equal work: every app table holds the same rows on both sides afterwards, every due
  # account is purged on both, and the same files and folders are left.
  grep -q "^purge: $n purged, 0 skipped, 0 failed" "$WORK/app-purge.out" || { cat "$WORK/app-purge.out" >&2; exit 1; }
  local side table
  for side in app-ours app-ref; do
    for table in members statuses media media_variants favourites follows messages; do
      echo "$table $(sqlite3 "$WORK/$side/app.sqlite" "SELECT COUNT(*) FROM $table")"
      sqlite3 "$WORK/$side/app.sqlite" "SELECT * FROM $table ORDER BY 1, 2" | sha256sum
    done > "$WORK/$side.tables"
    sqlite3 "$WORK/$side/app.sqlite" "SELECT state, COUNT(*) FROM lifecycle_subjects GROUP BY state" >> "$WORK/$side.tables"
    (cd "$WORK/$side/blobs" && find . -not -path './.incoming*' | sort) > "$WORK/$side.files"
  done
  cmp -s "$WORK/app-ours.tables" "$WORK/app-ref.tables" || { echo "app-map purge: the tables differ from the reference's" >&2; diff "$WORK/app-ours.tables" "$WORK/app-ref.tables" >&2; exit 1; }
  cmp -s "$WORK/app-ours.files" "$WORK/app-ref.files" || { echo "app-map purge: the files differ from the reference's" >&2; diff "$WORK/app-ours.files" "$WORK/app-ref.files" | head >&2; exit 1; }
  grep -qx "purged|$n" "$WORK/app-ours.tables" || { echo "app-map purge: not every due account is purged" >&2; cat "$WORK/app-ours.tables" >&2; exit 1; }
  [ -z "$(cd "$WORK/app-ours/blobs" && xargs ls -d -- < "$WORK/app-files" 2>/dev/null)" ] || { echo "app-map purge: files of purged accounts left" >&2; exit 1; }
}
rm -f "$WORK/app-ref-rounds" "$WORK/app-ours-rounds"
local round
for round in $(seq 1 "$RUNS"); do
  if [ $((round % 2)) = 1 ]; then run_app_reference; run_app_ours; else run_app_ours; run_app_reference; fi
  check_app_round
done
local ours ours_user ours_sys verify_share reference ref_user ref_sys
read -r ours ours_user ours_sys verify_share scan_share scan_rate scan_batch < <(best_of "$WORK/app-ours-rounds")
read -r reference ref_user ref_sys < <(best_of "$WORK/app-ref-rounds")

python3 - "$n" "$ours" "$reference" "$ours_user $ours_sys" "$ref_user $ref_sys" "$RUNS" "$verify_share" "$scan_share" "$scan_rate" "$scan_batch" <<'PY'
import sys
n, ours, ref = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
ours_cpu, ref_cpu = (sum(map(float, arg.split())) for arg in sys.argv[4:6])
print(f"(best of {sys.argv[6]} interleaved rounds, each on a fresh copy)")
print(f"lifecycle purge through the data map:      {ours:7.2f} s   {n / ours:7.0f} accounts/s   cpu {ours_cpu:6.2f} s")
print(f"sqlite3 deletes and masks + rm:            {ref:7.2f} s   {n / ref:7.0f} accounts/s   cpu {ref_cpu:6.2f} s")
print(f"app-map purge: {n} accounts {ours:.2f}s vs sqlite3+rm {ref:.2f}s → ratio {ours / ref:.2f} (target ≤ 1.3 with the residue scan; cpu ratio {ours_cpu / ref_cpu:.2f})")
share = sys.argv[7]
print(f"verification (the read of every mapped table again, in the transaction that marks purged): {float(share) * 100:.1f} % of the purge's time" if share else "verification share: not measured")
scan_share, scan_rate, scan_batch = sys.argv[8:11]
print(f"residue scan (every readable table searched, one pass per batch of purges): {float(scan_share) * 100:.1f} % of the purge's time, "
      f"{float(scan_rate):,.0f} rows scanned/s, {float(scan_batch):.1f} accounts per pass on average")
PY
}

first=1
for case in $CASES; do
  [ "$first" = 1 ] || echo
  first=0
  case $case in
    reference) reference_app_case ;;
    app) app_map_case ;;
    *) echo "BENCH_PURGE_CASES: unknown case '$case' (reference, app)" >&2; exit 64 ;;
  esac
done
