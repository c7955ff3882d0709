"""Sweep launch settings of the tuned attention kernels on a GPU and print the best per shape.

Used on the H200 to choose the forward kernel's autotuning space (TUNED_CONFIGS in
lab/attention/triton_fwd.py) and the teaching kernel's launch; kept so the choice can be repeated
on another GPU (the decode kernel times its own small space on first use):

    python scripts/tune_kernels.py --out /tmp/tune

Prints the top settings per shape and writes every timing to OUT/tune.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rep-ms", type=int, default=40)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    from lab.attention import triton_fwd

    results = []

    def timed(label, shape, fn, expected, qkv):
        try:
            err = (fn(*qkv).float() - expected.float()).abs().max().item()
            ms = do_bench(lambda: fn(*qkv), warmup=5, rep=args.rep_ms, return_mode="median") if err <= 2e-2 else float("nan")
        except Exception as exc:  # a setting that does not fit (shared memory) is a result
            err, ms = float("nan"), float("nan")
            label = f"{label} ({type(exc).__name__})"
        results.append({"shape": shape, "label": label, "ms": ms, "err": err})
        print(f"{shape:18s} {label:60s} {ms:9.4f} ms  err {err:.2e}", flush=True)

    gen = torch.Generator(device="cuda").manual_seed(0)
    def rand(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.bfloat16)

    # settings outside TUNED_CONFIGS (the benchmark's autotuner already times those), with and without TMA
    forward_settings = [(128, 32, 4, 3), (128, 128, 8, 4), (128, 64, 4, 4), (64, 128, 4, 3), (128, 128, 4, 3),
                        (256, 64, 8, 3)]
    for n in (16384,):
        q, k, v = rand(1, 28, n, 128), rand(1, 4, n, 128), rand(1, 4, n, 128)
        shape = f"prefill {n // 1024}k"
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
            def sdpa(q, k, v, backend=backend):
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            timed(f"sdpa {backend}", shape, sdpa, expected, (q, k, v))
        for bm, bn, w, s in forward_settings:
            for tma in (False, True):
                config = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s}
                timed(f"tuned {bm}x{bn} w{w} s{s} tma={tma}", shape,
                      lambda q, k, v, config=config, tma=tma: triton_fwd.tuned_forward(q, k, v, True, config=config, tma=tma),
                      expected, (q, k, v))
        if n == 16384:
            for bm, bn, w, s in [(128, 64, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3), (128, 32, 4, 3), (128, 128, 8, 2)]:
                timed(f"teaching {bm}x{bn} w{w} s{s}", shape,
                      lambda q, k, v, bm=bm, bn=bn, w=w, s=s: _teaching(triton_fwd, q, k, v, bm, bn, w, s), expected, (q, k, v))

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tune.json").write_text(json.dumps(results, indent=0))
    print("\nbest per shape")
    for shape in dict.fromkeys(r["shape"] for r in results):
        rows = sorted((r for r in results if r["shape"] == shape and r["ms"] == r["ms"]), key=lambda r: r["ms"])
        for r in rows[:6]:
            print(f"{shape:18s} {r['label']:60s} {r['ms']:9.4f} ms")
        for r in rows:
            if r["label"].startswith("sdpa"):
                print(f"{shape:18s} {r['label']:60s} {r['ms']:9.4f} ms  (reference)")
    return 0


def _teaching(triton_fwd, q, k, v, bm, bn, w, s):
    """The teaching kernel at other launch settings (its wrapper fixes warps and stages)."""
    import math

    import triton

    o = torch_empty_like(q)
    grid = (triton.cdiv(q.shape[2], bm), q.shape[0] * q.shape[1])
    triton_fwd._teaching_kernel[grid](q, k, v, o, 1 / math.sqrt(q.shape[-1]), q.shape[2], k.shape[2], q.shape[1],
                                      q.shape[1] // k.shape[1], *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                                      *o.stride()[:3], HEAD_DIM=q.shape[-1], BLOCK_M=bm, BLOCK_N=bn, CAUSAL=True,
                                      PRECISION="tf32", num_warps=w, num_stages=s)
    return o


def torch_empty_like(t):
    import torch
    return torch.empty_like(t)


if __name__ == "__main__":
    sys.exit(main())
