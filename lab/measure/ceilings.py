"""A live measurement of this machine's own ceilings: a large matmul and a large copy, timed.

The roofs a reader's kernels actually live under (the GPU when there is one, otherwise the CPU).
``python -m lab hardware --measure`` runs it and writes a dataset with provenance.
"""

from __future__ import annotations

import csv
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from lab import LabError, store

KIB, MIB, GB, TB, TFLOPS = 1024, 1024**2, 10**9, 10**12, 10**12


@dataclass(frozen=True)
class Ceilings:
    """What this machine achieved: the roofs a reader's kernels actually live under."""

    name: str            # device name, e.g. "NVIDIA H200" or "CPU (x86_64)"
    dtype: str           # dtype of the matmul
    peak_flops: float    # best median matmul FLOP/s over the sizes tried
    bandwidth: float     # best median copy bandwidth, bytes/s (read + write counted)
    rows: tuple = ()     # every timing: dicts with kind, size, dtype, median_s, reps, value, unit

    def ridge(self, dtype: str | None = None) -> float:
        return self.peak_flops / self.bandwidth


def _median_seconds(fn, reps: int, warmup: int, min_sample_s: float = 0.02) -> float:
    """Median wall time of one fn() call on the CPU, over ``reps`` samples after ``warmup`` calls.

    Each sample times a batch of calls lasting at least ``min_sample_s``, so a coarse clock (some
    virtual machines tick every few milliseconds) does not swamp a short call.
    """
    for _ in range(warmup):
        fn()
    batch = 1
    while batch < 1 << 16:
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        if time.perf_counter() - start >= min_sample_s:
            break
        batch *= 2
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - start) / batch)
    return statistics.median(times)


def _median_seconds_cuda(torch, fn, reps: int, warmup: int) -> float:
    """Median GPU time of fn() in seconds, each call timed between its own pair of CUDA events.

    Warm-up runs at least ``warmup`` calls and at least 0.2 s, so clocks have ramped up before timing.
    """
    start_wall, calls = time.perf_counter(), 0
    while calls < warmup or time.perf_counter() - start_wall < 0.2:
        fn()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) / 1e3


def _matmul_op(torch, n: int, dev: str, tdtype, gen):
    """A call that multiplies two random n×n matrices into a preallocated output."""
    if torch is None:
        import numpy as np
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        out = np.empty((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=out)
    a = torch.randn(n, n, device=dev, dtype=tdtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=tdtype, generator=gen)
    out = torch.empty(n, n, device=dev, dtype=tdtype)
    return lambda: torch.matmul(a, b, out=out)


def _copy_op(torch, elements: int, dev: str, gen):
    """A call that copies a random fp32 buffer into another one."""
    if torch is None:
        import numpy as np
        src = np.random.default_rng(1).random(elements, dtype=np.float32)
        dst = np.empty_like(src)
        return lambda: np.copyto(dst, src)
    src = torch.rand(elements, device=dev, dtype=torch.float32, generator=gen)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


#: (matmul sizes n for an n×n×n product, copy sizes in bytes) per target.
GPU_SIZES = ((4096, 8192, 12288), (256 * MIB, 1024 * MIB, 2048 * MIB))
CPU_SIZES = ((256, 512, 1024), (64 * MIB, 256 * MIB))  # copies larger than a CPU's last-level cache
QUICK_CPU_SIZES = ((128, 256), (64 * MIB,))


def measure(use_gpu: bool | None = None, matmul_sizes=None, copy_sizes=None, reps: int | None = None,
            progress: bool = False) -> Ceilings:
    """Measure achieved matmul FLOP/s and copy bandwidth on the GPU (bf16) or, without one, the CPU (fp32).

    Random inputs, warm-up calls first, median over ``reps`` timed calls; the best size wins
    (small problems do not fill the machine). A copy moves each byte twice: read once, written once.
    """
    try:
        import torch
    except ImportError:
        torch = None
    if use_gpu is None:
        use_gpu = torch is not None and torch.cuda.is_available()
    if use_gpu and (torch is None or not torch.cuda.is_available()):
        raise LabError("no CUDA GPU visible to torch; call measure(use_gpu=False) to measure the CPU")
    default_mm, default_copy = GPU_SIZES if use_gpu else CPU_SIZES
    matmul_sizes = tuple(matmul_sizes or default_mm)
    copy_sizes = tuple(copy_sizes or default_copy)
    reps = reps or (20 if use_gpu else 5)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # progress bars are a nicety
        tqdm = None
    jobs = [("matmul", n) for n in matmul_sizes] + [("copy", b) for b in copy_sizes]
    bar = tqdm(jobs, desc="measuring ceilings", disable=not progress or tqdm is None, leave=False) if tqdm else jobs

    rows = []
    if use_gpu:
        name, dtype, dev = torch.cuda.get_device_name(0), "bf16", "cuda"
        tdtype = torch.bfloat16
    else:
        name, dtype, dev = f"CPU ({platform.machine()})", "fp32", "cpu"
        tdtype = torch.float32 if torch is not None else None
    gen = torch.Generator(device=dev).manual_seed(0) if torch is not None else None
    for kind, size in bar:
        if kind == "matmul":
            op = _matmul_op(torch, size, dev, tdtype, gen)
            work, unit, row_dtype, row_size = 2.0 * size**3, "FLOP/s", dtype, size
        else:
            elements = size // 4  # fp32 words: the element type does not change a copy's bytes
            op = _copy_op(torch, elements, dev, gen)
            work, unit, row_dtype, row_size = 2.0 * elements * 4, "B/s", "fp32", elements * 4  # read + write
        seconds = _median_seconds_cuda(torch, op, reps, 3) if use_gpu else _median_seconds(op, reps, 1)
        rows.append(dict(kind=kind, size=row_size, dtype=row_dtype, median_s=seconds, reps=reps,
                         value=work / seconds, unit=unit))
        del op
    if use_gpu:
        torch.cuda.empty_cache()
    best_flops = max(r["value"] for r in rows if r["kind"] == "matmul")
    best_bw = max(r["value"] for r in rows if r["kind"] == "copy")
    for value in (best_flops, best_bw):
        if not (math.isfinite(value) and value > 0):
            raise LabError(f"measurement gave a non-positive or non-finite figure ({value}); the timer may be too coarse")
    return Ceilings(name=name, dtype=dtype, peak_flops=best_flops, bandwidth=best_bw, rows=tuple(rows))


def quick_cpu_ceilings() -> Ceilings:
    """A few-second CPU measurement for a chapter build on any laptop."""
    return measure(use_gpu=False, matmul_sizes=QUICK_CPU_SIZES[0] + (512,), copy_sizes=(128 * MIB,), reps=3)


def write_measurement(ceilings: Ceilings, out: Path, command: str | None = None, datasheet: dict | None = None) -> Path:
    """Write measurements.json, measurements.csv and provenance.json to ``out``.

    ``datasheet``: the matched datasheet's fields (key and fractions), added by the caller that knows it.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_rows_csv(out / "measurements.csv", list(ceilings.rows))
    summary = {
        "device": ceilings.name, "dtype": ceilings.dtype,
        "peak_flops": ceilings.peak_flops, "bandwidth": ceilings.bandwidth, "ridge": ceilings.ridge(),
        **(datasheet or {"datasheet": None, "fraction_of_datasheet_flops": None, "fraction_of_datasheet_bandwidth": None}),
        "rows": list(ceilings.rows),
    }
    store.write_json_atomic(out / "measurements.json", summary)
    record = store.new_provenance("hardware", dtype=ceilings.dtype, command=command,
                                 flags={"method": "median of CUDA-event (GPU) or perf_counter (CPU) timings, "
                                                  "random inputs, warm-up first; copy counts read + write"})
    store.write_provenance(out, record)
    return out


def _write_rows_csv(path: Path, rows: list[dict]) -> None:
    """CSV without pandas (a bare GPU box may lack it), through a temporary file."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


