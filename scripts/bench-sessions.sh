#!/usr/bin/env bash
# Signing out on a Django site whose `django_session` holds BENCH_SESSIONS sessions
# (default 1,000,000: 10 for each of 100,000 users), built by the example project's own
# `migrate` and Django's own session encoding, on SQLite:
#
# 1. `lifecycle init` builds lifecycle's index of whose each session is: one pass decoding
#    the whole table, what every deletion request cost before the index;
# 2. BENCH_SESSION_REQUESTS deletion requests (default 200), each a different user's,
#    through `lifecycle serve`'s API one after another, timed by the client: p50 and p99.
#    Target: p99 under 200 ms. The users' passwords are PBKDF2 with one iteration, so the
#    figure is the request's own work, not the password hash's;
# 3. a purge sweep (the index brought up to date: nothing new to decode), then the purge
#    of those accounts: per account, it signs out through the index too.
#
#   LIFECYCLE_BENCH_BIN=.build/release/lifecycle scripts/bench-sessions.sh
#   BENCH_SESSIONS=100000 scripts/bench-sessions.sh   # a quicker look
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then scripts/build-release.sh >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
SESSIONS=${BENCH_SESSIONS:-1000000}
REQUESTS=${BENCH_SESSION_REQUESTS:-200}
PYTHON=$PWD/.build-tools/venv/bin/python
[ -x "$PYTHON" ] || { echo "bench-sessions: $PYTHON is missing: run 'make example-deps' first" >&2; exit 69; }
WORK=$(mktemp -d /tmp/lifecycle-bench-sessions.XXXXXX)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  [ -n "${BENCH_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
now() { date +%s.%N; }
seconds_between() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
free_port() { python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }

echo "== Django sign-out: $SESSIONS sessions in django_session, $(nproc) cores =="
site="$WORK/site.sqlite" media="$WORK/media"
Jobs/examples/django/build.sh "$site" "$media" >/dev/null 2>"$WORK/build.err" || { cat "$WORK/build.err" >&2; exit 1; }
BENCH_SESSIONS=$SESSIONS Jobs/examples/django/manage.sh "$site" "$media" shell --no-imports -c '
import os, secrets
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection, transaction
from django.utils import timezone

sessions = int(os.environ["BENCH_SESSIONS"])
users = max(sessions // 10, 1)
User = get_user_model()
password = PBKDF2PasswordHasher().encode("bench password", "benchsalt", iterations=1)
with transaction.atomic():
    User.objects.bulk_create([User(username=f"bench{i}", email=f"bench{i}@example.com", password=password) for i in range(users)], batch_size=5000)
ids = list(User.objects.filter(username__startswith="bench").order_by("id").values_list("id", flat=True))
store = SessionStore()
expire = timezone.now() + timedelta(days=14)
backend = "django.contrib.auth.backends.ModelBackend"
with transaction.atomic(), connection.cursor() as cursor:
    batch = []
    for number in range(sessions):
        user = ids[number % len(ids)]
        data = store.encode({"_auth_user_id": str(user), "_auth_user_backend": backend, "_auth_user_hash": secrets.token_hex(32), "n": number})
        batch.append((secrets.token_hex(16), data, expire))
        if len(batch) == 10000:
            cursor.executemany("INSERT INTO django_session (session_key, session_data, expire_date) VALUES (%s, %s, %s)", batch)
            batch = []
    if batch:
        cursor.executemany("INSERT INTO django_session (session_key, session_data, expire_date) VALUES (%s, %s, %s)", batch)
print(ids[0])
' > "$WORK/first-id"
first_id=$(tail -1 "$WORK/first-id")
total=$(sqlite3 "$site" "SELECT COUNT(*) FROM django_session")

cp -r Jobs "$WORK/jobs"
cp Jobs/examples/django/account-data.yaml "$WORK/jobs/account-data.yaml"
export LIFECYCLE_DATABASE="$site" LIFECYCLE_BLOBS="$media" LIFECYCLE_JOBS_DIR="$WORK/jobs"
export LIFECYCLE_API_TOKEN=$(python3 -c "import secrets; print(secrets.token_hex(32))")
export LIFECYCLE_SIGNING_KEY=$(python3 -c "import secrets; print(secrets.token_hex(32))")
start=$(now)
"$BIN" init --json --log-level warning > "$WORK/init.json"
end=$(now)
built=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['session_rows_indexed'])" "$WORK/init.json")
[ "$built" = "$total" ] || { echo "bench-sessions: init indexed $built of $total sessions" >&2; exit 1; }
echo "init, the index built: $built sessions decoded in $(seconds_between "$start" "$end") s (each deletion request's cost before the index)"

port=$(free_port)
"$BIN" serve --listen "127.0.0.1:$port" --log-level warning > "$WORK/serve.out" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$WORK/serve.out" || { cat "$WORK/serve.out" >&2; exit 1; }
python3 - "$port" "$first_id" "$REQUESTS" <<'PY'
import http.client, json, os, sys, time
port, first, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
connection = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Authorization": "Bearer " + os.environ["LIFECYCLE_API_TOKEN"], "Content-Type": "application/json"}
body = json.dumps({"password": "bench password"})
took, signed_out = [], 0
for user in range(first, first + count):
    started = time.perf_counter()
    connection.request("POST", f"/v1/accounts/{user}/deletion", body=body, headers=headers)
    answer = connection.getresponse()
    payload = json.loads(answer.read())
    took.append((time.perf_counter() - started) * 1000)
    if answer.status != 202:
        sys.exit(f"bench-sessions: deletion of {user} answered {answer.status}: {payload}")
    signed_out += payload["sessions_revoked"]
if signed_out != 10 * count:
    sys.exit(f"bench-sessions: {signed_out} sessions signed out, not {10 * count}")
took.sort()
rank = lambda p: took[max(0, -(-len(took) * p // 100) - 1)]
print(f"deletion request, {count} users one after another, each signed out of 10 sessions: "
      f"p50 {rank(50):.1f} ms, p99 {rank(99):.1f} ms (target p99 < 200)")
PY
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
left=$(sqlite3 "$site" "SELECT COUNT(*) FROM django_session")
[ "$left" = "$((total - 10 * REQUESTS))" ] || { echo "bench-sessions: $left sessions left, not $((total - 10 * REQUESTS))" >&2; exit 1; }

start=$(now)
"$BIN" purge --json --log-level warning > "$WORK/sweep.json"
end=$(now)
echo "a sweep, nothing new to decode: $(seconds_between "$start" "$end") s"
start=$(now)
LIFECYCLE_NOW=$(date -u -d '+31 days' +%Y-%m-%dT%H:%M:%SZ) "$BIN" purge --json --log-level warning > "$WORK/purge.json"
end=$(now)
purged=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['run']['purged']))" "$WORK/purge.json")
[ "$purged" = "$REQUESTS" ] || { echo "bench-sessions: $purged of $REQUESTS accounts purged" >&2; head -c 2000 "$WORK/purge.json" >&2; exit 1; }
elapsed=$(seconds_between "$start" "$end")
echo "purge of the $REQUESTS accounts (sweep included): $elapsed s, $(python3 -c "import sys; print(f'{float(sys.argv[1]) * 1000 / int(sys.argv[2]):.0f}')" "$elapsed" "$REQUESTS") ms per account"
