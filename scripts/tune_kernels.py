"""Sweep launch settings of the tuned forward kernel on a GPU and print the best per shape.

Used on the H200 to choose the forward kernel's autotuning space (TUNED_CONFIGS in
lab/attention/triton_fwd.py), with pointer and TMA loads; kept so the choice can be repeated on
another GPU (the decode kernel times its own small space on first use):

    python scripts/tune_kernels.py --out /tmp/tune --budget-s 300

Earlier versions of this script also tried kernel variants that lost on the H200; their timings
are in data/h200/kernels/tuning_forward.csv, with the commit of the code each one ran.

Each setting is checked against SDPA's output before it is timed. cuDNN and SDPA flash are timed at
the start and at the end of each shape, so drift (clocks, heat) shows. Every timing is appended to
OUT/tune.jsonl as it is made; the best settings per shape are printed at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (BLOCK_M, BLOCK_N, num_warps, num_stages) tried at the first length; the best few go on to the others.
LAUNCHES = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 8, 2), (128, 64, 8, 4), (256, 64, 8, 3), (64, 64, 4, 3),
            (64, 64, 4, 2), (64, 64, 4, 4), (128, 32, 4, 2), (64, 32, 4, 3)]
#: tile loads: pointers, then the TMA copy engine
OPTIONS = [False, True]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for tune.jsonl")
    parser.add_argument("--rep-ms", type=int, default=40, help="milliseconds of timed repeats per setting")
    parser.add_argument("--lengths", default="16384,32768", help="prompt lengths, the first one sweeps everything")
    parser.add_argument("--keep", type=int, default=6, help="settings carried from the first length to the others")
    parser.add_argument("--budget-s", type=float, default=300, help="stop starting new settings after this long")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    from lab.attention import triton_fwd

    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "tune.jsonl"
    started = time.time()
    results = []

    def timed(label, shape, fn, expected, **extra):
        t0 = time.time()
        try:
            err = (fn().float() - expected.float()).abs().max().item()
            ms = do_bench(fn, warmup=5, rep=args.rep_ms, return_mode="median") if err <= 2e-2 else float("nan")
            note = ""
        except Exception as exc:  # a setting that does not fit (shared memory, registers) is a result
            err, ms, note = float("nan"), float("nan"), f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        row = {"shape": shape, "label": label, "ms": ms, "err": err, "note": note, "seconds": round(time.time() - t0, 1), **extra}
        results.append(row)
        with open(log, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"{shape:12s} {label:48s} {ms:9.4f} ms  err {err:.1e}  [{row['seconds']:.0f} s] {note}", flush=True)
        return ms

    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.bfloat16)

    def sdpa(q, k, v, backend):
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    lengths = [int(x) for x in args.lengths.split(",")]
    settings = [(launch, tma) for tma in OPTIONS for launch in LAUNCHES]
    for index, n in enumerate(lengths):
        q, k, v = rand(1, 28, n, 128), rand(1, 4, n, 128), rand(1, 4, n, 128)
        shape = f"prefill {n // 1024}k"
        expected = sdpa(q, k, v, "FLASH_ATTENTION")
        for backend in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
            timed(f"sdpa {backend} (start)", shape, lambda backend=backend, qkv=(q, k, v): sdpa(*qkv, backend), expected)
        if index > 0:  # only the best settings of the first length
            first = [r for r in results if r["shape"] == f"prefill {lengths[0] // 1024}k" and "launch" in r and r["ms"] == r["ms"]]
            settings = [(tuple(r["launch"]), r["tma"]) for r in sorted(first, key=lambda r: r["ms"])[:args.keep]]
        for (bm, bn, w, s), tma in settings:
            if time.time() - started > args.budget_s * (index + 1) / len(lengths):
                print(f"{shape}: time budget reached, {len(settings)} settings not all tried", flush=True)
                break
            config = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s}
            timed(f"{bm}x{bn} w{w} s{s} tma={int(tma)}", shape,
                  lambda config=config, tma=tma, qkv=(q, k, v): triton_fwd.tuned_forward(*qkv, True, config=config, tma=tma),
                  expected, launch=[bm, bn, w, s], tma=tma)
        for backend in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
            timed(f"sdpa {backend} (end)", shape, lambda backend=backend, qkv=(q, k, v): sdpa(*qkv, backend), expected)

    print("\nbest per shape (speed vs cuDNN at the start and end of the shape)")
    for shape in dict.fromkeys(r["shape"] for r in results):
        mine = [r for r in results if r["shape"] == shape]
        cudnn = [r["ms"] for r in mine if r["label"].startswith("sdpa CUDNN")]
        for r in sorted((r for r in mine if "launch" in r and r["ms"] == r["ms"]), key=lambda r: r["ms"])[:8]:
            print(f"{shape:12s} {r['label']:48s} {r['ms']:8.4f} ms  vs cuDNN {cudnn[0] / r['ms']:.3f} / {cudnn[-1] / r['ms']:.3f}")
        for r in mine:
            if r["label"].startswith("sdpa"):
                print(f"{shape:12s} {r['label']:48s} {r['ms']:8.4f} ms")
    print(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
