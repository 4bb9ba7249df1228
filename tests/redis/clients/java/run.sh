#!/usr/bin/env bash
# Run step of the Jedis client suite: compiles JedisSuite.java with javac against the jars fetch.sh
# put in lib/, then runs it against the server at REDIS_HOST (default 127.0.0.1) : REDIS_PORT
# (default 6379). Arguments are case names to run (all when none); -v prints stack traces.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -s lib/jedis-8.0.2.jar ]; then
  echo "missing lib/jedis-8.0.2.jar: run 'bash fetch.sh' first" >&2
  exit 2
fi
CP="lib/*"
rm -rf build
mkdir -p build
javac -nowarn -encoding UTF-8 --release 17 -cp "$CP" -d build JedisSuite.java
exec java -Xss1m -Xmx256m -XX:TieredStopAtLevel=1 -cp "build:$CP" JedisSuite "$@"
