"""What the GPU's clock limits say while it idles, after short bursts of matrix products, and through a long run.

Chapter 7's capture windows show the software power cap flag at a power reading of 151 W, and decode steps
running at a lowered clock. The samples cannot say how fast the limiter lowers and gives back the clock, nor
whether the flag stays set while the GPU idles: nothing was sampled between windows. This command samples
``nvidia-smi`` every :data:`INTERVAL_MS` ms (the SM clock, ``power.draw``, which is NVML's one-second average,
beside ``power.draw.instant``, the enforced power limit, the active clock limits) through :data:`PHASES`:
idle time, a short and a longer burst of dense bf16 matrix products, a sustained run, idle time after each.

    python -m lab clock-probe --out data/h200/clock-probe      # about half a minute on a GPU

Writes ``samples.csv`` (one row per sample, its time on the host clock), ``phases.csv`` (each phase's kind,
planned seconds, start and end on the host clock, products run) and ``provenance.json``; prints per phase the
samples in it, how many had the power cap set, the median SM clock and the median of both power readings.
"""

from __future__ import annotations

import datetime as _dt
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import path_arg
from lab.folders import writes_folder
from lab.measure import gpuclocks

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "clock-probe"
INTERVAL_MS = 20
EXTRA = (*gpuclocks.INSTANT_POWER, "enforced.power.limit")
#: (kind, seconds): idle, a burst the length of a short prefill, a longer one, a long prefill's worth, idle.
PHASES = (("idle", 3.0), ("burst", 0.05), ("idle", 3.0), ("burst", 0.25), ("idle", 3.0), ("sustained", 5.0),
          ("idle", 5.0))
MATMUL_N = 8192
POWER_CAP = "software power cap"


def matmul_work(n: int = MATMUL_N) -> Callable[[float], int]:
    """``work(seconds) -> products``: dense bf16 n×n×n matrix products on the GPU for about ``seconds``."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    (a @ b).sum().item()  # cuBLAS's handle and kernel chosen before any phase

    def work(seconds: float) -> int:
        done, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            for _ in range(4):  # a few products per check keep the queue short and the phase's end sharp
                a @ b
            torch.cuda.synchronize()
            done += 4
        return done
    return work


def run_phases(work: Callable[[float], int], phases=PHASES, sleep=time.sleep, now=time.time) -> list[dict]:
    """Run each phase in turn (idle: sleep), recording its start and end on the host clock and its products."""
    rows = []
    for index, (kind, seconds) in enumerate(phases):
        start = now()
        products = 0 if kind == "idle" else work(seconds)
        if kind == "idle":
            sleep(seconds)
        rows.append({"phase": index, "kind": kind, "seconds": seconds, "start": start, "end": now(),
                     "products": products})
    return rows


def sample_time(timestamp: str) -> float:
    """nvidia-smi's timestamp (``2026/11/30 06:57:50.385``, the machine's local time) on the host clock."""
    try:
        return _dt.datetime.strptime(timestamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        raise LabError(f"nvidia-smi timestamp {timestamp!r} is not YYYY/MM/DD HH:MM:SS.mmm") from None


def _median(values: list) -> float | None:
    numbers = [v for v in values if v is not None and v == v]  # v == v: not NaN ("[N/A]" read as NaN)
    return statistics.median(numbers) if numbers else None


def by_phase(samples: list[dict], phases: list[dict]) -> list[dict]:
    """Per phase: the samples taken inside it, how many had the power cap set, the median SM clock and the median
    power.draw and power.draw.instant (None where no sample fell inside)."""
    rows = []
    for phase in phases:
        inside = [s for s in samples if phase["start"] <= s["t"] < phase["end"]]
        median = lambda key, inside=inside: _median([s.get(key) for s in inside])  # noqa: E731
        rows.append({"phase": phase["phase"], "kind": phase["kind"], "seconds": phase["seconds"],
                     "samples": len(inside),
                     "power_capped": sum(POWER_CAP in gpuclocks.reason_names(s.get("reasons")) for s in inside),
                     "sm_mhz": median("sm_mhz"), "power_w": median("power_w"),
                     "power_instant_w": median("power.draw.instant")})
    return rows


def probe(out_dir: Path, work: Callable[[float], int], sampler: gpuclocks.ClockSampler, phases=PHASES) -> list[dict]:
    """Sample through the phases and write the folder; returns :func:`by_phase`'s rows."""
    import pandas as pd

    flags = {"experiment": "clock-probe", "interval_ms": sampler.interval_ms, "fields": list(sampler.fields),
             "phases": [list(p) for p in phases], "work": f"torch bf16 {MATMUL_N}x{MATMUL_N}x{MATMUL_N} matmul, "
                                                         "synchronized every 4 products"}
    store.write_provenance(out_dir, store.new_provenance("hardware", flags=flags, complete=False))
    sampler.start()
    try:
        ran = run_phases(work, phases)
    finally:
        sampler.stop()
    samples = [{**s, "t": sample_time(s["timestamp"])} for s in sampler.samples]
    columns = ["t", *gpuclocks.COLUMNS, *sampler.extra]
    store.write_csv(out_dir, "samples.csv", pd.DataFrame(samples, columns=columns))
    store.write_csv(out_dir, "phases.csv", pd.DataFrame(ran))
    store.write_provenance(out_dir, store.new_provenance("hardware", flags=flags, complete=True))
    return by_phase(samples, ran)


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT,
                        help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")


@writes_folder("--out")
def main(args) -> int:
    caps = env.detect()
    if not caps.has_gpu:
        raise LabError("no CUDA GPU here: `python -m lab clock-probe` samples a GPU's clocks while it works")
    if not gpuclocks.available():
        raise LabError("nvidia-smi is not on PATH: the probe reads the clocks through it")
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    rows = probe(out_dir, matmul_work(), gpuclocks.ClockSampler(interval_ms=INTERVAL_MS, extra=EXTRA))
    print(f"{'phase':>5} {'kind':9} {'s':>5} {'samples':>7} {'capped':>6} {'SM MHz':>7} {'power.draw':>10} "
          f"{'instant':>8}")
    for r in rows:
        shown = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        print(f"{r['phase']:>5} {r['kind']:9} {r['seconds']:>5g} {r['samples']:>7} {r['power_capped']:>6} "
              f"{shown(r['sm_mhz']):>7} {shown(r['power_w']):>10} {shown(r['power_instant_w']):>8}")
    print(f"wrote {out_dir}")
    return 0
