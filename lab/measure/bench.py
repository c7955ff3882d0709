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
measure launch overhead. Decode bandwidth (from ``ms``) is compared with a device-to-device copy
measured in the same run.

Writes ``prefill.csv``, ``decode.csv``, ``ablation.csv`` (the tuned kernel's optimisations one at
a time), ``bars.csv`` (the issue's performance bars) and ``provenance.json`` to ``--out``
(default data/local/kernels; the book's cached run is data/h200/kernels).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab import REPO_ROOT, LabError, store

PREFILL_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
DECODE_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
DECODE_BATCHES = (1, 16)
CANDIDATES = ("naive", "sdpa-flash", "sdpa-cudnn", "flex", "ours-teaching", "ours-tuned")
OURS = ("ours-teaching", "ours-tuned")
MAX_ABS_ERR = 2e-2  # bf16 outputs against the fp32 reference
DEFAULT_OUT = REPO_ROOT / "data" / "local" / "kernels"
#: What the GPU's clocks did while a candidate was timed (lab.measure.gpuclocks; empty without nvidia-smi).
CLOCK_COLUMNS = ("sm_mhz", "power_w", "clock_limit", "clock_limit_share")  # gpuclocks.row_fields
PREFILL_COLUMNS = ("candidate", "batch", "q_heads", "kv_heads", "head_dim", "n", "dtype", "causal", "status",
                   "ms", "ms_rounds", "tflops", "speed_vs_fastest", "fastest", "max_abs_err", "note", "config",
                   *CLOCK_COLUMNS)
DECODE_COLUMNS = ("candidate", "batch", "q_heads", "kv_heads", "head_dim", "n", "dtype", "status", "ms", "ms_rounds",
                  "ms_eager", "tflops",
                  "bytes", "gbps", "copy_gbps", "bw_fraction", "speed_vs_fastest", "fastest", "max_abs_err",
                  "note", "config", *CLOCK_COLUMNS)


@dataclass(frozen=True)
class Shape:
    phase: str          # "prefill" or "decode"
    batch: int
    q_heads: int
    kv_heads: int
    n: int              # prompt length (prefill) or cached context (decode)
    head_dim: int = 128

    @property
    def n_q(self) -> int:
        return self.n if self.phase == "prefill" else 1

    @property
    def causal(self) -> bool:
        return self.phase == "prefill"

    def flops(self) -> float:
        from lab.measure.attention.reference import attention_flops
        return attention_flops(self.batch, self.q_heads, self.n_q, self.n, self.head_dim, self.causal)

    def min_bytes(self, element_bytes: int = 2) -> int:
        """Each input read once, the output written once (the least any kernel must move)."""
        q_and_o = 2 * self.batch * self.q_heads * self.n_q * self.head_dim
        k_and_v = 2 * self.batch * self.kv_heads * self.n * self.head_dim
        return (q_and_o + k_and_v) * element_bytes


# --- candidates --------------------------------------------------------------------------------

def _sdpa(backend_name: str):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return run


_FLEX = {}


def _flex(q, k, v, causal):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if "fn" not in _FLEX:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _FLEX["fn"] = torch.compile(flex_attention)
    mask = None
    if causal:
        key = (q.shape[2], k.shape[2])
        if key not in _FLEX:
            _FLEX[key] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, key[0], key[1], device=q.device)
        mask = _FLEX[key]
    return _FLEX["fn"](q, k, v, block_mask=mask, enable_gqa=True)


def candidate_fn(name: str, phase: str) -> Callable:
    from lab.measure.attention import triton_decode, triton_fwd

    if name == "naive":
        return _sdpa("MATH")
    if name == "sdpa-flash":
        return _sdpa("FLASH_ATTENTION")
    if name == "sdpa-cudnn":
        return _sdpa("CUDNN_ATTENTION")
    if name == "flex":
        return _flex
    if phase == "decode":
        fn = triton_decode.teaching_decode if name == "ours-teaching" else triton_decode.tuned_decode
        return lambda q, k, v, causal: fn(q, k, v)
    fn = triton_fwd.teaching_forward if name == "ours-teaching" else triton_fwd.tuned_forward
    return lambda q, k, v, causal: fn(q, k, v, causal)


def naive_bytes_needed(shape: Shape) -> int:
    """Rough peak memory of the math backend: the bf16 scores, their softmax and a copy, plus the mask."""
    matrix = shape.batch * shape.q_heads * shape.n_q * shape.n
    return 3 * 2 * matrix + shape.n_q * shape.n


# --- measuring ---------------------------------------------------------------------------------

def copy_bandwidth_gbps(gib: float = 2.0) -> float:
    """Device-to-device copy: bytes read plus bytes written per second, in GB/s."""
    import torch
    from triton.testing import do_bench

    n = int(gib * 2**30) // 2
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * n * 2 / (ms * 1e-3) / 1e9


def _inputs(shape: Shape, seed: int, device: str = "cuda", dtype=None):
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    def make(h, n):
        return torch.randn(shape.batch, h, n, shape.head_dim, generator=gen, device=device).to(dtype or torch.bfloat16)
    return make(shape.q_heads, shape.n_q), make(shape.kv_heads, shape.n), make(shape.kv_heads, shape.n)


class _Silent:
    """Stands in for a tqdm bar when nobody is watching (a chapter's live cell, a test)."""

    def set_postfix_str(self, text):
        pass

    def update(self, n):
        pass


def measure_shape(shape: Shape, candidates, rep_ms: int = 50, progress=None, copy_gbps: float | None = None,
                  device: str = "cuda", timer=None, dtype=None, clocks=None, rounds: int = 3) -> list[dict]:
    """Check every candidate on one shape, then time them in interleaved rounds; one row per candidate.

    The GPU's clock and power state drift within a run: a chip that has just idled runs a kernel
    faster for a moment, and a power-hungry kernel leaves the next one a hotter chip. A candidate
    timed in one block early in a run is therefore not comparable with one timed late. So each of
    ``rounds`` rounds times every candidate for ``rep_ms / rounds`` ms, each round starting at a
    different candidate; a row's ``ms`` is the median over the rounds and ``ms_rounds`` lists them.

    ``device``, ``timer`` and ``dtype`` exist for the CPU test of this function (interpreter, fp16).
    Without ``copy_gbps`` (a live cell), a decode row's bandwidth share is left empty. ``clocks`` (a
    :class:`lab.measure.gpuclocks.ClockSampler`) samples the GPU while each candidate is timed: a timing taken
    at a power-capped clock says so in its row.
    """
    progress = progress or _Silent()
    import statistics

    import torch

    from lab.measure.attention.reference import attention_torch
    from lab.measure.gpuclocks import row_fields, summarise

    if timer is None:
        from triton.testing import do_bench as timer
    if rounds < 1:
        raise LabError(f"rounds must be at least 1, got {rounds}")
    q, k, v = _inputs(shape, seed=shape.n + 7 * shape.batch, device=device, dtype=dtype)
    reference = attention_torch(q, k, v, shape.causal)  # fp32 math, query chunks
    rows, ready = [], []  # every row in candidate order; (row, fn) of those that passed the check
    for name in candidates:
        progress.set_postfix_str(f"{shape.phase} b={shape.batch} n={shape.n} {name}: check")
        row = {"candidate": name, "batch": shape.batch, "q_heads": shape.q_heads, "kv_heads": shape.kv_heads,
               "head_dim": shape.head_dim, "n": shape.n, "dtype": "bfloat16", "status": "ok", "ms": math.nan,
               "max_abs_err": math.nan, "note": "", "config": ""}
        if shape.phase == "prefill":
            row["causal"] = True
        rows.append(row)
        free = torch.cuda.mem_get_info()[0] if device == "cuda" else 2**40
        if name == "naive" and naive_bytes_needed(shape) > 0.8 * free:
            row.update(status="skipped", note=f"the score matrix needs ~{naive_bytes_needed(shape) / 1e9:.0f} GB, "
                                               f"{free / 1e9:.0f} GB free")
            progress.update(1)
            continue
        fn = candidate_fn(name, shape.phase)
        started = time.time()
        try:
            out = fn(q, k, v, shape.causal)  # first call also compiles / autotunes
            if device == "cuda":
                torch.cuda.synchronize()
            row["max_abs_err"] = (out.float() - reference.float()).abs().max().item()
            del out
            if not row["max_abs_err"] <= MAX_ABS_ERR:
                row.update(status="wrong", note=f"max abs error {row['max_abs_err']:.3g} > {MAX_ABS_ERR}")
        except Exception as exc:  # a backend that does not support this shape is a result, not a crash
            _failed(row, exc, device)
        row["seconds"] = time.time() - started  # compile + check, then timing: where a run's time goes
        if row["status"] == "ok":
            ready.append((row, fn))
        else:
            progress.update(1)
    if device == "cuda":
        torch.cuda.empty_cache()  # the naive check's score matrix

    timings = {row["candidate"]: [] for row, _ in ready}
    samples = {row["candidate"]: [] for row, _ in ready}
    sets = rotation(shape, (q, k, v)) if shape.phase == "decode" and device == "cuda" else None
    per_round = max(1, rep_ms // rounds)
    for turn in range(rounds):
        for row, fn in round_order(ready, turn, rounds):
            if row["status"] != "ok":
                continue
            name = row["candidate"]
            progress.set_postfix_str(f"{shape.phase} b={shape.batch} n={shape.n} {name}: round {turn + 1}/{rounds}")
            started = time.time()
            try:
                if clocks is not None:
                    clocks.start()
                timing = {"ms": timer(lambda fn=fn: fn(q, k, v, shape.causal), warmup=10, rep=per_round,
                                      return_mode="median")}
                if sets is not None:
                    timing["ms_eager"] = timing["ms"]
                    try:
                        timing["ms"] = graph_replay_ms(fn, sets, per_round)
                    except Exception as exc:
                        row["note"] = f"graph capture failed ({type(exc).__name__}); eager time reported"
                        torch.cuda.synchronize()
                if clocks is not None:
                    clocks.stop()
                    samples[name] += clocks.samples
                timings[name].append(timing)
            except Exception as exc:
                if clocks is not None and clocks.running:
                    clocks.stop()
                _failed(row, exc, device)
            row["seconds"] += time.time() - started
            if turn == rounds - 1 or row["status"] != "ok":
                progress.update(1)
    if device == "cuda":
        torch.cuda.empty_cache()

    for row, _ in ready:
        name = row["candidate"]
        if row["status"] == "ok":
            row["ms"] = statistics.median(t["ms"] for t in timings[name])
            row["ms_rounds"] = rounds_text(t["ms"] for t in timings[name])
            if sets is not None:
                row["ms_eager"] = statistics.median(t["ms_eager"] for t in timings[name])
            if clocks is not None:
                row.update(row_fields(summarise(samples[name])))
    for row in rows:
        if row["candidate"] == "ours-tuned":
            row["config"] = _tuned_config(shape, q.dtype)
        if row["status"] == "ok":
            row["tflops"] = shape.flops() / (row["ms"] * 1e-3) / 1e12
            if shape.phase == "decode":
                row["bytes"] = shape.min_bytes()
                row["gbps"] = row["bytes"] / (row["ms"] * 1e-3) / 1e9
                row["copy_gbps"] = copy_gbps
                row["bw_fraction"] = row["gbps"] / copy_gbps if copy_gbps else math.nan
        if "seconds" in row:
            row["seconds"] = round(row["seconds"], 1)
    ok = [r for r in rows if r["status"] == "ok"]
    if ok:
        best = min(ok, key=lambda r: r["ms"])
        for r in rows:
            r["fastest"] = best["candidate"]
            r["speed_vs_fastest"] = best["ms"] / r["ms"] if r["status"] == "ok" else math.nan
    return rows


def _failed(row: dict, exc: Exception, device: str) -> None:
    """Mark a candidate that raised: its row says why, and the run goes on."""
    row.update(status="error", note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def _tuned_config(shape: Shape, dtype) -> str:
    """The launch the tuned kernel chose for this shape, as 'KEY=value ...'."""
    from lab.measure.attention import triton_decode, triton_fwd

    if shape.phase == "prefill":
        config = triton_fwd.best_config(shape.n, shape.n, shape.head_dim, True)
    else:
        config = triton_decode.best_decode_config(shape.batch, shape.q_heads, shape.kv_heads, shape.n, shape.head_dim, dtype)
    return " ".join(f"{key}={val}" for key, val in (config or {}).items())


def rotation(shape: Shape, first, min_bytes: int = 256 << 20) -> list:
    """Input sets to cycle through so that the K/V a call reads were not left in L2 by the call before."""
    import torch

    sets = [first]
    while len(sets) * shape.min_bytes() < min_bytes:
        sets.append(tuple(torch.randn_like(t) for t in first))
    return sets


def graph_replay_ms(fn, sets, rep_ms: int) -> float:
    """Median ms per call of ``fn`` replayed from a CUDA graph (as serving engines run decode),
    cycling through ``sets`` of inputs. Without a graph, decode at short contexts times Python's
    launch overhead, not the GPU."""
    from triton.testing import do_bench_cudagraph

    state = {"i": 0}

    def call():
        q, k, v = sets[state["i"] % len(sets)]
        state["i"] += 1
        return fn(q, k, v, False)
    return do_bench_cudagraph(call, rep=rep_ms, return_mode="median")


# --- what each optimisation of the tuned forward kernel buys --------------------------------------

#: The teaching kernel's launch on a GPU; the ablation starts the tuned kernel from the same tiles.
TEACHING_LAUNCH = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
ABLATION_STEPS = (
    ("teaching kernel", {"kernel": "teaching"}),
    ("exp2, log2(e) folded into the scale",
     {"config": TEACHING_LAUNCH, "split_diagonal": False, "heavy_first": False, "tma": False}),
    ("+ off-diagonal tiles without a mask",
     {"config": TEACHING_LAUNCH, "split_diagonal": True, "heavy_first": False, "tma": False}),
    ("+ heaviest query tiles launched first",
     {"config": TEACHING_LAUNCH, "split_diagonal": True, "heavy_first": True, "tma": False}),
    ("+ tiles fetched by the TMA copy engine",
     {"config": TEACHING_LAUNCH, "split_diagonal": True, "heavy_first": True, "tma": True}),
    ("+ autotuned tiles, warps, stages; TMA only if faster",
     {"config": None, "split_diagonal": True, "heavy_first": True, "tma": None}),
)


def ablation(n: int, q_heads: int, kv_heads: int, rep_ms: int, rounds: int = 3) -> list[dict]:
    """Time the teaching kernel, then the tuned kernel with its optimisations switched on one by one
    (checked first, then timed in interleaved rounds like :func:`measure_shape`)."""
    import statistics

    from triton.testing import do_bench

    from lab.measure.attention import triton_fwd
    from lab.measure.attention.reference import attention_torch

    shape = Shape("prefill", 1, q_heads, kv_heads, n)
    q, k, v = _inputs(shape, seed=n + 1)
    reference = attention_torch(q, k, v, True)
    launch = TEACHING_LAUNCH
    rows, ready = [], []
    for step, (label, options) in enumerate(ABLATION_STEPS):
        if options.get("kernel") == "teaching":
            def fn():
                return triton_fwd.teaching_forward(q, k, v, True)
        else:
            def fn(options=options):
                return triton_fwd.tuned_forward(q, k, v, True, config=options["config"], tma=options["tma"],
                                                split_diagonal=options["split_diagonal"], heavy_first=options["heavy_first"])
        err = (fn().float() - reference.float()).abs().max().item()
        row = {"n": n, "step": step, "change": label,
               "teaching_launch": f"{launch['BLOCK_M']}x{launch['BLOCK_N']} tiles, {launch['num_warps']} warps, "
                                  f"{launch['num_stages']} stages",
               "ms": math.nan, "max_abs_err": err, "times": []}
        rows.append(row)
        if err <= MAX_ABS_ERR:
            ready.append((row, fn))
    for turn in range(rounds):
        for row, fn in round_order(ready, turn, rounds):
            row["times"].append(do_bench(fn, warmup=10, rep=max(1, rep_ms // rounds), return_mode="median"))
    for row in rows:
        times = row.pop("times")
        if times:
            row["ms"] = statistics.median(times)
            row["ms_rounds"] = rounds_text(times)
        row["tflops"] = shape.flops() / (row["ms"] * 1e-3) / 1e12
        row["speedup_vs_teaching"] = rows[0]["ms"] / row["ms"]
    return rows


def round_order(items: list, turn: int, rounds: int) -> list:
    """``items`` rotated so that round ``turn`` of ``rounds`` starts at a different item: over the
    rounds each item is timed early and late, and drift of the GPU's state hits all of them alike."""
    first = turn * len(items) // rounds
    return items[first:] + items[:first]


# --- the performance bars --------------------------------------------------------------

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
    if decode is not None and not decode.empty:
        sel = decode[(decode.candidate == "ours-tuned") & (decode.n == 32768) & (decode.batch == 16) & (decode.status == "ok")]
        frac = float(sel.bw_fraction.iloc[0]) if len(sel) else math.nan
    else:
        frac = math.nan
    add("decode 32k batch 16: tuned bandwidth / copy bandwidth", frac, 0.7)
    return out


def rounds_text(times) -> str:
    """Round times as a row's ``ms_rounds`` ('3.5872 3.6197 3.6067'); :func:`round_times` reads it back."""
    return " ".join(f"{t:.5g}" for t in times)


# --- CLI ---------------------------------------------------------------------------------------

def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x.replace("k", "")) * (1024 if x.endswith("k") else 1) for x in text.split(",") if x)
    except ValueError:
        raise LabError(f"expected comma-separated integers such as 1k,2k,4096; got {text!r}") from None
    if not values or min(values) <= 0:
        raise LabError(f"expected positive sizes; got {text!r}")
    return values


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--lengths", default="1k,2k,4k,8k,16k,32k", help="prefill prompt lengths")
    parser.add_argument("--contexts", default="1k,2k,4k,8k,16k,32k,64k,128k", help="decode context lengths")
    parser.add_argument("--batches", default="1,16", help="decode batch sizes")
    parser.add_argument("--candidates", default=",".join(CANDIDATES), help=f"subset of {','.join(CANDIDATES)}")
    parser.add_argument("--q-heads", type=int, default=28)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--rep-ms", type=int, default=120, help="milliseconds of timed repeats per measurement, "
                        "shared out among the rounds")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds: each round times every candidate "
                        "of a shape once, starting at a different one; a candidate's time is its median round")
    parser.add_argument("--skip-prefill", action="store_true")
    parser.add_argument("--skip-decode", action="store_true")
    parser.add_argument("--skip-ablation", action="store_true", help="skip the tuned kernel's step-by-step ablation at 16k/32k")
    parser.add_argument("--rebuild", type=Path, metavar="DIR",
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


def rebuild(folder: Path) -> int:
    """Re-derive the tables of a run (one cut off by a time limit, say) from its measurements.jsonl."""

    path = folder / "measurements.jsonl"
    if not path.exists():
        raise LabError(f"{path}: not found; --rebuild needs the folder of a bench run")
    rows = store.read_jsonl(path)  # a line torn by the cut-off is skipped
    prefill, decode, bar_table = write_tables(folder, rows)
    _print_summary(prefill, decode, bar_table, [])
    return 0


def main(args) -> int:
    import pandas as pd
    from tqdm import tqdm

    from lab import env
    from lab.measure import gpuclocks

    if args.rebuild is not None:
        return rebuild(args.rebuild)
    if args.rounds < 1 or args.rep_ms < args.rounds:
        raise LabError(f"--rounds must be at least 1 and --rep-ms at least --rounds; got --rounds {args.rounds}, "
                       f"--rep-ms {args.rep_ms}")
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here (or TRITON_INTERPRET=1): `python -m lab bench` times kernels on a GPU; "
                       "run it on a GPU machine, or read the cached H200 results in data/h200/kernels/")
    candidates = [c for c in args.candidates.split(",") if c]
    unknown = [c for c in candidates if c not in CANDIDATES]
    if unknown:
        raise LabError(f"unknown candidate {unknown[0]!r}; choose from {', '.join(CANDIDATES)}")
    if args.q_heads % args.kv_heads:
        raise LabError(f"--q-heads ({args.q_heads}) must be a multiple of --kv-heads ({args.kv_heads})")
    shapes = []
    if not args.skip_prefill:
        shapes += [Shape("prefill", 1, args.q_heads, args.kv_heads, n) for n in _ints(args.lengths)]
    if not args.skip_decode:
        shapes += [Shape("decode", b, args.q_heads, args.kv_heads, n) for b in _ints(args.batches) for n in _ints(args.contexts)]
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "measurements.jsonl").unlink(missing_ok=True)
    started = time.time()
    copy_gbps = copy_bandwidth_gbps()
    print(f"{caps.gpu}: device-to-device copy {copy_gbps:,.0f} GB/s (read + write)", file=sys.stderr)
    clocks = gpuclocks.ClockSampler(interval_ms=20) if gpuclocks.available() else None
    flags = {
        "q_heads": args.q_heads, "kv_heads": args.kv_heads, "head_dim": 128, "candidates": candidates,
        "timer": ("prefill and decode ms_eager: triton.testing.do_bench median, L2 flushed before each call; "
                  "decode ms: median of CUDA-graph replays (triton.testing.do_bench_cudagraph), inputs rotated "
                  "over >= 256 MB so K/V come from HBM; every shape's candidates are timed in interleaved rounds "
                  "(each round starts at a different candidate, rep_ms / rounds each) and ms is the median round, "
                  "listed in ms_rounds"), "rep_ms": args.rep_ms, "rounds": args.rounds,
        "reference": "fp32 naive attention (lab.measure.attention.reference.attention_torch)", "max_abs_err": MAX_ABS_ERR,
        "clocks": ("nvidia-smi every 20 ms while each candidate was timed: sm_mhz and power_w are medians, "
                   "clock_limit the limit active in most samples" if clocks is not None else "not sampled")}
    # written first and again at the end: a run cut off midway still leaves a valid (partial) dataset
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags,
                                                       copy_gbps=copy_gbps, complete=False))
    rows: list[dict] = []
    with tqdm(total=len(shapes) * len(candidates), unit="run", file=sys.stderr) as progress:
        for shape in shapes:
            measured = [{"phase": shape.phase, **row}
                        for row in measure_shape(shape, candidates, args.rep_ms, progress, copy_gbps, clocks=clocks,
                                                 rounds=args.rounds)]
            rows += measured
            for row in measured:  # nothing measured is lost if a later shape crashes
                store.append_jsonl(out_dir / "measurements.jsonl", row)
            write_tables(out_dir, rows)
    ablation_rows = []
    if not args.skip_prefill and not args.skip_ablation:
        for n in [n for n in _ints(args.lengths) if n in (16384, 32768)]:
            ablation_rows += ablation(n, args.q_heads, args.kv_heads, args.rep_ms, args.rounds)
        if ablation_rows:
            store.write_csv(out_dir, "ablation.csv", pd.DataFrame(ablation_rows))
    prefill, decode, bar_table = write_tables(out_dir, rows)
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, copy_gbps=copy_gbps,
                                                       complete=True, seconds=round(time.time() - started, 1)))
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
            print("decode bandwidth / copy bandwidth")
            print(decode.pivot(index=["batch", "n"], columns="candidate", values="bw_fraction").round(2).to_string())
        if ablation_rows:
            print("tuned forward, one change at a time")
            print(pd.DataFrame(ablation_rows).round(3).to_string(index=False))
        print("bars")
        print(bar_table.to_string(index=False))
