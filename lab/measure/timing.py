"""How the kernel benchmark times candidates: checked first, then interleaved rounds, CUDA-graph replay for decode.

The GPU's clock and power state drift within a run: a chip that has just idled runs a kernel faster for
a moment, and a power-hungry kernel leaves the next one a hotter chip. So every candidate of a shape is
timed in ``rounds`` rounds, each round starting at a different candidate (:func:`round_order`), and a
row's time is its median round. Decode is timed twice: replayed from a CUDA graph with inputs rotated so
K/V come from HBM (``ms``, as serving engines run it) and launched from Python (``ms_eager``).
"""

from __future__ import annotations

import math
import statistics
import time

from lab import LabError
from lab.measure.attention.reference import attention_torch
from lab.measure.attention.switches import DEFAULT_SWITCHES, Switches
from lab.measure.candidates import (
    MAX_ABS_ERR,
    Shape,
    candidate_fn,
    inputs,
    naive_bytes_needed,
    timed_call,
    tuned_config,
)
from lab.measure.gpuclocks import row_fields, summarise


def copy_bandwidth_gbps(gib: float = 2.0) -> float:
    """Device-to-device copy: bytes read plus bytes written per second, in GB/s."""
    import torch
    from triton.testing import do_bench

    n = int(gib * 2**30) // 2
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * n * 2 / (ms * 1e-3) / 1e9


class _Silent:
    """Stands in for a tqdm bar when nobody is watching (a chapter's live cell, a test)."""

    def set_postfix_str(self, text):
        pass

    def update(self, n):
        pass


def round_order(items: list, turn: int, rounds: int) -> list:
    """``items`` rotated so that round ``turn`` of ``rounds`` starts at a different item: over the
    rounds each item is timed early and late, and drift of the GPU's state hits all of them alike."""
    first = turn * len(items) // rounds
    return items[first:] + items[:first]


def rounds_text(times) -> str:
    """Round times as a row's ``ms_rounds`` ('3.5872 3.6197 3.6067'); ``kernel_runs.round_times`` reads it back."""
    return " ".join(f"{t:.5g}" for t in times)


def rotation(shape: Shape, first, min_bytes: int = 256 << 20) -> list:
    """Input sets to cycle through so that the K/V a call reads were not left in L2 by the call before."""
    import torch

    sets = [first]
    while len(sets) * shape.min_bytes() < min_bytes:
        sets.append(tuple(torch.randn_like(t) for t in first))
    return sets


def replay_ms(calls: list, rep_ms: int) -> float:
    """The one CUDA-graph replay: median ms per call of ``calls`` (functions of no arguments, one per input set)
    captured in a graph and replayed in turn, as serving engines run decode. Cycling through input sets whose
    bytes exceed L2 makes each call read its K/V from HBM; without a graph, decode at short contexts times
    Python's launch overhead, not the GPU."""
    from triton.testing import do_bench_cudagraph

    state = {"i": 0}

    def call():
        state["i"] += 1
        return calls[(state["i"] - 1) % len(calls)]()
    return do_bench_cudagraph(call, rep=rep_ms, return_mode="median")


def graph_replay_ms(fn, sets, rep_ms: int, causal: bool = False) -> float:
    """:func:`replay_ms` of a candidate ``fn`` over ``sets`` of (q, k, v); layout changes made before the capture."""
    return replay_ms([timed_call(fn, q, k, v, causal) for q, k, v in sets], rep_ms)


def time_in_rounds(items: list, measure, rounds: int, *, stop=None, after_round=None) -> list[list]:
    """The one interleaved-rounds loop: ``measure(item, turn)`` for every item in each of ``rounds`` rounds, each round
    starting at another item (:func:`round_order`), so drift of the GPU's clocks and heat hits every item alike.

    Returns, in the order of ``items``, the list of what ``measure`` returned for each (one value a round; None,
    for an item that failed or is skipped, adds nothing). ``stop(turn)`` is asked before each round: true ends
    the rounds there (a deadline). ``after_round(turn, times)`` runs after each round (progress), ``times`` as
    returned so far."""
    times = [[] for _ in items]
    for turn in range(rounds):
        if stop is not None and stop(turn):
            break
        for index, item in round_order(list(enumerate(items)), turn, rounds):
            value = measure(item, turn)
            if value is not None:
                times[index].append(value)
        if after_round is not None:
            after_round(turn, times)
    return times


# --- one shape: check, time in rounds, summarise ------------------------------------------------

def _failed(row: dict, exc: Exception, device: str) -> None:
    """Mark a candidate that raised: its row says why, and the run goes on."""
    row.update(status="error", note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def _new_row(shape: Shape, name: str) -> dict:
    row = {"candidate": name, "batch": shape.batch, "q_heads": shape.q_heads, "kv_heads": shape.kv_heads,
           "head_dim": shape.head_dim, "n": shape.n, "dtype": "bfloat16", "status": "ok", "ms": math.nan,
           "max_abs_err": math.nan, "note": "", "config": ""}
    if shape.phase == "prefill":
        row["causal"] = True
    return row


def _check(row: dict, fn, qkv, shape: Shape, reference, device: str) -> None:
    """Run a candidate once (compiling it) and compare its output with the fp32 reference."""
    import torch

    started = time.time()
    try:
        out = fn(*qkv, shape.causal)
        if device == "cuda":
            torch.cuda.synchronize()
        row["max_abs_err"] = (out.float() - reference.float()).abs().max().item()
        del out
        if not row["max_abs_err"] <= MAX_ABS_ERR:
            row.update(status="wrong", note=f"max abs error {row['max_abs_err']:.3g} > {MAX_ABS_ERR}")
    except Exception as exc:  # a backend that does not support this shape is a result, not a crash
        _failed(row, exc, device)
    row["seconds"] = time.time() - started  # compile + check, then timing: where a run's time goes


def _check_all(shape: Shape, candidates, qkv, progress, device: str) -> tuple[list[dict], list[tuple]]:
    """Every candidate's row (in order) and (row, fn) for those whose output matched the reference."""
    import torch

    reference = attention_torch(*qkv, shape.causal)  # fp32 math, query chunks
    rows, ready = [], []
    for name in candidates:
        progress.set_postfix_str(f"{shape.phase} b={shape.batch} n={shape.n} {name}: check")
        row = _new_row(shape, name)
        rows.append(row)
        free = torch.cuda.mem_get_info()[0] if device == "cuda" else 2**40
        if name == "naive" and naive_bytes_needed(shape) > 0.8 * free:
            row.update(status="skipped", note=f"the score matrix needs ~{naive_bytes_needed(shape) / 1e9:.0f} GB, "
                                               f"{free / 1e9:.0f} GB free")
            progress.update(1)
            continue
        try:
            fn = candidate_fn(name, shape.phase)
        except Exception as exc:  # a peer whose library is not installed here is a row that says so
            _failed(row, exc, device)
            row["status"] = "unavailable"
            progress.update(1)
            continue
        _check(row, fn, qkv, shape, reference, device)
        if row["status"] == "ok":
            ready.append((row, fn))
        else:
            progress.update(1)
    if device == "cuda":
        torch.cuda.empty_cache()  # the naive check's score matrix
    return rows, ready


class _Rounds:
    """Times the checked candidates of one shape in interleaved rounds; keeps each one's times and clock samples."""

    def __init__(self, shape: Shape, qkv, timer, clocks, per_round: int, sets):
        self.shape, self.qkv, self.timer, self.clocks, self.per_round, self.sets = shape, qkv, timer, clocks, per_round, sets
        self.timings: dict[str, list[dict]] = {}
        self.samples: dict[str, list] = {}

    def time(self, row: dict, fn) -> dict:
        """One round of one candidate: {"ms": ...} (and "ms_eager" for decode from a graph)."""
        clocks = self.clocks
        if clocks is not None:
            clocks.start()
        timing = {"ms": self.timer(timed_call(fn, *self.qkv, self.shape.causal), warmup=10, rep=self.per_round,
                                   return_mode="median")}
        if self.sets is not None:
            timing["ms_eager"] = timing["ms"]
            try:
                timing["ms"] = graph_replay_ms(fn, self.sets, self.per_round)
            except Exception as exc:
                import torch

                row["note"] = f"graph capture failed ({type(exc).__name__}); eager time reported"
                torch.cuda.synchronize()
        if clocks is not None:
            clocks.stop()
            self.samples.setdefault(row["candidate"], []).extend(clocks.samples)
        return timing

    def run(self, ready: list, rounds: int, progress, device: str) -> None:
        shape = self.shape

        def measure(item, turn):
            row, fn = item
            if row["status"] != "ok":
                return None
            progress.set_postfix_str(f"{shape.phase} b={shape.batch} n={shape.n} {row['candidate']}: "
                                     f"round {turn + 1}/{rounds}")
            started, timing = time.time(), None
            try:
                timing = self.time(row, fn)
            except Exception as exc:
                if self.clocks is not None and self.clocks.running:
                    self.clocks.stop()
                _failed(row, exc, device)
            row["seconds"] += time.time() - started
            if turn == rounds - 1 or row["status"] != "ok":
                progress.update(1)
            return timing

        for (row, _), times in zip(ready, time_in_rounds(ready, measure, rounds), strict=True):
            self.timings.setdefault(row["candidate"], []).extend(times)


def _summarise(shape: Shape, rows: list[dict], timed: _Rounds, clocks, copy_gbps, ceiling_gbps, dtype) -> None:
    """Median round, FLOP/s, bytes and bandwidth for decode, clock summary, and the rank of each row."""

    for row in rows:
        times = timed.timings.get(row["candidate"], [])
        if row["status"] == "ok":
            row["ms"] = statistics.median(t["ms"] for t in times)
            row["ms_rounds"] = rounds_text(t["ms"] for t in times)
            if timed.sets is not None:
                row["ms_eager"] = statistics.median(t["ms_eager"] for t in times)
            if clocks is not None:
                row.update(row_fields(summarise(timed.samples.get(row["candidate"], []))))
            row["tflops"] = shape.flops() / (row["ms"] * 1e-3) / 1e12
            if shape.phase == "decode":
                row["bytes"] = shape.min_bytes()
                row["gbps"] = row["bytes"] / (row["ms"] * 1e-3) / 1e9
                row["copy_gbps"] = copy_gbps
                # the share of the read ceiling, the denominator every page divides a read rate by (until
                # 2026-12 this was the share of the copy rate: such rows have no read_ceiling_gbps)
                row["read_ceiling_gbps"] = ceiling_gbps
                row["bw_fraction"] = row["gbps"] / ceiling_gbps if ceiling_gbps else math.nan
        if row["candidate"] == "ours-tuned":
            row["config"] = tuned_config(shape, dtype)
        if "seconds" in row:
            row["seconds"] = round(row["seconds"], 1)
    ok = [r for r in rows if r["status"] == "ok"]
    if ok:
        best = min(ok, key=lambda r: r["ms"])
        for r in rows:
            r["fastest"] = best["candidate"]
            r["speed_vs_fastest"] = best["ms"] / r["ms"] if r["status"] == "ok" else math.nan


def measure_shape(shape: Shape, candidates, rep_ms: int = 50, progress=None, copy_gbps: float | None = None,
                  device: str = "cuda", timer=None, dtype=None, clocks=None, rounds: int = 3,
                  ceiling_gbps: float | None = None) -> list[dict]:
    """Check every candidate on one shape, then time them in interleaved rounds; one row per candidate.

    Each of ``rounds`` rounds times every candidate for ``rep_ms / rounds`` ms, each round starting at a
    different candidate; a row's ``ms`` is the median over the rounds and ``ms_rounds`` lists them.
    ``device``, ``timer`` and ``dtype`` exist for the CPU test of this function (interpreter, fp16).
    A decode row's ``bw_fraction`` is its K/V read rate over ``ceiling_gbps`` (the GPU's read ceiling,
    :func:`lab.measure.bandwidth.read_ceiling_gbps`); ``copy_gbps`` is stored beside it for reference. Without
    ``ceiling_gbps`` (a live cell) the share is left empty. ``clocks`` (a
    :class:`lab.measure.gpuclocks.ClockSampler`) samples the GPU while each candidate is timed: a timing
    taken at a power-capped clock says so in its row.
    """
    progress = progress or _Silent()
    if timer is None:
        from triton.testing import do_bench as timer
    if rounds < 1:
        raise LabError(f"rounds must be at least 1, got {rounds}")
    qkv = inputs(shape, seed=shape.n + 7 * shape.batch, device=device, dtype=dtype)
    rows, ready = _check_all(shape, candidates, qkv, progress, device)
    sets = rotation(shape, qkv) if shape.phase == "decode" and device == "cuda" else None
    timed = _Rounds(shape, qkv, timer, clocks, max(1, rep_ms // rounds), sets)
    timed.run(ready, rounds, progress, device)
    if device == "cuda":
        import torch
        torch.cuda.empty_cache()
    _summarise(shape, rows, timed, clocks, copy_gbps, ceiling_gbps, qkv[0].dtype)
    return rows


# --- what each optimisation of the tuned forward kernel buys --------------------------------------

#: The teaching kernel's launch on a GPU; the ablation starts the tuned kernel from the same tiles.
TEACHING_LAUNCH = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
_PLAIN = {"split_diagonal": False, "heavy_first": False, "kv_major": False}
_BASE_STEPS = (
    ("teaching kernel", {"kernel": "teaching"}),
    ("exp2, log2(e) folded into the scale", {"config": TEACHING_LAUNCH, "switches": _PLAIN, "tma": False}),
    ("+ off-diagonal tiles without a mask",
     {"config": TEACHING_LAUNCH, "switches": {**_PLAIN, "split_diagonal": True}, "tma": False}),
    ("+ heaviest query tiles launched first",
     {"config": TEACHING_LAUNCH, "switches": {**_PLAIN, "split_diagonal": True, "heavy_first": True}, "tma": False}),
    ("+ tiles fetched by the TMA copy engine",
     {"config": TEACHING_LAUNCH, "switches": {**_PLAIN, "split_diagonal": True, "heavy_first": True}, "tma": True}),
    ("+ autotuned tiles, warps, stages; TMA only if faster",
     {"config": None, "switches": {**_PLAIN, "split_diagonal": True, "heavy_first": True}, "tma": None}),
)
#: Steps towards FlashAttention 3, each timed at the launch the autotuned step chose, in this order. A
#: step tuned_forward keeps by default (switches.DEFAULT_SWITCHES) stays on for the rows after it;
#: one it does not keep is measured on its own, on top of the kept ones, and says so.
FA3_STEPS = (
    ("one KV head's query heads and tiles launched together (L2 reuse)", {"kv_major": True}),
    ("persistent programs taking the heaviest units first", {"persistent": True}),
    ("Triton's automatic warp specialisation", {"warp_specialize": True}),
    ("FA4's lazy rescaling (threshold 2^8)", {"rescale_threshold": 8.0}),
    ("FA4's polynomial exp2 for half of each tile", {"poly_exp2": True}),
)


def _with_fa3_steps(steps: tuple) -> tuple:
    kept = dict(steps[-1][1]["switches"])
    for label, change in FA3_STEPS:
        on = all(getattr(DEFAULT_SWITCHES, key) == value for key, value in change.items())
        steps += ((f"+ {label}" + ("" if on else " (tried, not kept)"),
                   {"config": "chosen", "switches": {**kept, **change}, "tma": "chosen"}),)
        if on:
            kept.update(change)
    return steps


ABLATION_STEPS = _with_fa3_steps(_BASE_STEPS)


def _ablation_fn(options: dict, q, k, v):
    from lab.measure.attention import launch_policy  # lazy: the kernels load triton and torch
    from lab.measure.attention.teaching import teaching_forward
    from lab.measure.attention.tuned import tuned_forward

    if options.get("kernel") == "teaching":
        return lambda: teaching_forward(q, k, v, True)
    switches = Switches(**options["switches"])
    launch = {}

    def run():
        if not launch:  # "chosen": the launch the autotuned step picked (it runs first)
            chosen = launch_policy.best_config(q.shape[2], k.shape[2], q.shape[-1], True) or {}
            launch["config"] = options["config"] if options["config"] != "chosen" else \
                {key: val for key, val in chosen.items() if key != "tma"}
            launch["tma"] = options["tma"] if options["tma"] != "chosen" else chosen.get("tma", False)
        return tuned_forward(q, k, v, True, config=launch["config"], tma=launch["tma"], switches=switches)
    return run


def ablation(n: int, q_heads: int, kv_heads: int, rep_ms: int, rounds: int = 3) -> list[dict]:
    """Time the teaching kernel, then the tuned kernel with its optimisations switched on one by one
    (checked first, then timed in interleaved rounds like :func:`measure_shape`)."""
    from triton.testing import do_bench

    shape = Shape("prefill", 1, q_heads, kv_heads, n)
    q, k, v = inputs(shape, seed=n + 1)
    reference = attention_torch(q, k, v, True)
    launch = TEACHING_LAUNCH
    rows, ready = [], []
    for step, (label, options) in enumerate(ABLATION_STEPS):
        fn = _ablation_fn(options, q, k, v)
        try:
            err, note = (fn().float() - reference.float()).abs().max().item(), ""
        except Exception as exc:  # a step that does not compile on this GPU is a row that says so
            err, note = math.nan, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        row = {"n": n, "step": step, "change": label,
               "teaching_launch": f"{launch['BLOCK_M']}x{launch['BLOCK_N']} tiles, {launch['num_warps']} warps, "
                                  f"{launch['num_stages']} stages",
               "ms": math.nan, "max_abs_err": err, "note": note, "times": []}
        rows.append(row)
        if err <= MAX_ABS_ERR:
            ready.append((row, fn))
    timed = time_in_rounds(ready, lambda item, _: do_bench(item[1], warmup=10, rep=max(1, rep_ms // rounds),
                                                           return_mode="median"), rounds)
    for (row, _), times in zip(ready, timed, strict=True):
        row["times"] = times
    for row in rows:
        times = row.pop("times")
        if times:
            row["ms"] = statistics.median(times)
            row["ms_rounds"] = rounds_text(times)
        row["tflops"] = shape.flops() / (row["ms"] * 1e-3) / 1e12
        row["speedup_vs_teaching"] = rows[0]["ms"] / row["ms"]
    return rows
