"""Several ``vllm bench serve`` points in one process: vLLM's client is imported once, not once per point.

``vllm bench serve FLAGS`` is two calls (vllm/entrypoints/cli/benchmark/serve.py in vLLM 0.26):
``add_cli_args(parser)`` then ``main(parser.parse_args(FLAGS))`` of ``vllm.benchmarks.serve``. This runner
makes exactly those two calls for each point of a jobs file, one after the other, so every point is the
same client with the same flags as its ``<point>.cmd`` line; what it saves is the import of vLLM, torch
and transformers (seconds each time) between points of one arm. Run by :func:`lab.measure.vllm.bench.run_points`::

    python -m lab.measure.vllm.bench_batch JOBS.json [--bench vllm.benchmarks.serve]

JOBS.json lists ``{"slug", "flags", "console", "budget_s"}`` and ``"deadline_unix"``: a point whose
budget would end past the deadline is not started. Each point's stdout and stderr (file descriptors 1
and 2, so vLLM's logging lands there too) go to its console file; this process prints one line per point,
``start <slug>`` and ``end <slug> <status>``, for the parent's progress.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path


def load_bench(name: str):
    """The module that has ``add_cli_args`` and ``main``: by import name, or a ``.py`` file (the tests' fake)."""
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("bench_under_test", name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


def run_one(bench, flags: list[str], console: Path) -> int:
    """One point with its fds 1 and 2 on ``console``; its exit status (0 when ``main`` returned)."""
    parser_class = getattr(bench, "FlexibleArgumentParser", argparse.ArgumentParser)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(console, "a", encoding="utf-8") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            parser = parser_class()
            bench.add_cli_args(parser)
            bench.main(parser.parse_args(flags))
            status = 0
        except SystemExit as exc:  # argparse and the client's own exits
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code not in (None, 0) and not isinstance(exc.code, int):
                print(exc.code)
        except Exception:  # noqa: BLE001 -- the point failed; its traceback is its console's last lines
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.measure.vllm.bench_batch",
                                     description="Run several vllm bench serve points in one process.")
    parser.add_argument("jobs", type=Path, help="the jobs file (JSON) lab.measure.vllm.bench.run_points writes")
    parser.add_argument("--bench", default="vllm.benchmarks.serve",
                        help="module with add_cli_args and main (default vllm.benchmarks.serve)")
    args = parser.parse_args(argv)
    spec = json.loads(args.jobs.read_text(encoding="utf-8"))
    bench = load_bench(args.bench)
    for job in spec["jobs"]:
        if time.time() + job["budget_s"] > spec["deadline_unix"]:
            print(f"end {job['slug']} skipped", flush=True)
            continue
        print(f"start {job['slug']}", flush=True)
        status = run_one(bench, job["flags"], Path(job["console"]))
        print(f"end {job['slug']} {status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
