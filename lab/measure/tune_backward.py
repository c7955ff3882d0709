"""Time each backward kernel of lab.measure.attention.backward alone, launch by launch, on a GPU.

For choosing the autotuning spaces (backward.DKDV_CONFIGS, backward.DQ_CONFIGS) on the H200: at each length,
causal, 28 query over 4 KV heads, d=128, bf16, batch 1, the pre-pass once, then dkdv_kernel and dq_kernel
with every launch given, each checked first (its gradients against fp32 autograd of the reference, within
backward.GRAD_TOLERANCE) and then timed (triton.testing.do_bench median, L2 flushed) in interleaved rounds.
The forward's output and log-sum-exp come from torch (backward.reference_forward_with_lse), so the kernels
can be tuned before any forward returns its log-sum-exp. Prints per length: ms, the kernel's real TFLOP/s
(dkdv_kernel does four n x n x d products per pair of tiles, dq_kernel three), and the launch's registers
and spills per thread. Writes nothing; the race of record is `python -m lab backward-race`.

    python -m lab tune-backward --lengths 16384
    python -m lab tune-backward --dkdv 64x128w8s2,32x128w8s2 --dq 128x64w8s2 --rounds 5

(Until 2026-12 this was ``scripts/tune_backward.py``.)
"""

from __future__ import annotations

import re
import statistics

from lab import LabError, env
from lab.cli import positive_count, sizes
from lab.measure.attention.reference import attention_gradients_torch
from lab.measure.timing import time_in_rounds

#: tried by default: the autotuning spaces and the tiles next to them (64 x 128 is FlashAttention 3's for dK/dV)
DKDV = "32x128w8s2,16x128w8s3,32x64w8s2,16x64w4s3,64x128w8s2,64x64w8s2,32x128w8s3,64x128w8s3"
DQ = "128x64w8s2,128x64w8s3,128x32w8s3,64x64w4s2,64x128w8s2,128x128w8s2,128x32w4s3"


def parse_launches(text: str) -> list[dict]:
    """'32x128w8s2,...' -> [{"BLOCK_M": 32, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2}, ...]"""
    launches = []
    for part in filter(None, text.split(",")):
        found = re.fullmatch(r"(\d+)x(\d+)w(\d+)s(\d+)", part.strip())
        if not found:
            raise LabError(f"launch {part!r} is not BLOCK_MxBLOCK_NwWARPSsSTAGES, e.g. 32x128w8s2")
        bm, bn, w, s = map(int, found.groups())
        launches.append({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s})
    if not launches:
        raise LabError("no launch given")
    return launches


def name(launch: dict) -> str:
    return f"{launch['BLOCK_M']}x{launch['BLOCK_N']}w{launch['num_warps']}s{launch['num_stages']}"


def sweep(n: int, dkdv: list[dict], dq: list[dict], rounds: int, rep_ms: int, timer=None, device: str = "cuda",
          head_dim: int = 128, q_heads: int = 28, kv_heads: int = 4, dtype=None) -> list[dict]:
    """One row per (kernel, launch) at length ``n``: status, ms (median round), real TFLOP/s. ``timer``,
    ``device``, the head shape and ``dtype`` exist for the CPU test (Triton's interpreter)."""
    import torch

    from lab.measure.attention import backward  # lazy: the kernels load triton and torch

    if timer is None:
        from triton.testing import do_bench as timer
    gen = torch.Generator(device=device).manual_seed(n)
    dtype = dtype or torch.bfloat16
    q, k, v, do = (torch.randn(1, h, n, head_dim, generator=gen, device=device).to(dtype)
                   for h in (q_heads, kv_heads, kv_heads, q_heads))
    o, lse = backward.reference_forward_with_lse(q, k, v, True)
    reference = attention_gradients_torch(q, k, v, do, True)
    tolerance = backward.GRAD_TOLERANCE[dtype]
    group, scale = q_heads // kv_heads, head_dim ** -0.5
    delta = torch.empty(1, q_heads, n, dtype=torch.float32, device=device)
    block = 16 if device == "cpu" else backward.DELTA_BLOCK
    backward.delta_kernel[(-(-n // block), q_heads)](o, do, delta, n, HEAD_DIM=head_dim, BLOCK_M=block)
    args = (q, k, v, do, lse.float().contiguous(), delta)
    sizes = (scale, scale * backward.LOG2E.value, n, n, q_heads, group)
    flags = {"HEAD_DIM": head_dim, "CAUSAL": True, "PRECISION": "tf32"}
    product = backward.attention_flops(1, q_heads, n, n, head_dim, True) / 2   # one n x n x d product, causal halved
    rows, ready = [], []
    for kernel, launches, products in (("dkdv", dkdv, 4), ("dq", dq, 3)):
        for launch in launches:
            row = {"n": n, "kernel": kernel, "launch": name(launch), "status": "ok", "ms": float("nan"), "note": ""}
            rows.append(row)
            outputs = (torch.empty_like(k), torch.empty_like(v)) if kernel == "dkdv" else (torch.empty_like(q),)
            if kernel == "dkdv":
                call = (lambda launch=launch, outputs=outputs: backward.dkdv_kernel[(kv_heads, -(-n // launch["BLOCK_N"]))](
                    *args, *outputs, *sizes, **flags, **launch))
                expected = reference[1:]
            else:
                call = (lambda launch=launch, outputs=outputs: backward.dq_kernel[(q_heads, -(-n // launch["BLOCK_M"]))](
                    *args, *outputs, *sizes, **flags, **launch))
                expected = reference[:1]
            try:
                compiled = call()     # (on a GPU the compiled kernel: its registers and spills)
                row.update(registers=getattr(compiled, "n_regs", None), spills=getattr(compiled, "n_spills", None))
                worst = backward.gradient_errors(outputs, expected)[1]
            except Exception as exc:  # a launch that does not compile here is a row that says so
                row.update(status="error", note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}")
                continue
            row["worst_share"] = worst
            if not worst <= tolerance:
                row.update(status="wrong", note=f"largest error {worst:.3g} of the largest gradient")
                continue
            ready.append((row, call, products))
    timed = time_in_rounds(ready, lambda item, _: timer(item[1], warmup=10, rep=rep_ms, return_mode="median"), rounds)
    for (row, _, products), times in zip(ready, timed, strict=True):
        row["ms"] = statistics.median(times)
        row["tflops_real"] = products * product / (row["ms"] * 1e-3) / 1e12
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("--lengths", default="16384", help="comma-separated lengths (16k = 16384)")
    parser.add_argument("--dkdv", default=DKDV, help="dkdv_kernel launches, BLOCK_MxBLOCK_NwWARPSsSTAGES")
    parser.add_argument("--dq", default=DQ, help="dq_kernel launches")
    parser.add_argument("--rounds", type=positive_count, default=3, help="interleaved timing rounds per length")
    parser.add_argument("--rep-ms", type=positive_count, default=100, help="milliseconds of repeats per launch per round")


def main(args) -> int:
    dkdv, dq = parse_launches(args.dkdv), parse_launches(args.dq)
    lengths = sizes(args.lengths, example="16384", option="--lengths")
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here (or TRITON_INTERPRET=1): `python -m lab tune-backward` times kernels "
                       "on a GPU; run it on a GPU machine")
    for n in lengths:
        rows = sweep(n, dkdv, dq, args.rounds, args.rep_ms)
        print(f"\nn={n}: causal GQA 28/4, d=128, bf16 (kernels alone; real TFLOP/s)")
        for row in sorted(rows, key=lambda r: (r["kernel"], r["ms"] != r["ms"], r["ms"])):
            print(f"{row['kernel']:5s} {row['launch']:12s} {row['ms']:8.3f} ms {row.get('tflops_real', float('nan')):7.1f} "
                  f"TFLOP/s  regs {row.get('registers')} spills {row.get('spills')}  {row['status']} {row['note']}", flush=True)
    return 0
