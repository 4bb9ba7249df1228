#!/bin/bash
# Where one pgbench workload's time goes, per transaction, thread by thread: starts a fresh Shoal
# server for each synchronous_commit setting given, loads scale 10 (THREAD_SPLIT_SCALE), runs
# pgbench for 10 s over the Unix socket and prints, per transaction: pgbench's own CPU, the
# machine's idle, iowait and softirq time (/proc/stat), virtio interrupts (/proc/interrupts),
# and each server thread's user and system CPU, voluntary and preempted switches and write-class
# system calls (/proc/PID/task/*).
#
#   bash bench/pgbench/thread_split.sh BINARY "-M prepared -c 8 -j 2" on off
#
# Needs pgbench 15 (/usr/lib/postgresql/15/bin) and psql. Uses port 55442 and a directory
# under /tmp; extra environment variables reach the server.
set -u
BINARY=$1; ARGS=$2; shift 2
MODES=${*:-on}
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
PORT=55442
WORK=$(mktemp -d /tmp/shoal-thread-split-XXXXXX)
CONN="-h $WORK -p $PORT -U postgres postgres"
trap 'rm -rf "$WORK"' EXIT

snapshot() {
  local pid=$1
  for t in /proc/"$pid"/task/*; do
    echo "$(cat "$t"/comm | tr ' ' _) $(awk '{print $14, $15}' "$t"/stat)" \
      "$(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary/{n=$2} END{print v, n}' "$t"/status)" \
      "$(awk '/syscw/{print $2}' "$t"/io)"
  done
  awk '/^cpu /{print "MACHINE", $5, $6, $8}' /proc/stat
  awk '/virtio/{s=0; for (i=2; i<=NF && $i ~ /^[0-9]+$/; i++) s+=$i; t+=s} END{print "VIRTIO", t}' \
    /proc/interrupts
}

for mode in $MODES; do
  rm -rf "$WORK/data"
  setsid "$BINARY" serve --listen 127.0.0.1:$PORT --data-dir "$WORK/data" \
    --unix-socket-dir "$WORK" > "$WORK/server.log" 2>&1 < /dev/null &
  pid=$!
  until psql $CONN -Atc 'select 1' >/dev/null 2>&1; do sleep 0.2; done
  $PGBENCH -i -q -s "${THREAD_SPLIT_SCALE:-10}" $CONN >/dev/null 2>&1
  snapshot $pid > "$WORK/before"
  out=$(PGOPTIONS="-c synchronous_commit=$mode" python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(r.stdout)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print("PGBENCH_CPU", u.ru_utime, u.ru_stime)' $PGBENCH $ARGS -T 10 $CONN)
  snapshot $pid > "$WORK/after"
  kill $pid; wait $pid 2>/dev/null
  echo "== synchronous_commit=$mode: $(echo "$out" | grep -o 'tps = [0-9.]*')"
  echo "$out" | python3 -c '
import os, sys
out = sys.stdin.read()
tx = int(out.split("processed:")[1].split()[0])
tick = 1e6 / os.sysconf("SC_CLK_TCK")
def load(path):
    rows = {}
    for line in open(path):
        name, *nums = line.split()
        old = rows.get(name, [0] * len(nums))
        rows[name] = [a + int(b) for a, b in zip(old, nums)]
    return rows
before, after = load(sys.argv[1]), load(sys.argv[2])
d = {k: [b - a for a, b in zip(before.get(k, [0] * len(v)), v)] for k, v in after.items()}
cpu = out.split("PGBENCH_CPU")[1].split()
print(f"  pgbench          user {float(cpu[0]) * 1e6 / tx:6.1f} sys {float(cpu[1]) * 1e6 / tx:6.1f} us/tx")
m, virtio = d.pop("MACHINE"), d.pop("VIRTIO")[0]
print(f"  machine          idle {m[0] * tick / tx:6.1f} iowait {m[1] * tick / tx:5.1f} "
      f"softirq {m[2] * tick / tx:5.1f} us/tx; virtio interrupts {virtio / tx:.2f}/tx")
for name, (user, system, vol, invol, writes) in sorted(d.items()):
    if user + system + vol + invol:
        print(f"  {name:16} user {user * tick / tx:6.1f} sys {system * tick / tx:6.1f} us/tx, "
              f"switches {vol / tx:.2f} voluntary {invol / tx:.2f} preempted, writes {writes / tx:.2f}")
' "$WORK/before" "$WORK/after"
done
