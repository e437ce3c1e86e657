#!/usr/bin/env bash
# Installs Chromium from Debian's packages when it is missing. The
# dashboard's tests (package dashboard) drive it headless over the DevTools
# protocol (chromedp); as root they start it with --no-sandbox.
set -euo pipefail
if command -v chromium >/dev/null; then
  echo "chromium: already installed ($(chromium --version 2>/dev/null | head -1))"
  exit 0
fi
"$(dirname "$0")/apt-install.sh" chromium chromium
command -v chromium >/dev/null
echo "chromium: installed"
