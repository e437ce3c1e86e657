#!/usr/bin/env bash
# Installs ZooKeeper from Debian's packages when it is missing. The tests
# start their own servers from its jars; nothing is left running.
set -euo pipefail
if [ -f /usr/share/java/zookeeper.jar ]; then
  echo "zookeeper: already installed ($(ls /usr/share/java/zookeeper-3*.jar 2>/dev/null | head -1))"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "zookeeper: need root or sudo to run apt-get" >&2; exit 1; }
  sudo="sudo"
fi
echo "zookeeper: installing the Debian package (apt-get update first)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper >/dev/null
test -f /usr/share/java/zookeeper.jar
echo "zookeeper: installed"
