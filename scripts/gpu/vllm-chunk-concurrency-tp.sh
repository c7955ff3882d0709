#!/usr/bin/env bash
# Study: vLLM prefill chunk size, decode under concurrency, tensor parallelism over 2 GPUs.
# vLLM on the H200, round 2 (issues 14, 15, 16): prefill chunk size, decode under concurrency, tensor parallelism.
#
# Run from the repository root on the GPU box, with vLLM importable (the offline bundle in $VLLM_SITE,
# default /tmp/site, is put on PYTHONPATH when it exists). One part per 10-minute call:
#     OUT=/some/folder scripts/gpu_run.sh vllm-chunk-concurrency-tp chunk         # one H200
#     OUT=/some/folder scripts/gpu_run.sh vllm-chunk-concurrency-tp concurrency   # one H200
#     OUT=/some/folder scripts/gpu_run.sh vllm-chunk-concurrency-tp tp            # two H200s of one host (nvidia-h200-x2)
#   chunk        FA3 with --max-num-batched-tokens 2048, prompt lengths 256..32768 (the same arm as
#                vllm-sweeps' `extra` part): ~110 s start-up + ~2 min of requests.
#   concurrency  `python -m lab vllm-concurrency`: FA3 at 2048 and 32768 tokens x 1, 4, 16, 64 requests
#                (at most 300 s: ~110 s start-up, the 64 x 32k point ~100 s: vLLM admits only what its KV
#                cache holds), then FLEX_ATTENTION, whose 32k prefill is ~7x slower, at 32768 only 1 and 4
#                requests (the rest of the call, ~250 s). concurrency-fa3 / concurrency-flex run one arm alone
#                (a full call each) if the combined call cut one short.
#   tp           FA3 with --tensor-parallel-size 2, prompt lengths 256..32768: checks that torch sees exactly
#                2 GPUs first (and prints how they are linked), ~150 s start-up + ~2 min of requests.
# Every arm: random weights in the Qwen2.5-7B shape (data/models/qwen2.5-7b-128k, --load-format dummy),
# prefix caching off, --max-num-batched-tokens 8192 unless said, --gpu-memory-utilization 0.85,
# VLLM_USE_FLASHINFER_SAMPLER=0. NVLink multicast stays off for every process (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1, exported here and forced again by
# lab.measure.vllm.server for the server), and for `tp` vLLM's symmetric-memory all-reduce is off too
# (VLLM_ALLREDUCE_USE_SYMM_MEM=0: its custom all-reduce or NCCL carry the all-reduces).
# DEADLINE_S (default 560) is the time after which no arm may still run, so the results are always
# packed before a 10-minute limit. A rerun resumes into a kept WORK folder (points/lengths done are skipped).
#
# What comes back (2 files per call):
#   $OUT/<part>.tar.gz   <study>/<arm>/{measurements.jsonl, sweep.csv or concurrency.csv, server.log, provenance.json}
#   $OUT/<part>.txt      the console of every arm, then its tables
# Commit:
#   chunk:        tar -xzf chunk.tar.gz -C data/h200/    -> data/h200/vllm0.26-qwen2.5-7b-chunk2048/flash_attn-fa3/
#   concurrency*: tar -xzf concurrency.tar.gz -C data/h200/
#                 -> data/h200/vllm0.26-qwen2.5-7b-concurrency/{flash_attn-fa3,flex_attention}/
#   tp:           mkdir -p data/h200x2 && tar -xzf tp.tar.gz -C data/h200x2/
#                 -> data/h200x2/vllm0.26-qwen2.5-7b-tp2/flash_attn-fa3/
set -uo pipefail
# before anything else can start a process: keep NVLink multicast off everywhere (see KINDS.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PART=${1:-}
OUT=${OUT:-/tmp/h200-vllm-round2-out}
WORK=${WORK:-/tmp/h200-vllm-round2}
PYTHON=${PYTHON:-python3}
CHUNK=${CHUNK:-8192}
DEADLINE_S=${DEADLINE_S:-560}
MODEL=${MODEL:-data/models/qwen2.5-7b-128k}
SHORT=256,512,1024,2048,4096,8192,16384,24576,32768
TAG=h200_round2
case "$PART" in
  chunk|concurrency|concurrency-fa3|concurrency-flex|tp) ;;
  *) echo "usage: OUT=DIR scripts/gpu_run.sh vllm-chunk-concurrency-tp chunk|concurrency|concurrency-fa3|concurrency-flex|tp"; exit 2 ;;
esac
log="$OUT/$PART.txt"
source "$(dirname "$0")/env.sh"
say "part $PART, vLLM $version, $(nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null | paste -sd ';')"
say "multicast off: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"

# run FOLDER CAP_S MODULE [COMMAND] ARGS...: one arm, never past the deadline; its data is written even when cut short
run() {
  local folder=$1 cap=$2; shift 2
  local left=$((DEADLINE_S - SECONDS))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 150 ]; then say "SKIP $folder: only ${left}s left before the deadline"; return; fi
  say "START $folder (at most ${cap}s): $*"
  local t0=$SECONDS
  timeout -k 30 "$cap" "$PYTHON" -m "$@" --out "$WORK/$folder" --model "$MODEL" \
      --gpu-memory-utilization 0.85 2>&1 | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
  local status=${PIPESTATUS[0]}
  # a command killed with -9 cannot stop its server: its process group id is left on disk for this
  local pgid; pgid=$(cat "$WORK/$folder/server.pgid" 2>/dev/null) && kill -9 -- "-$pgid" 2>/dev/null \
    && say "killed the server group $pgid left by $folder"; rm -f "$WORK/$folder/server.pgid"
  say "END $folder: status $status after $((SECONDS - t0))s$([ "$status" = 124 ] && echo ' (cut at its time cap; rerun to resume)')"
  [ "$status" -ne 0 ] && tail -n 5 "$WORK/$folder/server.log" 2>/dev/null | tee -a "$log"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null | paste -sd ';' | sed 's/^/  GPU memory in use after the arm: /' | tee -a "$log"
}

SWEEP="lab vllm-sweep"
SWEEP_ARGS=(--reps 3 --max-tokens 64 --warmup-tokens 16 --lengths "$SHORT")
CONC="lab vllm-concurrency"
CONC_ARGS=(--contexts 2048,32768 --concurrency 1,4,16,64 --max-tokens 2048 --steps 64 --ready-timeout 300)
conc_fa3() { run "$study-concurrency/flash_attn-fa3" "$1" $CONC --backend FLASH_ATTN --fa-version 3 \
                 --max-num-batched-tokens "$CHUNK" "${CONC_ARGS[@]}" --stall 10 --point-timeout 150; }
conc_flex() { run "$study-concurrency/flex_attention" "$1" $CONC --backend FLEX_ATTENTION \
                  --max-num-batched-tokens "$CHUNK" "${CONC_ARGS[@]}" --limit 32768:4 \
                  --stall 30 --point-timeout 120; }  # its 32k prefill alone takes ~8 s: a longer stall

case "$PART" in
  chunk)
    dirs="$study-chunk2048"
    run "$study-chunk2048/flash_attn-fa3" 540 $SWEEP --backend FLASH_ATTN --fa-version 3 \
        --max-num-batched-tokens 2048 "${SWEEP_ARGS[@]}" ;;
  concurrency) dirs="$study-concurrency"; conc_fa3 300; conc_flex 540 ;;
  concurrency-fa3) dirs="$study-concurrency"; conc_fa3 540 ;;
  concurrency-flex) dirs="$study-concurrency"; conc_flex 540 ;;
  tp)
    dirs="$study-tp2"
    gpus=$("$PYTHON" -m lab env --get gpus 2>/dev/null)
    if [ "$gpus" != 2 ]; then say "STOP: torch sees ${gpus:-no} GPUs; the tp part needs exactly 2 (nvidia-h200-x2)"; exit 3; fi
    say "torch sees 2 GPUs; how they are linked:"
    nvidia-smi topo -m 2>&1 | head -n 6 | tee -a "$log"
    export VLLM_ALLREDUCE_USE_SYMM_MEM=0
    run "$study-tp2/flash_attn-fa3" 540 $SWEEP --backend FLASH_ATTN --fa-version 3 --tensor-parallel-size 2 \
        --max-num-batched-tokens "$CHUNK" --ready-timeout 420 "${SWEEP_ARGS[@]}" ;;
esac

( cd "$WORK" && tar -czf "$OUT/$PART.tar.gz" --exclude='*.tmp' --exclude='*.pgid' $(ls -d $dirs 2>/dev/null) )
for table in "$WORK"/$dirs/*/sweep.csv "$WORK"/$dirs/*/concurrency.csv; do
  [ -f "$table" ] && { echo "== ${table#$WORK/}"; cat "$table"; } | tee -a "$log"
done
say "packed $(du -h "$OUT/$PART.tar.gz" | cut -f1) into $OUT/$PART.tar.gz; total ${SECONDS}s"
