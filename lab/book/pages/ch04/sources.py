"""What chapter 4 reads: its runs (each opened once, :func:`runs`), the names of their rows, and the one
criterion that decides whether two timings differ (:func:`verdict`, the drift of an unchanged call)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pandas as pd

from lab.names import VARIANTS, in_data
from lab.results import data, kernel_counters, kernel_runs, tuning

RACE, BENCH, ABLATION, TUNING_RACE = kernel_runs.RACE, kernel_runs.RECORD, kernel_runs.ABLATION, kernel_runs.TUNING_RACE
HOPPER_RACE = "h200/kernels-hopper-race"
COUNTERS, HOPPER_COUNTERS = kernel_counters.RUNS[0], kernel_counters.HOPPER_RUN
HOOK_RUN, HOOK_FILE = "h200/device-logs", "bandwidth-paged-race.txt"
LENGTHS = (16384, 32768)           # where the ablation, the tuning race and the Gluon race were timed
N_COUNTERS = 16384
#: The project's bar (issue 24): our kernel at 0.95x FA3's speed or better, at 16k and 32k, in one run.
TARGET = 0.95
#: The race's candidates as the table and the figure list them (fastest peers first).
RACE_ORDER = ("fa3", "fa4", "flex-flash", "sdpa-cudnn", "ours-tuned", "flex", "fa2", "ours-teaching", "sdpa-flash")
#: The Gluon race's rows in the order the section builds them up (lab.names.VARIANTS: the Triton kernel, the Gluon
#: kernel's parts), cuDNN last for scale; the persistent launches raced in a later run of their own.
PERSISTENT = ("gluon-persistent", "gluon-balanced")
GLUON_STEPS = (*(step for step in VARIANTS if step not in PERSISTENT), "sdpa-cudnn")
#: The tricks of the tuning rounds that lost: (variant in tuning_forward.csv, glue key).
TRICKS = (("overlapped scores", "ov"), ("warp-specialized loop", "ws"), ("lazy rescaling", "lazy"))

CODE_HOPPER = "lab.measure.attention.hopper"  # where the Gluon kernel's launch constants live


@dataclass(frozen=True)
class Runs:
    """The tables of every run the chapter reads."""

    race: data.Dataset
    race_prefill: pd.DataFrame
    bench_prefill: pd.DataFrame
    teaching_launches: pd.DataFrame
    tuning_rounds: pd.DataFrame
    ablation: pd.DataFrame
    ablation_fa3_ms: dict
    tuning_race: pd.DataFrame
    gluon: pd.DataFrame
    counters: dict
    hopper_counters: dict
    hook: dict


@functools.cache
def runs() -> Runs:
    race = data.load(RACE)
    bench, ablation = data.load(BENCH), data.load(ABLATION)
    abl_prefill = ablation.csv("prefill.csv", ("candidate", "n", "status", "ms"))
    fa3 = abl_prefill[(abl_prefill.candidate == "fa3") & (abl_prefill.status == "ok")]
    gluon = data.load(HOPPER_RACE).csv("race.csv", ("n", "variant", "status", "ms", "max_abs_err"))
    return Runs(
        race=race,
        race_prefill=race.csv("prefill.csv", ("candidate", "n", "status", "ms", "tflops", "max_abs_err", "note")),
        bench_prefill=bench.csv("prefill.csv", ("candidate", "n", "status", "ms", "tflops", "config", "note")),
        teaching_launches=bench.csv("tuning.csv", ("shape", "setting", "ms")),
        tuning_rounds=bench.csv("tuning_forward.csv", ("round", "shape", "setting", "variant", "tma", "ms", "note")),
        ablation=ablation.csv("ablation.csv", ("n", "step", "change", "ms", "tflops", "speedup_vs_teaching")),
        ablation_fa3_ms={int(r.n): float(r.ms) for r in fa3.itertuples()},
        tuning_race=data.load(TUNING_RACE).csv("race.csv", ("n", "variant", "status", "ms", "note")),
        gluon=tuning.race_vs(gluon, [in_data(step) for step in GLUON_STEPS]),
        counters=kernel_counters.run_jobs(COUNTERS),
        hopper_counters=kernel_counters.run_jobs(HOPPER_COUNTERS),
        hook=kernel_runs.sdpa_hook_probe((data.DATA_DIR / HOOK_RUN / HOOK_FILE).read_text()))


def length_key(n: int) -> str:
    return f"{n // 1024}k"


def timed_row(table, candidate: str, n: int):
    rows = table[(table.candidate == candidate) & (table.n == n) & (table.status == "ok")]
    return rows.iloc[0] if len(rows) else None


def drift() -> float:
    """The drift of an unchanged call over one tuning round, in percent (the one criterion's threshold)."""
    return tuning.drift_pct(runs().tuning_rounds)


INSIDE = "inside the drift"


def verdict(ratio: float, above: str = "beyond the drift", below: str = "beyond the drift") -> str:
    """The one criterion's word for a ratio of two speeds (or a speed and a target): :data:`INSIDE` when they are
    no further apart than the drift, else ``above`` (the ratio is above 1) or ``below``."""
    if not tuning.beyond_drift(ratio, drift()):
        return INSIDE
    return above if ratio > 1 else below


