#!/usr/bin/env bash
# apt-install.sh NAME PACKAGE…: installs Debian packages (apt-get update
# first), as root or through sudo, without recommends; NAME starts its lines.
set -euo pipefail
name=$1; shift
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "$name: need root or sudo to run apt-get" >&2; exit 1; }
  sudo="sudo"
fi
echo "$name: installing the Debian package (apt-get update first)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
