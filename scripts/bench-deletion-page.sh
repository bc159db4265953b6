#!/usr/bin/env bash
# The public deletion page's answer time for an address with an account against one
# without: what an attacker measures to learn who has an account. 300 requests for each,
# interleaved, from distinct clients through a trusted proxy (so no limit answers them), the
# known addresses each a different account's. Prints both medians and p90s, the ratio of
# the medians, and how often one known request is slower than one unknown one (0.50: the
# two cannot be told apart). Called by scripts/bench.sh with LIFECYCLE_BENCH_BIN = a release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then scripts/build-release.sh >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
COUNT=${BENCH_DELETION_PAGE_REQUESTS:-300}
WORK=$(mktemp -d /tmp/lifecycle-bench-page.XXXXXX)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export LIFECYCLE_DATABASE="$WORK/l.sqlite" LIFECYCLE_BLOBS="$WORK/blobs" LIFECYCLE_JOBS_DIR="$PWD/Jobs"
export LIFECYCLE_SIGNING_KEY=$(python3 -c "import secrets; print(secrets.token_hex(32))")

echo "== Deletion page: known against unknown addresses, ${COUNT} each, $(nproc) cores =="
python3 - "$WORK/accounts.jsonl" "$COUNT" <<'PY'
import json, sys
path, count = sys.argv[1], int(sys.argv[2])
with open(path, "w") as out:
    for n in range(count):
        out.write(json.dumps({"id": f"k{n}", "email": f"known-{n}@example.com", "first_name": "K", "last_name": "N",
                              "password_hash": "$2b$04$Wd0dEsiS6/8yONvHwEEae.LfGSs/AKzG3YawF6CS.ukfXvr/45rre",
                              "timezone": "UTC", "created_at": "2025-01-02T03:04:05Z"}) + "\n")
PY
"$BIN" init --log-level warning >/dev/null
"$BIN" accounts import "$WORK/accounts.jsonl" --log-level warning >/dev/null
port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$BIN" serve --listen "127.0.0.1:$port" --trusted-proxy 127.0.0.1 --log-level warning > "$WORK/serve.out" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$WORK/serve.out" || { cat "$WORK/serve.out" >&2; exit 1; }

python3 - "$port" "$COUNT" <<'PY'
import http.client, statistics, sys, time, urllib.parse
port, count = int(sys.argv[1]), int(sys.argv[2])
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def ask(address, client):
    body = urllib.parse.urlencode({"email": address})
    started = time.perf_counter()
    connection.request("POST", "/account/delete", body, {"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": client})
    response = connection.getresponse()
    response.read()
    took = (time.perf_counter() - started) * 1000
    if response.status != 200:
        sys.exit(f"bench-deletion-page: {address} got {response.status}")
    return took
for n in range(20):  # warm-up, not counted
    ask(f"warm-{n}@example.com", f"10.9.0.{n}")
known, unknown = [], []
for n in range(count):
    known.append(ask(f"known-{n}@example.com", f"10.1.{n // 256}.{n % 256}"))
    unknown.append(ask(f"nobody-{n}@example.com", f"10.2.{n // 256}.{n % 256}"))
def p90(values): return sorted(values)[int(len(values) * 0.9)]
slower = sum(1 for k in known for u in unknown if k > u) / (len(known) * len(unknown))
print(f"known address:    median {statistics.median(known):6.2f} ms   p90 {p90(known):6.2f} ms")
print(f"unknown address:  median {statistics.median(unknown):6.2f} ms   p90 {p90(unknown):6.2f} ms")
print(f"ratio of medians: {statistics.median(known) / statistics.median(unknown):.2f}   "
      f"P(known slower than unknown): {slower:.2f}   (0.50: indistinguishable)")
PY
