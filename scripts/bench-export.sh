#!/usr/bin/env bash
# Export benchmarks, each against a reference tool on the same files in the same run:
#   1. 2 GB of generated photos into a ZIP: the export's archive writing (each photo
#      read, SHA-256 checked against its row, stored in the ZIP, the ZIP fsynced)
#      against `bsdtar --format zip --options zip:compression=store`, bare and followed
#      by an fsync of its archive (target: ≥ 0.9× bsdtar's throughput); and the export
#      process's peak RSS (target: < 64 MB, not growing with the export's size).
#   2. An account with 100,000 journal entries: its rows streamed into JSON + CSV, and
#      the whole export command, against `sqlite3 -json` dumping the same rows
#      (target: ≤ 2× its time).
# LIFECYCLE_BENCH_BIN: a release `lifecycle` binary (built here if unset).
# BENCH_EXPORT_PHOTO_MB / BENCH_EXPORT_ENTRIES shrink the data for a quick run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then swift build -c release --product lifecycle >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
WORK=$(mktemp -d /tmp/lifecycle-export-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
PHOTO_MB=${BENCH_EXPORT_PHOTO_MB:-2048}
ENTRIES=${BENCH_EXPORT_ENTRIES:-100000}
export LIFECYCLE_SIGNING_KEY=bench-signing-key-0123456789abcdef0123456789
export LC_ALL=C.UTF-8

# A Jobs directory without the rate limit: the same account is exported several times.
# -L: a checkout whose Jobs is a symlink must not have the original edited below.
cp -rL Jobs "$WORK/Jobs"
sed -i 's/^  rate_limit_hours: .*/  rate_limit_hours: 0/' "$WORK/Jobs/policies/export.yaml"
DB="$WORK/bench.sqlite"
BLOBS="$WORK/blobs"
lc() { "$BIN" "$@" --database "$DB" --blobs "$BLOBS" --jobs-dir "$WORK/Jobs" --log-level warning; }
now() { date +%s.%N; }
calc() { python3 -c "import sys; print(format(eval(sys.argv[1]), sys.argv[2]))" "$1" "$2"; }
peak_kb() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }

echo "== Export benchmarks, $(nproc) cores =="

# --- Data: photo accounts (incompressible 16 MB "JPEGs") and an account with many entries.
python3 - "$WORK" "$PHOTO_MB" "$ENTRIES" <<'PY'
import json, os, sys
work, photo_mb, entries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(f"{work}/input/photos", exist_ok=True)
def account(ident, photo_count, entry_count, prefix):
    items = []
    for i in range(max(photo_count, entry_count)):
        entry = {"id": f"{ident}-e{i}", "created_at": f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                 "text": f"Entry {i}: tempo run, 5 × 1 km — café au lait after; notes \"easy\" {i * 7919 % 100000}"}
        if i < photo_count:
            entry["photos"] = [{"id": f"{ident}-p{i}", "file": f"photos/{prefix}{i}.jpg", "taken_at": entry["created_at"]}]
        items.append(entry)
    return {"id": ident, "email": f"{ident}@example.com", "password_hash": "$2b$04$abcdefghijklmnopqrstuu",
            "first_name": "Bench", "timezone": "Europe/London", "entries": items}
chunk = 16 << 20
big_count = max(1, photo_mb * (1 << 20) // chunk)
small_count = max(1, big_count // 8)
for i in range(big_count):
    with open(f"{work}/input/photos/big{i}.jpg", "wb") as f:
        f.write(b"\xff\xd8\xff\xe0" + os.urandom(chunk - 4))
with open(f"{work}/input/accounts.jsonl", "w") as out:
    out.write(json.dumps(account("photos-big", big_count, 0, "big")) + "\n")
    # The small account reuses the first eighth of the photo files.
    out.write(json.dumps(account("photos-small", small_count, 0, "big")) + "\n")
    out.write(json.dumps(account("entries", 0, entries, "")) + "\n")
PY
lc accounts import "$WORK/input/accounts.jsonl" >/dev/null
rm -rf "$WORK/input/photos"

# --- 1. Photos: the write-archive step against bsdtar on the blob files themselves.
PHOTO_DIR="$BLOBS/accounts/photos-big"
photo_bytes=$(du -sb "$PHOTO_DIR/photos" | cut -f1)

bsdtar_run() {
  local start end
  rm -f "$WORK/ref.zip"
  start=$(now)
  bsdtar --format zip --options zip:compression=store -cf "$WORK/ref.zip" -C "$PHOTO_DIR" photos
  end=$(now)
  calc "$end - $start" .3f
}

# Prints: seconds writing the archive (photos read, hashed, archived, fsynced), seconds
# streaming the tables into JSON + CSV, the whole export in seconds, peak RSS in kB.
# The first two come from the write-archive step's output (`lifecycle jobs show`).
export_run() {
  local account=$1 start end job
  start=$(now)
  /usr/bin/time -v -o "$WORK/time.txt" "$BIN" export "$account" --wait --json \
    --database "$DB" --blobs "$BLOBS" --jobs-dir "$WORK/Jobs" --log-level warning > "$WORK/export.json"
  end=$(now)
  job=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['job_id'])" "$WORK/export.json")
  sqlite3 "$DB" "SELECT output FROM job_steps WHERE job_id = $job AND step = 'write-archive'" > "$WORK/step.json"
  # The archive is not needed afterwards; keep the disk free for the next run.
  python3 -c "import json,os,sys; os.remove(json.load(open(sys.argv[1]))['archive_path'])" "$WORK/export.json"
  python3 - "$WORK/step.json" "$(calc "$end - $start" .3f)" "$(peak_kb "$WORK/time.txt")" <<'PY'
import json, sys
step = json.load(open(sys.argv[1]))
print(f"{step['archiveSeconds']:.3f} {step['tablesSeconds']:.3f} {sys.argv[2]} {sys.argv[3]}")
PY
}

best() { printf '%s\n' "$@" | sort -g | head -1; }

# bsdtar leaves its archive in the page cache; the export fsyncs its archive before
# publishing it (a crash must not leave a published but empty file).
bsdtar_sync_run() {
  local start end
  rm -f "$WORK/ref.zip"
  start=$(now)
  bsdtar --format zip --options zip:compression=store -cf "$WORK/ref.zip" -C "$PHOTO_DIR" photos
  sync "$WORK/ref.zip"
  end=$(now)
  calc "$end - $start" .3f
}

b1=$(bsdtar_run); read -r w1 _ e1 r1 <<<"$(export_run photos-big)"
b2=$(bsdtar_run); read -r w2 _ e2 r2 <<<"$(export_run photos-big)"
c1=$(bsdtar_sync_run); c2=$(bsdtar_sync_run)
rm -f "$WORK/ref.zip"
bsdtar_s=$(best "$b1" "$b2")
bsdtar_sync_s=$(best "$c1" "$c2")
write_s=$(best "$w1" "$w2")
export_s=$(best "$e1" "$e2")
read -r _ _ _ small_rss <<<"$(export_run photos-small)"
big_rss=$(( r1 > r2 ? r1 : r2 ))
mb() { calc "$1 / 1048576" .0f; }

echo "photos: $(mb "$photo_bytes") MB in $(ls "$PHOTO_DIR/photos" | wc -l) files, ZIP with stored entries (best of 2)"
echo "  bsdtar --format zip (store):         ${bsdtar_s} s   $(calc "$photo_bytes / $bsdtar_s / 1048576" .0f) MB/s"
echo "  bsdtar, then fsync of its archive:   ${bsdtar_sync_s} s   $(calc "$photo_bytes / $bsdtar_sync_s / 1048576" .0f) MB/s (the durability the export has)"
echo "  lifecycle export, archive written:   ${write_s} s   $(calc "$photo_bytes / $write_s / 1048576" .0f) MB/s   → throughput ratio $(calc "$bsdtar_s / $write_s" .2f) vs bsdtar, $(calc "$bsdtar_sync_s / $write_s" .2f) vs bsdtar + fsync (target ≥ 0.90)"
echo "  lifecycle export, whole job:         ${export_s} s   (also: tables, re-read and check every hash, publish, notify)"
echo "  peak RSS of the export process:    $(calc "$big_rss / 1024" .1f) MB for $(mb "$photo_bytes") MB, $(calc "$small_rss / 1024" .1f) MB for an eighth of it (target < 64 MB, flat)"

# --- 2. 100,000 journal entries: the whole export against sqlite3 -json on the same rows.
sqlite_run() {
  local start end
  start=$(now)
  sqlite3 -json "$DB" "SELECT id, created_at, text FROM journal_entries WHERE account_id = 'entries' ORDER BY created_at, id" > "$WORK/ref.json"
  end=$(now)
  calc "$end - $start" .3f
}
s1=$(sqlite_run); read -r _ t1 x1 _ <<<"$(export_run entries)"
s2=$(sqlite_run); read -r _ t2 x2 _ <<<"$(export_run entries)"
rows=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$WORK/ref.json")
sqlite_s=$(best "$s1" "$s2")
tables_s=$(best "$t1" "$t2")
entries_s=$(best "$x1" "$x2")
echo "journal entries: $rows rows (best of 2)"
echo "  sqlite3 -json, the same rows:                    ${sqlite_s} s"
echo "  export: rows streamed into JSON + CSV:           ${tables_s} s   → $(calc "$tables_s / $sqlite_s" .2f)× sqlite3 (target ≤ 2.00)"
echo "  export: whole command (+ start, zip, verify, publish, notify): ${entries_s} s   → $(calc "$entries_s / $sqlite_s" .2f)× sqlite3"
