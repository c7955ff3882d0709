"""The kernel benchmark's stored runs: which run the chapters read, its repeats, and their tables.

Pure functions over ``data/<gpu>/kernels*`` folders written by ``python -m lab bench``.
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

from lab import LabError
from lab.results import data
from lab.results.bandwidth import bandwidth_ceiling, ceiling
from lab.results.facts import Fact
from lab.results.hardware import match_device
from lab.results.quantities import Quantity


def bars_over_runs(runs: dict):
    """The bars of several runs side by side: ``runs`` maps a run's name to its bars table (bars.csv).

    One column of ratios per run, then ``measured`` and ``met`` (in how many runs), and ``worst``. A
    bar a run did not measure (an empty ratio) counts neither way.
    """
    if not runs:
        raise LabError("bars_over_runs needs at least one run")
    wide = None
    for name, table in runs.items():
        column = table[["bar", "need", "ratio"]].rename(columns={"ratio": name})
        wide = column if wide is None else wide.merge(column, on=["bar", "need"], how="outer")
    ratios = wide[list(runs)]
    wide["measured"] = ratios.notna().sum(axis=1)
    wide["met"] = ratios.ge(wide["need"], axis=0).sum(axis=1)
    wide["worst"] = ratios.min(axis=1)
    order = {bar: i for i, bar in enumerate(next(iter(runs.values())).bar)}
    return wide.sort_values("bar", key=lambda col: col.map(lambda b: order.get(b, len(order)))).reset_index(drop=True)


def parse_launch(config: str) -> dict:
    """A tuned-kernel launch as recorded in a table ('BLOCK_M=128 BLOCK_N=64 num_warps=8 ... tma=True') as values:
    block_m, block_n, warps, stages, maxnreg (None: no register cap) and tma (None: not recorded)."""
    try:
        keys = dict(item.split("=", 1) for item in config.split())
        launch = {"block_m": int(keys["BLOCK_M"]), "block_n": int(keys["BLOCK_N"]),
                  "warps": int(keys["num_warps"]), "stages": int(keys["num_stages"])}
        launch["maxnreg"] = None if keys.get("maxnreg", "None") == "None" else int(keys["maxnreg"])
    except (KeyError, ValueError, AttributeError):
        raise LabError(f"not a recorded launch of the tuned kernel: {config!r}") from None
    launch["tma"] = {"True": True, "False": False}.get(keys.get("tma", ""))
    return launch


def picked_launches(prefill):
    """The launch the tuned kernel's autotuner picked at each prompt length of a run (one row per length)."""
    import pandas as pd

    tuned = prefill[(prefill.candidate == "ours-tuned") & (prefill.status == "ok")].sort_values("n")
    if tuned.empty:
        raise LabError("no timed ours-tuned rows in this prefill table")
    return pd.DataFrame([{"n": int(row.n), **parse_launch(row.config)} for row in tuned.itertuples()])


def stored_runs(folder: str, root: Path | None = None) -> dict:
    """The bench runs stored under data/``folder``, labelled for a table: the folder itself or its
    ``bench`` subfolder is the "bench run", subfolders ``run1``, ``run2``... are "repeat 1", "repeat 2"...
    (label -> lab.results.data.Dataset)."""
    root = root or data.DATA_DIR
    runs, repeats = {}, {}
    for ds in data.datasets(kind="kernels", root=root):
        name = ds.path.relative_to(root).as_posix()
        if name in (folder, f"{folder}/bench"):
            runs["bench run"] = ds
        elif name.startswith(f"{folder}/run") and name.rsplit("/run", 1)[1].isdigit():
            repeats[int(name.rsplit("/run", 1)[1])] = ds
    runs |= {f"repeat {i}": repeats[i] for i in sorted(repeats)}
    if not runs:
        raise LabError(f"no bench runs under data/{folder}; run `python -m lab bench --out data/{folder}` on a GPU")
    return runs


#: The benchmark of record (the tables the chapters read) and the repeats made right after it.
RECORD, RECORD_REPEATS = "h200/kernels", "h200/kernels-repeats"
#: The same kernel timed the earlier way, one block per candidate (the appendix shows why rounds replaced it).
CONTIGUOUS = "h200/kernels-contiguous"

def runs_of_record(root: Path | None = None) -> dict:
    """The bench run the chapters read, then its repeats where they exist (label -> Dataset)."""
    runs = stored_runs(RECORD, root)
    try:
        runs |= stored_runs(RECORD_REPEATS, root)
    except LabError:  # the bench run alone
        pass
    return runs


def with_ceiling_share(decode, gpu: str, root: Path | None = None):
    """A decode table (decode.csv) with ``pct_of_ceiling``: each row's K/V read rate (``gbps``) as a percentage of
    the GPU's one bandwidth ceiling (lab.results.bandwidth), not of the copy the run timed beside it (a read and a
    write); NaN for a GPU without a row in lab.results.hardware's table (a reader's own)."""
    table = decode.copy()
    table["pct_of_ceiling"] = (100 * table["gbps"] * 1e9 / ceiling(gpu, root)) if match_device(gpu) else float("nan")
    return table


#: The decode bar of lab.measure.bench.bars: its name since 2026-12 (the tuned kernel's read rate over the read
#: ceiling), and the name a run before then gave it, when the bench divided by the copy rate it timed beside.
READ_BAR = "decode 32k batch 16: tuned read rate / read ceiling"
COPY_BAR = "decode 32k batch 16: tuned bandwidth / copy bandwidth"


def read_fraction(decode, gpu: str, root: Path | None = None):
    """Each decode row's K/V read rate (its ``bytes`` over its ``ms``) as a fraction of the GPU's one bandwidth
    ceiling (lab.results.bandwidth.ceiling), never the ``bw_fraction`` the run stored: before 2026-12 the bench
    divided by the copy rate there."""
    return decode["bytes"] / (decode["ms"] * 1e-3) / ceiling(gpu, root)


def run_bars(ds, file: str = "bars.csv", root: Path | None = None):
    """A run's bars (``file``) with the decode bar as :data:`READ_BAR`, recomputed from the run's decode.csv (the tuned
    kernel at 32k, batch 16) over the one ceiling. ``bars_first_call.csv`` has no decode table of its own: its decode
    bar, stored over the copy rate, is left empty rather than mixed with the others."""
    table = ds.csv(file, ("bar", "ratio", "need", "met"))
    decode_bar = table.bar.isin((READ_BAR, COPY_BAR))
    ratio = float("nan")
    if file == "bars.csv" and (ds.path / "decode.csv").exists():   # a run with --skip-decode: an empty bar
        decode = ds.csv("decode.csv", ("candidate", "batch", "n", "status", "ms", "bytes"))
        row = decode[(decode.candidate == "ours-tuned") & (decode.n == 32768) & (decode.batch == 16)
                     & (decode.status == "ok")]
        if len(row) == 1:
            ratio = float(read_fraction(row, ds.gpu, root).iloc[0])
    table.loc[decode_bar, "bar"] = READ_BAR
    table.loc[decode_bar, "ratio"] = ratio
    table.loc[decode_bar, "met"] = bool(ratio >= table.loc[decode_bar, "need"].iloc[0]) if decode_bar.any() else False
    return table


#: One decode step's K/V read rate over the GPU's bandwidth ceiling: every "% of the ceiling" a decode page states.
DECODE_SHARE = Quantity("h200.decode.pct_of_ceiling", "one layer's decode attention (one new token per sequence, "
                        "28 query heads over 4 KV heads, d=128, bf16, graph replay, K/V from HBM): the K/V bytes it reads "
                        "per second over the H200's bandwidth ceiling", run=RECORD, unit="%",
                        others={"h200/paged-decode": "the contiguous kernel timed again in the paged-decode run, in turns "
                                "with the paged kernels on the same K/V (another lease and process; the autotuner picks its "
                                "launch again), so that paging is measured against a contiguous kernel of the same run"})


def decode_share(candidate: str, batch: int, n: int, root: Path | None = None) -> Fact:
    """The share of the bandwidth ceiling one candidate's decode reached in the benchmark of record (None: not
    timed there), as the fact every page quotes (:data:`DECODE_SHARE`)."""
    root = root or data.DATA_DIR
    ds = data.load(root / RECORD)
    table, ceiling = ds.csv("decode.csv", ("candidate", "batch", "n", "status", "gbps")), bandwidth_ceiling(ds.gpu, root)
    rows = table[(table.candidate == candidate) & (table.batch == batch) & (table.n == n) & (table.status == "ok")]
    value = 100 * float(rows.gbps.iloc[0]) * 1e9 / ceiling.value if len(rows) == 1 and ceiling.measured else None
    return DECODE_SHARE.fact(value, candidate, batch, n, detail=f"decode.csv: gbps over {ceiling.source}")


def prefill_rows(runs: dict, n: int, columns=("candidate", "n", "ms")):
    """Every run's prefill rows at ``n`` tokens in one table, with the run's label in ``run``."""
    import pandas as pd

    both = pd.concat([ds.csv("prefill.csv", columns).assign(run=label) for label, ds in runs.items()])
    return both[both.n == n]


def round_times(ms_rounds: str) -> list[float]:
    """A row's ``ms_rounds`` ('3.5872 3.6197 3.6067') as numbers."""
    return [float(x) for x in str(ms_rounds).split()]


def run_catalogue(runs: dict, root: Path | None = None):
    """One row per stored run (label -> Dataset): where it lives, when and how it ran, from its provenance.json.
    ``rounds`` is empty for runs that timed each candidate in one block (before interleaved rounds)."""
    import pandas as pd

    root = root or data.DATA_DIR
    rows = []
    for label, ds in runs.items():
        p = ds.provenance
        rows.append({"run": label, "folder": f"data/{ds.path.relative_to(root).as_posix()}", "date": str(p.get("date", ""))[:16].replace("T", " "),
                     "seconds": p.get("seconds"), "code": str(p.get("code", "")).removeprefix("commit "),
                     "rounds": p.get("flags", {}).get("rounds"), "command": p.get("command", "")})
    return pd.DataFrame(rows)


def block_and_round_spread(blocks: dict, rounds: dict, n: int = 16384, fast: str = "sdpa-cudnn",
                           ours: str = "ours-tuned") -> dict:
    """What timing in one block per candidate did, next to timing in interleaved rounds, at ``n`` tokens.

    ``blocks`` and ``rounds`` map a run's label to its Dataset. Returns values: the range of ``ours`` and
    ``fast`` over the block-timed runs (ms), ``fast``'s fastest round and median round over every round of
    the round-timed runs, the widest spread of ``ours``' rounds within one run (percent), rounds per run.
    """
    timed = prefill_rows(blocks, n).pivot(index="run", columns="candidate", values="ms")
    inside = prefill_rows(rounds, n, ("candidate", "n", "ms", "ms_rounds"))
    if timed.empty or inside.empty:
        raise LabError(f"no prefill rows at n={n} in the runs given")
    each = {name: [round_times(r) for r in inside[inside.candidate == name].ms_rounds] for name in (fast, ours)}
    fast_rounds = [t for run in each[fast] for t in run]
    return {"blocks_runs": len(timed), "ours_lo": timed[ours].min(), "ours_hi": timed[ours].max(),
            "fast_lo": timed[fast].min(), "fast_hi": timed[fast].max(),
            "rounds_runs": len(each[ours]), "rounds_per_run": len(each[ours][0]),
            "fast_round_lo": min(fast_rounds), "fast_round_median": statistics.median(fast_rounds),
            "ours_round_spread_pct": 100 * max(max(r) / min(r) - 1 for r in each[ours])}


def clock_ranges(runs: dict, n: int = 16384, candidates=("ours-tuned", "sdpa-cudnn")):
    """The SM clock each candidate ran at while timed at ``n`` tokens, over several runs: lowest and highest
    median MHz, and in how many runs the software power cap was the main clock limit (one row per candidate)."""
    import pandas as pd

    rows = prefill_rows(runs, n, ("candidate", "n", "ms", "sm_mhz", "clock_limit"))
    out = []
    for name in candidates:
        mine = rows[rows.candidate == name]
        if mine.sm_mhz.isna().all():
            raise LabError(f"no clock samples for {name} at n={n}: these runs predate clock sampling")
        out.append({"candidate": name, "mhz_lo": mine.sm_mhz.min(), "mhz_hi": mine.sm_mhz.max(),
                    "power_capped": int((mine.clock_limit == "software power cap").sum()), "runs": len(mine)})
    return pd.DataFrame(out)


#: The prefill race with FlashAttention itself (FA2, FA3, FA4, Flex's FLASH backend) beside PyTorch's backends and
#: ours, one process, interleaved rounds: chapter 4's race table.
RACE = "h200/kernels-race"
#: The ablation of the tuned kernel, every step (kept or not) with FA3 timed in the same run.
ABLATION = "h200/kernels-ablation"

# --- the race's times and speeds, stated by chapter 4 (which teaches the race) and chapter 6 (Flex against cuDNN) -----
_PREFILL = "causal prefill shaped like Qwen2.5-7B's attention (28 query / 4 KV heads, d=128, bf16, batch 1)"
_ROUNDS = "both timed in one process, in interleaved rounds (median round of CUDA-event timings)"
SPEED_VS_CUDNN = Quantity("h200.prefill.speed_vs_cudnn", f"cuDNN's time over the kernel's, {_PREFILL}, {_ROUNDS}",
                          run=RACE, file="prefill.csv", unit="×")
PREFILL_MS = Quantity("h200.prefill.ms", f"one {_PREFILL} call: the median of interleaved rounds", run=RACE,
                      file="prefill.csv", unit="ms",
                      others={RECORD: "the benchmark's earlier full run (1k-32k and the naive path), another lease",
                              CONTIGUOUS: "the same benchmark on an earlier machine start, each candidate timed in "
                                          "one block (its bench part)"})


def speed_vs(prefill, candidate: str, reference: str, n: int) -> float:
    """How fast ``candidate`` ran relative to ``reference`` at ``n`` tokens in one run (reference ms / candidate ms;
    NaN when either did not run)."""
    def ms(name):
        hit = prefill[(prefill.candidate == name) & (prefill.n == n) & (prefill.status == "ok")]
        return float(hit.ms.iloc[0]) if len(hit) else math.nan

    return ms(reference) / ms(candidate)


def race_table(prefill, candidates, reference: str = "fa3"):
    """One row per candidate of a race: ms at every length, and its speed relative to ``reference`` at each
    (columns ``ms_<n>`` and ``vs_<n>``; NaN where it did not run). Rows keep the order of ``candidates``."""
    import pandas as pd

    lengths = sorted(int(n) for n in prefill.n.unique())
    rows = []
    for name in candidates:
        mine = prefill[prefill.candidate == name]
        if mine.empty:
            continue
        row = {"candidate": name}
        for n in lengths:
            hit = mine[(mine.n == n) & (mine.status == "ok")]
            row[f"ms_{n}"] = float(hit.ms.iloc[0]) if len(hit) else float("nan")
            row[f"vs_{n}"] = speed_vs(prefill, name, reference, n)
        rows.append(row)
    if not rows:
        raise LabError(f"none of {', '.join(candidates)} is in this prefill table")
    return pd.DataFrame(rows)


def failed_allocation_gib(note: str) -> float | None:
    """The size of the allocation a CUDA out-of-memory error names ('Tried to allocate 128.00 GiB' -> 128.0),
    or None when the note is no such error."""
    hit = re.search(r"Tried to allocate ([\d.]+) ([KMG]iB)", str(note))
    if hit is None:
        return None
    return float(hit.group(1)) / {"KiB": 1024**2, "MiB": 1024, "GiB": 1}[hit.group(2)]


def sdpa_hook_probe(console: str) -> dict:
    """What the console of the ``sdpa-fa4`` probe (python -m lab probe sdpa-fa4, in scripts/gpu_run.sh kernel-parts) says for each implementation handed to
    ``torch.nn.attention.activate_flash_attention_impl``: impl -> {"ok": bool, "detail": max abs error vs fp32
    (float) when it ran, else the exception's name and message}. Lines of other parts are ignored."""
    found = {}
    for line in console.splitlines():
        ok = re.fullmatch(r"(FA\d) ok ([-+.\deE]+)", line.strip())
        failed = re.fullmatch(r"(FA\d) FAILED (.+)", line.strip())
        if ok:
            found[ok.group(1)] = {"ok": True, "detail": float(ok.group(2))}
        elif failed:
            found[failed.group(1)] = {"ok": False, "detail": failed.group(2)}
    if not found:
        raise LabError("no 'FA<n> ok' or 'FA<n> FAILED' line in this console: is it the sdpa-fa4 probe's?")
    return found


#: The tuning race of the tuned kernel's variants (python -m lab tuning-race), FA3 timed beside them.
TUNING_RACE = "h200/kernels-tuning-race"


def times_across_runs(n: int, candidate: str = "fa3", runs=(RACE, ABLATION, TUNING_RACE), root: Path | None = None):
    """The same candidate's time at ``n`` tokens in each of several runs (run -> ms): how far a kernel that did
    not change moves between machine leases. A bench run keeps it in prefill.csv, a tuning race in race.csv."""
    root = root or data.DATA_DIR
    out = {}
    for run in runs:
        ds = data.load(root / run)
        if ds.has("prefill.csv"):
            table = ds.csv("prefill.csv", ("candidate", "n", "status", "ms"))
        else:
            table = ds.csv("race.csv", ("variant", "n", "status", "ms")).rename(columns={"variant": "candidate"})
        hit = table[(table.candidate == candidate) & (table.n == n) & (table.status == "ok")]
        if hit.empty:
            raise LabError(f"data/{run}: no timed {candidate} row at n={n}")
        out[run] = float(hit.ms.iloc[0])
    return out
