#!/usr/bin/env bash
# Study: the kernel measurements, in named parts: bandwidth ceiling, races, ncu counters, decode rows, tuning.
# On the H200: run named measurement parts in one device call, each under its own cap, then pack what
# they wrote into one tarball (a call returns at most 8 files).
#
#   OUT=/some/folder DEADLINE_S=540 scripts/gpu_run.sh kernel-parts PART [PART ...]
#
# Parts (the data folder each writes, under $WORK, then data/h200/ once committed):
#   bandwidth      read-stream ceiling, 256 MB .. 4 GB, and a copy (bandwidth/)
#   counters       ncu counters: prefill 16k (cuDNN, FA3, ours, Flex, FA4, Flex-FLASH), FLEX decode (kernel-counters/)
#   decode-rows    decode vs query rows per KV head at 32k, ours and FA3 (decode-rows/)
#   paged          paged decode vs contiguous vs FA3's paged decode, graph-timed (paged-decode/)
#   fa2-warm       FA2's Hopper kernels JIT-compiled once from PTX (the driver caches them) before the race
#   race           prefill race 4k..128k: FA2/FA3/FA4, cuDNN, SDPA flash, Flex (Triton and FLASH), ours (kernels-race/)
#   race-decode    decode race, batch 1 and 16, 4k..128k (kernels-race-decode/)
#   sdpa-fa4       does torch's activate_flash_attention_impl("FA4") work with this flash-attn-4? (sdpa-fa4.txt)
#   tune           the tuned kernel's variants against FA3 (python -m lab tuning-race; tuning-race/)
#   ablation       the tuned kernel's steps one at a time, with FA3 in the same run (kernels-ablation/)
#   decode-rows2   the decode-rows points the first run could not take: 256 rows; FA3 with 8-32 query tokens
#   counters2      ncu counters of FLEX's decode variants at batch 16 and of decode at batch 16 (kernel-counters-batch16/)
#   persistent     the Gluon kernel's GPU tests, then its persistent launch raced against the default, its parts and FA3,
#                  4k..32k (kernels-persistent-race/), and ncu's counters of FA3 and both launches at 16k
#                  (kernel-counters-persistent/)
# Needs scripts/gpu_run.sh payload to have run (it writes /tmp/lab_env.sh), or PYTHON naming an interpreter with lab
# and vLLM (scripts/gpu_setup.sh --offline: PYTHON=.venv/bin/python). Output: $OUT/parts.tar.gz, $OUT/parts.txt.
set -uo pipefail
case "${1:-}" in -h|--help|"") awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/parts-out}; WORK=${WORK:-/tmp/parts}; DEADLINE_S=${DEADLINE_S:-540}; PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" "$WORK"
log="$OUT/parts.txt"; : > "$log"
[ -f /tmp/lab_env.sh ] && . /tmp/lab_env.sh || export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
say() { echo "[parts $(date -u +%T) +${SECONDS}s] $*" | tee -a "$log"; }
say "$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,memory.used --format=csv,noheader 2>&1)"
say "$("$PYTHON" -m lab env --get versions 2>&1 | tail -1)"
# run NAME CAP -- COMMAND...: at most CAP seconds and never past DEADLINE_S (8 s kept for packing)
run() {
  local name=$1 cap=$2; shift 3
  local left=$((DEADLINE_S - 8 - SECONDS)); [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 15 ]; then say "SKIP $name: ${cap}s left"; return; fi
  say "START $name (at most ${cap}s)"
  timeout -k 10 "$cap" "$@" 2>&1 | tee -a "$log"
  say "END $name: status ${PIPESTATUS[0]}"
}
RACE=sdpa-flash,sdpa-cudnn,flex,flex-flash,fa2,fa3,fa4,ours-teaching,ours-tuned
for part in "$@"; do
  case "$part" in
    bandwidth)   run bandwidth 60 -- "$PYTHON" -m lab bandwidth --out "$WORK/bandwidth" ;;
    counters)    run counters 300 -- "$PYTHON" -m lab kernel-counters --out "$WORK/kernel-counters" --deadline-s 290 ;;
    decode-rows) run decode-rows 150 -- "$PYTHON" -m lab decode-rows --out "$WORK/decode-rows" --deadline-s 120 ;;
    decode-rows2) run decode-rows2 80 -- "$PYTHON" -m lab decode-rows --rows 256 --tokens 8,16,32 --out "$WORK/decode-rows-extra" \
                   --deadline-s 60 ;;
    paged)       run paged 150 -- "$PYTHON" -m lab paged-bench --fa3 --out "$WORK/paged-decode" --deadline-s 100 ;;
    fa2-warm)    run fa2-warm 240 -- "$PYTHON" -m lab probe fa2-warm ;;
    race)        run race 330 -- "$PYTHON" -m lab bench --skip-decode --skip-ablation --lengths 4k,16k,32k,128k \
                   --candidates "$RACE" --rep-ms 150 --out "$WORK/kernels-race" ;;
    race-decode) run race-decode 200 -- "$PYTHON" -m lab bench --skip-prefill --contexts 4k,32k,128k --batches 1,16 \
                   --candidates sdpa-flash,sdpa-cudnn,flex,fa2,fa3,ours-teaching,ours-tuned --out "$WORK/kernels-race-decode" ;;
    sdpa-fa4)    run sdpa-fa4 60 -- "$PYTHON" -m lab probe sdpa-fa4 ;;
    tune)        run tune 300 -- "$PYTHON" -m lab tuning-race --out "$WORK/tuning-race" --deadline-s 270 ;;
    ablation)    run ablation 130 -- "$PYTHON" -m lab bench --skip-decode --lengths 16k,32k --candidates fa3,ours-tuned \
                   --out "$WORK/kernels-ablation" ;;
    counters2)   run counters2 100 -- "$PYTHON" -m lab kernel-counters --out "$WORK/kernel-counters-batch16" --deadline-s 95 \
                   --jobs flexdecode:flex-pad8:16:32768,flexdecode:flex-paged:16:32768,decode:sdpa-cudnn:1:32768,decode:ours-tuned:16:32768,decode:fa3:16:32768 ;;
    persistent)  run persistent-tests 240 -- "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_hopper.py \
                   tests/test_hopper_paged.py tests/test_hopper_persistent.py
                 run persistent 240 -- "$PYTHON" -m lab tuning-race --out "$WORK/kernels-persistent-race" \
                   --only "gluon 128x128 s2" --lengths 4096,8192,16384,32768 --rounds 5 --rep-ms 100 --deadline-s 220
                 run persistent-counters 120 -- "$PYTHON" -m lab kernel-counters --out "$WORK/kernel-counters-persistent" \
                   --jobs prefill:fa3:1:16384,prefill:ours-hopper:1:16384,prefill:ours-persistent:1:16384 --deadline-s 100 ;;
    *)           say "unknown part $part (see --help)" ;;
  esac
done
folders=$(cd "$WORK" && ls -d */ 2>/dev/null | tr -d /)
[ -n "$folders" ] && (cd "$WORK" && tar -czf "$OUT/parts.tar.gz" --exclude='*.tmp' $folders) && say "packed: $folders"
say "done in ${SECONDS}s"
