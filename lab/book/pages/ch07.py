"""Chapter 7, the trace: the census of the A10G study's published windows and of our H200 traces, the matmul
control, the clocks the captures sampled and the clock probe that explains them, the decode kernels and the decode
window that was mostly prefill.

``facts()`` is every number the chapter states (glue name -> Fact, each a named quantity where it comes from
data); the figures, tables and the explorer are the functions below. The chapter teaches the census rules
themselves by showing :func:`lab.measure.census.rules.decide` on its page.
"""

from __future__ import annotations

import functools
from pathlib import Path

from lab.book.census_explorer import census_explorer
from lab.book.plots.census import plot_census_panels
from lab.measure import census
from lab.measure.gpuclocks import reason_names
from lab.measure.vllm.arms import FLASH as A10G_FLASH
from lab.measure.vllm.arms import FLEX as A10G_FLEX
from lab.results import census_windows as cd
from lab.results import clock_probe
from lab.results import trace_analysis as ta
from lab.results.data import DATA_DIR, load
from lab.results.facts import Fact
from lab.results.hardware import DEVICES
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity
from lab.results.reference import DATASET as A10G_RUN
from lab.results.reference import SOURCE_TITLE
import statistics

TRACES_RUN = cd.H200_TRACES
FLASH, FLEX = cd.BACKENDS
LONG, SHORT = ta.LONG, ta.SHORT
PREFILL_LONG = f"prefill-{LONG}"
POWER_CAP = "software power cap"


def _census(prefix: str, run: str, file: str, where: str) -> dict[str, Quantity]:
    """The census quantities of one GPU's windows (the A10G study's, or our H200 traces')."""
    q = lambda key, means, unit: Quantity(f"{prefix}.census.{key}", f"{means}, {where}", run=run, file=file,  # noqa: E731
                                          unit=unit)
    return {"family_ms": q("family_ms", "GPU time of one kernel family (attention, matmul, other) in one profiler "
                                        "window", "ms"),
            "window_ms": q("window_ms", "GPU kernel time of one whole profiler window", "ms"),
            "share_pct": q("share_pct", "one kernel family's share of a profiler window's GPU time", "%"),
            "matmul_gap_pct": q("matmul_gap_pct", "the matmul control: |FlexAttention - FlashAttention| matmul time "
                                                  "over FlashAttention's, in one kind of window", "%"),
            "attention_ratio": q("attention_ratio", "FlexAttention's attention time over FlashAttention's, in one "
                                                    "kind of window", "×")}


#: The A10G study's published census (figures it did not publish are completed by arithmetic, and say so).
A10G = _census("a10g", A10G_RUN, "census.csv", "as the A10G study published it (or completed by arithmetic)") | {
    "window_tokens": Quantity("a10g.census.window_tokens", "the prompt tokens of one prefill window as the A10G "
                              "study's census records them", run=A10G_RUN, file="census.csv", unit="tokens"),
    "attention_extra_s": Quantity("a10g.census.attention_extra_s", "FlexAttention's attention time minus "
                                  "FlashAttention's in one kind of window of the A10G study", run=A10G_RUN,
                                  file="census.csv", unit="s"),
    "matmul_scaled_ms": Quantity("a10g.census.matmul_scaled_ms", "an estimate, not a measurement: the A10G study's "
                                 "28k-prefill matmul time scaled to a shorter prompt in proportion to its tokens",
                                 run=A10G_RUN, file="census.csv", unit="ms"),
    "naive_prefill_kernels_s": Quantity("a10g.census.naive_prefill_kernels_s", "attention plus matmul time of the "
                                        "A10G study's 28k prefill window: the prefill its whole-request decode "
                                        "window repeats", run=A10G_RUN, file="census.csv", unit="s"),
    "naive_prefill_pct": Quantity("a10g.census.naive_prefill_pct", "the prefill kernels' time as a share of the A10G "
                                  "study's whole-request decode window", run=A10G_RUN, file="census.csv", unit="%"),
    "naive_decode_s": Quantity("a10g.census.naive_decode_s", "an estimate: the decode window's generated tokens "
                               "times the sweep's inter-token latency at that context (A10G study)",
                               run=A10G_RUN, file="decode_summary.csv", unit="s"),
    "naive_decode_pct": Quantity("a10g.census.naive_decode_pct", "that decode estimate as a share of the A10G "
                                 "study's whole-request decode window", run=A10G_RUN, file="decode_summary.csv",
                                 unit="%"),
}
#: Our H200 traces (``python -m lab capture vllm``; census by ``python -m lab census``).
H200 = _census("h200", TRACES_RUN, "traces", "in our H200 traces (python -m lab census)") | {
    "launch_slower_pct": Quantity("h200.census.matmul_launch_slower_pct", "how much longer one matmul kernel's launch "
                                  "took in FlashAttention 3's 28k prefill window than the same kernel's in "
                                  "FlexAttention's (largest, smallest over the kernels)", run=TRACES_RUN,
                                  file="traces", unit="%"),
    "step_ms": Quantity("h200.census.step_ms", "one kernel family's GPU time per decode step in a decode-steps-only "
                        "window of our H200 traces", run=TRACES_RUN, file="traces", unit="ms"),
    "step_growth": Quantity("h200.census.step_attention_growth", "attention time per decode step at 28k tokens of "
                            "context over that at 2k", run=TRACES_RUN, file="traces", unit="×"),
    "naive_steps": Quantity("h200.census.naive_steps", "engine steps of each kind (prefill, decode) in our "
                            "study-style whole-request window", run=TRACES_RUN, file="traces", unit="steps"),
    "kernels": Quantity("h200.census.kernels", "GPU kernels in profiler windows of our H200 traces", run=TRACES_RUN,
                        file="traces", unit="kernels"),
    "graph_replayed": Quantity("h200.census.graph_replayed", "kernels of profiler windows replayed from a CUDA graph "
                               "(launched by cudaGraphLaunch, so no CPU operator is open at their launch)",
                               run=TRACES_RUN, file="traces", unit="kernels"),
    "naive_prefill_pct": Quantity("h200.census.naive_prefill_pct", "prefill steps' share of the GPU time of our "
                                  "study-style whole-request window", run=TRACES_RUN, file="traces", unit="%"),
    "chunk": Quantity("h200.census.chunk", "max_num_batched_tokens the traces' servers ran with, as their logs print "
                      "it", run=TRACES_RUN, file="traces/<backend>/provenance.json", unit="tokens"),
}
A10G_CHUNK = Quantity("a10g.census.chunk", "max_num_batched_tokens of the A10G study's server", run=A10G_RUN,
                      file="provenance.json", unit="tokens")
#: What nvidia-smi sampled during each H200 capture window (``<window>.clocks.json``, lab.measure.gpuclocks).
CLOCKS = {
    "readings_held": Quantity("h200.capture.readings_held", "how many consecutive samples showed one reading of "
                              "clock and power (median over the samples of a window)", run=TRACES_RUN,
                              file="traces", unit="samples"),
    "samples": Quantity("h200.capture.samples", "samples nvidia-smi gave between /start_profile and /stop_profile",
                        run=TRACES_RUN, file="traces", unit="samples"),
    "power_capped": Quantity("h200.capture.power_capped_samples", "samples with the software power cap among the "
                             "active clock limits (clocks_event_reasons.active, bit 0x4)", run=TRACES_RUN,
                             file="traces", unit="samples"),
    "sm_mhz": Quantity("h200.capture.sm_mhz", "the SM clock nvidia-smi read in a capture window (clocks.sm)",
                       run=TRACES_RUN, file="traces", unit="MHz"),
    "power_w": Quantity("h200.capture.power_w", "the board power nvidia-smi read in a capture window (power.draw: "
                        "NVML's one-second average)", run=TRACES_RUN, file="traces", unit="W"),
}

#: What the clock probe (data/h200/clock-probe, lab.results.clock_probe) read through idle time, two short bursts of
#: matrix products and a sustained run: what the capture windows could not show.
_PROBE = dict(run=clock_probe.RUN, file="samples.csv")
PROBE = {
    "limit_w": Quantity("h200.clock_probe.power_limit_w", "the enforced power limit nvidia-smi read through the probe",
                        unit="W", **_PROBE),
    "idle_mhz": Quantity("h200.clock_probe.idle_mhz", "the median SM clock of the probe's first idle phase",
                         unit="MHz", **_PROBE),
    "instant_max_w": Quantity("h200.clock_probe.burst_instant_max_w", "the highest instantaneous power "
                              "(power.draw.instant) in the second from either short burst's start", unit="W",
                              **_PROBE),
    "flag_average_w": Quantity("h200.clock_probe.flag_average_w", "the one-second average power (power.draw) in the "
                               "samples with the software power cap set, in the second from either short burst's "
                               "start (lowest or highest)", unit="W", **_PROBE),
    "burst_mhz": Quantity("h200.clock_probe.burst_mhz", "the SM clock read inside the longer short burst while the "
                          "power cap was set (lowest or highest)", unit="MHz", **_PROBE),
    "burst_ms": Quantity("h200.clock_probe.burst_ms", "the longer of the probe's two short bursts of matrix products",
                         run=clock_probe.RUN, file="phases.csv", unit="ms"),
    "sustained_w": Quantity("h200.clock_probe.sustained_w", "the median one-second average power through the "
                            "probe's sustained run of matrix products", unit="W", **_PROBE),
    "sustained_mhz": Quantity("h200.clock_probe.sustained_mhz", "the median SM clock through the probe's sustained "
                              "run of matrix products", unit="MHz", **_PROBE),
    "flag_hold_s": Quantity("h200.clock_probe.flag_hold_s", "the longest the power-cap flag stayed set after a burst "
                            "or the sustained run ended (to the interval at which nvidia-smi refreshes it)", unit="s",
                            **_PROBE),
}


# --- reading the runs once ---------------------------------------------------------------------------

@functools.cache
def _table():
    return cd.census_table()


@functools.cache
def _clocks():
    clocks = cd.window_clocks()
    return clocks[clocks.gpu == "H200"].set_index(["backend", "window"])


def _h200_detail(backend: str, file: str) -> str:
    """Where in the run one H200 backend's figure lies: ``flash_attn-fa3/census.csv``."""
    rows = _table()
    dataset = rows[(rows.gpu == "H200") & (rows.backend == backend)].dataset.iloc[0]
    return f"{dataset.removeprefix(TRACES_RUN + '/traces/')}/{file}"


def _a10g(key: str, value, *params, detail: str = "") -> Fact:
    return A10G[key].fact(value, *params, detail=detail)


#: Quantities that compare the two backends: no backend among their params, both backends' files behind them.
BOTH = ("matmul_gap_pct", "attention_ratio")


def _h200(key: str, value, backend: str, *params, file: str = "census.csv") -> Fact:
    if key in BOTH:
        return H200[key].fact(value, *params, detail=f"*/{file}")
    return H200[key].fact(value, backend, *params, detail=_h200_detail(backend, file))


def _control(gpu: str, make) -> dict[str, Fact]:
    """The 28k prefill of both backends: matmul and attention of each, the matmul gap, the attention ratio."""
    c = ta.control(_table(), gpu)
    window = ("prefill", LONG)
    return {"mm28_fa": make("family_ms", c.matmul_flash, FLASH, "matmul", *window),
            "mm28_fx": make("family_ms", c.matmul_flex, FLEX, "matmul", *window),
            "at28_fa": make("family_ms", c.attention_flash, FLASH, "attention", *window),
            "at28_fx": make("family_ms", c.attention_flex, FLEX, "attention", *window),
            "mm28_diff_pct": make("matmul_gap_pct", c.matmul_diff_pct, FLASH, *window),
            "at28_ratio": make("attention_ratio", c.attention_ratio, FLASH, *window),
            "share_fa": make("share_pct", c.share_flash, FLASH, "attention", *window),
            "share_fx": make("share_pct", c.share_flex, FLEX, "attention", *window)}


def _a10g_window_tokens() -> int:
    """The prompt tokens of the A10G study's long prefill window as its census records them (a token past 28k)."""
    census = load(A10G_RUN).csv("census.csv", ["phase", "tokens"])
    return int(census.query("phase == 'prefill'")["tokens"].max())


def a10g_facts() -> dict[str, Fact]:
    """The A10G study's census: the matmul control, attention at 28k and 2k, the scaled 2k matmul."""
    a10g = lambda key, value, backend, *params: (  # noqa: E731
        _a10g(key, value, *params) if key in BOTH else _a10g(key, value, backend, *params))
    facts = {f"a10g_{name}": fact for name, fact in _control("A10G", a10g).items() if not name.startswith("share")}
    c, short = ta.control(_table(), "A10G"), ta.attention_pair(_table(), "A10G", "prefill", SHORT)
    return facts | {
        "census_len": A10G["window_tokens"].fact(_a10g_window_tokens(), "prefill", LONG),
        "a10g_at28_extra_s": _a10g("attention_extra_s", c.extra_attention_s, "prefill", LONG),
        "a10g_at2_fa": _a10g("family_ms", short[0], FLASH, "attention", "prefill", SHORT),
        "a10g_at2_fx": _a10g("family_ms", short[1], FLEX, "attention", "prefill", SHORT),
        "a10g_at2_ratio": _a10g("attention_ratio", short[1] / short[0], "prefill", SHORT),
        "a10g_mm2_est": _a10g("matmul_scaled_ms", ta.scaled_matmul_estimate(_table()), "prefill", SHORT)}


def h200_facts() -> dict[str, Fact]:
    """Our traces' census at 28k prefill, the matmul launches compared one by one."""
    facts = {f"h200_{name}": fact for name, fact in _control("H200", _h200).items()}
    control, launches = ta.control(_table(), "H200"), ta.matmul_launch_comparison()
    source = f"data/{TRACES_RUN}/traces/*/{PREFILL_LONG}.census.json"
    return facts | {
        "h200_control_verdict": Fact("within" if control.holds else "beyond", source),
        "control_tolerance": Fact(ta.CONTROL_TOLERANCE_PCT, "lab.results.trace_analysis.CONTROL_TOLERANCE_PCT"),
        "h200_same_launches": Fact("the same matmul kernels the same number of times" if launches.same_work
                                   else "different matmul kernels or counts", source),
        "h200_slower_max": H200["launch_slower_pct"].fact(launches.slower_max_pct, "largest", detail=source),
        "h200_slower_min": H200["launch_slower_pct"].fact(launches.slower_min_pct, "smallest", detail=source)}


def _clock(key: str, value, backend: str, window: str, *params) -> Fact:
    return CLOCKS[key].fact(value, backend, window, *params, detail=_h200_detail(backend, f"{window}.clocks.json"))


def clock_facts() -> dict[str, Fact]:
    """What nvidia-smi read in the capture windows: sampling, the power-cap flag per backend, the windows the
    chapter's power story reads."""
    clocks = _clocks()
    fa, fx = clocks.loc[FLASH], clocks.loc[FLEX]
    per_backend = {"fa": fa, "fx": fx}
    facts = {"clock_interval_ms": cd.sample_interval(),
             "clock_readings_held": CLOCKS["readings_held"].fact(float(clocks.readings_held.median()),
                                                                 detail="*/<window>.clocks.json, median of the windows")}
    for tag, rows in per_backend.items():
        backend = FLASH if tag == "fa" else FLEX
        every = lambda key, value, stat, backend=backend: CLOCKS[key].fact(  # noqa: E731
            value, backend, "every window", *stat, detail=_h200_detail(backend, "*.clocks.json"))
        facts |= {f"clock_{tag}_lo": every("sm_mhz", float(rows.sm_mhz_min.min()), ("lowest",)),
                  f"clock_{tag}_hi": every("sm_mhz", float(rows.sm_mhz_max.max()), ("highest",))}
        facts |= {f"clock_{tag}_samples": CLOCKS["samples"].fact(int(rows.samples.sum()), backend, "every window",
                                                                 detail=_h200_detail(backend, "*.clocks.json")),
                  f"clock_{tag}_capped": CLOCKS["power_capped"].fact(int(rows.power_capped.sum()), backend,
                                                                     "every window",
                                                                     detail=_h200_detail(backend, "*.clocks.json"))}
    row = lambda backend, window: clocks.loc[(backend, window)]  # noqa: E731
    story = {"fa_2k": (FLASH, "prefill-2048"), "fa_8k": (FLASH, "prefill-8192"), "fa_28k": (FLASH, PREFILL_LONG),
             "fa_d2k": (FLASH, "decode-2048"), "fa_d28k": (FLASH, "decode-28672"), "fx_28k": (FLEX, PREFILL_LONG),
             "fx_d2k": (FLEX, "decode-2048")}
    for tag, (backend, window) in story.items():
        r = row(backend, window)
        facts |= {f"clock_{tag}_mhz": _clock("sm_mhz", float(r.sm_mhz_median), backend, window, "median"),
                  f"clock_{tag}_w": _clock("power_w", float(r.power_w_median), backend, window, "median"),
                  f"clock_{tag}_samples": _clock("samples", int(r.samples), backend, window),
                  f"clock_{tag}_capped": _clock("power_capped", int(r.power_capped), backend, window),
                  f"clock_{tag}_window_ms": H200["window_ms"].fact(float(r.window_ms), backend, window,
                                                                   detail=_h200_detail(backend, f"{window}.census.json"))}
    long = row(FLASH, PREFILL_LONG)
    facts |= {"clock_fa_28k_first": _clock("sm_mhz", float(long.sm_mhz_first), FLASH, PREFILL_LONG, "first"),
              "clock_fa_28k_min": _clock("sm_mhz", float(long.sm_mhz_min), FLASH, PREFILL_LONG, "lowest"),
              "clock_fa_28k_max_w": _clock("power_w", float(long.power_w_max), FLASH, PREFILL_LONG, "highest"),
              "clock_fx_28k_max_mhz": _clock("sm_mhz", float(row(FLEX, PREFILL_LONG).sm_mhz_max), FLEX, PREFILL_LONG,
                                             "highest"),
              "clock_fx_prefill_max_w": CLOCKS["power_w"].fact(float(fx.filter(like="prefill", axis=0).power_w_max.max()),
                                                               FLEX, "prefill windows", "highest",
                                                               detail=_h200_detail(FLEX, "prefill-*.clocks.json")),
              "clock_fx_d2k_capped_mhz": _clock("sm_mhz", _capped_clock(row(FLEX, "decode-2048")), FLEX, "decode-2048",
                                                "with the power cap")}
    return facts


def _capped_clock(row) -> float | None:
    """The SM clock of the samples of one window (a row of the clocks table) that had the software power cap
    active (their median)."""
    series = load(row.dataset).json(f"{row.name[1]}.clocks.json")["series"]
    capped = [mhz for mhz, mask in zip(series["sm_mhz"], series["reasons"], strict=True)
              if POWER_CAP in reason_names(mask)]
    return statistics.median(capped) if capped else None


def decode_facts() -> dict[str, Fact]:
    """The decode kernels: the model's heads, the GPUs' SMs, the A10G study's kernel names, our per-step times."""
    model, reference = qwen25_7b(), load(A10G_RUN)
    names = reference.csv("decode_kernels.csv", ("arm", "phase", "kernel")).set_index("arm")["kernel"]
    names_src = f"data/{A10G_RUN}/decode_kernels.csv"
    facts = {"q_heads": Fact(model.q_heads, "lab.results.modelshape"),
             "kv_heads": Fact(model.kv_heads, "lab.results.modelshape"),
             "group": Fact(model.q_heads // model.kv_heads, "lab.results.modelshape"),
             "sm_a10g": Fact(DEVICES["A10G"].sm_count, "lab.results.hardware"),
             "sm_h200": Fact(DEVICES["H200-SXM"].sm_count, "lab.results.hardware"),
             "a10g_decode_fa": Fact(names[A10G_FLASH.label], names_src),
             "a10g_decode_fx": Fact(names[A10G_FLEX.label], names_src)}
    per_step = ta.decode_per_step(_table())
    for (backend, n), values in per_step.items():
        tag = "fa" if backend == FLASH else "fx"
        for family, key in (("attention", "attn"), ("matmul", "mm")):
            facts[f"step_{tag}_{n // 1024}k_{key}"] = _h200("step_ms", values[family], backend, family, n,
                                                             file=f"decode-{n}.census.json")
    growth = per_step[FLEX, LONG]["attention"] / per_step[FLEX, SHORT]["attention"]
    facts["step_fx_growth"] = _h200("step_growth", growth, FLEX, file="decode-*.census.json")
    facts["step_context_ratio"] = Fact(LONG // SHORT, "lab.results.trace_analysis (the nominal window lengths)")
    return facts


def naive_facts() -> dict[str, Fact]:
    """The study's whole-request 'decode' window against its own prefill, and ours split per engine step."""
    itl = load(A10G_RUN).csv("decode_summary.csv", ("arm", "long_len", "long_itl_ms")).set_index("arm")["long_itl_ms"]
    facts = {"naive_gen": Fact(cd.REFERENCE_DECODE_WINDOW_TOKENS, "lab.results.census_windows (the study's method)")}
    for tag, backend, arm in (("fa", FLASH, A10G_FLASH.label), ("fx", FLEX, A10G_FLEX.label)):
        w = ta.naive_window(_table(), backend, float(itl[arm]))
        facts |= {f"naive_{tag}_s": _a10g("window_ms", w.window_s * 1000, backend, "decode-naive", LONG).to("s"),
                  f"naive_{tag}_prefill_s": _a10g("naive_prefill_kernels_s", w.prefill_kernels_s, backend),
                  f"naive_{tag}_prefill_pct": _a10g("naive_prefill_pct", w.prefill_pct, backend),
                  f"naive_{tag}_decode_s": _a10g("naive_decode_s", w.decode_s, backend),
                  f"naive_{tag}_decode_pct": _a10g("naive_decode_pct", w.decode_pct, backend),
                  f"naive_{tag}_share": _a10g("share_pct", w.attention_share, backend, "attention", "decode-naive", LONG)}
    for row in ta.naive_split():
        backend = FLASH if row["arm"].startswith("FLASH") else FLEX
        tag, file = ("fa" if backend == FLASH else "fx"), f"decode-naive-{LONG}.census.json"
        facts |= {f"h200_naive_{tag}_prefill_steps": _h200("naive_steps", row["prefill_steps"], backend, "prefill", file=file),
                  f"h200_naive_{tag}_decode_steps": _h200("naive_steps", row["decode_steps"], backend, "decode", file=file),
                  f"h200_naive_{tag}_prefill_pct": _h200("naive_prefill_pct", row["prefill_pct"], backend, file=file)}
    return facts


def graph_facts() -> dict[str, Fact]:
    """How many kernels of the 2k decode windows were replayed from CUDA graphs, and of the prefill windows."""
    stats = {(cd.backend_of(w["arm"]), w["window"]): w["stats"] for w in cd.measured_windows() if w["gpu"] == "H200"}
    facts = {}
    for tag, backend in (("fa", FLASH), ("fx", FLEX)):
        window = f"decode-{SHORT}"
        file = f"{window}.census.json"
        facts |= {f"graph_{tag}_d2k_kernels": _h200("kernels", stats[backend, window]["kernels"], backend, window,
                                                    file=file),
                  f"graph_{tag}_d2k_replayed": _h200("graph_replayed", stats[backend, window]["graph_replayed"],
                                                     backend, window, file=file)}
    prefill = sum(st["graph_replayed"] for (_, window), st in stats.items() if window.startswith("prefill"))
    facts["graph_prefill_replayed"] = H200["graph_replayed"].fact(prefill, "both backends", "prefill windows",
                                                                  detail="*/prefill-*.census.json")
    return facts


def probe_facts() -> dict[str, Fact]:
    """The clock probe's answers: the flag at a low one-second average around short bursts, the draw the average
    hides, the clock under the cap, how long the flag outlasts the work."""
    r = clock_probe.readings()
    watts, mhz = "{:.0f} W", "{:,.0f} MHz"  # the lower end of a range without its unit: "164–279 W"
    return {"probe_limit_w": PROBE["limit_w"].fact(r["limit_w"], fmt=watts),
            "probe_idle_mhz": PROBE["idle_mhz"].fact(r["idle_mhz"], fmt=mhz),
            "probe_instant_max_w": PROBE["instant_max_w"].fact(r["burst_instant_max_w"], fmt=watts),
            "probe_flag_avg_lo_w": PROBE["flag_average_w"].fact(r["flag_avg_lo_w"], "lowest", fmt="{:.0f}"),
            "probe_flag_avg_hi_w": PROBE["flag_average_w"].fact(r["flag_avg_hi_w"], "highest", fmt=watts),
            "probe_burst_ms": PROBE["burst_ms"].fact(r["longest_burst_ms"], fmt="{:.0f} ms"),
            "probe_burst_mhz_lo": PROBE["burst_mhz"].fact(r["burst_mhz_lo"], "lowest", fmt="{:,.0f}"),
            "probe_burst_mhz_hi": PROBE["burst_mhz"].fact(r["burst_mhz_hi"], "highest", fmt=mhz),
            "probe_sustained_w": PROBE["sustained_w"].fact(r["sustained_w"], fmt=watts),
            "probe_sustained_mhz": PROBE["sustained_mhz"].fact(r["sustained_mhz"], fmt=mhz),
            "probe_flag_hold_s": PROBE["flag_hold_s"].fact(r["flag_hold_s"], fmt="{:.1f} s")}


def rig_facts() -> dict[str, Fact]:
    """How the traces' servers ran: prefill chunk (ours and the A10G study's) and the weights."""
    ours = load(f"{TRACES_RUN}/traces/flash_attn-fa3").provenance
    server, study = (ours.get("flags") or {}).get("server") or {}, load(A10G_RUN).provenance.get("flags") or {}
    where = f"data/{TRACES_RUN}/traces/<backend>/provenance.json"
    chunk = (server.get("log") or {}).get("max_num_batched_tokens")   # what the server's log says it ran with
    return {"trace_chunk": H200["chunk"].fact(chunk, fmt="{:,d}"),
            "trace_weights": Fact("random weights" if server.get("load_format") == "dummy"
                                  else "the checkpoint's weights", where),
            "trace_a10g_chunk": A10G_CHUNK.fact(study.get("max_num_batched_tokens"), fmt="{:,d}")}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 7 states, by glue name."""
    return (a10g_facts() | h200_facts() | graph_facts() | clock_facts() | decode_facts() | naive_facts()
            | probe_facts() | rig_facts())


# --- figures, tables, the explorer -------------------------------------------------------------------

def trace_file(backend: str = FLASH, window: str = "prefill-2048") -> Path:
    """One of our H200 traces: ``<window>.trace.json.gz`` of one backend."""
    return DATA_DIR / TRACES_RUN / "traces" / _h200_detail(backend, f"{window}.trace.json.gz")


def a10g_figure():
    """The A10G study's census: 2k and 28k prefill, and its whole-request decode window."""
    w = lambda phase, n: [cd.window(_table(), "A10G", phase, n, b) for b in cd.BACKENDS]  # noqa: E731
    groups = {"prefill, 2k tokens": w("prefill", SHORT), "prefill, 28k tokens": w("prefill", LONG),
              "decode window as in the study, 28k tokens of context": w("decode-naive", LONG)}
    return plot_census_panels(groups, f"NVIDIA A10G, vLLM 0.11, Qwen2.5-7B: published figures "
                                      f"({SOURCE_TITLE.split(':')[0]})")


def h200_figure():
    """Our H200 traces' census: prefill at every length, decode steps at 2k and 28k."""
    w = lambda phase, n: [cd.window(_table(), "H200", phase, n, b) for b in cd.BACKENDS]  # noqa: E731
    groups = {f"prefill, {n // 1024}k tokens": w("prefill", n) for n in cd.LENGTHS}
    groups |= {f"decode steps only, {n // 1024}k tokens of context": w("decode", n) for n in (SHORT, LONG)}
    return plot_census_panels(groups, "NVIDIA H200, vLLM 0.26, Qwen2.5-7B (dummy weights): our traces")


def _styled(frame, formats: dict | None = None):
    """A table whose text is escaped (kernel names hold ``<...>``) and whose numbers take ``formats``."""
    styler = frame.style.format(escape="html")
    if formats:   # a second format() call replaces the first for its columns: escape again there
        styler = styler.format(formats, escape="html")
    return styler.hide(axis="index")


#: Kernel names from our H200 traces and the A10G study (its decode windows, FACTS of the reference), with what each is.
NAME_EXAMPLES = {
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT": "cuBLAS matmul on Hopper",
    "triton_poi_fused_3": "Inductor-fused elementwise kernel",
    "triton_tem_fused_0": "Inductor template (FlexAttention's decode kernel in the A10G study)",
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>": "FlashAttention 3",
    "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, ...>>":
        "FlashAttention 2 over a paged KV cache (prefill and decode)",
}


def name_rule_table():
    """What the A10G study's substring rules and this census's name rules make of a few kernel names."""
    import pandas as pd

    rows = []
    for name, what in NAME_EXAMPLES.items():
        rule = census.classify_name(name)
        ours = rule.family if rule and rule.family and rule.strong else "ask the launcher"
        rows.append({"kernel": name, "what it is": what, "substring rules": census.reference_family(name),
                     "name rule here": ours})
    return _styled(pd.DataFrame(rows))


def rule_table():
    """The census's name rules, in the order they are tried, each with its reason."""
    import pandas as pd

    return _styled(pd.DataFrame([{"rule": r.key, "family": r.family or "(launcher decides)",
                                  "strength": "strong" if r.strong else "weak", "why": r.reason}
                                 for r in census.NAME_RULES]))


def launch_table():
    """The 28k prefill windows' matmul kernels side by side: launches and ms per launch, per backend."""
    launches = ta.matmul_launch_comparison().table.drop(columns="gpu")
    counts = [c for c in launches.columns if c.endswith(": launches")]
    per_launch = [c for c in launches.columns if c.endswith(": ms per launch")]
    return _styled(launches, {**dict.fromkeys(counts, "{:,.0f}"), **dict.fromkeys(per_launch, "{:.3f}")})


def clock_table():
    """Every H200 capture window: samples, the SM clock, the power reading and the power-cap flag."""
    clocks = _clocks().reset_index()
    table = clocks.assign(capped=[f"{int(c)} of {int(n)}" for c, n in zip(clocks.power_capped, clocks.samples,
                                                                          strict=True)])
    columns = {"backend": "backend", "window": "window", "window_ms": "GPU time (ms)", "samples": "samples",
               "sm_mhz_median": "SM clock, median (MHz)", "sm_mhz_min": "lowest (MHz)", "sm_mhz_max": "highest (MHz)",
               "power_w_median": "power, median (W)", "power_w_max": "highest (W)", "capped": "with the power cap"}
    table = table[list(columns)].rename(columns=columns)
    mhz = ["SM clock, median (MHz)", "lowest (MHz)", "highest (MHz)"]
    return _styled(table, {"GPU time (ms)": "{:,.0f}", "samples": "{:d}", **dict.fromkeys(mhz, "{:,.0f}"),
                           "power, median (W)": "{:.0f}", "highest (W)": "{:.0f}"})


def decode_signature_table():
    """The attention signature and kernels of every decode window we captured."""
    import pandas as pd

    rows = [{"GPU": w["gpu"], "arm": w["arm"], "window": w["window"], "signature": w["signature"],
             "attention kernels": ", ".join(k[:70] for k in w["attention_kernels"])}
            for w in cd.measured_windows() if w["window"].startswith("decode")]
    return _styled(pd.DataFrame(rows))


def explorer():
    """The chapter's explorer: phase x length x backend x GPU -> GPU time by family."""
    return census_explorer()
