"""Chapter 4's section on FA3's schedule written by hand (the Gluon kernel, lab.measure.attention.hopper):
its race against FA3, step by step, and its hardware counters beside FA3's.

One run of record each: the race (data/h200/kernels-hopper-race, scripts/race_tuned.py: FA3, cuDNN, our Triton
kernel and the Gluon variants in one process, interleaved rounds) and the counters (data/h200/kernel-counters-hopper,
FA3 and the Gluon kernel profiled side by side by Nsight Compute). The interview answer and the quiz quote
these same facts.
"""

from __future__ import annotations

from lab.book.facts import Fact
from lab.measure.attention import hopper
from lab.results import data, kernel_counters
from lab.results import tuning as tuning_runs

RACE = "h200/kernels-hopper-race"
COUNTERS = "h200/kernel-counters-hopper"
N_COUNTERS = 16384
TARGET = 0.95  # the project's bar (issue 24): ours / FA3 in one run, at 16k and 32k

#: The race's variants in the order the section builds them up, and how the page names each.
STEPS = {
    "+ kv-major order, TMA": "Triton kernel (compiler's schedule)",
    "gluon 128x128 s2, neither": "Gluon: producer + 2 consumers",
    "gluon 128x128 s2, no ping-pong": "+ softmax under P·V",
    "gluon 128x128 s2": "+ ping-pong (the default)",
    "gluon 128x128 s2, no overlap": "ping-pong, no overlap",
    "gluon 128x128 s3": "default, 3 stages",
    "gluon 128x64 s4": "default, 64-key tiles, 4 stages",
    "sdpa-cudnn": "cuDNN (SDPA), for scale",
}
DEFAULT = "gluon 128x128 s2"


def race_table(root=None):
    """(rows of :func:`lab.results.tuning.race_vs` for :data:`STEPS`, the race's folder name)."""
    run = data.load((root / RACE) if root is not None else RACE)
    race = run.csv("race.csv", ("n", "variant", "status", "ms", "max_abs_err"))
    return tuning_runs.race_vs(race, list(STEPS)), f"data/{run.name}/race.csv"


def step_table(rows):
    """The section's table: one row per step, ms and speed vs FA3 at each length."""
    table = rows.pivot(index="variant", columns="n", values=["ms", "vs_reference"]).loc[list(STEPS)]
    table.columns = [f"{n // 1024}k: {'ms' if what == 'ms' else 'speed vs FA3'}" for what, n in table.columns]
    table.insert(0, "kernel", [STEPS[v] for v in table.index])
    return table.reset_index(drop=True).style.hide(axis="index").format(precision=3)


def facts(root=None, race=None) -> dict:
    """The facts of the section (and of the interview answer built on it); ``race``: what :func:`race_table`
    returned, when the caller has read it already."""
    rows, source = race or race_table(root)
    vs = {(int(r.n), r.variant): float(r.vs_reference) for r in rows.itertuples()}
    out = {"hk_worst_err": Fact(float(rows.max_abs_err.max()), source)}
    for n in sorted({n for n, _ in vs}):
        k = f"{n // 1024}k"
        out |= {f"hk_vs_{k}": Fact(vs[n, DEFAULT], source),
                f"hk_triton_vs_{k}": Fact(vs[n, "+ kv-major order, TMA"], source),
                f"hk_neither_vs_{k}": Fact(vs[n, "gluon 128x128 s2, neither"], source),
                f"hk_overlap_pct_{k}": Fact(100 * (vs[n, "gluon 128x128 s2, no ping-pong"]
                                                   / vs[n, "gluon 128x128 s2, neither"] - 1), source),
                f"hk_pingpong_pct_{k}": Fact(100 * (vs[n, DEFAULT] / vs[n, "gluon 128x128 s2, no ping-pong"] - 1), source),
                f"hk_pingpong_alone_pct_{k}": Fact(100 * (vs[n, "gluon 128x128 s2, no overlap"]
                                                          / vs[n, "gluon 128x128 s2, neither"] - 1), source)}
    block_n, stages = hopper.LAUNCH[128]
    code = "lab.measure.attention.hopper"
    out |= {"hk_block_m": Fact(hopper.ROWS, code), "hk_rows": Fact(hopper.ROWS // 2, code),
            "hk_block_n": Fact(block_n, code), "hk_stages": Fact(stages, code),
            "hk_consumer_regs": Fact(int(hopper.CONSUMER_REGS.value), code), "hk_producer_regs": Fact(int(hopper.PRODUCER_REGS.value), code)}
    return out | counter_facts(root)


def counter_facts(root=None) -> dict:
    """FA3 and the Gluon kernel at 16k, profiled in one Nsight Compute run."""
    jobs = kernel_counters.run_jobs(COUNTERS, root)
    source = f"data/{COUNTERS}/raw.csv (Nsight Compute on the H200)"
    out = {}
    for key, candidate in (("fa3", "fa3"), ("ours", "ours-hopper")):
        job = jobs.get(f"prefill:{candidate}:1:{N_COUNTERS}")
        if job is None:
            continue
        out |= {f"hk_{key}_tensor": Fact(job.main["tensor_pct"], source),
                f"hk_{key}_programs": Fact(int(job.main["programs"]), source),
                f"hk_{key}_waves": Fact(job.main["waves"], source),
                f"hk_{key}_busy": Fact(job.main["sm_busy_pct"], source),
                f"hk_{key}_warps": Fact(job.main["warps_per_sm"], source),
                f"hk_{key}_stall": Fact(job.stalls[0][0] if job.stalls else None, source)}
    return out
