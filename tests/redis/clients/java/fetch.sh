#!/usr/bin/env bash
# Install step of the Jedis client suite: puts the pinned Jedis jar and its runtime dependencies
# (all pinned in pom.xml) into lib/, from Maven Central through Maven, unless they are already there.
set -euo pipefail
cd "$(dirname "$0")"
JARS=(
  jedis-8.0.2.jar
  commons-pool2-2.13.1.jar
  gson-2.14.0.jar
  error_prone_annotations-2.48.0.jar
  json-20260719.jar
  redis-authx-core-0.1.1-beta2.jar
  slf4j-api-1.7.36.jar
  slf4j-nop-1.7.36.jar
)
complete=1
for j in "${JARS[@]}"; do
  [ -s "lib/$j" ] || complete=0
done
if [ "$complete" = 1 ]; then
  exit 0
fi
rm -rf lib
mkdir -p lib
# The dependency plugin is pinned too, so a fresh machine resolves the same artifacts.
mvn -q -B -ntp -f pom.xml \
  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
  -DoutputDirectory=lib \
  -DincludeScope=runtime \
  -Dmdep.stripVersion=false
for j in "${JARS[@]}"; do
  if [ ! -s "lib/$j" ]; then
    echo "fetch.sh: lib/$j is missing after the download" >&2
    exit 1
  fi
done
