#!/usr/bin/env bash
# Installs ZooKeeper from Debian's packages when it is missing. The tests
# start their own servers from its jars; nothing is left running.
set -euo pipefail
if [ -f /usr/share/java/zookeeper.jar ]; then
  echo "zookeeper: already installed ($(ls /usr/share/java/zookeeper-3*.jar 2>/dev/null | head -1))"
  exit 0
fi
"$(dirname "$0")/apt-install.sh" zookeeper zookeeper
test -f /usr/share/java/zookeeper.jar
echo "zookeeper: installed"
