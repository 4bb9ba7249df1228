#!/usr/bin/env bash
# Run step of the pgjdbc driver suite (tests/drivers/run.py): compiles PgjdbcSuite.java with javac
# against the jar fetch.sh put in lib/, then runs it. Arguments are case names to run (all when none).
set -euo pipefail
cd "$(dirname "$0")"
CP="lib/postgresql-42.7.14.jar"
if [ ! -s "$CP" ]; then
  echo "missing $CP: run 'bash fetch.sh' first" >&2
  exit 2
fi
rm -rf build
mkdir -p build
javac -nowarn -encoding UTF-8 --release 17 -cp "$CP" -d build PgjdbcSuite.java
exec java -Xss1m -Xmx512m -cp "build:$CP" PgjdbcSuite "$@"
