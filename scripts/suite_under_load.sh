#!/usr/bin/env bash
# Run the whole test suite (scripts/run_tests.sh: units, the book build, the browser tests) several times
# in a row while busy loops keep every core of this machine at 100%: the suite must not race the clock.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bash scripts/suite_under_load.sh [--runs N] [--log DIR] [-- PYTEST_ARGS...]

Runs `bash scripts/run_tests.sh` N times in a row (default 5) while one busy loop per core
(nproc of them) competes for the CPU. Stops at the first failing run and exits non-zero.
Each run's output goes to DIR/run-K.log (default: suite-under-load/ here); one line per run
(its exit status, its wall time and pytest's summary) goes to DIR/summary.txt and the screen.
The busy loops are stopped when the script ends, however it ends.
EOF
}

runs=5 log=suite-under-load
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0;;
    --runs) runs="${2:?--runs needs a number}"; shift 2;;
    --log) log="${2:?--log needs a folder}"; shift 2;;
    --) shift; break;;
    *) echo "error: unknown argument '$1' (see --help)" >&2; exit 2;;
  esac
done
case "$runs" in ''|*[!0-9]*|0) echo "error: --runs must be a positive whole number, not '$runs'" >&2; exit 2;; esac

cd "$(dirname "$0")/.."
mkdir -p "$log"
burners=()
stop_burners() { [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null || true; }
trap stop_burners EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$(nproc)"); do
  sh -c 'while :; do :; done' &   # one core's worth of pure CPU work, at the suite's own priority
  burners+=("$!")
done
echo "load: ${#burners[@]} busy loops on $(nproc) cores (pids ${burners[*]})" | tee "$log/summary.txt"

for k in $(seq "$runs"); do
  started=$(date +%s)
  set +e
  bash scripts/run_tests.sh "$@" >"$log/run-$k.log" 2>&1
  status=$?
  set -e
  line="run $k of $runs: exit $status in $(( $(date +%s) - started )) s; $(grep -E '(passed|failed|error)' "$log/run-$k.log" | tail -n 1)"
  echo "$line" | tee -a "$log/summary.txt"
  [ "$status" = 0 ] || { echo "error: run $k failed; its output is in $log/run-$k.log" >&2; exit 1; }
done
echo "all $runs runs passed under load" | tee -a "$log/summary.txt"
