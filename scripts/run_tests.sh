#!/usr/bin/env bash
# Install everything (Python packages, Debian's chromium for the browser tests) and run the tests.
# The tests build the site once and open every page in headless chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if ! command -v chromium >/dev/null 2>&1; then
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  for attempt in 1 2 3; do  # a mirror hiccup should not fail the run
    $sudo_ apt-get update -qq && $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && break
    [ "$attempt" = 3 ] && { echo "error: could not install Debian's chromium (needed by the browser tests)" >&2; exit 2; }
    sleep 10
  done
fi
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's lab (see build_site.sh)
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
