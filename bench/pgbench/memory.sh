#!/bin/bash
# Memory per pgbench_accounts row: RSS growth of a fresh Shoal over `pgbench -i -q -s SCALE`,
# divided by the accounts rows (100,000 per scale), and how long the load took. Runs each
# binary in turn, so two builds compare in one run on the same machine:
#
#   bash bench/pgbench/memory.sh 100 OLD_BINARY NEW_BINARY
#
# Needs pgbench 15 and psql (Debian's postgresql-15). Port 55450, data under /tmp (removed).
set -eu
SCALE=$1; shift
PORT=55450
CONN="-h 127.0.0.1 -p $PORT -U postgres postgres"
for binary in "$@"; do
  dir=$(mktemp -d /tmp/shoal-memory.XXXX)
  "$binary" serve --listen 127.0.0.1:$PORT --data-dir "$dir/data" > "$dir/log" 2>&1 < /dev/null &
  pid=$!
  until psql $CONN -Atc 'select 1' >/dev/null 2>&1; do sleep 0.2; done
  rss_before_kb=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  started=$(date +%s.%N)
  pgbench -i -q -s "$SCALE" $CONN > "$dir/init.log" 2>&1
  ended=$(date +%s.%N)
  rss_after_kb=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  rows=$((SCALE * 100000))
  echo "$binary scale=$SCALE init_s=$(echo "$ended - $started" | bc)" \
       "bytes_per_row=$(( (rss_after_kb - rss_before_kb) * 1024 / rows ))"
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$dir"
done
