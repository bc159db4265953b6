#!/usr/bin/env bash
# Download throughput of a 2 GB export archive over loopback: `lifecycle serve` (the link
# checked, the file streamed with its headers) against nginx serving the same file from
# the same disk in the same run, best of BENCH_SERVE_RUNS interleaved rounds, with the
# server's peak RSS; then the app API's export request under wrk at about 200 requests/s,
# with its latency percentiles. Called by scripts/bench.sh with LIFECYCLE_BENCH_BIN = a
# release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LIFECYCLE_BENCH_BIN:-}" ]; then scripts/build-release.sh >/dev/null; fi
BIN=${LIFECYCLE_BENCH_BIN:-$PWD/.build/release/lifecycle}
# Five rounds: one download takes about half a second, and with three the same build's
# ratio read 0.83 in one run and 1.33 in the next.
RUNS=${BENCH_SERVE_RUNS:-5}
SIZE_MB=${BENCH_SERVE_MB:-2048}
for tool in nginx curl python3 wrk; do
  command -v "$tool" >/dev/null || { echo "bench-serve: $tool is missing (apt: nginx-light curl wrk)" >&2; exit 69; }
done
WORK=$(mktemp -d /tmp/lifecycle-bench-serve.XXXXXX)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  [ -f "$WORK/nginx/nginx.pid" ] && kill "$(cat "$WORK/nginx/nginx.pid")" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# Archives go to a folder of their own (as by default, beside the database), named here so nginx can serve it.
export LIFECYCLE_DATABASE="$WORK/l.sqlite" LIFECYCLE_BLOBS="$WORK/blobs" LIFECYCLE_EXPORTS="$WORK/exports" LIFECYCLE_JOBS_DIR="$PWD/Jobs"
export LIFECYCLE_SIGNING_KEY=$(python3 -c "import secrets; print(secrets.token_hex(32))")
free_port() { python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }

echo "== Download server: a ${SIZE_MB} MB export archive over loopback, $(nproc) cores =="
# A real export of a demo account, whose archive is then replaced by SIZE_MB of incompressible bytes.
"$BIN" demo --log-level warning >/dev/null 2>&1
report=$("$BIN" export grace --wait --json --log-level warning)
read -r link archive < <(python3 -c "import json,sys; r=json.loads(sys.argv[1]); print(r['link'], r['archive_path'])" "$report")
head -c "$((SIZE_MB * 1048576))" /dev/urandom > "$archive.tmp" && mv "$archive.tmp" "$archive"
query=${link#*\?}
id=$(basename "${link%%\?*}")
relative=${archive#"$LIFECYCLE_EXPORTS"/}
[ "$relative" != "$archive" ] || { echo "bench-serve: the archive $archive is not under $LIFECYCLE_EXPORTS" >&2; exit 1; }

port=$(free_port)
"$BIN" serve --listen "127.0.0.1:$port" --log-level warning > "$WORK/serve.out" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$WORK/serve.out" || { cat "$WORK/serve.out" >&2; exit 1; }

nginx_port=$(free_port)
mkdir -p "$WORK/nginx/tmp"
# The archive is private to this user (0600), so nginx's worker runs as this user too.
user_line=""; [ "$(id -u)" = 0 ] && user_line="user root;"
cat > "$WORK/nginx/nginx.conf" <<CONF
$user_line
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
daemon on;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on; tcp_nopush on;
  client_body_temp_path $WORK/nginx/tmp; proxy_temp_path $WORK/nginx/tmp; fastcgi_temp_path $WORK/nginx/tmp;
  uwsgi_temp_path $WORK/nginx/tmp; scgi_temp_path $WORK/nginx/tmp;
  server { listen 127.0.0.1:$nginx_port; root $LIFECYCLE_EXPORTS; }
}
CONF
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" -e "$WORK/nginx/error.log"

ours_url="http://127.0.0.1:$port/exports/$id?$query"
nginx_url="http://127.0.0.1:$nginx_port/$relative"
fetch() { curl -sS -o /dev/null -w '%{http_code} %{size_download} %{time_total}\n' "$1"; }
cat "$archive" > /dev/null   # both read from the page cache
best_ours=999; best_nginx=999
for _ in $(seq "$RUNS"); do
  read -r code bytes seconds < <(fetch "$ours_url")
  [ "$code" = 200 ] && [ "$bytes" = "$((SIZE_MB * 1048576))" ] || { echo "lifecycle serve answered $code with $bytes bytes" >&2; exit 1; }
  best_ours=$(python3 -c "print(min(float('$best_ours'), float('$seconds')))")
  read -r code bytes seconds < <(fetch "$nginx_url")
  [ "$code" = 200 ] && [ "$bytes" = "$((SIZE_MB * 1048576))" ] || { echo "nginx answered $code with $bytes bytes" >&2; exit 1; }
  best_nginx=$(python3 -c "print(min(float('$best_nginx'), float('$seconds')))")
done
# The kernel's own peak for the server process, read before it stops.
rss_mb=$(awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$SERVER_PID/status")
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""

python3 - "$SIZE_MB" "$best_ours" "$best_nginx" "$rss_mb" <<'PY'
import sys
size, ours, nginx, rss = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
print(f"lifecycle serve: {ours:.2f} s  {size / ours:.0f} MB/s   peak RSS {rss} MB (the archive is {size:.0f} MB)")
print(f"nginx (sendfile): {nginx:.2f} s  {size / nginx:.0f} MB/s")
print(f"throughput ratio lifecycle/nginx = {nginx / ours:.2f} (target ≥ 0.90)")
PY

# The app API: POST /v1/accounts/<account>/exports at about 200 requests/s (two connections,
# each waiting 8 ms between requests) over 500 accounts, as the "Export My Data" button
# would; the first request of an account enqueues its export, later ones find it queued.
python3 - "$WORK/api.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as lines:
    for i in range(500):
        lines.write(json.dumps({"id": f"api-{i}", "email": f"api-{i}@example.com", "password_hash": "$2b$04$abcdefghijklmnopqrstuu"}) + "\n")
PY
"$BIN" accounts import "$WORK/api.jsonl" --log-level warning >/dev/null
export LIFECYCLE_API_TOKEN=$(python3 -c "import secrets; print(secrets.token_hex(32))")
port=$(free_port)
"$BIN" serve --listen "127.0.0.1:$port" --log-level warning > "$WORK/api.out" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/api.out" 2>/dev/null && break; sleep 0.1; done
cat > "$WORK/export.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $LIFECYCLE_API_TOKEN"
wrk.headers["Content-Type"] = "application/json"
wrk.body = "{}"
counter = 0
request = function()
  counter = counter + 1
  return wrk.format(nil, "/v1/accounts/api-" .. (counter % 500) .. "/exports")
end
delay = function() return 8 end
response = function(status) if status ~= 202 then error("status " .. status) end end
LUA
steadiness=$(python3 scripts/cpu-steadiness.py 5)
wrk -t 1 -c 2 -d 10s --latency -s "$WORK/export.lua" "http://127.0.0.1:$port" > "$WORK/wrk.out" 2>&1
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""
python3 - "$WORK/wrk.out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(value, unit): return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
p = {m.group(1): ms(m.group(2), m.group(3)) for m in re.finditer(r"^\s+(50|90|99)%\s+([\d.]+)(us|ms|s)", text, re.M)}
rate = re.search(r"Requests/sec:\s+([\d.]+)", text)
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
if not p or not rate:
    sys.exit("wrk printed no latency figures:\n" + text)
print(f"API POST /v1/accounts/<account>/exports: {float(rate.group(1)):.0f} requests/s, p50 {p['50']:.2f} ms, p90 {p['90']:.2f} ms, p99 {p['99']:.2f} ms (target p99 < 10 ms at 200/s)"
      + (f", {errors.group(1)} non-2xx" if errors else ""))
PY
echo "$steadiness"
