#!/usr/bin/env bash
# Study: the book's kernels as vLLM's attention backend (OURS), against FA3 in the same lease.
#
# Run from the repository root on the GPU box, with vLLM importable (the offline bundle in $VLLM_SITE, default
# /tmp/site, or a .venv from scripts/gpu_setup.sh --offline with PYTHON=.venv/bin/python):
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm kernels     # GPU tests of the serving kernels, then
#                                                                 # python -m lab serving-race (ours vs FA3 per step)
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm mixed       # GPU tests of the server step and the backend, then
#                                                                 # serving-race --steps mixed (a busy server's step), and
#                                                                 # ncu's counters of that step (FA3, ours both ways)
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm agreement   # vllm-agreement, then the same with a planted bug
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm sweep       # vllm-sweep FLASH_ATTN/FA3 and OURS, 256..32768
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm census      # capture vllm --arm OURS: prefill and decode windows
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm counters    # ncu: the last 8k chunk of a 32k prompt, FA3 and ours
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm arms        # vllm-sweep FA2, TRITON_ATTN, FLEX_ATTENTION beside
#                                                                 # the sweep's two arms, same lengths (FA2 starts slowly)
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm long        # vllm-sweep FA3 and OURS at 65536 and 131072 tokens
#                                                                 # (a study of its own: <study>-ours-long)
#     OUT=/some/folder scripts/gpu_run.sh ours-in-vllm load        # vllm-load OURS, then FA3 with the same flags (1024-token
#                                                                 # prompts, 128 out, SPAN_S s of arrivals a point, default 10;
#                                                                 # LOAD_S s an arm, default 250; every kernel JIT event in
#                                                                 # the server's log, Triton's cache counted before each arm)
#                                                                 # (a study of its own: <study>-ours-load/random-1024-128)
# The sweep and census run OURS with the prefill setting the race found fastest (LAB_OURS_PREFILL_CONFIG, read
# from $WORK/serving-race/best_prefill.json when the kernels part ran in this lease). DEADLINE_S (default 560) is the
# time after which nothing new starts, so results are packed before a 10-minute call ends. OURS_STUDY (default
# <study>-ours) names the folder of the sweep, arms and census, so a lease with other lengths keeps its own. ARMS
# (default: all of the part's) picks arms by folder, e.g. ARMS="triton_attn flex_attention" for arms, ARMS=ours for
# load, so one part's arms can be spread over two device calls of the same lease. LOAD_STUDY (default
# <study>-ours-load) names the load part's folder, so a lease with other code keeps its own; LOAD_FRACTIONS (default
# vllm-load's) its Poisson rates as fractions of each arm's capacity, fewer of them for a short lease.
#
# What comes back (2 files per call):
#   $OUT/ours-<part>.tar.gz   serving-race/, agreement{,-planted-bug}/, <study>-ours/{flash_attn-fa3,ours,traces/ours}/
#                             (the data/h100 folders of 2026-12-06)
#   $OUT/ours-<part>.txt      the console
# Commit: tar -xzf ours-<part>.tar.gz -C data/<gpu>/ (the run of 2026-12-06 ran on an H100: data/h100/)
set -uo pipefail
PART=${1:-kernels}
OUT=${OUT:-/tmp/ours-out}
WORK=${WORK:-/tmp/ours-work}
PYTHON=${PYTHON:-python3}
DEADLINE_S=${DEADLINE_S:-560}
MODEL=${MODEL:-data/models/qwen2.5-7b-128k}
LENGTHS=${LENGTHS:-256,1024,4096,8192,16384,32768}
ARMS=${ARMS:-}
LOAD_S=${LOAD_S:-250}   # seconds of one load arm, its server's start included (500 when ARMS runs one arm a call)
TAG=ours
log="$OUT/ours-$PART.txt"
source "$(dirname "$0")/env.sh"
picked() { [ -z "$ARMS" ] || [[ " $ARMS " == *" $1 "* ]]; }   # is the arm in folder $1 one to run
ours_study=${OURS_STUDY:-$study-ours}
load_study=${LOAD_STUDY:-$study-ours-load}
say "part $PART, vLLM $version, $(nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null)"

# capped CAP_S COMMAND...: one step, never past the deadline
capped() {
  local cap=$1; shift
  local left=$((DEADLINE_S - SECONDS))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 60 ]; then say "SKIP (only ${left}s left): $*"; return; fi
  say "START (at most ${cap}s): $*"
  timeout -k 20 "$cap" "$@" 2>&1 | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
  say "END status ${PIPESTATUS[0]}: $1 $2 $3"
}
best="$WORK/serving-race/best_prefill.json"
export LAB_OURS_PREFILL_CONFIG=${LAB_OURS_PREFILL_CONFIG:-$(cat "$best" 2>/dev/null)}
say "prefill setting of OURS: ${LAB_OURS_PREFILL_CONFIG:-the default}"

case "$PART" in
  kernels)
    capped 260 "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_serving.py tests/test_paged_prefill.py tests/test_paged.py \
        tests/test_hopper_paged.py tests/test_vllm_backend.py tests/test_vllm_plugin.py
    capped 300 "$PYTHON" -m lab serving-race --out "$WORK/serving-race" --rounds 3 --rep-ms 100 ;;
  mixed)
    capped 200 "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_serving.py tests/test_vllm_backend.py
    capped 200 "$PYTHON" -m lab serving-race --steps mixed --out "$WORK/serving-race-mixed" --rounds 3 --rep-ms 100
    capped 240 "$PYTHON" -m lab kernel-counters --jobs mixed:fa3:128:1089,mixed:ours-chunks:128:1089,mixed:ours-decode:128:1089 \
        --deadline-s 200 --out "$WORK/mixed-counters" ;;
  agreement)
    capped 240 "$PYTHON" -m lab vllm-agreement --model data/models/qwen2.5-7b --out "$WORK/agreement"
    capped 240 "$PYTHON" -m lab vllm-agreement --model data/models/qwen2.5-7b --out "$WORK/agreement-planted-bug" \
        --planted-bug ;;
  sweep)
    for arm in "--backend FLASH_ATTN --fa-version 3" "--backend OURS"; do
      folder=$(echo "$arm" | awk '{print ($2 == "OURS") ? "ours" : "flash_attn-fa3"}')
      picked "$folder" || continue
      # shellcheck disable=SC2086
      capped 290 "$PYTHON" -m lab vllm-sweep --out "$WORK/$ours_study/$folder" --model "$MODEL" \
          --max-num-batched-tokens 8192 --gpu-memory-utilization 0.85 --reps 3 --max-tokens 64 --warmup-tokens 16 \
          --lengths "$LENGTHS" $arm
    done ;;
  census)
    capped 300 "$PYTHON" -m lab capture vllm --arm OURS --out "$WORK/$ours_study/traces" --windows prefill:8192,decode:8192 \
        --model "$MODEL" ;;   # the 128k config: capture's server asks for a 33,024-token context, past the 32k one's
  arms)
    # backend:folder:seconds to ready:seconds of the arm (FA2's server spends minutes capturing CUDA graphs)
    for arm in "FLASH_ATTN --fa-version 2:flash_attn-fa2:420:540" "TRITON_ATTN:triton_attn:300:400" \
               "FLEX_ATTENTION:flex_attention:300:400"; do
      IFS=: read -r backend folder ready cap <<< "$arm"
      picked "$folder" || continue
      # shellcheck disable=SC2086
      capped "$cap" "$PYTHON" -m lab vllm-sweep --out "$WORK/$ours_study/$folder" --model "$MODEL" \
          --max-num-batched-tokens 8192 --gpu-memory-utilization 0.85 --reps 3 --max-tokens 64 --warmup-tokens 16 \
          --lengths "$LENGTHS" --ready-timeout "$ready" --backend $backend
    done ;;
  long)
    for arm in "--backend FLASH_ATTN --fa-version 3" "--backend OURS"; do
      folder=$(echo "$arm" | awk '{print ($2 == "OURS") ? "ours" : "flash_attn-fa3"}')
      picked "$folder" || continue
      # shellcheck disable=SC2086
      capped 300 "$PYTHON" -m lab vllm-sweep --out "$WORK/$study-ours-long/$folder" --model "$MODEL" \
          --max-num-batched-tokens 8192 --gpu-memory-utilization 0.85 --reps 2 --max-tokens 64 --warmup-tokens 16 \
          --lengths 65536,131072 $arm
    done ;;
  load)
    "$PYTHON" -m lab vllm-tokenizer --model "$MODEL" 2>&1 | tee -a "$log"
    for arm in "OURS:ours" "FLASH_ATTN/FA3:flash_attn-fa3"; do
      IFS=: read -r label folder <<< "$arm"
      picked "$folder" || continue
      # what Triton's on-disk cache already holds: a kernel found there loads, one missing compiles
      cache=${TRITON_CACHE_DIR:-$HOME/.triton/cache}
      say "Triton cache $cache: $(find "$cache" -name '*.cubin' 2>/dev/null | wc -l) kernels, of them the book's:" \
          "$(find "$cache" -name '*.cubin' 2>/dev/null | xargs -r -n1 basename | grep -E 'paged|combine' | sort | uniq -c | tr '\n' ' ')"
      capped $((LOAD_S + 30)) "$PYTHON" -m lab vllm-load --arm "$label" --model "$MODEL" --input-len 1024 \
          --output-len 128 --span-s "${SPAN_S:-10}" ${LOAD_FRACTIONS:+--load-fractions "$LOAD_FRACTIONS"} \
          --deadline-s "$LOAD_S" --jit-log --out "$WORK/$load_study/random-1024-128/$folder"
    done ;;
  counters)
    capped 400 "$PYTHON" -m lab kernel-counters --jobs chunk:fa3:1:32768,chunk:ours:1:32768 --deadline-s 300 \
        --out "$WORK/chunk-counters" ;;
  *) say "unknown part '$PART': use kernels, mixed, agreement, sweep, arms, long, load, census or counters"; exit 2 ;;
esac

( cd "$WORK" && tar -czf "$OUT/ours-$PART.tar.gz" --exclude='*.tmp' --exclude='*.pgid' . )
say "packed $(du -h "$OUT/ours-$PART.tar.gz" | cut -f1) into $OUT/ours-$PART.tar.gz; total ${SECONDS}s"
