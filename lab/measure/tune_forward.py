"""Sweep launch settings of the tuned forward kernel on a GPU and print the best per shape.

Used on the H200 to choose the forward kernel's autotuning space (TUNED_CONFIGS in
lab/measure/attention/tuned.py), with pointer and TMA loads; kept so the choice can be repeated on
another GPU (the decode kernel times its own small space on first use):

    python -m lab tune-forward --out /tmp/tune --budget-s 300

(Until 2026-12 this was ``scripts/tune_kernels.py``.) Earlier versions also tried kernel variants that lost on the H200; their timings
are in data/h200/kernels/tuning_forward.csv, with the commit of the code each one ran.

Each setting is checked against SDPA's output before it is timed. cuDNN and SDPA flash are timed at
the start and at the end of each shape, so drift (clocks, heat) shows. Each launch's row also records
its registers, spills, shared memory and resident programs per multiprocessor
(lab.measure.attention.launch_policy.launch_resources) and the GPU's clocks while it was timed. Every timing is appended to
OUT/tune.jsonl as it is made; the best settings per shape are printed at the end.
lab.results.tuning.log_rows turns a tune.jsonl into rows of tuning_forward.csv.
"""

from __future__ import annotations

import argparse
import json
import re
import time

from lab import REPO_ROOT, LabError, env
from lab.cli import path_arg, positive_count, positive_number, sizes
from lab.folders import dataset_lock
from lab.measure import gpuclocks

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "tune-forward"

#: (BLOCK_M, BLOCK_N, num_warps, num_stages, register cap or 0) tried at the first length; the best few go on.
LAUNCHES = [(bm, bn, w, s, 0) for bm, bn, w, s in [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 8, 2), (128, 64, 8, 4),
                                                   (256, 64, 8, 3), (64, 64, 4, 3), (64, 64, 4, 2), (64, 64, 4, 4),
                                                   (128, 32, 4, 2), (64, 32, 4, 3)]]
#: tile loads: pointers, then the TMA copy engine
OPTIONS = [False, True]


def parse_launches(text: str) -> list[tuple[int, int, int, int]]:
    """'64x64w4s3,128x64w8s2r128' -> [(64, 64, 4, 3, 0), (128, 64, 8, 2, 128)] (r: register cap, 0 for none)"""
    launches = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = re.fullmatch(r"(\d+)x(\d+)w(\d+)s(\d+)(?:r(\d+))?", item)
        if not match:
            raise argparse.ArgumentTypeError(f"launch {item!r} is not BMxBNwWsS[rR], e.g. 64x64w4s3 or 128x64w8s2r128")
        launches.append(tuple(int(x or 0) for x in match.groups()))
    if not launches:
        raise argparse.ArgumentTypeError("no launches given")
    return launches


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT,
                        help=f"folder for tune.jsonl (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--rep-ms", type=positive_count, default=40, help="milliseconds of timed repeats per setting")
    parser.add_argument("--lengths", default="16384,32768", help="prompt lengths, the first one sweeps everything")
    parser.add_argument("--keep", type=positive_count, default=6,
                        help="settings carried from the first length to the others")
    parser.add_argument("--budget-s", type=positive_number, default=300, help="stop starting new settings after this long")
    parser.add_argument("--launches", type=parse_launches, default=LAUNCHES,
                        help="launches to try, as BMxBNwWsS separated by commas (e.g. 64x64w4s3,128x128w8s3); "
                             "default: the built-in list")
    parser.add_argument("--tma", choices=["both", "on", "off"], default="both", help="tile loads to try")


def main(args) -> int:
    lengths = list(sizes(args.lengths, example="16384,32768", option="--lengths"))
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here (or TRITON_INTERPRET=1): `python -m lab tune-forward` times kernels "
                       "on a GPU; run it on a GPU machine")
    with dataset_lock(args.out, kinds=()):
        return _tune(args, lengths)


def _tune(args, lengths: list[int]) -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    from lab.measure.attention.launch_policy import launch_resources  # lazy: the kernels load triton and torch
    from lab.measure.attention.tuned import tuned_forward

    clocks = gpuclocks.ClockSampler(interval_ms=20) if gpuclocks.available() else None
    log = args.out / "tune.jsonl"
    started = time.time()
    results = []

    def timed(label, shape, fn, expected, resources=None, **extra):
        t0 = time.time()
        sampled = {}
        try:
            err = (fn().float() - expected.float()).abs().max().item()
            if resources is not None:
                extra.update(resources())
            if clocks is not None:
                clocks.start()
            ms = do_bench(fn, warmup=5, rep=args.rep_ms, return_mode="median") if err <= 2e-2 else float("nan")
            note = ""
        except Exception as exc:  # a setting that does not fit (shared memory, registers) is a result
            err, ms, note = float("nan"), float("nan"), f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        finally:
            if clocks is not None and clocks.running:
                sampled = gpuclocks.row_fields(clocks.stop())
        row = {"shape": shape, "label": label, "ms": ms, "err": err, "note": note, "seconds": round(time.time() - t0, 1),
               **extra, **sampled}
        results.append(row)
        with open(log, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        facts = " ".join(f"{key}={row[key]}" for key in ("registers", "spills", "shared_kib", "programs_per_sm", "sm_mhz",
                                                         "clock_limit") if row.get(key) is not None)
        print(f"{shape:12s} {label:32s} {ms:9.4f} ms  err {err:.1e}  [{row['seconds']:.0f} s] {facts} {note}", flush=True)
        return ms

    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.bfloat16)

    def sdpa(q, k, v, backend):
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    options = {"both": OPTIONS, "on": [True], "off": [False]}[args.tma]
    settings = [(launch, tma) for tma in options for launch in args.launches]
    for index, n in enumerate(lengths):
        q, k, v = rand(1, 28, n, 128), rand(1, 4, n, 128), rand(1, 4, n, 128)
        shape = f"prefill {n // 1024}k"
        expected = sdpa(q, k, v, "FLASH_ATTENTION")
        for backend in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
            timed(f"sdpa {backend} (start)", shape, lambda backend=backend, qkv=(q, k, v): sdpa(*qkv, backend), expected)
        if index > 0:  # only the best settings of the first length
            settings = _best_settings(results, f"prefill {lengths[0] // 1024}k", args.keep)
        for (bm, bn, w, s, regs), tma in settings:
            if time.time() - started > args.budget_s * (index + 1) / len(lengths):
                print(f"{shape}: time budget reached, {len(settings)} settings not all tried", flush=True)
                break
            config = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s, "maxnreg": regs or None}
            timed(f"{bm}x{bn} w{w} s{s}{f' r{regs}' if regs else ''} tma={int(tma)}", shape,
                  lambda config=config, tma=tma, qkv=(q, k, v): tuned_forward(*qkv, True, config=config, tma=tma),
                  expected, resources=launch_resources, launch=[bm, bn, w, s, regs], tma=tma)
        for backend in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
            timed(f"sdpa {backend} (end)", shape, lambda backend=backend, qkv=(q, k, v): sdpa(*qkv, backend), expected)

    _summary(results)
    print(f"done in {time.time() - started:.0f} s")
    return 0


def _best_settings(results: list[dict], shape: str, keep: int) -> list[tuple]:
    """The ``keep`` fastest launches (and their tile-load choice) that ran at ``shape``."""
    ran = [r for r in results if r["shape"] == shape and "launch" in r and r["ms"] == r["ms"]]
    return [(tuple(r["launch"]), r["tma"]) for r in sorted(ran, key=lambda r: r["ms"])[:keep]]


def _summary(results: list[dict]) -> None:
    """The best launches per shape, with their speed against cuDNN timed at the shape's start and end."""
    print("\nbest per shape (speed vs cuDNN at the start and end of the shape)")
    for shape in dict.fromkeys(r["shape"] for r in results):
        mine = [r for r in results if r["shape"] == shape]
        cudnn = [r["ms"] for r in mine if r["label"].startswith("sdpa CUDNN")]
        for r in sorted((r for r in mine if "launch" in r and r["ms"] == r["ms"]), key=lambda r: r["ms"])[:8]:
            print(f"{shape:12s} {r['label']:48s} {r['ms']:8.4f} ms  vs cuDNN {cudnn[0] / r['ms']:.3f} / {cudnn[-1] / r['ms']:.3f}")
        for r in mine:
            if r["label"].startswith("sdpa"):
                print(f"{shape:12s} {r['label']:48s} {r['ms']:8.4f} ms")
