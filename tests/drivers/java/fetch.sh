#!/usr/bin/env bash
# Install step of the pgjdbc driver suite (tests/drivers/run.py): puts the pinned PostgreSQL JDBC
# driver jar into lib/, from Maven Central through Maven, unless it is already there.
set -euo pipefail
cd "$(dirname "$0")"
PGJDBC_VERSION=42.7.14
JAR="lib/postgresql-${PGJDBC_VERSION}.jar"
if [ -s "$JAR" ]; then
  exit 0
fi
mkdir -p lib
# The dependency plugin is pinned too, so a fresh machine resolves the same artifacts.
mvn -q -B -ntp \
  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
  -Dartifact="org.postgresql:postgresql:${PGJDBC_VERSION}:jar" \
  -DoutputDirectory=lib \
  -Dmdep.stripVersion=false
test -s "$JAR"
