#!/usr/bin/env bash
# Run step of the Hibernate ORM suite (tests/drivers/run.py): compiles the suite with javac against
# the jars fetch.sh put in lib/, then runs it. Arguments are case names to run (all when none);
# -v also prints Hibernate's SQL (hibernate.show_sql) and the stack trace of each failure.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -s lib/.complete ]; then
  echo "lib/ is incomplete: run 'bash fetch.sh' first" >&2
  exit 2
fi
rm -rf build
mkdir -p build
javac -nowarn -encoding UTF-8 --release 17 -cp "lib/*" -d build HibernateSuite.java Entities.java
# UTC, so that the session TimeZone pgJDBC sends and the java.time values read back are fixed.
exec java -Xss1m -Xmx768m -Duser.timezone=UTC -cp "build:lib/*" HibernateSuite "$@"
