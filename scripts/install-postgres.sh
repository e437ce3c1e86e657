#!/usr/bin/env bash
# Installs PostgreSQL from Debian's packages when it is missing. The tests
# (internal/pgtest) run their own servers with initdb and postgres from
# /usr/lib/postgresql/<version>/bin; nothing is left running, and the
# cluster the package may create for itself is not used.
set -euo pipefail
installed() { ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; }
if installed; then
  echo "postgresql: already installed ($(ls /usr/lib/postgresql | sort -n | tail -1))"
  exit 0
fi
"$(dirname "$0")/apt-install.sh" postgresql postgresql
installed
echo "postgresql: installed"
