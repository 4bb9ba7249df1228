#!/usr/bin/env bash
# Starts a three-node Shoal replication group on loopback, for trying it out:
#
#   bash bench/cluster/local3.sh [path/to/shoal] [base directory]
#
# Node N serves PostgreSQL clients on port 5440+N and talks to its peers on port 7000+N; its
# data directory is BASE/nodeN and its log BASE/nodeN.log. One node is elected primary (it
# accepts writes); the other two are hot standbys (they serve reads). A client that should
# find the primary wherever it is connects with a multi-host string:
#
#   psql "host=127.0.0.1,127.0.0.1,127.0.0.1 port=5441,5442,5443 target_session_attrs=read-write user=postgres"
#
# Ctrl-C stops the three nodes.
set -euo pipefail
shoal="${1:-target/release/shoal}"
base="${2:-./shoal-group}"
peers="1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
for n in 1 2 3; do
  mkdir -p "$base/node$n"
  "$shoal" serve --node-id "$n" --peers "$peers" --listen "127.0.0.1:$((5440 + n))" \
    --data-dir "$base/node$n" --unix-socket-dir "" >"$base/node$n.log" 2>&1 &
  pids+=($!)
done
echo "3 nodes: ports 5441, 5442, 5443 (logs in $base/node*.log); Ctrl-C stops them"
wait
