#!/usr/bin/env bash
# Installs versitygw, the S3 server the tests start (a real S3 gateway over a
# folder), by building it from the Go module proxy into a fixed tools folder
# that internal/s3test looks in. Exits at once when it is already there.
# Cold: about 2 minutes on 2 cores. CI caches nothing, so CI pays that each run.
set -euo pipefail
version=v1.8.0
dir="${XDG_CACHE_HOME:-$HOME/.cache}/ingestq-tools/versitygw-$version"
if [ -x "$dir/versitygw" ]; then
  echo "versitygw: already installed ($dir/versitygw)"
  exit 0
fi
command -v go >/dev/null || { echo "versitygw: needs Go to build it" >&2; exit 1; }
echo "versitygw: building $version into $dir (about 2 minutes)"
mkdir -p "$dir"
GOBIN="$dir" go install "github.com/versity/versitygw/cmd/versitygw@$version"
test -x "$dir/versitygw"
echo "versitygw: installed"
