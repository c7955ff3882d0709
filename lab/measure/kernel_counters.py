"""Why a kernel is as fast as it is, from the GPU's hardware counters (Nsight Compute, ``ncu``).

A stopwatch says how long a kernel took; the counters say what it was doing meanwhile: how busy the
tensor pipe (matrix instructions) and the XU pipe (exponentials and other special functions) were,
how many warps each multiprocessor kept resident (achieved occupancy), what the warps waited on
(stall reasons), and how many bytes crossed DRAM and L2. One *job* is one kernel call at one shape:

* ``prefill:<candidate>:<batch>:<n>`` -- a causal prefill through :func:`lab.measure.candidates.candidate_fn`
  (``sdpa-cudnn``, ``fa3``, ``ours-tuned``, ``flex``, ...);
* ``decode:<candidate>:<batch>:<n>`` -- one query token per sequence over an n-token cache, same candidates;
* ``flexdecode:<variant>:<batch>:<n>`` -- a FlexAttention decode variant of
  :mod:`lab.measure.flex_decomposition` (``flex-default``, ``flex-pad8``, ``flex-paged``: vLLM's recipe, ...);
* ``backward:<candidate>:<batch>:<n>`` -- the backward alone of a causal training step of
  :mod:`lab.measure.backward_race` (``ours``, ``sdpa-flash``, ``sdpa-cudnn``, ``fa4``): the forward runs
  before, outside the profiled range (:data:`BACKWARD_JOBS`; not among the default jobs);
* ``chunk:<candidate>:<batch>:<n>`` -- the last 8,192-token prefill chunk of an n-token prompt over its cached
  prefix, on a paged cache, as a server runs it (:func:`lab.measure.serving_race.chunk_call`: ``fa3``, ``ours``;
  needs vLLM; :data:`CHUNK_JOBS`);
* ``mixed:<candidate>:<batch>:<n>`` -- a busy server's mixed step: ``batch`` decoding sequences of n keys beside 7
  new 1,024-token prompts (:func:`lab.measure.serving_race.mixed_call`: ``fa3``, ``ours-chunks`` (the decode rows in
  the prefill kernel's tiles), ``ours-decode`` (split off to the decode kernel); needs vLLM; :data:`MIXED_JOBS`).

How: the jobs run one after another in one child Python process under ``ncu --nvtx --nvtx-include
counters`` (a start/end NVTX range, which spans threads): the child warms each job up (compile, autotune) outside any range, then launches a marker
kernel and the call once inside an NVTX range, so ncu profiles only those kernels (as
:mod:`lab.measure.dram_bytes` does), and the markers split them into calls. ncu
collects whole sections (SpeedOfLight, ComputeWorkloadAnalysis, MemoryWorkloadAnalysis, Occupancy,
WarpStateStats, LaunchStats, InstructionStats) and prints its raw page: every metric under its own name,
so nothing depends on guessing this ncu version's metric names. ``--clock-control none`` leaves the
card's clocks as found; the default cache control flushes the caches before each profiled kernel.

Writes ``raw.csv`` (ncu's raw page: every metric of every profiled kernel), ``child.log`` (the child's
MEASURED/FAILED lines, which name the job of each profiled call, in order) and ``provenance.json`` to
``--out``. :func:`read_dataset` turns the two into long rows (job, phase, candidate, batch, n,
kernel_index, kernel, metric, unit, value); :mod:`lab.results.kernel_counters` reads them that way.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, store
from lab.cli import module_cli, path_arg, positive_number
from lab.folders import dataset_lock
from lab.measure import backward_race, candidates, flex_decomposition, serving_race
from lab.measure.dram_bytes import find_ncu, run_group
from lab.measure.ncu_output import (  # noqa: F401  (read_dataset, long_rows: where the tests and readers look)
    MARKER,
    PHASES,
    after_markers,
    long_rows,
    measured_jobs,
    parse_job,
    parse_raw_csv,
    query_rows,
    read_dataset,
)

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "kernel-counters"
SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "Occupancy", "WarpStateStats",
            "LaunchStats", "InstructionStats", "SchedulerStats")
EXTRA_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "gpu__time_duration.sum")
RANGE = "counters"
DEFAULT_JOBS = ("prefill:sdpa-cudnn:1:16384", "prefill:fa3:1:16384", "prefill:ours-tuned:1:16384",
                "prefill:flex:1:16384", "prefill:fa4:1:16384", "prefill:flex-flash:1:16384",
                "flexdecode:flex-default:1:32768", "flexdecode:flex-default:16:32768",
                "flexdecode:flex-pad8:1:32768", "flexdecode:flex-paged:1:32768",
                "decode:fa3:1:32768", "decode:ours-tuned:1:32768")
#: The backward passes side by side at 16k: `python -m lab kernel-counters --jobs` with these.
BACKWARD_JOBS = ("backward:ours:1:16384", "backward:sdpa-flash:1:16384", "backward:sdpa-cudnn:1:16384",
                 "backward:fa4:1:16384")
#: The last chunk of a 32k prompt, FA3 against ours as a server runs it: where chapter 6c's prefill gap comes from.
CHUNK_JOBS = ("chunk:fa3:1:32768", "chunk:ours:1:32768")
#: A busy server's mixed step, FA3 against ours with its decode rows in the prefill kernel and split off.
MIXED_JOBS = ("mixed:fa3:128:1089", "mixed:ours-chunks:128:1089", "mixed:ours-decode:128:1089")
COLUMNS = ("job", "phase", "candidate", "batch", "n", "kernel_index", "kernel", "metric", "unit", "value")


# --- the child: runs under ncu -----------------------------------------------------------------------

def _marker():
    import triton
    import triton.language as tl

    @triton.jit
    def counters_marker(x):
        tl.store(x, 1)
    return counters_marker


def job_call(job: str):
    """A no-argument call of one job on seeded random inputs (K/V from HBM: each job is profiled cold)."""

    phase, name, batch, n = parse_job(job)
    if phase == "chunk":   # paged inputs of its own
        return serving_race.chunk_call(name, batch, n)
    if phase == "mixed":
        return serving_race.mixed_call(name, batch, n)
    n_q = query_rows(phase, n)
    q, k, v = flex_decomposition.random_inputs(batch, 28, 4, n_q, n, 128, seed=n + batch)
    if phase == "backward":
        do = flex_decomposition.random_inputs(batch, 28, 4, n_q, n, 128, seed=n + batch + 1)[0]
        return backward_race.backward_only(name, q, k, v, do)
    if phase == "flexdecode":
        run, _ = flex_decomposition.variant_fn(name, q, k, v, causal=False)
        return run
    return candidates.timed_call(candidates.candidate_fn(name, phase), q, k, v, phase == "prefill")


def child(jobs: list[str]) -> int:
    """Profile each job in turn in this one process (imports and compiles paid once): warm it up outside
    the NVTX range, then a marker kernel and one call inside it. A job that fails says so and is skipped."""
    import torch

    marker, flag = _marker(), torch.zeros(1, device="cuda")
    for job in jobs:
        try:
            call = job_call(job)
            for _ in range(3):   # compile, autotune, warm
                call()
            torch.cuda.synchronize()
        except Exception as exc:  # the parent sees no MEASURED line for this job
            print(f"FAILED {job}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                  file=sys.stderr, flush=True)
            torch.cuda.synchronize()
            continue
        # a start/end range, not push/pop: it spans every thread, and autograd launches a backward's kernels
        # from its own device thread (a push/pop range on this thread profiled none of them)
        profiled = torch.cuda.nvtx.range_start(RANGE)
        marker[(1,)](flag)
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_end(profiled)
        print(f"MEASURED {job}", file=sys.stderr, flush=True)
        del call
        torch.cuda.empty_cache()
    return 0


# --- the parent --------------------------------------------------------------------------------------

def ncu_command(ncu: str, jobs: list[str], extra_metrics: bool = True) -> list[str]:
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    metrics = ["--metrics", ",".join(EXTRA_METRICS)] if extra_metrics else []
    return [ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", RANGE, *sections, *metrics,
            "--page", "raw", "--csv", "--print-units", "base", "--target-processes", "application-only",
            sys.executable, "-m", "lab.measure.kernel_counters", "--child", ",".join(jobs)]



def profile_jobs(ncu: str, jobs: list[str], timeout_s: float) -> tuple[dict[str, list[dict]], str, str]:
    """Run the jobs in one child under ncu: {job: its profiled kernels}, ncu's raw output, the child's
    stderr. Tried once more without the extra metrics if ncu refuses one of their names."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.time()
    for extra in (True, False):
        done = run_group(ncu_command(ncu, jobs, extra), timeout_s - (time.time() - started), env)
        measured, calls = measured_jobs(done.stderr), after_markers(parse_raw_csv(done.stdout))
        if measured and len(calls) == len(measured):
            return dict(zip(measured, calls, strict=True)), done.stdout, done.stderr
        if measured or "MEASURED" in done.stderr:
            break  # the child ran: a second try would not change the count
    tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    raise LabError(f"ncu gave {len(calls)} profiled calls for {len(measured)} measured jobs (exit {done.returncode}): "
                   f"{tail[:800]}")


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--jobs", default=",".join(DEFAULT_JOBS),
                        help="comma-separated PHASE:CANDIDATE:BATCH:N jobs, profiled in this order "
                             f"(PHASE: {', '.join(PHASES)}; default: {','.join(DEFAULT_JOBS)}; the backward passes: "
                             f"{','.join(BACKWARD_JOBS)}; a server's last prefill chunk: {','.join(CHUNK_JOBS)}; a busy "
                             f"server's mixed step: {','.join(MIXED_JOBS)})")
    parser.add_argument("--deadline-s", type=positive_number, default=480, help="stop starting jobs after this many seconds "
                        "(a job still running then is cut off; earlier jobs' rows are kept)")
    parser.add_argument("--child", metavar="JOB", help=argparse.SUPPRESS)


def main(args) -> int:
    if args.child:
        return child(args.child.split(","))
    jobs = [job for job in args.jobs.split(",") if job]
    for job in jobs:
        parse_job(job)
    if not args.deadline_s > 0:
        raise LabError(f"--deadline-s must be a positive number of seconds, got {args.deadline_s}")
    ncu = find_ncu()
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    with dataset_lock(out_dir, kinds=("kernels",)):
        return _profile(args, jobs, ncu, version, out_dir)


def _profile(args, jobs: list[str], ncu: str, version: list[str], out_dir: Path) -> int:
    import pandas as pd

    flags = {"experiment": "kernel-counters", "jobs": jobs, "q_heads": 28, "kv_heads": 4, "head_dim": 128,
             "ncu": ncu, "ncu_version": version[-1] if version else None, "sections": list(SECTIONS),
             "method": "ncu --clock-control none --nvtx --nvtx-include counters (a start/end range) --section ... --page raw "
                       "(default cache control: caches flushed before each profiled kernel); one call per job "
                       "after three warm-up calls"}
    started, rows, failures = time.time(), [], {}
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=False))
    print(f"[counters] {len(jobs)} jobs in one process under ncu (at most {args.deadline_s:.0f} s)", file=sys.stderr, flush=True)
    try:
        profiled, raw, stderr = profile_jobs(ncu, jobs, args.deadline_s)
    except subprocess.TimeoutExpired:
        raise LabError(f"ncu did not finish the jobs within --deadline-s {args.deadline_s:.0f}") from None
    store.write_atomic(out_dir / "raw.csv", lambda tmp: tmp.write_text(raw))
    store.write_atomic(out_dir / "child.log", lambda tmp: tmp.write_text(stderr))
    for job in jobs:
        if job not in profiled:
            found = re.search(rf"^FAILED {re.escape(job)}: (.*)$", stderr, flags=re.M)
            failures[job] = found.group(1) if found else "not profiled"
            continue
        rows += long_rows(job, profiled[job])
        print(f"  {job}: {len(profiled[job])} kernel(s): {', '.join(k['name'][:50] for k in profiled[job])}",
              file=sys.stderr, flush=True)
    flags["failures"] = failures
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=not failures,
                                                       seconds=round(time.time() - started, 1)))
    if not rows:
        raise LabError(f"no job was profiled: {failures}")
    print(f"wrote {out_dir}: {len(rows)} metric values from {len(jobs) - len(failures)} of {len(jobs)} jobs", file=sys.stderr)
    print(pd.DataFrame(rows).query("metric == 'gpu__time_duration.sum'")[["job", "kernel", "value"]].to_string(index=False))
    return 0


def cli(argv=None) -> int:
    return module_cli(sys.modules[__name__], "python -m lab.measure.kernel_counters", argv)


if __name__ == "__main__":
    sys.exit(cli())
