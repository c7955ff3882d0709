#!/usr/bin/env bash
# Study: two H200s under Poisson load, as one tensor-parallel server against two copies of the model.
# The busy-server study on two H200s of one host (issue 27): two GPUs as one tensor-parallel server
# against the same two GPUs as two copies of the model, under the same Poisson load.
#
# Run from the repository root on an nvidia-h200-x2 box, with vLLM importable (the offline bundle in
# $VLLM_SITE, default /tmp/site, is put on PYTHONPATH when it exists), one part per call:
#     OUT=/some/folder scripts/gpu_run.sh vllm-busy-server-2gpu tp2 [WORKLOAD]
#     OUT=/some/folder scripts/gpu_run.sh vllm-busy-server-2gpu replicas [WORKLOAD]
#   tp2       one FLASH_ATTN/FA3 server with --tensor-parallel-size 2 (~150 s start-up), vLLM's
#             symmetric-memory all-reduce off (VLLM_ALLREDUCE_USE_SYMM_MEM=0: its custom all-reduce or
#             NCCL carry the two all-reduces per layer)
#   replicas  two one-GPU FLASH_ATTN/FA3 servers, CUDA_VISIBLE_DEVICES=0 and 1, started at once (~80 s),
#             behind the spreader (lab.measure.vllm.spreader), least-loaded: each request goes to the copy
#             with fewer requests in flight (POLICY=round-robin for the other policy; its own folder)
#   WORKLOAD  fixed (default: 1024-token prompts, 128 generated tokens) or mix (the long-tailed mix of
#             300 prompts of scripts/gpu_run.sh vllm-busy-server)
# Both parts are scripts/gpu_run.sh vllm-busy-server's fa3 arm on two GPUs: random weights in the Qwen2.5-7B shape
# (data/models/qwen2.5-7b-128k, --load-format dummy), the synthetic tokenizer, prefix caching off,
# --max-num-batched-tokens 8192, --gpu-memory-utilization 0.85 per GPU; the serial agreement point
# (20 requests one at a time, bench and probe), the capacity point (200 prompts at once), then Poisson
# arrivals at 0.25, 0.5, 0.75, 0.9, 1.0 and 1.2 x that capacity, 30 s of arrivals each (60..1500 prompts).
# The KV capacity of each layout is in provenance.json (server.log.kv_cache_tokens: the TP server's
# tokens; for the replicas the sum, and each replica's own under server.replicas), and so is what went
# where (server.spreader.backends[].requests). NVLink multicast off for every process (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1, forced again by lab.measure.vllm.server).
# It refuses to run unless torch sees exactly 2 GPUs, or when vllm-load has no --replicas option.
# DEADLINE_S (default 530): no point starts or runs after it, so the results are packed inside a
# 9-minute call; a cut point is measured by the next call into the same WORK folder.
#
# What comes back (2 files per call):
#   $OUT/load2-<part>-<workload>.tar.gz  <study>-load/<layout>/<workload>/flash_attn-fa3/{rate-*.json,cmd,log},
#                                        points.jsonl, probe.jsonl, server*.log, provenance.json
#   $OUT/load2-<part>-<workload>.txt     the console
# Commit: mkdir -p data/h200x2 && tar -xzf load2-<part>-<workload>.tar.gz -C data/h200x2/
#   -> data/h200x2/vllm0.26-qwen2.5-7b-load/tp2/random-1024-128/flash_attn-fa3/
#   -> data/h200x2/vllm0.26-qwen2.5-7b-load/replicas2/random-1024-128/flash_attn-fa3/
#   (lab.results.load.load_study(root=DATA_DIR / "h200x2", study="vllm0.26-qwen2.5-7b-load/tp2") reads one)
set -uo pipefail
# before anything else can start a process: keep NVLink multicast off everywhere (see KINDS.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PART=${1:-}
WORKLOAD=${2:-fixed}
OUT=${OUT:-/tmp/h200x2-load-out}
WORK=${WORK:-/tmp/h200x2-load}
PYTHON=${PYTHON:-python3}
DEADLINE_S=${DEADLINE_S:-530}
MODEL=${MODEL:-data/models/qwen2.5-7b-128k}
POLICY=${POLICY:-least-loaded}
TAG=h200x2_load
case "$PART" in
  tp2) layout=tp2; flags=(--tensor-parallel-size 2 --ready-timeout 420); export VLLM_ALLREDUCE_USE_SYMM_MEM=0 ;;
  replicas)
    case "$POLICY" in
      least-loaded) layout=replicas2 ;;
      round-robin) layout=replicas2-round-robin ;;
      *) echo "POLICY=$POLICY: expected least-loaded or round-robin"; exit 2 ;;
    esac
    flags=(--replicas 2 --policy "$POLICY") ;;
  *) echo "usage: OUT=DIR scripts/gpu_run.sh vllm-busy-server-2gpu tp2|replicas [fixed|mix]"; exit 2 ;;
esac
case "$WORKLOAD" in
  fixed) wl=(--input-len 1024 --output-len 128); wname=random-1024-128 ;;
  mix) wl=(--input-len 1024 --output-len 128 --mix 300); wname=mix-1024-128 ;;
  *) echo "usage: OUT=DIR scripts/gpu_run.sh vllm-busy-server-2gpu tp2|replicas fixed|mix"; exit 2 ;;
esac
name="load2-$PART-$WORKLOAD"
log="$OUT/$name.txt"
source "$(dirname "$0")/env.sh"
gpus=$("$PYTHON" -m lab env --get gpus 2>/dev/null)
if [ "$gpus" != 2 ]; then say "STOP: torch sees ${gpus:-no} GPUs; tp2 and replicas need exactly 2 (nvidia-h200-x2)"; exit 3; fi
if ! "$PYTHON" -m lab vllm-load --help 2>/dev/null | grep -q -- '--replicas'; then
  say "STOP: python -m lab vllm-load has no --replicas option yet (the load-replicas patch is not applied)"; exit 2
fi
say "part $PART ($layout), workload $WORKLOAD, vLLM $version"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/  GPU /' | tee -a "$log"
say "how the GPUs are linked:"
nvidia-smi topo -m 2>&1 | head -n 6 | tee -a "$log"
say "multicast off: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS${VLLM_ALLREDUCE_USE_SYMM_MEM+ VLLM_ALLREDUCE_USE_SYMM_MEM=$VLLM_ALLREDUCE_USE_SYMM_MEM}"
slug=flash_attn-fa3   # the arm's folder (lab.measure.vllm.arms: FLASH_ATTN/FA3 in lower case, / as -)
folder="$study-load/$layout/$wname/$slug"
"$PYTHON" -m lab vllm-tokenizer --model "$MODEL" 2>&1 | tee -a "$log"
left=$((DEADLINE_S - SECONDS))
say "START $folder (deadline in ${left}s)"
timeout -k 30 "$((left + 40))" "$PYTHON" -m lab vllm-load --arm FLASH_ATTN/FA3 --model "$MODEL" "${wl[@]}" "${flags[@]}" \
    --agreement 20 --deadline-s "$((left - 10))" --out "$WORK/$folder" 2>&1 \
    | grep --line-buffered -v '^  waiting for vLLM' | tee -a "$log"
status=${PIPESTATUS[0]}
# a client killed with -9 cannot stop its servers: their process group ids are left on disk for this
for g in "$WORK/$folder"/server*.pgid; do
  [ -f "$g" ] || continue
  kill -9 -- "-$(cat "$g")" 2>/dev/null && say "killed the server group $(cat "$g") ($(basename "$g"))"
  rm -f "$g"
done
say "END $folder: status $status"
[ "$status" -ne 0 ] && for f in "$WORK/$folder"/server*.log; do [ -f "$f" ] && tail -n 5 "$f" | sed "s|^|  $(basename "$f"): |"; done | tee -a "$log"
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader 2>/dev/null | paste -sd ';' | sed 's/^/  GPU memory in use after the part: /' | tee -a "$log"
# the mix's prompts are rebuilt from the seed (provenance says how); the results and logs travel
( cd "$WORK" && tar -czf "$OUT/$name.tar.gz" --exclude='*.tmp' --exclude='*.pgid' --exclude='*.raw.json' \
    --exclude='mix.jsonl' "$folder" )
say "packed $(du -h "$OUT/$name.tar.gz" | cut -f1) into $OUT/$name.tar.gz; total ${SECONDS}s"
