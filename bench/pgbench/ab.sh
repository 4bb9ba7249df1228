#!/bin/bash
# A/B of Shoal builds on one pgbench workload: runs the same pgbench against each binary in
# turn, RUNS rounds, and prints TPS and the server's CPU time per transaction (user + system,
# from /proc/PID/stat). On a noisy machine the CPU per transaction varies less than TPS.
#
#   bash bench/pgbench/ab.sh "-S -M prepared -c 8 -j 2" 3 OLD_BINARY NEW_BINARY
#
# Needs pgbench 15 (/usr/lib/postgresql/15/bin) and psql. Each binary gets a fresh data
# directory under /tmp and port 55440; scale 10 (AB_SCALE) is loaded once per binary, before
# the first round, with pgbench's default init steps or AB_INIT_STEPS (e.g. dtGvpf: server-side
# generation and foreign keys); the init's timing line is printed.
# pgbench connects over loopback TCP, or over the Unix socket with AB_TRANSPORT=unix.
# AB_SETUP_SQL_<i> (i from 1, the binary's position) is run by psql after that binary's init,
# e.g. AB_SETUP_SQL_2="CREATE EXTENSION pg_stat_statements" to measure what tracking costs.
set -u
ARGS=$1; RUNS=$2; shift 2
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
PORT=55440
SOCKET_DIR=/tmp/shoal-ab-sock
mkdir -p $SOCKET_DIR
if [ "${AB_TRANSPORT:-tcp}" = unix ]; then HOST=$SOCKET_DIR; else HOST=127.0.0.1; fi
CONN="-h $HOST -p $PORT -U postgres postgres"
TICKS_PER_S=$(getconf CLK_TCK)
for i in $(seq $#); do rm -rf /tmp/shoal-ab-data-$i; done
for round in $(seq "$RUNS"); do
  i=0
  for binary in "$@"; do
    i=$((i + 1))
    setsid "$binary" serve --listen 127.0.0.1:$PORT --data-dir /tmp/shoal-ab-data-$i \
      $( [ "$HOST" = "$SOCKET_DIR" ] && echo --unix-socket-dir $SOCKET_DIR ) \
      > /tmp/shoal-ab-$i.log 2>&1 < /dev/null &
    pid=$!
    until psql $CONN -Atc 'select 1' >/dev/null 2>&1; do sleep 0.2; done
    if [ "$round" = 1 ]; then
      init=$($PGBENCH -i -s "${AB_SCALE:-10}" -q ${AB_INIT_STEPS:+-I $AB_INIT_STEPS} $CONN 2>&1)
      echo "binary $i init: $(echo "$init" | grep '^done in')"
      setup_var="AB_SETUP_SQL_$i"
      if [ -n "${!setup_var:-}" ]; then psql $CONN -qc "${!setup_var}"; fi
    fi
    ticks_before=$(awk '{print $14 + $15}' /proc/$pid/stat)
    out=$($PGBENCH $ARGS -T 10 $CONN 2>/dev/null)
    ticks_after=$(awk '{print $14 + $15}' /proc/$pid/stat)
    transactions=$(echo "$out" | grep "processed:" | grep -o '[0-9]*' | head -1)
    tps=$(echo "$out" | grep tps | grep -o '= [0-9.]*' | tr -d '= ')
    cpu_us=$(( (ticks_after - ticks_before) * 1000000 * 10 / TICKS_PER_S / transactions ))
    echo "round $round binary $i ($binary): tps $tps server_cpu_us_per_tx $((cpu_us / 10)).$((cpu_us % 10))"
    kill "$pid"; wait "$pid" 2>/dev/null; sleep 1
  done
done
