"""Chapter 4's tables and figures: each labelled with its run, headers with units, numbers formatted, no
index column."""

from __future__ import annotations

import pandas as pd

from lab import env
from lab.book.pages.ch04.sources import (
    ABLATION,
    BENCH,
    GLUON_STEPS,
    HOPPER_COUNTERS,
    HOPPER_RACE,
    LENGTHS,
    N_COUNTERS,
    RACE,
    RACE_ORDER,
    TUNING_RACE,
    drift,
    length_key,
    runs,
)
from lab.book.plots.kernels import plot_ablation, plot_prefill
from lab.measure.attention.tuned import TUNED_CONFIGS
from lab.names import in_data, label, labels
from lab.results import data, kernel_counters, kernel_runs, tuning
from lab.results.units import power_of_ten


def _styled(frame: pd.DataFrame, formats: dict, caption: str, na: str = "not timed"):
    return frame.style.hide(axis="index").format(formats, na_rep=na).set_caption(caption)


def check_table(errors: dict):
    """The kernels' checks (``{kernel: module.check()}``) as a table: kernel, mask, largest |error| against the
    float64 reference, and where it ran."""
    caps = env.detect()
    where = "this machine's GPU" if caps.has_gpu and caps.triton_mode == "gpu" else "Triton's interpreter on this machine's CPU"
    rows = [{"kernel": kernel, "mask": mask, "largest |error| vs float64": error}
            for kernel, by_mask in errors.items() for mask, error in by_mask.items()]
    return _styled(pd.DataFrame(rows), {"largest |error| vs float64": power_of_ten},
                   f"Checked when this page was built, in {where}: 50 tokens, 4 query heads over 2 KV heads, "
                   "head dim 64, float32")


def race_table():
    """The race of record: ms at every length and the speed against FA3 at 32k."""
    r = runs()
    raced = kernel_runs.race_table(r.race_prefill, RACE_ORDER)
    lengths = sorted(int(n) for n in r.race_prefill.n.unique())
    table = pd.DataFrame({"kernel": raced.candidate.map(label),
                          **{f"{length_key(n)}, ms": raced[f"ms_{n}"] for n in lengths},
                          "speed vs FA3, 32k": raced.vs_32768})
    formats = {column: "{:.2f}" for column in table.columns if column != "kernel"}
    return _styled(table, formats, f"The race (data/{RACE}): median of interleaved rounds, one process",
                   na="failed")


def ablation_table():
    """Each ablation step against the step it builds on, and against FA3 timed in the same run."""
    r = runs()
    steps = tuning.step_changes(r.ablation, drift())
    table = steps.pivot(index=["step", "change"], columns="n", values="change_pct")
    table.columns = [f"{length_key(n)}: % faster than the step it builds on" for n in table.columns]
    for n in LENGTHS:
        at = r.ablation[r.ablation.n == n].set_index("step").ms
        table[f"{length_key(n)}: speed vs FA3"] = [r.ablation_fa3_ms[n] / float(at[step]) for step, _ in table.index]
    beyond = steps.pivot(index=["step", "change"], columns="n", values="beyond_drift")
    table["beyond the drift at"] = ["both lengths" if row.all() else ", ".join(length_key(n) for n in row.index[row])
                                    if row.any() else "neither" for _, row in beyond.iterrows()]
    table = table.reset_index()
    formats = {c: "{:+.1f}" if "%" in c else "{:.2f}" for c in table.columns if ":" in c}
    return _styled(table, formats, f"The ablation (data/{ABLATION}): each step against the one it builds on "
                   "(steps 7 to 10 against step 6), FA3 timed in the same run")


def launch_table():
    """What the autotuner picked at each length in the benchmark's earlier full run."""
    launches = kernel_runs.picked_launches(runs().bench_prefill)
    table = pd.DataFrame({"prompt length": launches.n.map("{:,}".format),
                          "tile (queries × keys)": launches.block_m.astype(str) + "×" + launches.block_n.astype(str),
                          "warps": launches.warps, "stages": launches.stages,
                          "registers per thread, at most": launches.maxnreg.map(
                              lambda regs: "no cap" if pd.isna(regs) else f"{int(regs)}"),
                          "loads": launches.tma.map({True: "TMA", False: "pointers"})})
    return _styled(table, {}, f"The tuned kernel's launches in the benchmark's earlier full run (data/{BENCH})")


def autotune_space(configs=TUNED_CONFIGS):
    """The autotuner's space (``TUNED_CONFIGS``): tile, warps, stages and register cap of each entry."""
    rows = [{"tile (queries × keys)": f"{c.kwargs['BLOCK_M']}×{c.kwargs['BLOCK_N']}", "warps": c.num_warps,
             "stages": c.num_stages, "registers per thread, at most": "no cap" if not c.maxnreg else f"{c.maxnreg}"}
            for c in configs]
    return _styled(pd.DataFrame(rows), {}, "TUNED_CONFIGS, the space triton.autotune times once per shape")


def teaching_launches_table():
    """The teaching kernel at 16k under each launch the first call's tuning timed."""
    teach = runs().teaching_launches
    teach = teach[teach.setting.str.startswith("teaching")][["setting", "ms"]]
    return _styled(teach.rename(columns={"setting": "teaching kernel at 16k, launch", "ms": "ms"}), {"ms": "{:.2f}"},
                   f"The teaching kernel's launches (data/{BENCH}/tuning.csv)")


def tuning_race_table():
    """The tuning race: the fastest variant at each length, FA3 timed beside it."""
    best = tuning.race_best(runs().tuning_race)
    table = pd.DataFrame({"tokens": best.n.map("{:,}".format), "fastest variant": best.variant, "ms": best.ms,
                          "FA3, ms": best.reference_ms, "speed vs FA3": best.vs_reference})
    return _styled(table, {"ms": "{:.2f}", "FA3, ms": "{:.2f}", "speed vs FA3": "{:.2f}"},
                   f"The tuning race (data/{TUNING_RACE}): FA3 timed in the same rounds")


def register_cap_table():
    """The launches timed with and without a register cap at 16k, each pair in one tuning round."""
    pairs = tuning.register_cap_pairs(runs().tuning_rounds, "prefill 16k")
    table = pd.DataFrame({"round": pairs["round"], "launch": pairs.launch,
                          "loads": pairs.tma.map(lambda t: "TMA" if str(t) == "True" else "pointers"),
                          "registers": pairs.registers, "programs / SM": pairs.programs_per_sm, "ms": pairs.ms,
                          "cap": pairs.cap, "registers, capped": pairs.registers_capped,
                          "spilled, capped": pairs.spills_capped, "programs / SM, capped": pairs.programs_per_sm_capped,
                          "ms, capped": pairs.ms_capped, "speed-up": pairs.speedup})
    return _styled(table, {"ms": "{:.2f}", "ms, capped": "{:.2f}", "speed-up": "{:.2f}×"},
                   f"Register cap or not, 16k, each pair in one tuning round (data/{BENCH}/tuning_forward.csv)")


def tricks_table():
    """The three published tricks against the plain kernel of the same tuning round, 16k."""
    tried = tuning.variants(runs().tuning_rounds, "prefill 16k")
    tried = tried[tried.variant != "plain"]
    noise = drift()
    table = pd.DataFrame({"variant": tried.variant, "launches tried": tried.tried, "did not build": tried.failed,
                          "its best launch": tried.best_setting, "ms": tried.best_ms,
                          "plain kernel's best, ms": tried.plain_ms, "speed vs plain": tried.vs_plain,
                          "beyond the drift": tried.vs_plain.map(lambda v: "yes" if tuning.beyond_drift(v, noise) else "no")})
    return _styled(table, {"ms": "{:.3f}", "plain kernel's best, ms": "{:.3f}", "speed vs plain": "{:.2f}"},
                   f"Variants against the plain kernel of the same tuning round, 16k (data/{BENCH}/tuning_forward.csv)")


def gluon_table():
    """The Gluon race: one row per step, ms and speed against FA3 at each length."""
    rows = runs().gluon
    wide = rows.pivot(index="variant", columns="n", values=["ms", "vs_reference"]).loc[[in_data(step) for step in GLUON_STEPS]]
    wide.columns = [f"{length_key(n)}: {'ms' if what == 'ms' else 'speed vs FA3'}" for what, n in wide.columns]
    wide.insert(0, "kernel", [label(step) for step in GLUON_STEPS])
    table = wide.reset_index(drop=True)
    return _styled(table, {c: "{:.3f}" if c.endswith("ms") else "{:.2f}" for c in table.columns if ":" in c},
                   f"The Gluon race (data/{HOPPER_RACE}): FA3 timed in the same rounds")


def gluon_counters_table():
    """FA3 and the Gluon kernel under Nsight Compute at 16k: time, clock, SM-cycles, tensor-busy cycles, launch."""
    jobs = runs().hopper_counters
    rows = []
    for candidate in ("fa3", "ours-hopper"):
        job = jobs[f"prefill:{candidate}:1:{N_COUNTERS}"]
        rows.append({"kernel": label(candidate), "main kernel, ms": job.main["ms"], "clock, GHz": job.main["clock_hz"] / 1e9,
                     "SM-cycles, millions": job.main["sm_cycles_sum"] / 1e6,
                     "tensor pipe busy": job.main["tensor_pct"],
                     "tensor-busy SM-cycles, millions": kernel_counters.tensor_cycles(job) / 1e6,
                     "programs": int(job.main["programs"]), "waves": kernel_counters.waves(job)["waves"]})
    return _styled(pd.DataFrame(rows), {"main kernel, ms": "{:.3f}", "clock, GHz": "{:.3f}",
                                        "SM-cycles, millions": "{:.1f}", "tensor pipe busy": "{:.1f}%",
                                        "tensor-busy SM-cycles, millions": "{:.1f}", "programs": "{:,}",
                                        "waves": "{:.2f}"},
                   f"FA3 and the Gluon kernel at 16k, one Nsight Compute run (data/{HOPPER_COUNTERS})")


# --- figures ---------------------------------------------------------------------------------------------

def _provenance(ds: data.Dataset) -> str:
    return f"{ds.gpu}, torch {ds.provenance['torch']}, Triton {ds.provenance['triton']}; data/{ds.name}"


def prefill_figure():
    """Throughput against prompt length for every candidate of the race of record."""
    r = runs()
    return plot_prefill(r.race_prefill, labels(RACE_ORDER),
                        _provenance(r.race) + "; causal, 28 query / 4 KV heads, d=128, bf16, batch 1")


def ablation_figure():
    """TFLOP/s after each step of the ablation, at each length."""
    return plot_ablation(runs().ablation, f"NVIDIA H200; data/{ABLATION}/ablation.csv")


