#!/usr/bin/env bash
# Installs promtool (in Debian's prometheus package) when it is missing. The
# tests (package deploy) check deploy/ingestq-alerts.yml with it and run its
# unit tests; nothing else of the package is used. Where systemd runs, the
# package starts its own Prometheus server (prometheus.service, :9090): the
# tests neither use nor need it.
set -euo pipefail
if command -v promtool >/dev/null; then
  echo "promtool: already installed ($(promtool --version 2>&1 | head -1))"
  exit 0
fi
"$(dirname "$0")/apt-install.sh" promtool prometheus
command -v promtool >/dev/null
echo "promtool: installed"
