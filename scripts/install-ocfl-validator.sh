#!/usr/bin/env bash
# Installs the OCFL validator the tests run (scripts/ocfl-validate: node and
# the npm package @ocfl/ocfl-fs at the version package-lock.json pins).
# Idempotent: does nothing when the pinned packages are there.
set -euo pipefail
cd "$(dirname "$0")/ocfl-validate"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "ocfl-validate: need node and npm (apt-get install -y nodejs npm), as root or with sudo" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "ocfl-validate: installing node and npm from Debian's packages"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
fi
# npm ci writes node_modules/.package-lock.json; it matches the lock file
# when the pinned versions are installed.
if [ -f node_modules/.package-lock.json ] && node -e '
  const want = require("./package-lock.json").packages, got = require("./node_modules/.package-lock.json").packages;
  for (const k of Object.keys(want)) if (k && (!got[k] || got[k].version !== want[k].version)) process.exit(1);'; then
  echo "ocfl-validate: already installed (@ocfl/ocfl-fs $(node -p 'require("./node_modules/@ocfl/ocfl-fs/package.json").version'))"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
echo "ocfl-validate: installed (@ocfl/ocfl-fs $(node -p 'require("./node_modules/@ocfl/ocfl-fs/package.json").version'))"
