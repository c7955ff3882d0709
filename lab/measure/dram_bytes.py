"""DRAM bytes of one attention forward pass, read from the GPU's counters with Nsight Compute (ncu).

The byte count a roofline needs is the bytes that actually crossed the HBM interface, not a model's
count: the compulsory bytes (Q, K, V read once, O written once) are a lower bound, and charging every
K/V tile re-read to HBM is an upper estimate (L2 serves most re-reads; the query heads of one KV group
run side by side). ncu reads ``dram__bytes_read.sum`` / ``dram__bytes_write.sum`` per kernel.

How: for each candidate (lab.measure.bench's ``ours-tuned``, ``sdpa-flash``, ``sdpa-cudnn``, ``flex``)
a child Python process runs under ``ncu --nvtx --nvtx-include dram/``: it warms the candidate up
(compile, autotune) outside any range, then for each length launches a tiny marker kernel and the
candidate once inside an NVTX push/pop range named ``dram``, so ncu profiles only those kernels. The
parent splits the kernel list at the markers and sums each call's kernels. ncu runs with
``--clock-control none`` (the card's clocks are left as found) and its default cache control, which
flushes the caches before each profiled kernel: the bytes are those of a cold call.

Writes ``dram_bytes.csv`` (candidate,n,batch,q_heads,kv_heads,head_dim,causal,dram_read_bytes,
dram_write_bytes,l2_hit_pct,kernel_ms,kernels; ``kernels`` = kernels in one call, ``kernel_ms`` their
summed duration under ncu, ``l2_hit_pct`` weighted by L2 sectors), ``kernels.csv`` (one row per
kernel), ``ncu-<candidate>.csv`` (ncu's raw output) and ``provenance.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, store
from lab.cli import module_cli, path_arg, positive_count, positive_number, sizes
from lab.folders import dataset_lock
from lab.measure import bench
from lab.measure.flex_decomposition import random_inputs
from lab.measure.ncu_output import after_markers, metric_value

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "dram-bytes"
CANDIDATES = ("ours-tuned", "sdpa-flash", "sdpa-cudnn", "flex")
LENGTHS = (4096, 16384, 32768)
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct", "lts__t_sectors.sum",
           "gpu__time_duration.sum")
COLUMNS = ("candidate", "n", "batch", "q_heads", "kv_heads", "head_dim", "causal", "dram_read_bytes",
           "dram_write_bytes", "l2_hit_pct", "kernel_ms", "kernels")
MARKER = "dram_bytes_marker"   # the marker kernel's name: each one starts a new call's kernels
RANGE = "dram"


# --- ncu's output (pure; CPU-tested) -----------------------------------------------------------------

def parse_ncu_csv(text: str) -> list[dict]:
    """Kernels of ``ncu --csv`` output (details page, one row per metric) in launch order:
    [{"id", "name", "grid", metric: value in base units, ...}]. Lines that are not CSV records
    (``==PROF==`` messages, the program's own output) are skipped."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    header = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if header is None:
        return []
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[header:]))):
        if row.get("ID") in (None, "ID") or not row.get("Metric Name"):
            continue  # a repeated header
        kernel = kernels.setdefault(row["ID"], {"id": int(row["ID"]), "name": row.get("Kernel Name", ""),
                                                 "grid": row.get("Grid Size", "")})
        kernel[row["Metric Name"]] = metric_value(row.get("Metric Value", ""), row.get("Metric Unit", ""))
    return sorted(kernels.values(), key=lambda k: k["id"])


def summarise_call(kernels: list[dict]) -> dict:
    """One call's DRAM bytes (summed), L2 hit rate (weighted by L2 sectors, else by time), time and kernel count."""
    def total(metric):
        values = [k.get(metric, math.nan) for k in kernels]
        return math.nan if not values or any(math.isnan(v) for v in values) else sum(values)

    hits = [(k.get("lts__t_sector_hit_rate.pct", math.nan),
             k.get("lts__t_sectors.sum", k.get("gpu__time_duration.sum", math.nan))) for k in kernels]
    hits = [(h, w) for h, w in hits if not math.isnan(h) and not math.isnan(w)]
    weight = sum(w for _, w in hits)
    return {"dram_read_bytes": total("dram__bytes_read.sum"), "dram_write_bytes": total("dram__bytes_write.sum"),
            "l2_hit_pct": sum(h * w for h, w in hits) / weight if weight else math.nan,
            "kernel_ms": total("gpu__time_duration.sum") * 1e3, "kernels": len(kernels)}


def find_ncu() -> str:
    """Path of Nsight Compute's CLI: $NCU, PATH, or the usual CUDA install folders."""
    places = [os.environ.get("NCU", ""), shutil.which("ncu") or "", "/usr/local/cuda/bin/ncu",
              *sorted(glob.glob("/usr/local/cuda-*/bin/ncu"), reverse=True),
              *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]
    for place in places:
        if place and os.access(place, os.X_OK):
            return place
    raise LabError("ncu (Nsight Compute) not found: not in $NCU, on PATH, in /usr/local/cuda*/bin or "
                   "/opt/nvidia/nsight-compute; the DRAM byte counts need it (set NCU=/path/to/ncu)")


# --- the child: runs under ncu -----------------------------------------------------------------------

def _marker():
    import triton
    import triton.language as tl

    @triton.jit
    def dram_bytes_marker(x):
        tl.store(x, 1)
    return dram_bytes_marker


def child(candidate: str, lengths, q_heads: int, kv_heads: int, head_dim: int) -> int:
    """Warm each length's call up, then run it once inside the NVTX range, after a marker kernel."""
    import torch

    marker, flag = _marker(), torch.zeros(1, device="cuda")
    fn = bench.candidate_fn(candidate, "prefill")
    for n in lengths:
        try:
            q, k, v = random_inputs(1, q_heads, kv_heads, n, n, head_dim, seed=n)
            for _ in range(3):   # compile, autotune, and warm
                fn(q, k, v, True)
            marker[(1,)](flag)
            torch.cuda.synchronize()
        except Exception as exc:  # this length is skipped; the parent sees no MEASURED line for it
            print(f"FAILED n={n}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                  file=sys.stderr, flush=True)
            torch.cuda.synchronize()
            continue
        torch.cuda.nvtx.range_push(RANGE)
        marker[(1,)](flag)
        fn(q, k, v, True)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print(f"MEASURED n={n}", file=sys.stderr, flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    return 0


# --- the parent --------------------------------------------------------------------------------------

def ncu_command(ncu: str, candidate: str, lengths, args, base_units: bool = True) -> list[str]:
    return [ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", f"{RANGE}/", "--metrics", ",".join(METRICS),
            "--csv", *(["--print-units", "base"] if base_units else []), "--target-processes", "application-only",
            sys.executable, "-m", "lab.measure.dram_bytes", "--child", "--candidates", candidate,
            "--lengths", ",".join(map(str, lengths)), "--q-heads", str(args.q_heads), "--kv-heads", str(args.kv_heads),
            "--head-dim", str(args.head_dim)]


def run_group(command: list[str], timeout_s: float, env: dict) -> subprocess.CompletedProcess:
    """Run ``command`` in a process group of its own and end the whole group (ncu and the Python it
    launched) on a timeout or when this process is told to stop."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env=env, start_new_session=True)

    def stop_group(*_):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    previous = signal.signal(signal.SIGTERM, lambda *a: (stop_group(), sys.exit(143)))
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group()
        proc.communicate()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def profile_candidate(ncu: str, candidate: str, lengths, args, timeout_s: float) -> tuple[list[dict], list[dict], str]:
    """Run one candidate's child under ncu; return its rows, its per-kernel rows and ncu's raw output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.time()
    for base_units in (True, False):
        done = run_group(ncu_command(ncu, candidate, lengths, args, base_units),
                         timeout_s - (time.time() - started), env)
        if not (done.returncode and base_units and "print-units" in done.stdout + done.stderr):
            break  # an ncu without --print-units gets a second try with its scaled units
    measured = [int(m) for m in re.findall(r"^MEASURED n=(\d+)", done.stderr, flags=re.M)]
    calls = after_markers(parse_ncu_csv(done.stdout), MARKER)
    if not calls or len(calls) != len(measured):
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
        raise LabError(f"{candidate}: ncu gave {len(calls)} profiled calls for {len(measured)} measured lengths "
                       f"(exit {done.returncode}): {tail[:600]}")
    rows, kernel_rows = [], []
    for n, kernels in zip(measured, calls, strict=True):
        rows.append({"candidate": candidate, "n": n, "batch": 1, "q_heads": args.q_heads, "kv_heads": args.kv_heads,
                     "head_dim": args.head_dim, "causal": True, **summarise_call(kernels)})
        kernel_rows += [{"candidate": candidate, "n": n, "kernel": k["name"][:160], "grid": k["grid"],
                         **{key: k.get(key, math.nan) for key in METRICS}} for k in kernels]
    return rows, kernel_rows, done.stdout


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--candidates", default=",".join(CANDIDATES), help=f"subset of {','.join(CANDIDATES)}, in order")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="prompt lengths (causal prefill, batch 1)")
    parser.add_argument("--q-heads", type=positive_count, default=28)
    parser.add_argument("--kv-heads", type=positive_count, default=4)
    parser.add_argument("--head-dim", type=positive_count, default=128)
    parser.add_argument("--deadline-s", type=positive_number, default=600, help="stop starting candidates after this many seconds; "
                        "a candidate still running then is cut off (the rows of earlier ones are kept)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def main(args) -> int:

    candidates, lengths = [c for c in args.candidates.split(",") if c], sizes(args.lengths, option="--lengths")
    unknown = [c for c in candidates if c not in CANDIDATES]
    if unknown or not candidates:
        raise LabError(f"--candidates: unknown candidate {(unknown or [''])[0]!r}; choose from {', '.join(CANDIDATES)}")
    if args.q_heads % args.kv_heads:
        raise LabError(f"--q-heads ({args.q_heads}) must be a multiple of --kv-heads ({args.kv_heads})")
    if args.child:
        return child(candidates[0], lengths, args.q_heads, args.kv_heads, args.head_dim)
    ncu = find_ncu()
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    with dataset_lock(out_dir, kinds=("kernels",)):
        return _profile_all(args, ncu, version, candidates, lengths, out_dir)


def _profile_all(args, ncu: str, version: list[str], candidates: list[str], lengths, out_dir: Path) -> int:
    import pandas as pd

    started = time.time()
    flags = {"experiment": "dram-bytes", "candidates": candidates, "lengths": list(lengths), "q_heads": args.q_heads,
             "kv_heads": args.kv_heads, "head_dim": args.head_dim, "causal": True, "batch": 1,
             "ncu": ncu, "ncu_version": version[-1] if version else None, "metrics": list(METRICS),
             "method": "ncu --clock-control none --nvtx --nvtx-include dram/ (default cache control: caches flushed "
                       "before each profiled kernel); one call per length after warm-up, kernels summed per call"}
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=False))
    rows, kernel_rows, failures = [], [], {}
    for candidate in candidates:
        left = args.deadline_s - (time.time() - started)
        if left < 15:
            failures[candidate] = f"not run: {left:.0f} s left before the deadline"
            continue
        print(f"[dram +{time.time() - started:.0f}s] {candidate} under ncu (at most {left:.0f} s)", file=sys.stderr, flush=True)
        try:
            got, per_kernel, raw = profile_candidate(ncu, candidate, lengths, args, timeout_s=left)
        except (LabError, subprocess.TimeoutExpired) as exc:
            failures[candidate] = str(exc).splitlines()[0][:600]
            print(f"  {candidate}: {failures[candidate]}", file=sys.stderr, flush=True)
            continue
        rows += got
        kernel_rows += per_kernel
        store.write_atomic(out_dir / f"ncu-{candidate}.csv", lambda tmp, raw=raw: tmp.write_text(raw))
        store.write_csv(out_dir, "dram_bytes.csv", pd.DataFrame(rows).reindex(columns=COLUMNS))
        store.write_csv(out_dir, "kernels.csv", pd.DataFrame(kernel_rows))
    flags["failures"] = failures
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=not failures,
                                                       seconds=round(time.time() - started, 1)))
    if not rows:
        raise LabError(f"no candidate was profiled: {failures}")
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    print(table.drop(columns=["batch", "q_heads", "kv_heads", "head_dim", "causal"]).round(3).to_string(index=False))
    return 0


def cli(argv=None) -> int:
    return module_cli(sys.modules[__name__], "python -m lab.measure.dram_bytes", argv)


if __name__ == "__main__":
    sys.exit(cli())
