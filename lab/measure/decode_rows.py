"""When decode attention turns compute-bound: time against query rows per KV head, at a long context.

A decode step reads every cached K and V byte once. What it does with each byte depends on how many
query rows share that KV head: the query heads of a GQA group, times the query tokens each sequence
brings to the step (one in plain decode; several when speculative decoding verifies a draft, or a
model predicts several tokens). Each row costs 4·d FLOPs per cached token (QK^T and PV) against the
4·d bytes of that token's K and V row in bf16, so the intensity is about one FLOP per byte per row:
``rows`` FLOP/byte. Below the GPU's ridge the step is memory-bound whatever the kernel; above it the
matrix units set the pace.

Shapes: batch ``--batch`` sequences over ``--context`` cached tokens, 4 KV heads of d = 128, bf16.
Two ways to get R rows per KV head, both timed:

* ``ours-tuned`` and ``fa3`` with 4·R query heads and one query token (a GQA group of R);
* ``fa3-tokens``: FA3 with Qwen2.5-7B's 28 query heads (a group of 7) and t query tokens per
  sequence, causal within the new tokens (as a speculative verification step runs): R = 7·t.

Every candidate is checked against the fp32 reference, then timed by CUDA-graph replay over input sets
rotated through >= 256 MB (K/V from HBM, as in :func:`lab.measure.timing.graph_replay_ms`). Writes
``rows.csv`` (candidate, rows, batch, context, q_heads, query_tokens, ms, flops, bytes, intensity,
tflops, gb_per_s, max_abs_err, status, note) and ``provenance.json`` to ``--out``.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import module_cli, path_arg, positive_count, positive_number, sizes
from lab.folders import writes_folder
from lab.measure.attention.reference import attention_torch
from lab.measure.candidates import Shape, candidate_fn, timed_call
from lab.measure.flex_decomposition import random_inputs
from lab.measure.timing import graph_replay_ms, rotation

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "decode-rows"
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
TOKENS = (1, 2, 4, 8, 16, 32)          # fa3-tokens: query tokens per sequence, a group of 7
KV_HEADS, HEAD_DIM, QWEN_GROUP = 4, 128, 7
CANDIDATES = ("ours-tuned", "fa3", "fa3-tokens")
COLUMNS = ("candidate", "rows", "batch", "context", "q_heads", "query_tokens", "ms", "flops", "bytes", "intensity",
           "tflops", "gb_per_s", "max_abs_err", "status", "note")
MAX_ABS_ERR = 2e-2


def shapes(candidate: str, rows, tokens) -> list[tuple[int, int]]:
    """(q_heads, query tokens) per point of one candidate."""
    if candidate == "fa3-tokens":
        return [(KV_HEADS * QWEN_GROUP, t) for t in tokens]
    return [(KV_HEADS * r, 1) for r in rows]


def counts(batch: int, q_heads: int, query_tokens: int, context: int) -> tuple[float, float]:
    """(FLOPs, bytes) of one step: 4·d FLOPs per (row, cached token); K, V read once, Q and O once, bf16."""
    flops = 4.0 * batch * q_heads * query_tokens * context * HEAD_DIM
    moved = 2 * (2 * batch * KV_HEADS * context + 2 * batch * q_heads * query_tokens) * HEAD_DIM
    return flops, moved


def _call(candidate: str, query_tokens: int):
    from lab.measure.attention import split_kv_tuned  # lazy: the kernels load triton and torch

    if candidate == "ours-tuned":
        return lambda q, k, v, causal: split_kv_tuned.tuned_decode(q, k, v)
    return candidate_fn("fa3", "prefill" if query_tokens > 1 else "decode")


def measure_point(candidate: str, batch: int, q_heads: int, query_tokens: int, context: int, rep_ms: int) -> dict:
    import torch

    flops, moved = counts(batch, q_heads, query_tokens, context)
    row = {"candidate": candidate, "rows": q_heads // KV_HEADS * query_tokens, "batch": batch, "context": context,
           "q_heads": q_heads, "query_tokens": query_tokens, "flops": flops, "bytes": moved,
           "intensity": flops / moved, "status": "ok", "note": ""}
    causal = query_tokens > 1
    try:
        fn = _call(candidate, query_tokens)
        qkv = random_inputs(batch, q_heads, KV_HEADS, query_tokens, context, HEAD_DIM, seed=q_heads + query_tokens)
        out = fn(*qkv, causal)
        # the fp32 reference expands K/V to every query head: for a large group check the first sequence
        checked = slice(0, 1) if q_heads * context * HEAD_DIM * 4 * batch > 16 << 30 else slice(None)
        reference = attention_torch(*(t[checked] for t in qkv), causal)
        row["max_abs_err"] = (out[checked].float() - reference.float()).abs().max().item()
        del reference
        if not row["max_abs_err"] <= MAX_ABS_ERR:
            return {**row, "status": "wrong", "note": f"max abs error {row['max_abs_err']:.3g}"}
        if query_tokens > 1:  # FA3's varlen call with several query tokens faulted under graph replay (2026-12-01)
            from triton.testing import do_bench

            row["ms"] = do_bench(timed_call(fn, *qkv, causal), warmup=10, rep=rep_ms, return_mode="median")
            row["note"] = "eager (do_bench), L2 flushed before each call"
        else:
            sets = rotation(Shape("decode", batch, q_heads, KV_HEADS, context), qkv)
            row["ms"] = graph_replay_ms(fn, sets, rep_ms, causal)
    except Exception as exc:  # a shape a kernel does not take is a row that says why
        torch.cuda.synchronize()
        return {**row, "status": "error", "note": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"}
    finally:
        torch.cuda.empty_cache()
    row["tflops"] = flops / (row["ms"] * 1e-3) / 1e12
    row["gb_per_s"] = moved / (row["ms"] * 1e-3) / 1e9
    return row


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--candidates", default=",".join(CANDIDATES), help=f"subset of {','.join(CANDIDATES)}")
    parser.add_argument("--rows", default=",".join(map(str, ROWS)), help="query rows per KV head (ours-tuned, fa3)")
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)),
                        help="query tokens per sequence for fa3-tokens (28 query heads over 4: rows = 7 x tokens)")
    parser.add_argument("--batch", type=positive_count, default=8, help="sequences (default 8: 537 MB of K/V at 32k, far above L2)")
    parser.add_argument("--context", default="32k", help="cached tokens per sequence")
    parser.add_argument("--rep-ms", type=positive_count, default=60, help="milliseconds of graph replays per point")
    parser.add_argument("--deadline-s", type=positive_number, default=300, help="stop starting points after this many seconds")


@writes_folder("--out")
def main(args) -> int:
    import pandas as pd

    candidates = [c for c in args.candidates.split(",") if c]
    unknown = [c for c in candidates if c not in CANDIDATES]
    if unknown or not candidates:
        raise LabError(f"--candidates: unknown candidate {(unknown or [''])[0]!r}; choose from {', '.join(CANDIDATES)}")
    sizes(args.rows, option="--rows"), sizes(args.tokens, option="--tokens")   # refused before any GPU work
    contexts = sizes(args.context, option="--context")
    if len(contexts) != 1:
        raise LabError(f"--context takes one length, got {args.context!r}")
    context = contexts[0]
    if args.batch < 1 or args.rep_ms < 1 or not args.deadline_s > 0:
        raise LabError("--batch, --rep-ms and --deadline-s must be positive")
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here: `python -m lab decode-rows` times kernels on a GPU; the cached H200 run "
                       "is data/h200/decode-rows/")
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    flags = {"experiment": "decode-rows", "candidates": candidates, "rows": list(sizes(args.rows)),
             "tokens": list(sizes(args.tokens)), "batch": args.batch, "context": context, "kv_heads": KV_HEADS,
             "head_dim": HEAD_DIM, "timer": "median of CUDA-graph replays (triton do_bench_cudagraph), inputs rotated "
             "over >= 256 MB", "rep_ms": args.rep_ms, "reference": "fp32 attention_torch", "max_abs_err": MAX_ABS_ERR}
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=False))
    started, rows, skipped = time.time(), [], 0
    points = [(c, h, t) for c in candidates for h, t in shapes(c, sizes(args.rows), sizes(args.tokens))]
    for i, (candidate, q_heads, tokens) in enumerate(points):
        if time.time() - started > args.deadline_s:
            skipped = len(points) - i
            break
        row = measure_point(candidate, args.batch, q_heads, tokens, context, args.rep_ms)
        rows.append(row)
        print(f"[decode-rows +{time.time() - started:.0f}s] {candidate} rows={row['rows']}: "
              f"{row.get('ms', math.nan):.4g} ms {row.get('tflops', math.nan):.4g} TFLOP/s {row['status']} {row['note']}",
              file=sys.stderr, flush=True)
        store.write_csv(out_dir, "rows.csv", pd.DataFrame(rows).reindex(columns=COLUMNS))
    flags["skipped_points"] = skipped
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=not skipped,
                                                       seconds=round(time.time() - started, 1)))
    print(pd.DataFrame(rows).reindex(columns=COLUMNS).drop(columns=["note"]).round(4).to_string(index=False))
    return 0 if any(r["status"] == "ok" for r in rows) else 1


def cli(argv=None) -> int:
    return module_cli(sys.modules[__name__], "python -m lab decode-rows", argv)


if __name__ == "__main__":
    sys.exit(cli())
