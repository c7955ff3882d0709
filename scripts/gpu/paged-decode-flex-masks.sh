#!/usr/bin/env bash
# Study: paged split-KV decode against contiguous and a copy; FlexAttention masks; their GPU tests first.
# PagedAttention decode and FlexAttention masks on the H200 (issue 15, items 1 and 3), in one call:
#   1. the gpu-marked tests: the paged kernel in bf16 at real sizes (ragged lengths, shuffled pages,
#      16- and 128-token pages) against the reference and the contiguous kernel; compiled Flex masks
#   2. python -m lab paged-bench: contiguous vs paged (16, 128) split-KV decode and a copy of the same
#      bytes, batch 16 and 1 at 32k and 128k tokens (28/4 heads, d=128, bf16), interleaved rounds
#   3. python -m lab flex-masks: causal, sliding-window and document masks through
#      compiled FlexAttention and through SDPA (flash for plain causal; dense mask: efficient, cuDNN)
#
# Run from the repository root on the GPU box (torch, triton, pandas, pytest importable):
#     OUT=/some/folder scripts/gpu_run.sh paged-decode-flex-masks
# Optional: DEADLINE_S (default 200: no step starts or runs past it; each benchmark stops starting new
# shapes before its share runs out and keeps what it measured), PYTHON (default python3).
# The most important shapes go first (batch 16 x 32k pages, then masks at 16k); 400 s covers everything.
#
# What comes back (2 files):
#   $OUT/paged.tar.gz   paged-decode/{paged.csv,measurements.jsonl,provenance.json}
#                       flex-masks/{masks.csv,provenance.json}
#   $OUT/paged.txt      the console: tests, progress, then the two tables
# Commit: tar -xzf paged.tar.gz -C data/h200/   -> data/h200/paged-decode/, data/h200/flex-masks/
set -uo pipefail
OUT=${OUT:-/tmp/h200-paged-out}
WORK=${WORK:-/tmp/h200-paged}
PYTHON=${PYTHON:-python3}
DEADLINE_S=${DEADLINE_S:-200}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT" "$WORK"
rm -rf "$WORK/paged-decode" "$WORK/flex-masks"
log="$OUT/paged.txt"
: > "$log"
say() { echo "[paged $(date -u +%T) +${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((DEADLINE_S - SECONDS)); }
say "$(nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null)"
say "$("$PYTHON" -m lab env --get versions 2>&1)"

# 1. tests first: a kernel that is wrong is not worth timing (at most 40% of the time)
cap=$(( $(left) * 2 / 5 ))
say "START gpu tests (at most ${cap}s)"
timeout -k 10 "$cap" "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/test_paged.py tests/test_flex_masks.py 2>&1 \
  | tail -n 30 | tee -a "$log"
status=${PIPESTATUS[0]}
say "END gpu tests: status $status$([ "$status" = 124 ] && echo ' (cut at its cap)')"

# 2. paged decode: 60% of what is left; it starts no new shape after 60% of its cap
cap=$(( $(left) * 3 / 5 ))
if [ "$cap" -lt 30 ]; then say "SKIP paged-bench: ${cap}s left"; else
  say "START paged-bench (at most ${cap}s)"
  timeout -k 10 "$cap" "$PYTHON" -m lab paged-bench --out "$WORK/paged-decode" --deadline-s $((cap * 3 / 5)) 2>&1 \
    | tee -a "$log"
  status=${PIPESTATUS[0]}
  say "END paged-bench: status $status"
fi

# 3. Flex masks: the rest
cap=$(( $(left) - 5 ))
if [ "$cap" -lt 30 ]; then say "SKIP flex masks: ${cap}s left"; else
  say "START flex masks (at most ${cap}s)"
  timeout -k 10 "$cap" "$PYTHON" -m lab flex-masks --out "$WORK/flex-masks" \
    --deadline-s $((cap * 3 / 5)) 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
  say "END flex masks: status $status"
fi

( cd "$WORK" && tar -czf "$OUT/paged.tar.gz" --exclude='*.tmp' $(ls -d paged-decode flex-masks 2>/dev/null) )
ls -l "$OUT" | tee -a "$log"
say "done in ${SECONDS}s"
# the tables last, whole
"$PYTHON" -m lab tables --root "$WORK" --drop ms_rounds paged-decode/paged.csv flex-masks/masks.csv 2>&1 | tee -a "$log"
