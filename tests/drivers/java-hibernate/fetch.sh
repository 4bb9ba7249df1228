#!/usr/bin/env bash
# Install step of the Hibernate ORM suite (tests/drivers/run.py): Maven copies the jars pinned in
# pom.xml (hibernate-core, the PostgreSQL JDBC driver, Jackson for jsonb) and everything they need
# at run time into lib/, unless lib/ already holds exactly what this pom.xml resolved to last time.
set -euo pipefail
cd "$(dirname "$0")"
STAMP=lib/.complete
want="$(sha256sum pom.xml | cut -d' ' -f1)"
complete() {
  [ -f "$STAMP" ] && [ "$(head -n1 "$STAMP")" = "$want" ] || return 1
  local jar
  while read -r jar; do
    [ -s "lib/$jar" ] || return 1
  done < <(tail -n +2 "$STAMP")
}
if complete; then
  exit 0
fi
rm -rf lib
mkdir -p lib
# The dependency plugin is pinned too, so a fresh machine resolves the same artifacts.
mvn -q -B -ntp \
  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
  -DincludeScope=runtime \
  -DoutputDirectory=lib
test -s lib/hibernate-core-7.4.16.Final.jar
test -s lib/postgresql-42.7.14.jar
{ echo "$want"; (cd lib && ls -1 -- *.jar); } > "$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
