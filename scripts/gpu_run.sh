#!/usr/bin/env bash
# Run one GPU study on the GPU box, from anywhere: scripts/gpu_run.sh STUDY [PART ...].
#
#   scripts/gpu_run.sh --help            the studies, one line each
#   scripts/gpu_run.sh STUDY --help      what STUDY measures, its parts, what comes back and where it is committed
#   OUT=/some/folder scripts/gpu_run.sh kernel-parts bandwidth race
#
# Each study is scripts/gpu/STUDY.sh, named by what it measures; it runs `python -m lab` commands (no Python of
# its own), each under a time cap inside one device call, and packs what they wrote under $OUT. The provenance
# of every committed data/ folder names the command that made it (`python -m lab datasets --commands`).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
studies() { for f in "$here"/gpu/*.sh; do is_study "$f" && basename "$f" .sh; done; }
is_study() { [ -f "$1" ] && [ "$(head -c 2 "$1")" = "#!" ]; }   # env.sh (sourced by the vLLM studies) is none
header() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"; }
case "${1:-}" in
  ""|-h|--help)
    header "$0"
    echo
    echo "studies:"
    for s in $(studies); do printf '  %-28s %s\n' "$s" "$(header "$here/gpu/$s.sh" | head -n 1)"; done
    [ -n "${1:-}" ]; exit $? ;;   # no study named: the list, and status 1
esac
study=$1; shift
if [[ "$study" == */* ]] || ! is_study "$here/gpu/$study.sh"; then
  echo "error: no study '$study'; choose one of: $(studies | paste -sd ' ')" >&2
  exit 2
fi
case "${1:-}" in -h|--help) header "$here/gpu/$study.sh"; exit 0 ;; esac
cd "$here/.."            # the studies run from the repository root
exec bash "$here/gpu/$study.sh" "$@"
