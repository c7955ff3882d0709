"""The method appendix, "How the numbers were taken": the facts and tables of each of its sections, and the
tables generated from the book's registry (the runs of record, the quantities, every data folder and the
command that made it).

One function per section returns that section's facts (``timing_facts``, ``rounds_facts``, ...); ``facts()`` is
all of them. A chapter that adds a section for its method adds its function here (or takes the facts from its
own page module) and one line to ``facts()``.
"""

from __future__ import annotations

import functools
import html

from lab.book.pages.busy_method import method_facts, serial_ttft_table
from lab.book.pages import declared
from lab.book.pages.ch06b import facts as chapter06b
from lab.measure import clock_probe, gpuclocks
from lab.measure.vllm.arms import FA3
from lab.names import label
from lab.results import bandwidth, data, decode_rows, paged, records
from lab.results import census_windows as cd
from lab.results import tuning as tuning_runs
from lab.results.facts import Fact
from lab.results.hardware import DEVICES
from lab.results.kernel_runs import (ABLATION, CONTIGUOUS, PREFILL_MS, RACE, RECORD, TUNING_RACE, bars_over_runs, run_bars,
                                     block_and_round_spread, clock_ranges, prefill_rows, runs_of_record, stored_runs,
                                     times_across_runs)
from lab.results.quantities import Quantity, is_data_run

#: The run the timing method's evidence comes from: the benchmark's first full run (and its repeats).
KERNELS = RECORD
COUNTERS = "h200/kernel-counters"
H200 = DEVICES["H200-SXM"]
N16K, N1K = 16384, 1024
BAR_COLUMNS = ("bar", "ratio", "need", "met")
HARDEST_BAR = "prefill 16k: tuned speed vs fastest torch backend"
BLOCK_TIMED = "timed one block per candidate, in a fixed order, before interleaved rounds"

#: The method's own numbers: what a run's settings were, how far timings moved, what the read stream held.
METHOD = {
    "setting": Quantity("h200.kernels.setting", "a setting of the kernel benchmark's first full run, as its "
                        "provenance.json records it (rep_ms, rounds, max_abs_err)", run=KERNELS,
                        file="provenance.json"),
    "block_ms": Quantity("h200.kernels.block_timed_ms", "a candidate's prefill time at one length over the benchmark "
                         "runs that timed each candidate in one block (lowest, highest)", run=CONTIGUOUS,
                         file="*/prefill.csv", unit="ms"),
    "block_runs": Quantity("h200.kernels.block_timed_runs", "benchmark runs that timed each candidate in one block",
                           run=CONTIGUOUS, file="*/prefill.csv", unit="runs"),
    "round_ms": Quantity("h200.kernels.round_ms", "one candidate's rounds at one length, over every round of the "
                         "benchmark's first full run and its repeats (fastest, median)", run=KERNELS,
                         file="prefill.csv", unit="ms"),
    "round_runs": Quantity("h200.kernels.round_runs", "the benchmark's first full run and its repeats, timed in "
                           "interleaved rounds", run=KERNELS, file="prefill.csv", unit="runs"),
    "round_spread": Quantity("h200.kernels.round_spread_pct", "the widest spread of one candidate's rounds within "
                             "one run (slowest over fastest, minus one)", run=KERNELS, file="prefill.csv", unit="%"),
    "prefill_ms": PREFILL_MS,
    "ablation_ms": Quantity("h200.kernels.ablation_last_ms", "the last step of the tuned kernel's ablation in the "
                            "benchmark's first full run (the tuned kernel and launch, timed minutes after the table)",
                            run=KERNELS, file="ablation.csv", unit="ms"),
    "fa3_across": Quantity("h200.fa3_16k_across_leases_ms", "FA3's prefill time at 16k tokens in each run of one day "
                           "that timed it, each on its own machine lease: the race, the ablation and the tuning race "
                           "(lowest, highest, how many runs)", run=RACE, file="prefill.csv", unit="ms"),
    "eager_from": Quantity("h200.decode_rows.eager_from_tokens", "the fewest query tokens per sequence at which FA3's "
                           "points of the decode-rows sweep were timed eagerly rather than by graph replay",
                           run=decode_rows.RUNS[1], file="rows.csv", unit="tokens"),
    "clock_mhz": Quantity("h200.kernels.sm_mhz", "the median SM clock a candidate ran at while timed at 16k tokens, "
                          "over the benchmark's first full run and its repeats (lowest, highest)", run=KERNELS,
                          file="prefill.csv", unit="MHz"),
    "capped_runs": Quantity("h200.kernels.power_capped_runs", "runs in which the software power cap was the clock "
                            "limit active in most of a candidate's samples at 16k, and the runs that sampled it",
                            run=KERNELS, file="prefill.csv", unit="runs"),
    "bars": Quantity("h200.kernels.bars", "the project's performance bars over runs: bars met in every run that "
                     "measured them, bars in all, and the hardest bar's need, runs met, runs measured, lowest ratio",
                     run=KERNELS, others={CONTIGUOUS: f"the same bars from the benchmark runs {BLOCK_TIMED}"}),
    "read_stream": bandwidth.READ_STREAM,
    "copy_rate": Quantity("h200.copy_rate", "a device-to-device copy (torch copy_) timed beside the read stream: bytes "
                          "read and written per second of one call, for one size, and the slope over the sizes",
                          run=bandwidth.RUNS["NVIDIA H200"], unit="GB/s",
                          others={paged.PAGED_RUN: "copies of the decode kernels' K/V timed beside them by CUDA-graph "
                                                   "replay over rotated buffers, not one call at a time with L2 "
                                                   "cleared before each"}),
    "paged_copy_bytes": Quantity("h200.paged_decode.copy_bytes", "the K/V bytes one copy of the paged-decode run "
                                 "moved (each read once and written once)", run=paged.PAGED_RUN, file="paged.csv",
                                 unit="B"),
    "counter_jobs": Quantity("h200.kernel_counters.jobs", "the jobs one call of python -m lab kernel-counters "
                             "profiled", run=COUNTERS, file="provenance.json", unit="jobs"),
}


# --- the sections ------------------------------------------------------------------------------------

@functools.cache
def _kernels():
    return data.load(KERNELS)


def timing_facts() -> dict[str, Fact]:
    """Timing one kernel, interleaved rounds: the benchmark's settings as its provenance records them."""
    flags = _kernels().provenance["flags"]
    setting = METHOD["setting"].fact
    return {"rep_ms": setting(flags["rep_ms"], "rep_ms"), "rounds": setting(flags["rounds"], "rounds"),
            "per_round_ms": setting(flags["rep_ms"] // flags["rounds"], "rep_ms per round"),
            "max_err": setting(flags["max_abs_err"], "max_abs_err")}


@functools.cache
def _blocks():
    return stored_runs(CONTIGUOUS)


@functools.cache
def _record():
    return runs_of_record()


def rounds_facts() -> dict[str, Fact]:
    """Blocks against rounds at 16k: the range of ours and cuDNN's in block-timed runs, cuDNN's rounds."""
    spread = block_and_round_spread(_blocks(), _record())
    block, rnd = METHOD["block_ms"].fact, METHOD["round_ms"].fact
    repeats = "and data/h200/kernels-repeats/*/prefill.csv"
    return {"blk_runs": METHOD["block_runs"].fact(spread["blocks_runs"]),
            "blk_ours_lo": block(spread["ours_lo"], "ours-tuned", N16K, "lowest"),
            "blk_ours_hi": block(spread["ours_hi"], "ours-tuned", N16K, "highest"),
            "blk_cudnn_lo": block(spread["fast_lo"], "sdpa-cudnn", N16K, "lowest"),
            "blk_cudnn_hi": block(spread["fast_hi"], "sdpa-cudnn", N16K, "highest"),
            "rnd_runs": METHOD["round_runs"].fact(spread["rounds_runs"], detail=repeats),
            "rnd_cudnn_lo": rnd(spread["fast_round_lo"], "sdpa-cudnn", N16K, "fastest", detail=repeats),
            "rnd_cudnn_median": rnd(spread["fast_round_median"], "sdpa-cudnn", N16K, "median", detail=repeats),
            "rnd_ours_spread": METHOD["round_spread"].fact(spread["ours_round_spread_pct"], "ours-tuned", N16K,
                                                          detail=repeats)}


def block_table():
    """Our kernel and cuDNN at 16k in each block-timed run, and the ratio between them."""
    blocks = prefill_rows(_blocks(), N16K).pivot(index="run", columns="candidate", values="ms").loc[list(_blocks())]
    table = blocks[["ours-tuned", "sdpa-cudnn"]].assign(ratio=blocks["sdpa-cudnn"] / blocks["ours-tuned"])
    table = table.reset_index().rename(columns={"ours-tuned": f"{label('ours-tuned')} (ms)",
                                                "sdpa-cudnn": f"{label('sdpa-cudnn')} (ms)", "ratio": "cuDNN time / ours"})
    return table.style.format(precision=3).hide(axis="index")


def _ms(table, candidate: str, n: int) -> float:
    return float(table[(table.candidate == candidate) & (table.n == n)].ms.iloc[0])


def drift_facts() -> dict[str, Fact]:
    """How much timings move: within a tuning run, within a benchmark run, between machine starts and leases,
    and the decode-rows points timed eagerly."""
    kernels = _kernels()
    tuning = kernels.csv("tuning_forward.csv", ("round", "shape", "setting", "variant", "tma", "ms", "note"))
    ablation = kernels.csv("ablation.csv", ("n", "step", "ms"))
    prefill = kernels.csv("prefill.csv", ("candidate", "n", "ms"))
    earlier = data.load(f"{CONTIGUOUS}/bench").csv("prefill.csv", ("candidate", "n", "ms"))
    fa3 = times_across_runs(N16K, "fa3")
    across = METHOD["fa3_across"].fact
    others = f"and data/{ABLATION}/prefill.csv, data/{TUNING_RACE}/race.csv"
    points = decode_rows.sweep()
    eager = points[(points.candidate == "fa3-tokens") & (points.timer == "eager")]
    prefill_ms = METHOD["prefill_ms"].fact
    return {
        "drift_pct": tuning_runs.drift(tuning),
        "abl_last_16k": METHOD["ablation_ms"].fact(float(ablation[ablation.n == N16K].sort_values("step").ms.iloc[-1]),
                                                   N16K),
        "bench_tuned_16k": prefill_ms(_ms(prefill, "ours-tuned", N16K), "ours-tuned", N16K, run=RECORD, detail="prefill.csv"),
        "host_1k_here": prefill_ms(_ms(prefill, "sdpa-cudnn", N1K), "sdpa-cudnn", N1K, run=RECORD, detail="prefill.csv").to("us"),
        "host_1k_there": prefill_ms(_ms(earlier, "sdpa-cudnn", N1K), "sdpa-cudnn", N1K, run=CONTIGUOUS,
                                    detail="bench/prefill.csv").to("us"),
        "fa3_16k_lo": across(min(fa3.values()), "lowest", detail=others),
        "fa3_16k_hi": across(max(fa3.values()), "highest", detail=others),
        "fa3_16k_runs": across(len(fa3), "runs", detail=others),
        "eager_tokens": Fact(", ".join(str(int(t)) for t in eager.query_tokens), f"data/{decode_rows.RUNS[1]}/rows.csv"),
        "eager_from_tokens": METHOD["eager_from"].fact(int(eager.query_tokens.min())),
        "host_tokens": Fact(N1K, "lab.book.pages.appendix (the shortest prompt of the benchmark)")}


def clock_facts() -> dict[str, Fact]:
    """The clocks our kernel and cuDNN ran at, timed at 16k, over the first full run and its repeats."""
    clocks = clock_ranges(_record()).set_index("candidate")
    repeats = "sm_mhz, clock_limit; and data/h200/kernels-repeats/*/prefill.csv"
    facts = {}
    for name, key in (("ours-tuned", "ours"), ("sdpa-cudnn", "cudnn")):
        row = clocks.loc[name]
        facts |= {f"clk_{key}_mhz_lo": METHOD["clock_mhz"].fact(float(row.mhz_lo), name, "lowest", detail=repeats),
                  f"clk_{key}_mhz_hi": METHOD["clock_mhz"].fact(float(row.mhz_hi), name, "highest", detail=repeats),
                  f"clk_{key}_power_capped": METHOD["capped_runs"].fact(int(row.power_capped), name, "capped",
                                                                        detail=repeats),
                  f"clk_{key}_runs": METHOD["capped_runs"].fact(int(row.runs), name, "sampled", detail=repeats)}
    return facts


def clock_table():
    """The clock ranges as a table."""
    columns = {"candidate": "candidate", "mhz_lo": "SM clock, lowest (MHz)", "mhz_hi": "SM clock, highest (MHz)",
               "power_capped": "runs limited by the power cap", "runs": "runs"}
    return clock_ranges(_record()).rename(columns=columns).style.hide(axis="index").format(precision=0)


def _bars(runs: dict):
    return bars_over_runs({label: run_bars(ds) for label, ds in runs.items()})


def bars_facts() -> dict[str, Fact]:
    """The bars over the round-timed runs and over the block-timed ones, the hardest bar's record."""
    record, blocks = _bars(_record()), _bars(_blocks())
    hard, hard_blocks = record.set_index("bar").loc[HARDEST_BAR], blocks.set_index("bar").loc[HARDEST_BAR]
    bar = METHOD["bars"].fact
    repeats = "bars.csv, and data/h200/kernels-repeats/*/bars.csv"
    blocks_run = {"run": CONTIGUOUS, "detail": "*/bars.csv"}
    return {"bars_all_met": bar(int((record.met == record.measured).sum()), "met in every run", detail=repeats),
            "bars_total": bar(len(record), "bars", detail=repeats),
            "hard_need": bar(float(hard.need), HARDEST_BAR, "need", detail=repeats),
            "hard_met_record": bar(int(hard.met), HARDEST_BAR, "met", detail=repeats),
            "hard_runs_record": bar(int(hard.measured), HARDEST_BAR, "measured", detail=repeats),
            "hard_worst_record": bar(float(hard.worst), HARDEST_BAR, "lowest", detail=repeats),
            "hard_met_blocks": bar(int(hard_blocks.met), HARDEST_BAR, "met", **blocks_run),
            "hard_runs_blocks": bar(int(hard_blocks.measured), HARDEST_BAR, "measured", **blocks_run),
            "hard_worst_blocks": bar(float(hard_blocks.worst), HARDEST_BAR, "lowest", **blocks_run)}


def _bars_styled(table, runs: dict):
    table = table.rename(columns={"bar": "bar", "need": "need", "measured": "runs measured", "met": "runs met",
                                  "worst": "lowest"})
    return table.style.hide(axis="index").format(precision=3, subset=list(runs) + ["lowest", "need"], na_rep="—")


def bars_table():
    """Every bar over the round-timed runs."""
    return _bars_styled(_bars(_record()), _record())


def blocks_bars_table():
    """Every bar over the block-timed runs."""
    return _bars_styled(_bars(_blocks()), _blocks())


def decode_bars_table():
    """The decode bars of the project's first benchmark call (timed from Python) beside the graph-replayed run."""
    kernels = _kernels()
    final, first = run_bars(kernels), run_bars(kernels, "bars_first_call.csv")
    table = final[final.bar.str.startswith("decode")].rename(columns={"ratio": "graph replay"}).merge(
        first[["bar", "ratio"]].rename(columns={"ratio": "launched from Python (first call)"}), on="bar")
    return table[["bar", "need", "launched from Python (first call)", "graph replay", "met"]].style.hide(
        axis="index").format(precision=3, na_rep="—")


def ceiling_facts() -> dict[str, Fact]:
    """The read stream and its ceiling; the copy beside it, steady, and the paged-decode run's, not."""
    found, ceiling = bandwidth.read_ceiling(H200), bandwidth.bandwidth_ceiling(H200)
    calls = _calls()
    stream = METHOD["read_stream"].fact
    copy = bandwidth_copy()
    rate = METHOD["copy_rate"].fact
    paged_copy = lambda batch: paged.paged_row("copy", batch, 32768)  # noqa: E731  (the paged-decode run's copies)
    small, large = paged_copy(1), paged_copy(16)
    return {"ceiling_tbs": ceiling.to("TB/s"), "ceiling_spread": bandwidth.spread(H200).shown_as("{:.1f}%"),
            "ceiling_lo_mb": stream(found.sizes[0] / 1e6, "smallest size", fmt="{:,.0f} MB"),
            "ceiling_hi_gb": stream(found.sizes[1] / 1e9, "largest size", fmt="{:.1f} GB"),
            "ceiling_sizes": stream(len(calls), "sizes"),
            "h200_l2_mib": Fact(H200.l2_bytes / 2**20, "lab.results.hardware"),
            "ceiling_fixed_us": stream(1e6 * found.intercept_s, "fixed cost per call", fmt="{:.0f} µs"),
            "call_lo_gbs": stream(float(calls.gb_per_s.iloc[0]), "one call's rate, smallest size", fmt="{:,.0f} GB/s"),
            "call_hi_gbs": stream(float(calls.gb_per_s.iloc[-1]), "one call's rate, largest size", fmt="{:,.0f} GB/s"),
            "flat_within": Fact(100 * bandwidth.FLAT_WITHIN, "lab.results.bandwidth.FLAT_WITHIN", "{:.0f}%"),
            "reach_gb": Fact(bandwidth.TO_BYTES / 1e9, "lab.results.bandwidth.TO_BYTES", "{:.0f} GB"),
            "datasheet_tbs": bandwidth.datasheet_bandwidth(H200).to("TB/s"),
            "a10g_ceiling_gbs": bandwidth.bandwidth_ceiling("A10G").to("GB/s"),
            "copy_lo_gbs": rate(copy["lo_gbs"], "smallest size", fmt=",.0f", detail=bandwidth.FILE),
            "copy_hi_gbs": rate(copy["hi_gbs"], "largest size", fmt=",.0f", detail=bandwidth.FILE),
            "copy_slope_tbs": rate(copy["slope_gbs"], "slope", fmt=".2f", detail=bandwidth.FILE).to("TB/s"),
            "copy_small_mb": METHOD["paged_copy_bytes"].fact(small["kv_bytes"], 1, fmt=".0f").to("MB"),
            "copy_large_gb": METHOD["paged_copy_bytes"].fact(large["kv_bytes"], 16, fmt=".2f").to("GB"),
            "copy_small_gbs": rate(small["gb_per_s"], "batch 1", run=paged.PAGED_RUN, fmt=",.0f", detail="paged.csv"),
            "copy_large_gbs": rate(large["gb_per_s"], "batch 16", run=paged.PAGED_RUN, fmt=",.0f", detail="paged.csv"),
            "clock_sample_ms": Fact(gpuclocks.TIMING_INTERVAL_MS, "lab.measure.gpuclocks.TIMING_INTERVAL_MS")}


@functools.cache
def _calls():
    import pandas as pd

    calls = pd.DataFrame(bandwidth.per_call_rates(H200))
    return calls[calls.size_bytes >= bandwidth.MIN_BYTES].reset_index(drop=True)


def bandwidth_copy() -> dict:
    """The copy timed beside the read stream (data/h200/bandwidth, kind copy): one call's rate (bytes read and
    written per second) at the smallest and the largest size, and the slope of time against those bytes."""
    table = data.load(bandwidth.RUNS["NVIDIA H200"]).csv(bandwidth.FILE, bandwidth.COLUMNS)
    copies = table[(table.kind == "copy") & (table.size_bytes >= bandwidth.MIN_BYTES)].sort_values("size_bytes")
    slope, _ = bandwidth.slope_rate(2 * copies.size_bytes.to_numpy(), copies.ms.to_numpy() / 1e3)
    return {"lo_gbs": float(copies.gb_per_s.iloc[0]), "hi_gbs": float(copies.gb_per_s.iloc[-1]), "slope_gbs": slope / 1e9}


def ceiling_table():
    """The read stream's calls: size, time, the fitted line's time, one call's rate."""
    found, calls = bandwidth.read_ceiling(H200), _calls()
    table = calls.assign(MB=calls.size_bytes / 1e6, fit=(found.intercept_s + calls.size_bytes / found.bytes_per_s) * 1e3)
    table = table[["MB", "ms", "fit", "gb_per_s"]].rename(columns={"MB": "size (MB)", "ms": "ms",
                                                                  "fit": "ms on the fitted line",
                                                                  "gb_per_s": "this call's GB/s"})
    return table.style.hide(axis="index").format({"size (MB)": "{:,.0f}", "ms": "{:.3f}",
                                                  "ms on the fitted line": "{:.3f}", "this call's GB/s": "{:,.0f}"})


def counter_facts() -> dict[str, Fact]:
    """The hardware-counter tool's run: its Nsight Compute version, command, jobs, method and sections."""
    prov = data.load(COUNTERS).provenance
    flags, source = prov["flags"], f"data/{COUNTERS}/provenance.json"
    return {"cm_ncu": Fact(flags["ncu_version"], source), "cm_command": Fact(prov["command"], source),
            "cm_jobs": METHOD["counter_jobs"].fact(len(flags["jobs"])), "cm_method": Fact(flags["method"], source),
            "cm_sections": Fact(", ".join(flags["sections"]), source)}


def capture_facts() -> dict[str, Fact]:
    """How chapter 7's profiler windows were taken: the capture's command and windows (FlashAttention 3's capture;
    FlexAttention's differs only in its arm), from its provenance; how the clock probe that answers what they leave
    was run (its readings are chapter 7's)."""
    folder = f"{cd.H200_TRACES}/traces/{FA3.slug}"
    prov = data.load(folder).provenance
    source = f"data/{folder}/provenance.json"
    probe = "lab.measure.clock_probe.PHASES"
    burst = [seconds for kind, seconds in clock_probe.PHASES if kind == "burst"]
    sustained = [seconds for kind, seconds in clock_probe.PHASES if kind == "sustained"]
    return {"cap_windows": Fact(", ".join(prov["flags"]["windows"]), source),
            "cap_fields": Fact(", ".join(gpuclocks.FIELDS), "lab.measure.gpuclocks.FIELDS"),
            "clock_interval_ms": cd.sample_interval(),
            "probe_interval_ms": Fact(clock_probe.INTERVAL_MS, "lab.measure.clock_probe.INTERVAL_MS"),
            "probe_short_ms": Fact(1000 * min(burst), probe, "{:.0f}"),
            "probe_long_ms": Fact(1000 * max(burst), probe, "{:.0f}"),
            "probe_sustained_s": Fact(max(sustained), probe, "{:g}")}


#: The facts of chapter 6b that the busy-server section states (the method's own come from busy_method).
BUSY_RESULTS = ("fa3_capacity", "fa3_rates", "inter_fa3_2048_8l_steady", "inter_fa3_8192_8l_steady",
                "agree_requests", "agree_bench_ttft", "agree_probe_ttft", "agree_ttft_pct", "agree_bench_itl",
                "agree_probe_itl", "agree_itl_pct", "agree_within", "agree_bench_ttft_median",
                "agree_probe_ttft_median")


def busy_server_facts() -> dict[str, Fact]:
    """The busy-server study's method (chapter 6b's settings, tokenizer, probe check and interference windows)."""
    results = chapter06b()
    return {name: results[name] for name in BUSY_RESULTS} | method_facts()


def busy_serial_table():
    """The serial TTFTs behind the probe-against-bench check."""
    import pandas as pd

    return serial_ttft_table().style.format("{:.1f}").format("{:.0f}", subset=pd.IndexSlice["requests", :])


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact the appendix states, by glue name."""
    return (timing_facts() | rounds_facts() | drift_facts() | clock_facts() | bars_facts() | ceiling_facts()
            | counter_facts() | capture_facts() | busy_server_facts())


# --- the tables generated from the registry ---------------------------------------------------------

def _declared() -> list[Quantity]:
    return [quantity for quantity, _ in declared().values()]


def _provenances(run: records.Run) -> list[dict]:
    """The provenance records of a run's folder: its own, or its parts' (a study of several arms), leaving out the
    parts another run of the registry holds."""
    return [row for row in data.made_by() if records.run_holding(f"data/{row['folder']}") == run]


def _few(names: list[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def run_rows() -> list[dict]:
    """One row per run of :data:`lab.results.records.RUNS`: what it measured, when and by which command (from its
    provenance files), the quantities that take it as their record, and the other runs kept of those
    quantities or the quantities it is another run of, with why they differ."""
    quantities = _declared()
    rows = []
    for run in records.RUNS:
        made = _provenances(run)
        dates = sorted({m["date"][:10] for m in made if m["date"]})
        commands = list(dict.fromkeys(m["command"] for m in made))
        codes = sorted({m["code"] for m in made if m["code"]})
        record = sorted(q.name for q in quantities if q.run == run.folder)
        kept = [f"data/{other}: {why}" for q in quantities if q.run == run.folder for other, why in q.others.items()]
        kept += [f"another run of {q.name} (record: data/{q.run}): {why}" for q in quantities
                 for other, why in q.others.items() if other == run.folder]
        rows.append({"run": f"data/{run.folder}", "what it measured": run.measured,
                     "date": " to ".join(dict.fromkeys((dates[0], dates[-1]))) if dates else "",
                     "command": commands[0] + (f" (and {len(commands) - 1} more, one per part: every data folder "
                                               "is listed below)" if len(commands) > 1 else "") if commands else "",
                     "code": ", ".join(codes) or "not recorded",
                     "quantities of record": len(record), "for example": _few(record),
                     "other runs of its measurements": "; ".join(dict.fromkeys(kept))})
    return rows


def _as_code(text: str) -> str:
    """A command or name in a table cell as code, which the site lets break anywhere (a long path would widen the
    column past a laptop's page)."""
    return f"<code>{html.escape(text)}</code>" if text else ""


def runs_table():
    """The runs of record, generated: see :func:`run_rows`."""
    import pandas as pd

    rows = [{**{k: v for k, v in row.items() if k != "for example"},
             "quantities of record": f"{row['quantities of record']}: {row['for example']}" if row["for example"]
             else str(row["quantities of record"])} for row in run_rows()]
    return (pd.DataFrame(rows).style.format(escape="html")
            .format({"run": _as_code, "command": _as_code,
                     "code": lambda c: html.escape(c) if c == "not recorded" else _as_code(c)}, escape=None)
            # quantity names and data paths are long words: let them break so seven columns fit a laptop's page
            .set_table_styles([{"selector": "td", "props": [("overflow-wrap", "anywhere")]}])
            .hide(axis="index"))


def quantity_rows() -> list[dict]:
    """One row per declared quantity: name, what it means, unit, run of record, other runs kept."""
    return [{"quantity": q.name, "what it is": q.means, "unit": q.unit or "—",
             "run of record": f"data/{q.run}" if is_data_run(q.run) else q.run,
             "other runs": ", ".join(f"data/{other}" for other in q.others) or "—"}
            for q in sorted(_declared(), key=lambda q: (q.run, q.name))]


def quantities_table():
    """Every declared quantity: see :func:`quantity_rows`."""
    import pandas as pd

    return (pd.DataFrame(quantity_rows()).style.format(escape="html")
            .format({"quantity": _as_code}, escape=None).hide(axis="index"))


def folders_table():
    """Every committed data folder and the command that made it, from its provenance.json."""
    import pandas as pd

    rows = [{"data folder": f"data/{row['folder']}", "kind": row["kind"], "date (UTC)": row["date"],
             "command recorded": row["command"], "command that makes it now": row["now"] if row["now"] != row["command"] else "",
             "code": row["code"] or "not recorded"} for row in data.made_by()]
    return (pd.DataFrame(rows).style.format(escape="html")
            .format({"data folder": _as_code, "command recorded": _as_code, "command that makes it now": _as_code},
                    escape=None).hide(axis="index"))
