#!/usr/bin/env bash
# Install everything (Python packages, Debian's chromium for the browser tests) and run the tests.
# The tests build the site once and open every page in headless chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if ! command -v chromium >/dev/null 2>&1; then
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get update -qq && $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
