#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for benchmarks and manual trials:
#   eval "$(scripts/pg-cluster.sh start DIR)"   # prints PG_URL=… and PG_DIR=…
#   scripts/pg-cluster.sh stop DIR
# The server refuses to run as root, so as root it runs as the postgres user.
set -euo pipefail
BIN=${LIFECYCLE_PG_BIN:-/usr/lib/postgresql/15/bin}
command=${1:?usage: pg-cluster.sh start|stop DIR}
dir=${2:?usage: pg-cluster.sh start|stop DIR}
as_server() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$command" in
start)
  [ -x "$BIN/initdb" ] || { echo "PostgreSQL 15 not found in $BIN: install the Debian package postgresql (make test-deps)" >&2; exit 69; }
  mkdir -p "$dir"
  # As root the server runs as postgres: it must reach the directory and own it.
  if [ "$(id -u)" = 0 ]; then chmod o+x "$(dirname "$dir")"; chown postgres "$dir"; fi
  password=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
  echo "$password" > "$dir/pwfile"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir/pwfile"; fi
  as_server "$BIN/initdb" -D "$dir/data" -U lifecycle --pwfile="$dir/pwfile" -A scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # Default durability (fsync, synchronous_commit on): the figures are for a real deployment.
  as_server "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c max_connections=200" start >/dev/null
  PGPASSWORD=$password "$BIN/psql" -h 127.0.0.1 -p "$port" -U lifecycle -d postgres -qc "CREATE DATABASE lifecycle"
  echo "PG_DIR=$dir"
  echo "PG_PORT=$port"
  echo "PG_PASSWORD=$password"
  echo "PG_URL='postgres://lifecycle:$password@127.0.0.1:$port/lifecycle?sslmode=disable'"
  ;;
stop)
  [ -f "$dir/data/postmaster.pid" ] && as_server "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  rm -rf "$dir"
  ;;
*) echo "usage: pg-cluster.sh start|stop DIR" >&2; exit 64 ;;
esac
