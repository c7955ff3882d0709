"""Every number chapter 4 states, as facts of named quantities (declared here, one run of record each), by
the glue name the chapter uses: :func:`facts` (cached, so the interview page and the course kit take the
same facts without a second read)."""

from __future__ import annotations

import functools

from lab import names
from lab.book.facts import Fact
from lab.book.pages.ch04.persistent import persistent_facts
from lab.book.pages.ch04.sources import (
    ABLATION,
    BENCH,
    CODE_HOPPER,
    HOOK_FILE,
    HOOK_RUN,
    HOPPER_COUNTERS,
    HOPPER_RACE,
    INSIDE,
    LENGTHS,
    N_COUNTERS,
    RACE,
    RACE_ORDER,
    TARGET,
    TRICKS,
    TUNING_RACE,
    drift,
    length_key,
    runs,
    timed_row,
    verdict,
)
from lab.measure.attention import hopper
from lab.measure.attention.tuned import TUNED_CONFIGS
from lab.names import in_data, label
from lab.results import bandwidth, kernel_counters, kernel_runs, roofline, tuning
from lab.results.kernel_counters import counter_fact
from lab.results.kernel_runs import PREFILL_MS, SPEED_VS_CUDNN  # the race's, stated by chapters 4 and 6
from lab.results.quantities import Quantity

_PREFILL = "causal prefill shaped like Qwen2.5-7B's attention (28 query / 4 KV heads, d=128, bf16, batch 1)"
_ROUNDS = "both timed in one process, in interleaved rounds (median round of CUDA-event timings)"
_LEASE = "timed on another machine lease, where FA3's own time was not the race's"

# --- quantities: the race of record ------------------------------------------------------------------
SPEED_VS_FA3 = Quantity(
    "h200.prefill.speed_vs_fa3", f"FA3's time over the kernel's, {_PREFILL}, {_ROUNDS}", run=RACE,
    file="prefill.csv", unit="×",
    others={ABLATION: f"the ablation's own run (the tuned kernel as its last kept step, FA3 beside it), {_LEASE}",
            HOPPER_RACE: f"the Gluon race (our Triton kernel again, TMA loads, beside FA3 and the Gluon kernel), {_LEASE}"})
PREFILL_TFLOPS = Quantity("h200.prefill.tflops", f"causal FLOPs (half of 4 n² d per head) per second, {_PREFILL}",
                          run=RACE, file="prefill.csv", unit="TFLOP/s")
PCT_OF_PEAK = Quantity("h200.prefill.pct_of_datasheet_peak", "a kernel's TFLOP/s in the race as a share of the "
                       "H200's dense bf16 datasheet peak", run=RACE, file="prefill.csv", unit="%")
RACE_ERROR = Quantity("h200.race.max_abs_err", "the largest |error| of any timed candidate of the race against "
                      "the fp32 reference", run=RACE, file="prefill.csv")
LONGEST = Quantity("h200.race.longest", "the longest prompt the race timed", run=RACE, file="prefill.csv",
                   unit="tokens")
FLEX_MASK = Quantity("h200.race.flex_mask_request", "what FlexAttention's create_block_mask asked to allocate at the "
                     "race's longest prompt (its out-of-memory note)", run=RACE, file="prefill.csv", unit="GiB")
FLEX_MASK_PAIR = Quantity("h200.race.flex_mask_request_per_pair", "that request over the (query, key) pairs of one "
                          "head", run=RACE, file="prefill.csv", unit="B")
COMPULSORY_MS = Quantity("h200.prefill.compulsory_ms", "Q, K and V read once and O written once (28 query / 4 KV "
                         "heads, d=128, bf16) at the H200's bandwidth ceiling", run="h200/bandwidth",
                         file="read_stream.csv", unit="ms")
TUNED_FASTER_FROM = Quantity("h200.bench.tuned_faster_from", "the shortest prompt from which the tuned kernel beat "
                             "the teaching kernel at every longer length", run=BENCH, file="prefill.csv", unit="tokens")
HOOK_ERROR = Quantity("h200.sdpa_fa4_hook.max_abs_err", "a causal bf16 SDPA call under PyTorch's FA4 hook against an "
                      "fp32 reference (8 heads)", run=HOOK_RUN, file=HOOK_FILE)

# --- quantities: the tuning rounds, the ablation, the tuning race ----------------------------------------
STEP_GAIN = Quantity("h200.ablation.step_gain", "how much faster a step of the ablation made the kernel than the "
                     "step it builds on: 100 × (time before / time after − 1); negative: slower", run=ABLATION,
                     file="ablation.csv", unit="%")
VS_TEACHING = Quantity("h200.ablation.speedup_vs_teaching", "a step's speed over the teaching kernel's, in the "
                       "ablation", run=ABLATION, file="ablation.csv", unit="×")
ABLATION_TFLOPS = Quantity("h200.ablation.tflops", "a step's causal TFLOP/s in the ablation", run=ABLATION,
                           file="ablation.csv", unit="TFLOP/s")
TEACHING_LAUNCH_MS = Quantity("h200.teaching_launches.ms", "the teaching kernel at 16k tokens under the fastest and "
                              "the slowest of the launches the first call's tuning timed", run=BENCH, file="tuning.csv",
                              unit="ms")
TUNING_BEST = Quantity("h200.tuning_race.best_speed_vs_fa3", "FA3's time over the fastest variant of the tuned "
                       f"Triton kernel at one length, {_ROUNDS}", run=TUNING_RACE, file="race.csv", unit="×")
TUNING_COUNT = Quantity("h200.tuning_race.variants", "variants of the tuned kernel the tuning race tried, and how "
                        "many did not build", run=TUNING_RACE, file="race.csv", unit="variants")
CAP_SPEEDUP = Quantity("h200.register_cap.speedup", "a launch's time without a register cap over its time with one, "
                       "16k, in the same tuning round", run=BENCH, file="tuning_forward.csv", unit="×")
CAP_MS = Quantity("h200.register_cap.ms", "the launch the cap helped most, 16k, with and without the cap", run=BENCH,
                  file="tuning_forward.csv", unit="ms")
CAP_REGISTERS = Quantity("h200.register_cap.registers", "registers per thread of that launch, with and without the "
                         "cap, and per program (8 warps of 32 threads)", run=BENCH, file="tuning_forward.csv",
                         unit="registers")
CAP_PROGRAMS = Quantity("h200.register_cap.programs_per_sm", "programs of that launch resident per SM (CUDA's "
                        "occupancy calculator), with and without the cap", run=BENCH, file="tuning_forward.csv",
                        unit="programs")
TRICK_SPEED = Quantity("h200.tricks.speed_vs_plain", "the plain kernel's best time over a variant's best, 16k, in "
                       "one tuning round", run=BENCH, file="tuning_forward.csv", unit="×")
TRICK_LAUNCHES = Quantity("h200.tricks.launches", "launches a variant was tried at, and how many did not build",
                          run=BENCH, file="tuning_forward.csv", unit="launches")

# --- quantities: the Gluon kernel ------------------------------------------------------------------------
GLUON_SPEED = Quantity("h200.gluon.speed_vs_fa3", f"FA3's time over a variant's of the Gluon kernel (or of a kernel "
                       f"raced beside it), {_PREFILL}, {_ROUNDS}", run=HOPPER_RACE, file="race.csv", unit="×")
GLUON_GAIN = Quantity("h200.gluon.step_gain", "how much faster one part of the schedule made the Gluon kernel than "
                      "the kernel without it: 100 × (time without / time with − 1); negative: slower", run=HOPPER_RACE,
                      file="race.csv", unit="%")
GLUON_ERROR = Quantity("h200.gluon_race.max_abs_err", "the largest |error| of the Gluon race's kernels against the "
                       "fp32 reference", run=HOPPER_RACE, file="race.csv")
COUNTER_SPEED = Quantity("h200.counters.speed_vs_fa3", "FA3's main-kernel time over the Gluon kernel's, each profiled "
                         "once under Nsight Compute with the clocks left free", run=HOPPER_COUNTERS, file="raw.csv",
                         unit="×")
COUNTER_CYCLES = Quantity("h200.counters.cycles_vs_fa3", "FA3's SM-cycles with work over the Gluon kernel's (the "
                          "same call, the clock taken out)", run=HOPPER_COUNTERS, file="raw.csv", unit="×")
TENSOR_CYCLES_APART = Quantity("h200.counters.tensor_cycles_apart", "how far apart the two kernels' tensor-busy "
                               "SM-cycles are (busy share × active cycles), either way up", run=HOPPER_COUNTERS,
                               file="raw.csv", unit="%")
EXTRA_CYCLES = Quantity("h200.counters.extra_cycles", "the Gluon kernel's SM-cycles beyond FA3's, as a share of "
                        "FA3's", run=HOPPER_COUNTERS, file="raw.csv", unit="%")
GLUON_LAUNCH = Quantity("h200.counters.gluon_launch", "the Gluon kernel's launch as Nsight Compute recorded it: warps "
                        "per program, the warps beyond its partitions' (Triton's padding), the GPU's SMs, programs "
                        "that fit on one SM, rounds of programs", run=HOPPER_COUNTERS, file="raw.csv")
LAST_ROUND = Quantity("h200.counters.last_round_full", "how full the last round of programs is: the programs left "
                      "for it over the programs one round holds", run=HOPPER_COUNTERS, file="raw.csv", unit="%")


@functools.cache
def facts() -> dict:
    """Every fact chapter 4 states, by glue name (the interview page and the course kit take theirs from here)."""
    return {**race_facts(), **bench_facts(), **ablation_facts(), **tuning_facts(), **tuning_race_facts(),
            **counter_facts(), **gluon_facts(), **persistent_facts()}


def race_facts() -> dict:
    """The race of record: each kernel's speed against FA3 (and cuDNN), the fastest kernel against the datasheet
    peak and the measured matmul rate, the time the compulsory bytes would take, Flex's failed mask build."""
    r = runs()
    race = r.race_prefill
    out = {}
    for name in RACE_ORDER:
        for n in sorted(int(n) for n in race.n.unique()):
            out[f"race_{names.key(name)}_vs_fa3_{length_key(n)}"] = SPEED_VS_FA3.fact(kernel_runs.speed_vs(race, name, "fa3", n), name, length_key(n))
    longest = int(race.n.max())
    flex_long = race[(race.candidate == "flex") & (race.n == longest)].iloc[0]
    request = kernel_runs.failed_allocation_gib(flex_long.note)
    best = race[(race.n == 32768) & (race.status == "ok")].sort_values("ms").iloc[0]
    peak, ceiling = roofline.datasheet_peak("H200-SXM").to("TFLOP/s"), roofline.matmul_rate().to("TFLOP/s")
    ceiling_bytes = bandwidth.bandwidth_ceiling(r.race.gpu)
    compulsory = 2 * (28 + 4) * 32768 * 128 * 2  # Q and O of 28 heads, K and V of 4, 32k x 128 dims x 2 bytes
    hook = r.hook
    out |= {
        "pf_worst_err": RACE_ERROR.fact(float(race[race.status == "ok"].max_abs_err.max())),
        "race_flex_long_n": LONGEST.fact(longest),
        "race_flex_oom_gib": FLEX_MASK.fact(request, detail="the note of flex at the longest prompt"),
        "race_flex_oom_per_pair": FLEX_MASK_PAIR.fact(None if request is None else request * 2**30 / longest**2,
                                                      detail="the note of flex at the longest prompt"),
        "teach_vs_cudnn_32k": SPEED_VS_CUDNN.fact(kernel_runs.speed_vs(race, "ours-teaching", "sdpa-cudnn", 32768),
                                                  "ours-teaching", "32k"),
        "h200_peak_tf": peak,
        "matmul_rate_tf": ceiling,
        "pf_best_kernel_32k": Fact(label(best.candidate), f"data/{RACE}/prefill.csv"),
        "pf_best_ms_32k": PREFILL_MS.fact(float(best.ms), best.candidate, "32k"),
        "pf_best_tf_32k": PREFILL_TFLOPS.fact(float(best.tflops), best.candidate, "32k"),
        "pf_best_pct_peak": PCT_OF_PEAK.fact(100 * float(best.tflops) / peak.value, best.candidate, "32k",
                                             detail=f"over {peak.source}"),
        "pf_best_vs_matmul_rate": Fact("below" if best.tflops < ceiling.value else "above",
                                   f"data/{RACE}/prefill.csv against {ceiling.source}"),
        "compulsory_ms_32k": COMPULSORY_MS.fact(compulsory / ceiling_bytes.value * 1e3),
        "hook_fa4": Fact("ran" if hook["FA4"]["ok"] else "failed", f"data/{HOOK_RUN}/{HOOK_FILE}"),
        "hook_fa4_err": HOOK_ERROR.fact(hook["FA4"]["detail"] if hook["FA4"]["ok"] else None),
        "hook_fa3": Fact("ran" if hook["FA3"]["ok"] else "failed", f"data/{HOOK_RUN}/{HOOK_FILE}"),
        "hook_fa3_error": Fact(str(hook["FA3"]["detail"]), f"data/{HOOK_RUN}/{HOOK_FILE}"),
    }
    return out


def bench_facts() -> dict:
    """The benchmark's earlier full run: the naive path, and the two kernels at 1k (a run of its own, named)."""
    prefill = runs().bench_prefill
    ms = lambda name, n: float(timed_row(prefill, name, n).ms)  # noqa: E731
    lengths = sorted(int(n) for n in prefill.n.unique())
    faster = [n for n in lengths if ms("ours-tuned", n) < ms("ours-teaching", n)]
    wins_from = next(n for n in lengths if all(m in faster for m in lengths if m >= n))
    skipped = prefill[(prefill.candidate == "naive") & (prefill.n == 32768)].note.iloc[0]
    return {
        "pf_naive_ms_16k": PREFILL_MS.fact(ms("naive", 16384), "naive", "16k", run=BENCH),
        "pf_naive_skip": Fact(skipped, f"data/{BENCH}/prefill.csv"),
        "bench_flash_ms_16k": PREFILL_MS.fact(ms("sdpa-flash", 16384), "sdpa-flash", "16k", run=BENCH),
        "pf_tuned_us_1k": PREFILL_MS.fact(ms("ours-tuned", 1024), "ours-tuned", "1k", run=BENCH).to("us"),
        "pf_teaching_us_1k": PREFILL_MS.fact(ms("ours-teaching", 1024), "ours-teaching", "1k", run=BENCH).to("us"),
        "pf_tuned_wins_from": TUNED_FASTER_FROM.fact(wins_from),
    }


def ablation_facts() -> dict:
    """Each ablation step against the step it builds on (one quantity per step and length), the kept steps
    together against the teaching kernel and against FA3 timed in the ablation's own run."""
    r = runs()
    noise = drift()
    out = {"drift_pct": tuning.drift(r.tuning_rounds), "abl_launch": Fact(r.ablation.teaching_launch.iloc[0], f"data/{ABLATION}/ablation.csv"),
           "n_tuned_configs": Fact(len(TUNED_CONFIGS), "lab.measure.attention.tuned.TUNED_CONFIGS")}
    for row in tuning.step_changes(r.ablation, noise).itertuples():
        out[f"abl_{length_key(row.n)}_{row.step}_pct"] = STEP_GAIN.fact(row.change_pct, row.step, length_key(row.n))
    for row in r.ablation.itertuples():
        out[f"abl_{length_key(row.n)}_{row.step}_tf"] = ABLATION_TFLOPS.fact(float(row.tflops), row.step, length_key(row.n))
    last = int(r.ablation[~r.ablation.change.str.contains(tuning.NOT_KEPT, regex=False)].step.max())
    for n in LENGTHS:
        step = r.ablation[(r.ablation.n == n) & (r.ablation.step == last)].iloc[0]
        out[f"abl_{length_key(n)}_last"] = VS_TEACHING.fact(float(step.speedup_vs_teaching), last, length_key(n))
        out[f"abl_{length_key(n)}_last_vs_fa3"] = SPEED_VS_FA3.fact(r.ablation_fa3_ms[n] / float(step.ms), "ours-tuned",
                                                            length_key(n), run=ABLATION, detail="prefill.csv (fa3)")
    return out


def tuning_facts() -> dict:
    """The tuning rounds: the teaching kernel's launches, the register cap, the three tricks that lost."""
    r = runs()
    teach = r.teaching_launches[r.teaching_launches.setting.str.startswith("teaching")]
    pairs = tuning.register_cap_pairs(r.tuning_rounds, "prefill 16k")
    best = pairs.loc[pairs.speedup.idxmax()]
    same = pairs[pairs.programs_per_sm == pairs.programs_per_sm_capped]
    threads = 8 * 32  # the capped launches run 8 warps of 32 threads
    out = {
        "teach_best": TEACHING_LAUNCH_MS.fact(float(teach.ms.min()), "fastest"),
        "teach_worst": TEACHING_LAUNCH_MS.fact(float(teach.ms.max()), "slowest"),
        "cap_launch": Fact(best.launch, f"data/{BENCH}/tuning_forward.csv"),
        "cap_cap": CAP_REGISTERS.fact(int(best.cap), "cap"),
        "cap_regs": CAP_REGISTERS.fact(int(best.registers), "uncapped"),
        "cap_regs_total": CAP_REGISTERS.fact(threads * int(best.registers), "uncapped, per program"),
        "cap_regs_capped_total": CAP_REGISTERS.fact(threads * int(best.cap), "cap, per program"),
        "cap_progs": CAP_PROGRAMS.fact(int(best.programs_per_sm), "uncapped"),
        "cap_progs_capped": CAP_PROGRAMS.fact(int(best.programs_per_sm_capped), "capped"),
        "cap_ms": CAP_MS.fact(float(best.ms), "uncapped"),
        "cap_ms_capped": CAP_MS.fact(float(best.ms_capped), "capped"),
        "cap_speedup": CAP_SPEEDUP.fact(float(best.speedup), "best"),
        "cap_loads": Fact("TMA" if str(best.tma) == "True" else "pointer", f"data/{BENCH}/tuning_forward.csv"),
        "cap_same_lo": CAP_SPEEDUP.fact(float(same.speedup.min()), "same occupancy, lowest"),
        "cap_same_hi": CAP_SPEEDUP.fact(float(same.speedup.max()), "same occupancy, highest"),
    }
    tried = tuning.variants(r.tuning_rounds, "prefill 16k").set_index("variant")
    for variant, key in TRICKS:
        row = tried.loc[variant]
        out |= {f"{key}_speed": TRICK_SPEED.fact(float(row.vs_plain), variant),
                f"{key}_tried": TRICK_LAUNCHES.fact(int(row.tried), variant, "tried"),
                f"{key}_failed": TRICK_LAUNCHES.fact(int(row.failed), variant, "did not build"),
                f"{key}_failure": Fact(row.failure, f"data/{BENCH}/tuning_forward.csv")}
    return out


def tuning_race_facts() -> dict:
    """The tuning race: the fastest variant at each length against FA3, and whether it reaches the target."""
    r = runs()
    best = tuning.race_best(r.tuning_race).set_index("n")
    source = f"data/{TUNING_RACE}/race.csv"
    ws = r.tuning_race[r.tuning_race.variant.str.contains("warp specialise") & (r.tuning_race.status != "ok")]
    out = {"tr_target": Fact(TARGET, "lab.book.pages.ch04.TARGET: the project's bar (issue 24)"),
           "tr_variants": TUNING_COUNT.fact(int(best.variants.iloc[0]), "tried"),
           "tr_failed": TUNING_COUNT.fact(int(best.failed.iloc[0]), "did not build"),
           "tr_ws_failure": Fact(str(ws.note.iloc[0]), source)}
    for n in LENGTHS:
        k, speed = length_key(n), float(best.loc[n].vs_reference)
        out |= {f"tr_best_{k}": Fact(best.loc[n].variant, source), f"tr_vs_{k}": TUNING_BEST.fact(speed, k),
                f"tr_target_{k}": Fact(verdict(speed / TARGET, "above it", "below it"),
                                       f"{source} against the drift of data/{BENCH}/tuning_forward.csv")}
    return out


def counter_facts() -> dict:
    """Chapter 2's counters of FA3, FA4 and our Triton kernel at 16k (h200/kernel-counters), as that chapter
    states them: the same quantities (:mod:`lab.results.kernel_counters`)."""
    jobs = runs().counters
    out = {}
    for candidate in ("fa3", "ours-tuned", "fa4"):
        job, name = jobs[f"prefill:{candidate}:1:{N_COUNTERS}"], names.key(candidate)
        out |= {f"ctr_{name}_tensor": counter_fact(kernel_counters.TENSOR_BUSY, job.main["tensor_pct"], job),
                f"ctr_{name}_warps": counter_fact(kernel_counters.WARPS_PER_SM, job.main["warps_per_sm"], job),
                f"ctr_{name}_ms": counter_fact(kernel_counters.MAIN_MS, job.main["ms"], job),
                f"ctr_{name}_programs": counter_fact(kernel_counters.PROGRAMS, int(job.main["programs"]), job),
                f"ctr_{name}_stall": Fact(job.stalls[0][0], job.source)}
    fa3, fa4 = (jobs[f"prefill:{c}:1:{N_COUNTERS}"] for c in ("fa3", "fa4"))
    out["ctr_fa4_vs_fa3"] = Fact(verdict(fa3.main["ms"] / fa4.main["ms"]), fa3.source)
    return out


def gluon_facts() -> dict:
    """The Gluon race part by part (one criterion: beyond the drift or not), the kernel's launch as the code
    sets it, and its counters beside FA3's (h200/kernel-counters-hopper): time, cycles, clocks, waves."""
    r = runs()
    vs = {(int(row.n), row.variant): float(row.vs_reference) for row in r.gluon.itertuples()}
    out = {"hk_worst_err": GLUON_ERROR.fact(float(r.gluon.max_abs_err.max()))}

    def speed(variant, n):  # variant: an id of lab.names.VARIANTS (or a candidate's)
        return vs[n, in_data(variant)]

    def gain(step, after, before, n):
        return GLUON_GAIN.fact(100 * (speed(after, n) / speed(before, n) - 1), step, length_key(n))

    for n in LENGTHS:
        k = length_key(n)
        out |= {f"hk_vs_{k}": GLUON_SPEED.fact(speed("gluon-default", n), "default", k),
                f"hk_neither_vs_{k}": GLUON_SPEED.fact(speed("gluon-neither", n), "neither", k),
                f"hk_triton_vs_{k}": SPEED_VS_FA3.fact(speed("tuned-kv-major-tma", n), "ours-tuned", k, run=HOPPER_RACE),
                f"hk_structure_pct_{k}": gain("structure", "gluon-neither", "tuned-kv-major-tma", n),
                f"hk_overlap_pct_{k}": gain("overlap", "gluon-overlap", "gluon-neither", n),
                f"hk_pingpong_pct_{k}": gain("ping-pong", "gluon-default", "gluon-overlap", n),
                f"hk_pingpong_alone_pct_{k}": gain("ping-pong alone", "gluon-pingpong", "gluon-neither", n)}

    def moved(after, before, n):
        return verdict(speed(after, n) / speed(before, n))

    source = f"data/{HOPPER_RACE}/race.csv against the drift of data/{BENCH}/tuning_forward.csv"
    for n in LENGTHS:
        k = length_key(n)
        # ping-pong counts if it moved the kernel beyond the drift with the overlap or without it
        pingpong = {moved("gluon-default", "gluon-overlap", n), moved("gluon-pingpong", "gluon-neither", n)} - {INSIDE}
        out |= {f"hk_fa3_{k}": Fact(verdict(speed("gluon-default", n), "faster", "slower"), source),
                f"hk_target_{k}": Fact(verdict(speed("gluon-default", n) / TARGET, "above it", "below it"), source),
                f"hk_overlap_{k}": Fact(moved("gluon-overlap", "gluon-neither", n), source),
                f"hk_pingpong_{k}": Fact(pingpong.pop() if pingpong else INSIDE, source)}
    block_n, stages = hopper.LAUNCH[128]
    out |= {"hk_block_m": Fact(hopper.ROWS, CODE_HOPPER), "hk_rows": Fact(hopper.ROWS // 2, CODE_HOPPER),
            "hk_block_n": Fact(block_n, CODE_HOPPER), "hk_stages": Fact(stages, CODE_HOPPER),
            "hk_consumer_regs": Fact(int(hopper.CONSUMER_REGS.value), CODE_HOPPER),
            "hk_producer_regs": Fact(int(hopper.PRODUCER_REGS.value), CODE_HOPPER),
            "hk_default_warps": Fact(hopper.NUM_WARPS, CODE_HOPPER),
            "hk_consumer_warps": Fact(int(hopper.CONSUMER_WARPS.value), CODE_HOPPER),
            "hk_producer_warps": Fact(int(hopper.PRODUCER_WARPS.value), CODE_HOPPER)}
    return out | gluon_counter_facts()


def gluon_counter_facts() -> dict:
    """FA3 and the Gluon kernel in one Nsight Compute run: the time ratio, the cycle ratio and the clocks (what
    each means), the tensor-busy cycles of both, the launch (threads, padding warps) and its waves."""
    jobs = runs().hopper_counters
    fa3, ours = (jobs[f"prefill:{c}:1:{N_COUNTERS}"] for c in ("fa3", "ours-hopper"))
    out = {}
    for name, job in ((names.key("fa3"), fa3), (names.key("ours-hopper"), ours)):
        out |= {f"hk_{name}_tensor": counter_fact(kernel_counters.TENSOR_BUSY, job.main["tensor_pct"], job),
                f"hk_{name}_warps": counter_fact(kernel_counters.WARPS_PER_SM, job.main["warps_per_sm"], job),
                f"hk_{name}_ms": counter_fact(kernel_counters.MAIN_MS, job.main["ms"], job),
                f"hk_{name}_clock": counter_fact(kernel_counters.CLOCK, job.main["clock_hz"] / 1e9, job),
                f"hk_{name}_programs": counter_fact(kernel_counters.PROGRAMS, int(job.main["programs"]), job),
                f"hk_{name}_stall": Fact(job.stalls[0][0], job.source)}
    launch = kernel_counters.waves(ours)
    warps = int(ours.main["threads"]) // 32
    partitions = hopper.NUM_WARPS + int(hopper.CONSUMER_WARPS.value) + int(hopper.PRODUCER_WARPS.value)
    apart = tuning.apart_pct(kernel_counters.tensor_cycles(fa3) / kernel_counters.tensor_cycles(ours))
    out |= {"hk_ctr_speed": COUNTER_SPEED.fact(fa3.main["ms"] / ours.main["ms"]),
            "hk_ctr_cycles": COUNTER_CYCLES.fact(fa3.main["sm_cycles_sum"] / ours.main["sm_cycles_sum"]),
            "hk_extra_cycles_pct": EXTRA_CYCLES.fact(100 * (ours.main["sm_cycles_sum"] / fa3.main["sm_cycles_sum"] - 1)),
            "hk_tensor_apart_pct": TENSOR_CYCLES_APART.fact(apart),
            "hk_gluon_threads": counter_fact(kernel_counters.THREADS, int(ours.main["threads"]), ours),
            "hk_launch_warps": GLUON_LAUNCH.fact(warps, "warps per program"),
            "hk_padding_warps": GLUON_LAUNCH.fact(warps - partitions, "padding warps", detail=f"against {CODE_HOPPER}"),
            "hk_sms": GLUON_LAUNCH.fact(int(ours.main["sms"]), "SMs"),
            "hk_gluon_per_sm": GLUON_LAUNCH.fact(kernel_counters.programs_per_sm(ours), "programs per SM"),
            "hk_gluon_waves": counter_fact(kernel_counters.WAVES, launch["waves"], ours),
            "hk_gluon_rounds": GLUON_LAUNCH.fact(launch["rounds"], "rounds"),
            "hk_gluon_last_full": LAST_ROUND.fact(100 * launch["last_full"])}
    return out


