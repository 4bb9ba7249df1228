#!/bin/bash
# Loads a taxi CSV into a row ("heap") table in ONE COPY, kills the server with SIGKILL (no
# checkpoint), restarts it and checks that count(*) and sum(trip_id) came back from the log.
# Prints the load time and the restart (recovery) time.
#
#   bash bench/taxi/heap_restart.sh SHOAL_BINARY CSV_FILE [PORT]
#
# The CSV comes from the taxi generator (see README.md); the data directory is a fresh
# temporary directory, removed at the end.
set -euo pipefail
BIN=$1 CSV=$(realpath "$2") PORT=${3:-55499}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$(mktemp -d /tmp/shoal-heap-restart-XXXXXX)
LOG=$DATA.log
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; sleep 1; rm -rf "$DATA"; }
trap cleanup EXIT
sql() { psql -h 127.0.0.1 -p "$PORT" -U postgres -X -Atq "$@"; }
start() {
  setsid "$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" >> "$LOG" 2>&1 < /dev/null &
  PID=$!
  for _ in $(seq 1 1200); do sql -c "SELECT 1" > /dev/null 2>&1 && return; sleep 0.5; done
  echo "the server did not start; see $LOG" >&2; exit 1
}
start
sql -f "$HERE/schema.sql"
t0=$(date +%s.%N)
sql -c "COPY trips FROM '$CSV' WITH (FORMAT csv)"
t1=$(date +%s.%N)
before=$(sql -c "SELECT count(*), sum(trip_id) FROM trips")
echo "load: $(echo "$t1 - $t0" | bc) s, $before (count|sum), log $(du -sh "$DATA/wal" | cut -f1)"
kill -9 "$PID"; wait "$PID" 2>/dev/null || true
t0=$(date +%s.%N)
start
t1=$(date +%s.%N)
after=$(sql -c "SELECT count(*), sum(trip_id) FROM trips")
echo "restart: $(echo "$t1 - $t0" | bc) s; $(grep -o 'recovery: .*' "$LOG" | tail -1)"
if [ "$before" != "$after" ]; then echo "MISMATCH: $before before, $after after" >&2; exit 1; fi
echo "same rows after the restart"
