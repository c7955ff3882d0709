"""Chapter 4's persistent launch: the Gluon kernel as a program per multiprocessor (lab.measure.attention.
hopper_persistent) raced against its launch of a program per query tile and FA3, and profiled beside them.

Both runs are of one later H100 lease, not the H200 of the chapter's other runs, so every ratio here is taken
within its own run and the page says which GPU:

    h100/kernels-persistent-race         the race of record: FA3, the Gluon kernel's launches and parts, 4k-32k
    h100/kernels-persistent-race-repeat  the same race again in the same lease, nine rounds
    h100/kernels-persistent-race-fa4     the same race in a third lease whose machine had FA4's wheels
    h100/kernel-counters-persistent      Nsight Compute at 16k: FA3, one program per tile, persistent (balanced)
    h100/kernel-counters-persistent-32k  the same at 32k
"""

from __future__ import annotations

import functools

import pandas as pd

from lab.book.facts import Fact
from lab.book.pages.ch04.sources import length_key
from lab.measure.attention import hopper_persistent
from lab.names import in_data, label
from lab.results import data, kernel_counters, tuning
from lab.results.quantities import Quantity

RACE, REPEAT, WITH_FA4 = ("h100/kernels-persistent-race", "h100/kernels-persistent-race-repeat",
                          "h100/kernels-persistent-race-fa4")
RUNS = (RACE, REPEAT, WITH_FA4)
COUNTERS = {16384: "h100/kernel-counters-persistent", 32768: "h100/kernel-counters-persistent-32k"}
#: The launches raced, in the order the section takes them: a program per tile, then the two plans.
LAUNCHES = ("gluon-default", "gluon-persistent", "gluon-balanced")
#: Each launch's row in the table, by its name in lab.names (the per-tile launch is the Gluon candidate itself).
ROWS = {"gluon-default": "ours-hopper", "gluon-persistent": "gluon-persistent", "gluon-balanced": "gluon-balanced"}
#: The counters' jobs by the launch they profiled (lab.measure.candidates: ours-persistent is the balanced plan).
PROFILED = {"fa3": "fa3", "gluon-default": "ours-hopper", "gluon-balanced": "ours-persistent"}
_SHAPE = "causal prefill shaped like Qwen2.5-7B's attention (28 query / 4 KV heads, d=128, bf16, batch 1), on an H100"
SPEED = Quantity("h100.persistent.speed_vs_fa3", f"FA3's time over one launch's of the Gluon kernel, {_SHAPE}, both "
                 "timed in one process in interleaved rounds (median round)", run=RACE, file="race.csv", unit="×",
                 others={REPEAT: "the same race again in the same lease, with nine rounds",
                         WITH_FA4: "the same race in a later lease whose machine had FA4's wheels"})
FA4_SPEED = Quantity("h100.persistent.fa4_vs_fa3", f"FA3's time over FA4's (flash-attn-4, CuTeDSL), {_SHAPE}, both "
                     "timed in the persistent race's rounds", run=WITH_FA4, file="race.csv", unit="×")
ROUNDS = Quantity("h100.persistent.rounds_won", "interleaved rounds in which the balanced plan's time was shorter than "
                  "the per-tile launch's, of the rounds a race ran at one length", run=RACE, file="race.csv",
                  others={REPEAT: "the same race again in the same lease, with nine rounds",
                          WITH_FA4: "the same race in a later lease whose machine had FA4's wheels"})
TENSOR_APART = Quantity("h100.persistent.tensor_cycles_apart", "how far apart FA3's and the Gluon kernel's two "
                        "launches' tensor-busy SM-cycles (busy share × active cycles) are, largest over smallest",
                        run=COUNTERS[16384], file="raw.csv", unit="%")
CYCLES = Quantity("h100.persistent.sm_cycles", "one kernel's SM-cycles with work over another's, each profiled once "
                  "under Nsight Compute", run=COUNTERS[16384], file="raw.csv", unit="×",
                  others={COUNTERS[32768]: "the same three jobs at 32k, the next call of the same lease"})
PROGRAMS = Quantity("h100.persistent.programs", "programs a kernel's launch ran, as Nsight Compute recorded it",
                    run=COUNTERS[16384], file="raw.csv", unit="programs")
_PLAN = "lab.measure.attention.hopper_persistent.plan"


def raced_tiles(n: int) -> list[int]:
    """Key tiles of each unit of the race's shape at ``n`` tokens: 28 query heads in groups of 7 per KV head, batch
    1, causal, 128-key tiles (hopper's LAUNCH at d=128)."""
    return hopper_persistent.unit_tiles(n, n, 28, 7, 1, True, 128)


@functools.cache
def _races() -> dict[str, pd.DataFrame]:
    variants = [in_data(launch) for launch in LAUNCHES]
    return {run: tuning.race_vs(data.load(run).csv("race.csv", ("n", "variant", "status", "ms", "max_abs_err")),
                                variants + (["fa4"] if run == WITH_FA4 else [])) for run in RUNS}


@functools.cache
def _rounds(run: str) -> pd.DataFrame:
    return data.load(run).csv("race.csv", ("n", "variant", "ms_rounds")).set_index(["n", "variant"])


def rounds_won(run: str, n: int) -> tuple[int, int]:
    """(rounds in which the balanced plan beat the per-tile launch, rounds) of one race at ``n`` tokens: the rounds
    interleave every variant, so round i of one is timed beside round i of the other."""
    race = _rounds(run)
    balanced, per_tile = ([float(t) for t in race.loc[(n, in_data(launch)), "ms_rounds"].split()]
                          for launch in ("gluon-balanced", "gluon-default"))
    return sum(b < t for b, t in zip(balanced, per_tile, strict=True)), len(balanced)


def _speed(run: str, launch: str, n: int) -> float:
    rows = _races()[run]
    name = launch if launch == "fa4" else in_data(launch)
    return float(rows[(rows.variant == name) & (rows.n == n)].vs_reference.iloc[0])


def plan_excess(n: int, how: str, programs: int = 132) -> float:
    """How much more the costliest program of a plan walks than the mean, in percent (tiles and one per unit)."""
    tiles = raced_tiles(n)
    costs = hopper_persistent.program_costs(tiles, hopper_persistent.plan(tiles, programs, how), programs)
    return 100 * (max(costs) / (sum(costs) / programs) - 1)


def persistent_facts() -> dict[str, Fact]:
    """``pers_<launch>_<len>``: a launch's speed over FA3 in the race of record (``pers_rep_*`` its repeat); the
    plans' excess over the mean at 4k and 16k; programs each launch ran; SM-cycles of the persistent launch over the
    per-tile launch's, and of each over FA3's, at 16k and 32k."""
    out = {}
    lengths = sorted(int(n) for n in _races()[RACE].n.unique())
    for launch in LAUNCHES:
        key = launch.removeprefix("gluon-")
        for n in lengths:
            out[f"pers_{key}_{length_key(n)}"] = SPEED.fact(_speed(RACE, launch, n), launch, n, fmt="{:.2f}×")
            out[f"pers_rep_{key}_{length_key(n)}"] = SPEED.fact(_speed(REPEAT, launch, n), launch, n, fmt="{:.2f}×",
                                                                run=REPEAT)
            out[f"pers_fa4run_{key}_{length_key(n)}"] = SPEED.fact(_speed(WITH_FA4, launch, n), launch, n,
                                                                   fmt="{:.2f}×", run=WITH_FA4)
    for n in lengths:
        out[f"pers_fa4_{length_key(n)}"] = FA4_SPEED.fact(_speed(WITH_FA4, "fa4", n), n, fmt="{:.2f}×")
        for prefix, run in (("race", RACE), ("rep", REPEAT), ("fa4run", WITH_FA4)):
            won, rounds = rounds_won(run, n)
            out[f"pers_won_{prefix}_{length_key(n)}"] = ROUNDS.fact(f"{won} of {rounds}", n, run=run)
    out["pers_most_tiles_4k"] = Fact(max(raced_tiles(4096)), "lab.measure.attention.hopper_persistent.unit_tiles",
                                     "{:d}")
    for n in (4096, 16384):
        for how in hopper_persistent.PLANS:
            out[f"pers_{how}_excess_{length_key(n)}"] = Fact(plan_excess(n, how), _PLAN, "{:.1f}%")
    for n, run in COUNTERS.items():
        profiled = kernel_counters.run_jobs(run)
        jobs = {launch: profiled[f"prefill:{job}:1:{n}"] for launch, job in PROFILED.items()}
        cycles = {launch: job.main["sm_cycles_sum"] for launch, job in jobs.items()}
        k = length_key(n)
        if run == TENSOR_APART.run:
            tensor = [kernel_counters.tensor_cycles(job) for job in jobs.values()]
            out["pers_tensor_apart_16k"] = TENSOR_APART.fact(100 * (max(tensor) / min(tensor) - 1), fmt="{:.2f}%")
        out[f"pers_cycles_vs_tile_{k}"] = CYCLES.fact(cycles["gluon-balanced"] / cycles["gluon-default"],
                                                      "persistent over per tile", n, fmt="{:.3f}×", run=run)
        for launch in ("gluon-default", "gluon-balanced"):
            out[f"pers_{launch.removeprefix('gluon-')}_cycles_vs_fa3_{k}"] = CYCLES.fact(
                cycles[launch] / cycles["fa3"], launch, "over fa3", n, fmt="{:.2f}×", run=run)
        if run == PROGRAMS.run:
            out |= {f"pers_programs_{launch.removeprefix('gluon-')}": PROGRAMS.fact(
                int(job.main["programs"]), launch, n, fmt=",d") for launch, job in jobs.items()}
    return out


def persistent_table():
    """Each launch's speed over FA3 at each length in the three runs (the race of record, its repeat, the run with
    FA4), and FA4's in the run that had it."""
    table = pd.DataFrame({"kernel": [label(ROWS[launch]) for launch in LAUNCHES] + [label("fa4")]})
    for n in sorted(int(n) for n in _races()[RACE].n.unique()):
        table[f"{length_key(n)}"] = [" / ".join(f"{_speed(run, launch, n):.2f}" for run in RUNS) for launch in LAUNCHES]\
            + [f"– / – / {_speed(WITH_FA4, 'fa4', n):.2f}"]
    return table.style.hide(axis="index").set_caption(
        "Speed over FA3 timed in the same rounds, on H100s: the persistent race / its repeat / the run with FA4 "
        f"(data/{RACE}, data/{REPEAT}, data/{WITH_FA4})")
