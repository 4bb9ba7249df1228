#!/bin/bash
# Short transactions beside analytic queries: pgbench select-only on a row table, alone and
# while another connection runs a GROUP BY over a column table in a loop
# (crates/shoal-sql/src/query/query_runtime.rs keeps DataFusion's work off the connections'
# runtime).
#
#     bash bench/columnar/isolation.sh BIN [BIN...]
#
# For each server binary: a fresh server on a free port and a temporary data directory,
# pgbench -i -s 10, a column table of 10M rows (id, a text of 8 values, v float8), then
# `pgbench -S -M prepared -c 4 -j 2 -T 15` alone and with the analytic loop running. Prints TPS
# and average latency of both, and how many analytic queries finished meanwhile.
set -euo pipefail
PSQL="psql -h 127.0.0.1 -U postgres -q -X"
for BIN in "$@"; do
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    DIR=$(mktemp -d /tmp/shoal-isolation.XXXXXX)
    "$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$DIR" > "$DIR.log" 2>&1 &
    SERVER=$!
    trap 'kill $SERVER 2>/dev/null; rm -rf "$DIR" "$DIR.log"' EXIT
    for _ in $(seq 50); do $PSQL -p $PORT -c 'SELECT 1' > /dev/null 2>&1 && break; sleep 0.2; done
    pgbench -i -q -s 10 -h 127.0.0.1 -p $PORT -U postgres postgres > /dev/null 2>&1
    $PSQL -p $PORT -c "CREATE TABLE facts (id bigint, a text, v double precision) USING columnar" \
        -c "INSERT INTO facts SELECT g, 'kind ' || (g % 8), g * 0.5 FROM generate_series(1, 10000000) g" \
        -c "CHECKPOINT"
    run_pgbench() {
        pgbench -S -M prepared -c 4 -j 2 -T 15 -h 127.0.0.1 -p $PORT -U postgres postgres 2>/dev/null |
            awk '/^tps/ {tps=$3} /latency average/ {lat=$4} END {printf "%.0f TPS, %s ms average latency", tps, lat}'
    }
    ALONE=$(run_pgbench)
    ( n=0; while true; do
        $PSQL -p $PORT -c "SELECT a, count(*), sum(v) FROM facts WHERE id % 3 <> 0 GROUP BY a" > /dev/null 2>&1 || break
        n=$((n + 1)); echo $n > "$DIR.analytic"
      done ) &
    LOOP=$!
    sleep 1
    BESIDE=$(run_pgbench)
    kill $LOOP 2>/dev/null; wait $LOOP 2>/dev/null || true
    echo "$BIN"
    echo "  select-only alone:            $ALONE"
    echo "  beside the analytic loop:     $BESIDE ($(cat "$DIR.analytic") GROUP BYs over 10M rows ran)"
    kill $SERVER; wait $SERVER 2>/dev/null || true
    rm -rf "$DIR" "$DIR.log" "$DIR.analytic"
    trap - EXIT
done
