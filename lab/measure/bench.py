"""Time every attention candidate side by side on this GPU: prefill (causal GQA) and split-KV decode.

Candidates: naive (torch SDPA's math backend: the score matrix in memory), torch SDPA with the
flash and cuDNN backends, FlexAttention (torch.compile'd), and this book's Triton kernels
(teaching and tuned). Each candidate's output is checked against an fp32 reference before it is
timed. The candidates of a shape are then timed in interleaved rounds (``--rounds``), each round
starting at a different candidate, and each time is the median round: the GPU's state drifts within
a run, and one block per candidate would hand the drift to whoever ran at the wrong moment. Prefill
times are medians of ``triton.testing.do_bench`` (CUDA events, L2 flushed between runs). Decode is
timed twice: ``ms`` replays the calls from a CUDA graph (as serving engines do; inputs rotated so
K/V come from HBM) and ``ms_eager`` launches from Python, where short contexts
measure launch overhead. Decode's K/V read rate (from ``ms``) is given as a share of the GPU's read
ceiling (``bw_fraction``; the read-stream slope measured at the start of the run, the denominator every page
divides a read rate by), with a device-to-device copy's rate beside it (``copy_gbps``). Runs before 2026-12
stored ``bw_fraction`` against the copy rate; their rows have no ``read_ceiling_gbps``, and the book
recomputes their share from ``ms`` and ``bytes`` over the one ceiling (:func:`lab.results.kernel_runs.run_bars`).

The candidates live in :mod:`lab.measure.candidates`, the timing in :mod:`lab.measure.timing`; this
module is the command, the tables and the performance bars (and re-exports the names other modules use).

Writes ``prefill.csv``, ``decode.csv``, ``ablation.csv`` (the tuned kernel's optimisations one at
a time), ``bars.csv`` (the issue's performance bars) and ``provenance.json`` to ``--out``
(default data/local/kernels; the book's cached run is data/h200/kernels).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store, units
from lab.cli import path_arg, positive_count, sizes
from lab.folders import dataset_lock, set_aside
from lab.measure import gpuclocks
from lab.measure.candidates import (  # noqa: F401  (re-exported: lab.measure.bench is where callers look)
    ALL_CANDIDATES,
    CANDIDATES,
    MAX_ABS_ERR,
    OURS,
    Shape,
    candidate_fn,
    inputs,
    naive_bytes_needed,
)
from lab.measure.timing import (  # noqa: F401  (re-exported as above)
    ABLATION_STEPS,
    TEACHING_LAUNCH,
    ablation,
    copy_bandwidth_gbps,
    graph_replay_ms,
    measure_shape,
    rotation,
    round_order,
    rounds_text,
)

#: The old private name of :func:`inputs`, kept for modules written against it.
_inputs = inputs

PREFILL_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
DECODE_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
DECODE_BATCHES = (1, 16)
DEFAULT_OUT = REPO_ROOT / "data" / "local" / "kernels"
#: What the GPU's clocks did while a candidate was timed (lab.measure.gpuclocks; empty without nvidia-smi).
CLOCK_COLUMNS = ("sm_mhz", "power_w", "clock_limit", "clock_limit_share")  # gpuclocks.row_fields
PREFILL_COLUMNS = ("candidate", "batch", "q_heads", "kv_heads", "head_dim", "n", "dtype", "causal", "status",
                   "ms", "ms_rounds", "tflops", "speed_vs_fastest", "fastest", "max_abs_err", "note", "config",
                   *CLOCK_COLUMNS)
DECODE_COLUMNS = ("candidate", "batch", "q_heads", "kv_heads", "head_dim", "n", "dtype", "status", "ms", "ms_rounds",
                  "ms_eager", "tflops",
                  "bytes", "gbps", "copy_gbps", "read_ceiling_gbps", "bw_fraction", "speed_vs_fastest", "fastest",
                  "max_abs_err",
                  "note", "config", *CLOCK_COLUMNS)


# --- the performance bars --------------------------------------------------------------

#: the decode bar: the tuned kernel's K/V read rate over the read ceiling (before 2026-12: over the copy rate)
READ_BAR = "decode 32k batch 16: tuned read rate / read ceiling"
COPY_BAR = "decode 32k batch 16: tuned bandwidth / copy bandwidth"

def bars(prefill, decode) -> list[dict]:
    """Each bar with its measured ratio and whether it is met (ratios from this run only)."""
    def ms(table, name, **where):
        if table is None or table.empty:
            return math.nan
        sel = table[(table.candidate == name) & (table.status == "ok")]
        for key, value in where.items():
            sel = sel[sel[key] == value]
        return float(sel.ms.iloc[0]) if len(sel) else math.nan

    def fastest_torch(table, **where):
        return min((ms(table, n, **where) for n in CANDIDATES if n not in OURS), key=lambda x: (math.isnan(x), x))

    out = []

    def add(name, ratio, need):
        out.append({"bar": name, "ratio": ratio, "need": need, "met": bool(ratio >= need) if not math.isnan(ratio) else False})

    for n in (16384, 32768):
        tuned = ms(prefill, "ours-tuned", n=n)
        add(f"prefill {n // 1024}k: tuned speed vs SDPA flash", ms(prefill, "sdpa-flash", n=n) / tuned, 1.0)
        add(f"prefill {n // 1024}k: tuned speed vs FlexAttention", ms(prefill, "flex", n=n) / tuned, 1.0)
        add(f"prefill {n // 1024}k: tuned speed vs fastest torch backend", fastest_torch(prefill, n=n) / tuned, 0.8)
    add("prefill 16k: teaching speed vs fastest torch backend",
        fastest_torch(prefill, n=16384) / ms(prefill, "ours-teaching", n=16384), 0.5)
    add("decode 32k batch 1: tuned speed vs SDPA flash",
        ms(decode, "sdpa-flash", n=32768, batch=1) / ms(decode, "ours-tuned", n=32768, batch=1), 1.0)
    frac, of_ceiling = math.nan, True
    if decode is not None and not decode.empty:
        sel = decode[(decode.candidate == "ours-tuned") & (decode.n == 32768) & (decode.batch == 16) & (decode.status == "ok")]
        frac = float(sel.bw_fraction.iloc[0]) if len(sel) else math.nan
        # a run before 2026-12 divided by the copy rate (no read_ceiling_gbps): its bar keeps its own name
        of_ceiling = "read_ceiling_gbps" in sel and bool(sel.read_ceiling_gbps.notna().all())
    add(READ_BAR if of_ceiling else COPY_BAR, frac, 0.7)
    return out


# --- CLI ---------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--lengths", default="1k,2k,4k,8k,16k,32k", help="prefill prompt lengths")
    parser.add_argument("--contexts", default="1k,2k,4k,8k,16k,32k,64k,128k", help="decode context lengths")
    parser.add_argument("--batches", default="1,16", help="decode batch sizes")
    parser.add_argument("--candidates", default=",".join(CANDIDATES),
                        help=f"subset of {','.join(ALL_CANDIDATES)} (the peers {','.join(ALL_CANDIDATES[len(CANDIDATES):])} "
                             "need vLLM's vllm_flash_attn or flash-attn-4 installed)")
    parser.add_argument("--q-heads", type=positive_count, default=28)
    parser.add_argument("--kv-heads", type=positive_count, default=4)
    parser.add_argument("--rep-ms", type=positive_count, default=120, help="milliseconds of timed repeats per measurement, "
                        "shared out among the rounds")
    parser.add_argument("--rounds", type=positive_count, default=3, help="interleaved rounds: each round times every candidate "
                        "of a shape once, starting at a different one; a candidate's time is its median round")
    parser.add_argument("--skip-prefill", action="store_true")
    parser.add_argument("--skip-decode", action="store_true")
    parser.add_argument("--skip-ablation", action="store_true", help="skip the tuned kernel's step-by-step ablation at 16k/32k")
    parser.add_argument("--rebuild", type=path_arg, metavar="DIR",
                        help="no GPU needed: rewrite DIR's tables from its measurements.jsonl (e.g. after a cut-off run)")


def _tables(rows: list[dict]):
    """prefill and decode tables (None where a phase has no rows) from measurement rows."""
    import pandas as pd

    prefill = [r for r in rows if r.get("phase", "prefill") == "prefill"]
    decode = [r for r in rows if r.get("phase") == "decode"]
    return (pd.DataFrame(prefill).reindex(columns=PREFILL_COLUMNS) if prefill else None,
            pd.DataFrame(decode).reindex(columns=DECODE_COLUMNS) if decode else None)


def write_tables(out_dir: Path, rows: list[dict]):
    """Write prefill.csv, decode.csv and bars.csv from the rows measured so far."""
    import pandas as pd


    prefill, decode = _tables(rows)
    if prefill is not None:
        store.write_csv(out_dir, "prefill.csv", prefill)
    if decode is not None:
        store.write_csv(out_dir, "decode.csv", decode)
    bar_table = pd.DataFrame(bars(prefill, decode))
    store.write_csv(out_dir, "bars.csv", bar_table)
    return prefill, decode, bar_table


#: Fields every measurement row has; a line without one is not a bench measurement.
ROW_FIELDS = ("candidate", "n", "status")


def read_measurements(folder: Path) -> list[dict]:
    """The rows of a bench run's measurements.jsonl, checked: a file with no rows, a line that is not a
    measurement, or an 'ok' row without a time is refused (so --rebuild never writes tables of NaN)."""
    path = Path(folder) / "measurements.jsonl"
    if not path.is_file():
        raise LabError(f"{path}: not found; --rebuild needs the folder of a bench run")
    rows = store.read_jsonl(path, required=ROW_FIELDS)  # a line torn by the cut-off is skipped
    if not rows:
        raise LabError(f"{path}: no measurements in it; nothing to rebuild the tables from")
    for number, row in enumerate(rows, 1):
        ms = row.get("ms")
        if row["status"] == "ok" and (isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms)):
            raise LabError(f"{path}: record {number} ({row['candidate']}, n={row['n']}) has status ok but ms "
                           f"{ms!r}; expected a time in ms")
    return rows


def rebuild(folder: Path) -> int:
    """Re-derive the tables of a run (one cut off by a time limit, say) from its measurements.jsonl."""
    rows = read_measurements(folder)
    with dataset_lock(folder, option="--rebuild", kinds=("kernels",)):
        prefill, decode, bar_table = write_tables(folder, rows)
    _print_summary(prefill, decode, bar_table, [])
    return 0


def main(args) -> int:

    if args.rebuild is not None:
        return rebuild(args.rebuild)
    if args.rep_ms < args.rounds:
        raise LabError(f"--rep-ms must be at least --rounds; got --rounds {args.rounds}, --rep-ms {args.rep_ms}")
    candidates = [c for c in args.candidates.split(",") if c]
    unknown = [c for c in candidates if c not in ALL_CANDIDATES]
    if unknown or not candidates:
        raise LabError(f"--candidates: unknown candidate {(unknown or [''])[0]!r}; choose from {', '.join(ALL_CANDIDATES)}")
    if args.q_heads % args.kv_heads:
        raise LabError(f"--q-heads ({args.q_heads}) must be a multiple of --kv-heads ({args.kv_heads})")
    shapes = []
    if not args.skip_prefill:
        shapes += [Shape("prefill", 1, args.q_heads, args.kv_heads, n) for n in sizes(args.lengths, option="--lengths")]
    if not args.skip_decode:
        shapes += [Shape("decode", b, args.q_heads, args.kv_heads, n) for b in sizes(args.batches, option="--batches")
                   for n in sizes(args.contexts, option="--contexts")]
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here (or TRITON_INTERPRET=1): `python -m lab bench` times kernels on a GPU; "
                       "run it on a GPU machine, or read the cached H200 results in data/h200/kernels/")
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    with dataset_lock(out_dir, kinds=("kernels",)):
        return _measure(args, caps, candidates, shapes, out_dir)


def _measure(args, caps, candidates: list[str], shapes: list, out_dir: Path) -> int:
    import pandas as pd
    from tqdm import tqdm

    from lab.measure.bandwidth import read_ceiling_gbps  # triton's kernels: loaded when a run starts

    set_aside(out_dir / "measurements.jsonl")  # an earlier run's measurements stay readable, as measurements.1.jsonl
    started = time.time()
    copy_gbps, ceiling_gbps = copy_bandwidth_gbps(), read_ceiling_gbps()
    print(f"{caps.gpu}: read ceiling {units.byte_rate(ceiling_gbps * 1e9)} (read-stream slope), device-to-device copy "
          f"{units.byte_rate(copy_gbps * 1e9)} (read + write)", file=sys.stderr)
    clocks = gpuclocks.ClockSampler(interval_ms=gpuclocks.TIMING_INTERVAL_MS) if gpuclocks.available() else None
    flags = {
        "q_heads": args.q_heads, "kv_heads": args.kv_heads, "head_dim": 128, "candidates": candidates,
        "timer": ("prefill and decode ms_eager: triton.testing.do_bench median, L2 flushed before each call; "
                  "decode ms: median of CUDA-graph replays (triton.testing.do_bench_cudagraph), inputs rotated "
                  "over >= 256 MB so K/V come from HBM; every shape's candidates are timed in interleaved rounds "
                  "(each round starts at a different candidate, rep_ms / rounds each) and ms is the median round, "
                  "listed in ms_rounds"), "rep_ms": args.rep_ms, "rounds": args.rounds,
        "reference": "fp32 naive attention (lab.measure.attention.reference.attention_torch)", "max_abs_err": MAX_ABS_ERR,
        "bw_fraction": "decode gbps / read_ceiling_gbps (lab.measure.bandwidth.read_ceiling_gbps: the read-stream "
                       "slope between 256 MiB and 4 GiB, measured at the start of the run)",
        "clocks": ("nvidia-smi every 20 ms while each candidate was timed: sm_mhz and power_w are medians, "
                   "clock_limit the limit active in most samples" if clocks is not None else "not sampled")}
    # written first and again at the end: a run cut off midway still leaves a valid (partial) dataset
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags,
                                                       copy_gbps=copy_gbps, read_ceiling_gbps=ceiling_gbps,
                                                       complete=False))
    rows: list[dict] = []
    with tqdm(total=len(shapes) * len(candidates), unit="run", file=sys.stderr) as progress:
        for shape in shapes:
            measured = [{"phase": shape.phase, **row}
                        for row in measure_shape(shape, candidates, args.rep_ms, progress, copy_gbps, clocks=clocks,
                                                 rounds=args.rounds, ceiling_gbps=ceiling_gbps)]
            rows += measured
            for row in measured:  # nothing measured is lost if a later shape crashes
                store.append_jsonl(out_dir / "measurements.jsonl", row)
            write_tables(out_dir, rows)
    ablation_rows = []
    if not args.skip_prefill and not args.skip_ablation:
        for n in [n for n in sizes(args.lengths) if n in (16384, 32768)]:
            ablation_rows += ablation(n, args.q_heads, args.kv_heads, args.rep_ms, args.rounds)
        if ablation_rows:
            store.write_csv(out_dir, "ablation.csv", pd.DataFrame(ablation_rows))
    prefill, decode, bar_table = write_tables(out_dir, rows)
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, copy_gbps=copy_gbps,
                                                       read_ceiling_gbps=ceiling_gbps, complete=True, seconds=round(time.time() - started, 1)))
    _print_summary(prefill, decode, bar_table, ablation_rows)
    print(f"wrote {out_dir} in {time.time() - started:.0f} s", file=sys.stderr)
    return 0


def _print_summary(prefill, decode, bar_table, ablation_rows) -> None:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        if prefill is not None:
            print("prefill ms (causal GQA, bf16, d=128)")
            print(prefill.pivot(index="n", columns="candidate", values="ms").round(3).to_string())
        if decode is not None:
            print("decode ms (one token over the cache, bf16, d=128)")
            print(decode.pivot(index=["batch", "n"], columns="candidate", values="ms").round(4).to_string())
            print("decode K/V read rate / read ceiling")
            print(decode.pivot(index=["batch", "n"], columns="candidate", values="bw_fraction").round(2).to_string())
        if ablation_rows:
            print("tuned forward, one change at a time")
            print(pd.DataFrame(ablation_rows).round(3).to_string(index=False))
        print("bars")
        print(bar_table.to_string(index=False))
