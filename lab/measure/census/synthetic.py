"""A synthetic torch.profiler-shaped trace, and the census speed benchmark on it.

    python -m lab census-synthetic --bench 500        # MB/s and peak memory on a 500 MB trace
    python -m lab census-synthetic --write t.json.gz --mb 5

Tests import :func:`write_synthetic`. (Until 2026-12 this was ``scripts/census_synthetic.py``.)
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from lab.cli import path_arg, positive_number
from lab.measure.census.reader import ijson_backend, iter_events
from lab.measure.census.summary import census
from lab.store import write_json_atomic

_SYNTH_STEP = [
    # (cpu op, kernel name, dur us)
    ("aten::mm", "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 40.0),
    ("triton_poi_fused_add_mul_rms_norm_0", "triton_poi_fused_add_mul_rms_norm_0", 5.0),
    ("vllm::unified_attention_with_output",
     "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
     "flash::CollectiveMainloopFwdSm90<2, cute::tuple<_1,_1,_1>, cute::tuple<_128,_128,_128>>>>>(...)", 60.0),
    ("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", 35.0),
    ("triton_red_fused__to_copy_add_mean_mm_pow_rsqrt_1", "triton_red_fused__to_copy_add_mean_mm_pow_rsqrt_1", 6.0),
]


def write_synthetic(path: Path, megabytes: float, *, first_step: tuple = (1, 2048, 0, 0)) -> dict:
    """Write a torch.profiler-shaped trace of about ``megabytes`` MB (uncompressed) to ``path``.

    Each step has CPU ops, Python-stack events, runtime launches, flows and kernels linked by
    correlation ids, indented as torch.profiler writes them. Returns counts for checking.
    """
    path = Path(path)
    target = int(megabytes * 1e6)
    opener = gzip.open if path.suffix == ".gz" else open
    corr = 0
    ts = 1_000_000.0
    written = 0
    n_kernels = 0
    with opener(path, "wt", encoding="utf-8") as fh:
        head = '{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],\n  "traceEvents": [\n'
        fh.write(head)
        written += len(head)
        first = True
        step_no = 0
        while written < target:
            # The first step prefills, the rest decode one token each (as in a real decode window).
            ctx_reqs, ctx_tok, gen_reqs, gen_tok = first_step if step_no == 0 else (0, 0, 1, 1)
            step_no += 1
            step_ts = ts
            chunk = []
            for op, kernel, dur in _SYNTH_STEP:
                corr += 1
                n_kernels += 1
                ev_op = {"ph": "X", "cat": "cpu_op", "name": op, "pid": 100, "tid": 100, "ts": ts, "dur": 12.0,
                         "args": {"External id": corr, "Record function id": 0, "Sequence number": corr,
                                  "Fwd thread id": 0, "Ev Idx": corr}}
                ev_py = {"ph": "X", "cat": "python_function", "name": "vllm/model_executor/layers/linear.py(100): forward",
                         "pid": 100, "tid": 100, "ts": ts, "dur": 12.5,
                         "args": {"Python parent id": corr, "Python id": corr + 1, "Ev Idx": corr}}
                ev_rt = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100,
                         "ts": ts + 2.0, "dur": 4.0, "args": {"External id": corr, "cbid": 211, "correlation": corr}}
                ev_s = {"ph": "s", "id": corr, "pid": 100, "tid": 100, "ts": ts + 2.0, "cat": "ac2g", "name": "ac2g"}
                ev_k = {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": ts + 20.0, "dur": dur,
                        "args": {"External id": corr, "queued": 0, "device": 0, "context": 1, "stream": 7,
                                 "correlation": corr, "registers per thread": 168, "shared memory": 213000,
                                 "blocks per SM": 1.2, "warps per SM": 4.8, "grid": [132, 1, 1],
                                 "block": [384, 1, 1], "est. achieved occupancy %": 0}}
                ev_f = {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": ts + 20.0, "cat": "ac2g", "name": "ac2g",
                        "bp": "e"}
                chunk += [ev_op, ev_py, ev_rt, ev_s, ev_k, ev_f]
                ts += dur + 5.0
            name = f"execute_context_{ctx_reqs}({ctx_tok})_generation_{gen_reqs}({gen_tok})"
            chunk.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 100, "tid": 100,
                          "ts": step_ts - 1.0, "dur": ts - step_ts + 1.0, "args": {"External id": 0}})
            ts += 10.0
            text = ",\n".join("  " + json.dumps(e, indent=2).replace("\n", "\n  ") for e in chunk)
            if not first:
                text = ",\n" + text
            first = False
            fh.write(text)
            written += len(text)
        tail = '\n  ],\n  "traceName": "synthetic"\n}\n'
        fh.write(tail)
    return {"kernels": n_kernels, "steps": step_no, "bytes": os.path.getsize(path)}


def _items_only(path: Path) -> int:
    """The floor: stream every event through the same parser and do nothing with it."""
    n = 0
    for _ in iter_events(path):
        n += 1
    return n


def _compare_backends(megabytes: float = 10.0) -> dict[str, float]:
    """Parse-only MB per CPU second of each available ijson backend on a small synthetic trace."""
    import ijson

    results = {}
    with tempfile.TemporaryDirectory(prefix="census-backends-") as tmp:
        path = Path(tmp) / "synthetic.json"
        size = write_synthetic(path, megabytes)["bytes"] / 1e6
        for name in ("yajl2_c", "python"):
            try:
                backend = ijson.get_backend(name)
            except Exception:  # noqa: BLE001 - a backend that does not load is simply not compared
                continue
            cpu = time.process_time()
            with open(path, "rb") as fh:
                for _ in backend.items(fh, "traceEvents.item", use_float=True):
                    pass
            results[name] = size / (time.process_time() - cpu)
    return results


def bench(megabytes: float, keep: Path | None = None, compare_mb: float = 10.0) -> dict:
    """Census throughput (MB/s of uncompressed JSON, per CPU second and per wall second) and peak RSS.

    Also times the bare parse (every event through the same streaming parser, nothing kept) as
    the fastest peer, so the figure comes with a ratio that does not depend on the machine.
    """
    import ijson

    folder = Path(tempfile.mkdtemp(prefix="census-bench-"))
    path = keep or folder / "synthetic.json"
    try:
        info = write_synthetic(path, megabytes)
        mb = info["bytes"] / 1e6
        wall, cpu = time.perf_counter(), time.process_time()
        result = census(path, progress=sys.stderr.isatty())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
        floor_cpu = time.process_time()
        _items_only(path)
        floor_cpu = time.process_time() - floor_cpu
    finally:
        if keep is None:
            path.unlink(missing_ok=True)
            folder.rmdir()
    backends = _compare_backends(compare_mb)
    return {"mb": mb, "kernels": info["kernels"], "cpu_seconds": cpu, "wall_seconds": wall,
            "parse_only_mb_per_cpu_s_by_backend": backends,
            "mb_per_cpu_s": mb / cpu, "mb_per_wall_s": mb / wall, "parse_only_mb_per_cpu_s": mb / floor_cpu,
            "ratio_to_parse_only": floor_cpu / cpu, "peak_rss_mib": rss,
            "backend": ijson_backend().__name__.rsplit(".", 1)[-1], "ijson": ijson.__version__,
            "families_ms": {k: v["ms"] for k, v in result["families"].items()}}



def print_bench(r: dict) -> None:
    print(f"census benchmark ({r['backend']} parser, ijson {r['ijson']}): {r['mb']:.1f} MB of trace JSON, "
          f"{r['kernels']:,} kernels")
    print(f"  census      {r['mb_per_cpu_s']:7.1f} MB per CPU second ({r['mb_per_wall_s']:.1f} MB/s wall; "
          f"{r['cpu_seconds']:.2f} s CPU)")
    print(f"  parse only  {r['parse_only_mb_per_cpu_s']:7.1f} MB per CPU second (fastest peer: same parser, "
          f"nothing kept); census runs at {r['ratio_to_parse_only']:.2f}x of it")
    print(f"  peak RSS    {r['peak_rss_mib']:7.0f} MiB (whole process)")
    for name, rate in r["parse_only_mb_per_cpu_s_by_backend"].items():
        print(f"  ijson backend {name:8s} {rate:7.1f} MB per CPU second, parse only (10 MB synthetic)")
    print(f"bars: >= 50 MB/s on one core: {'met' if r['mb_per_cpu_s'] >= 50 else 'NOT met'}; "
          f"<= 300 MB peak memory: {'met' if r['peak_rss_mib'] <= 300 else 'NOT met'}")


def add_arguments(parser) -> None:
    parser.add_argument("--bench", type=positive_number, metavar="MB", help="benchmark the census on a synthetic trace")
    parser.add_argument("--write", type=path_arg, metavar="TRACE", help="write a synthetic trace (.json or .json.gz)")
    parser.add_argument("--mb", type=positive_number, default=1.0, help="size of the trace --write makes (default 1)")
    parser.add_argument("--json", type=path_arg, metavar="OUT", help="also write the benchmark's figures as JSON")


def main(args) -> int:
    if not (args.write or args.bench):
        print("error: give --bench MB, --write TRACE or both (see python -m lab census-synthetic --help)",
              file=sys.stderr)
        return 2
    if args.write:
        print(write_synthetic(args.write, args.mb))
    if args.bench:
        r = bench(args.bench)
        print_bench(r)
        if args.json:
            write_json_atomic(args.json, r)
    return 0
