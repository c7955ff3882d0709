"""Chapter 6b, a busy server: every fact the chapter and its self-check state, its figures and its explorer.

    glue_all(ch06b.facts())         # the one hidden cell
    ch06b.load_curves_figure(), ch06b.interference_figure(), ch06b.fp8_figure(), ch06b.explorer()

The runs it reads, each once: the load study (data/h200/vllm0.26-qwen2.5-7b-load: vllm bench serve at Poisson
rates), the interference trials (data/h200/vllm0.26-qwen2.5-7b-interference: a long prompt among decoders) and the
concurrency sweep's bf16 and FP8 arms (data/h200/vllm0.26-qwen2.5-7b-concurrency). A study that is not on file
gives "not measured yet", never a typed number.

Glue names other pages take from here (the interview page, the course kit, the method appendix): the ``<arm>_*``
load facts (capacity, p99s at the lightest and heaviest rate, ``<arm>_slo_rate``), ``slo_ttft_ms`` and
``slo_tpot_ms`` (the chapter states both rules they are scored by), the ``inter_*`` trials and ``chunkcost_*`` (what the smaller
chunk's extra steps read), the ``fp8_*`` facts, among them the single-request pair ``fp8_bf16_one_itl`` and
``fp8_fp8_one_itl`` (stated bf16 first) and ``fp8_one_ratio`` (the FP8 step over the bf16 one).
"""

from __future__ import annotations

import functools
from pathlib import Path

from lab.book.facts import Fact
from lab.book.load_explorer import load_explorer, missing_note
from lab.book.pages.busy_method import method_facts
from lab.book.plots.busy import plot_fp8, plot_interference, plot_load_curves
from lab.measure.vllm import arms
from lab.results import concurrency as rc
from lab.results import interference as ri
from lab.results import load as rl
from lab.results.bandwidth import ceiling
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity
from lab import names
from lab.store import DATA_DIR

#: The targets the chapter scores the load study against (vllm bench serve's --goodput of the run).
SLO = {"ttft": 500.0, "tpot": 50.0}
#: The backends the study ran (each one's glue names begin with lab.names.key of its label).
STUDY_ARMS = (arms.FA3, arms.FLEX, arms.TRITON)
LOAD_RUN = f"h200/{rl.H200_STUDY}"
INTER_RUN = f"h200/{ri.STUDY}"
CONC_RUN = rc.H200_STUDY
WORKLOAD = "random-1024-128"
LOAD_SRC, INTER_SRC, CONC_SRC = f"data/{LOAD_RUN}/{WORKLOAD}", f"data/{INTER_RUN}", f"data/{CONC_RUN}"
LONG_CONTEXT = 32768
#: Where the chapter measures what a smaller chunk costs the long prompt (8 decoders, the longest prompt) and the
#: second case it names (32 decoders, the shorter prompt).
CHUNKS = (2048, 8192)
SLO_SRC = "lab.book.pages.ch06b.SLO"
#: The method appendix's settings the interview quotes from this page (lab.book.pages.busy_method), and the steady
#: window's length, which this page's prose names beside summarize_trial.
QUOTED_SETTINGS = ("bm_input_len", "bm_output_len", "bm_chunk", "bm_inter_ctx_lo", "bm_inter_ctx_hi", "bm_steady_gaps")

# --- the quantities chapter 6b teaches ---------------------------------------------------------------------
_LOAD = dict(run=LOAD_RUN, file=WORKLOAD)
_WHERE = "vllm bench serve on one H200, 1,024-token prompts, 128 tokens out"
CAPACITY = Quantity("h200.load.capacity", f"requests per second completed with every prompt sent at once, {_WHERE}",
                    unit="req/s", **_LOAD)
RATES = Quantity("h200.load.poisson_rates", "Poisson request rates the load study ran per backend", unit="rates",
                 **_LOAD)
RATE = Quantity("h200.load.rate", "a Poisson point's offered request rate", unit="req/s", **_LOAD)
P99_TTFT = Quantity("h200.load.p99_ttft", f"p99 time to first token at a Poisson rate, {_WHERE}", unit="ms", **_LOAD)
P99_ITL = Quantity("h200.load.p99_itl", "p99 inter-token gap at a Poisson rate", unit="ms", **_LOAD)
P50_ITL = Quantity("h200.load.p50_itl", "median inter-token gap at a Poisson rate", unit="ms", **_LOAD)
P99_TPOT = Quantity("h200.load.p99_tpot", "p99 time per output token at a Poisson rate", unit="ms", **_LOAD)
P50_TPOT = Quantity("h200.load.p50_tpot", "median time per output token at a Poisson rate", unit="ms", **_LOAD)
THROUGHPUT = Quantity("h200.load.throughput", "requests per second a Poisson point completed", unit="req/s", **_LOAD)
GOODPUT = Quantity("h200.load.goodput", "requests per second that met both targets, by vLLM's per-request rule "
                   "(each request's TTFT and TPOT within its target)", unit="req/s", **_LOAD)
SLO_RATE = Quantity("h200.load.slo_rate", "the highest Poisson rate measured whose p99 TTFT and p99 TPOT are each "
                    "within the targets", unit="req/s", **_LOAD)
UTILISATION = Quantity("h200.load.utilisation", "a Poisson rate over the backend's capacity", unit="ρ", **_LOAD)
IN_FLIGHT = Quantity("h200.load.in_flight", "requests in flight at a Poisson point by Little's law (rate × mean "
                     "end-to-end latency); past capacity an average over a queue still growing", unit="requests",
                     **_LOAD)
MM1 = Quantity("mm1.response_over_service", "the mean response time of an M/M/1 queue over its service time, "
               "1 / (1 - ρ), at a measured utilisation", run="lab.book.pages.ch06b: M/M/1", unit="×")
_INTER = dict(run=INTER_RUN, file="<arm>/chunk-<n>/trials.jsonl")
LONG_LEN = Quantity("h200.interference.long_len", "the long prompt's length in an interference trial", unit="tokens",
                    **_INTER)
DECODERS = Quantity("h200.interference.decoders", "requests decoding when the long prompt arrives", unit="requests",
                    **_INTER)
CHUNK = Quantity("h200.interference.chunk", "the prefill chunk (max_num_batched_tokens) of a trial's server",
                 unit="tokens", **_INTER)
LONG_TTFT = Quantity("h200.interference.long_ttft", "the long prompt's time to first token", unit="s", **_INTER)
MAX_GAP = Quantity("h200.interference.max_gap", "the decoders' longest gap while the long prompt is prefilled",
                   unit="ms", **_INTER)
STEADY_GAP = Quantity("h200.interference.steady_gap", "the decoders' median gap just before the long prompt "
                      "arrives", unit="ms", **_INTER)
STALL_CUT = Quantity("h200.interference.stall_cut", "the longest gap with the large chunk over the longest gap with "
                     "the small chunk", unit="×", **_INTER)
TTFT_COST = Quantity("h200.interference.ttft_cost", "how much later the long prompt's first token comes with the "
                     "small chunk than with the large one", unit="%", **_INTER)
EXTRA_STEPS = Quantity("h200.interference.extra_steps", "engine steps the small chunk adds to the long prompt's "
                       "prefill: ceil(L / (chunk - decoders)) for each chunk", unit="steps", **_INTER)
TTFT_ADDED = Quantity("h200.interference.ttft_added", "the long prompt's TTFT with the small chunk minus with the "
                      "large one", unit="ms", **_INTER)
PER_EXTRA_STEP = Quantity("h200.interference.per_extra_step", "the TTFT the small chunk added over the engine "
                          "steps it added", unit="ms", **_INTER)
DURING_GAP = Quantity("h200.interference.during_median", "the decoders' median gap while the long prompt is "
                      "prefilled (every step then carries a chunk of it)", unit="ms", **_INTER)
DECODER_RATE = Quantity("h200.interference.decoder_tok_s", "a decoder's tokens per second, 1000 over its median gap "
                        "just before the long prompt arrives or while it is prefilled", unit="tokens/s", **_INTER)
_CONC = dict(run=CONC_RUN, file="<arm>/concurrency.csv")
CACHE_RATIO = Quantity("h200.fp8.cache_ratio", "the FP8 server's KV cache in tokens over the bf16 server's",
                       unit="×", run=CONC_RUN, file="<arm>/server.log")
TOK_S_GAIN = Quantity("h200.fp8.tok_s_gain", "the FP8 server's decode tokens per second over the bf16 server's at "
                      "64 requests of 32k tokens", unit="×", **_CONC)
FP8_CUT = Quantity("h200.fp8.cut_pct", "how much shorter the FP8 server's step (or its floor) is than the bf16 "
                   "server's, at the largest batch both admitted whole at 32k", unit="%", **_CONC)
FITS = Quantity("h200.fp8.fits", "requests of the server's context limit that fit in its KV cache at once",
                unit="requests", run=CONC_RUN, file="<arm>/server.log")
_AGREE = dict(run=LOAD_RUN, file=f"{WORKLOAD}/{arms.FA3.slug}/rate-inf-c1.json + probe.jsonl")
AGREE_REQUESTS = Quantity("h200.load.agreement.requests", "requests of the serial check, bench and probe each",
                          unit="requests", **_AGREE)
AGREE_MS = Quantity("h200.load.agreement.ms", "a mean (or median) latency of the serial check, as vllm bench serve "
                    "or the project's probe measured it on FA3's load server", unit="ms", **_AGREE)
AGREE_PCT = Quantity("h200.load.agreement.pct", "the bench's mean over the probe's, minus one", unit="%", **_AGREE)
ONE_RATIO = Quantity("h200.fp8.one_request_ratio", "the FP8 server's decode step over the bf16 server's, one request "
                     "of 32k tokens", unit="×", **_CONC)


# --- the runs, each read once ------------------------------------------------------------------------------

@functools.cache
def _load(root: Path = DATA_DIR) -> rl.LoadStudy:
    return rl.load_study(root=Path(root) / "h200")


@functools.cache
def _trials(root: Path = DATA_DIR) -> list[ri.TrialSummary]:
    return ri.read_trials(Path(root) / "h200")


@functools.cache
def _concurrency(root: Path = DATA_DIR):
    bandwidth, _ = rc.floor_bandwidth()
    return rc.with_floor(rc.load_points(root=root), bandwidth)


def _value(row: dict | None, key: str):
    return row[key] if row else None


# --- facts ---------------------------------------------------------------------------------------------------

def slo_facts() -> dict:
    """The targets (scored two ways, as the chapter says: a rate's p99s by lab.results.load.highest_rate_meeting,
    each request by vLLM's goodput rule, lab.results.load.goodput)."""
    return {"slo_ttft_ms": Fact(SLO["ttft"], SLO_SRC), "slo_tpot_ms": Fact(SLO["tpot"], SLO_SRC)}


def _slo_break(rows: list[dict]) -> tuple[dict | None, dict | None]:
    """(the highest Poisson point within the targets, the next measured point above it)."""
    poisson = rl.poisson_points(rows)
    best = rl.highest_rate_meeting(rows, SLO)
    within = next((r for r in poisson if r["rate"] == best), None)
    above = [r for r in poisson if best is None or r["rate"] > best]
    return within, (above[0] if above else None)


def load_facts(root: Path = DATA_DIR) -> dict:
    """Per arm: capacity, the lightest and heaviest Poisson points, the highest rate within the targets and the
    point that breaks them."""
    study, out = _load(root), {}
    for arm in STUDY_ARMS:
        name, rows = names.key(arm.label), study.points.get(arm.label, [])
        poisson, cap = rl.poisson_points(rows), rl.capacity(rows)
        low, high = (poisson[0], poisson[-1]) if poisson else (None, None)
        within, broke = _slo_break(rows) if rows else (None, None)
        at = lambda q, row, key, fmt, label=arm.label: q.fact(_value(row, key), label, _value(row, "rate"),  # noqa: E731
                                                               fmt=fmt)
        rho = lambda row, label=arm.label, cap=cap: UTILISATION.fact(row["rate"] / cap if row and cap else None,  # noqa: E731
                                                           label, _value(row, "rate"), fmt=".2f")
        flight = lambda row, label=arm.label: IN_FLIGHT.fact(rl.in_flight(row) if row else None, label,  # noqa: E731
                                                            _value(row, "rate"), fmt=".0f")
        out |= {f"{name}_capacity": CAPACITY.fact(cap, arm.label, fmt=".1f"),
                f"{name}_rates": RATES.fact(len(poisson) or None, arm.label, fmt="d"),
                f"{name}_low_rate": at(RATE, low, "rate", "g"), f"{name}_high_rate": at(RATE, high, "rate", "g"),
                f"{name}_low_p99_ttft": at(P99_TTFT, low, "p99_ttft_ms", "{:.0f} ms"),
                f"{name}_high_p99_ttft": at(P99_TTFT, high, "p99_ttft_ms", "{:.0f} ms"),
                f"{name}_low_p99_itl": at(P99_ITL, low, "p99_itl_ms", "{:.0f} ms"),
                f"{name}_high_p99_itl": at(P99_ITL, high, "p99_itl_ms", "{:.0f} ms"),
                f"{name}_low_p50_itl": at(P50_ITL, low, "p50_itl_ms", "{:.1f} ms"),
                f"{name}_low_p50_tpot": at(P50_TPOT, low, "p50_tpot_ms", "{:.1f} ms"),
                f"{name}_high_throughput": at(THROUGHPUT, high, "request_throughput", ".1f"),
                f"{name}_high_goodput": at(GOODPUT, high, "goodput_bench", ".1f"),
                f"{name}_slo_rate": SLO_RATE.fact(_value(within, "rate"), arm.label, fmt="g"),
                f"{name}_break_rate": at(RATE, broke, "rate", "g"),
                f"{name}_break_rho": rho(broke),
                f"{name}_break_p99_ttft": at(P99_TTFT, broke, "p99_ttft_ms", "{:.0f} ms"),
                f"{name}_break_p99_tpot": at(P99_TPOT, broke, "p99_tpot_ms", "{:.0f} ms"),
                f"{name}_break_throughput": at(THROUGHPUT, broke, "request_throughput", ".1f"),
                f"{name}_low_in_flight": flight(low), f"{name}_break_in_flight": flight(broke),
                # the point within the targets, and which p99 the next point broke (the interview's answers)
                f"{name}_slo_rho": rho(within), f"{name}_slo_in_flight": flight(within),
                f"{name}_slo_p99_ttft": at(P99_TTFT, within, "p99_ttft_ms", "{:.0f} ms"),
                f"{name}_slo_p99_tpot": at(P99_TPOT, within, "p99_tpot_ms", "{:.0f} ms"),
                f"{name}_break_metric": Fact(_broken(broke), LOAD_SRC)}
    return out


def _broken(row: dict | None) -> str | None:
    """Which p99 of ``row`` is over its target ("TTFT", "TPOT", "TTFT and TPOT"); None without a row."""
    over = [metric.upper() for metric, limit in SLO.items() if row and row[f"p99_{metric}_ms"] > limit]
    return " and ".join(over) or None


def curve_facts(root: Path = DATA_DIR) -> dict:
    """FA3's Poisson points, lowest rate first: rate, utilisation, p99 TTFT, and M/M/1's 1 / (1 - ρ) beside them."""
    rows = _load(root).points.get(arms.FA3.label, [])
    cap, poisson, out = rl.capacity(rows), rl.poisson_points(rows), {}
    for i, row in enumerate(poisson, start=1):
        rho = row["rate"] / cap if cap else None
        out |= {f"curve_{i}_rate": RATE.fact(row["rate"], arms.FA3.label, row["rate"], fmt="g"),
                f"curve_{i}_rho": UTILISATION.fact(rho, arms.FA3.label, row["rate"], fmt=".2f"),
                f"curve_{i}_p99_ttft": P99_TTFT.fact(row["p99_ttft_ms"], arms.FA3.label, row["rate"],
                                                     fmt="{:.0f} ms"),
                f"curve_{i}_p50_tpot": P50_TPOT.fact(row["p50_tpot_ms"], arms.FA3.label, row["rate"],
                                                     fmt="{:.1f} ms"),
                f"curve_{i}_mm1": _mm1(rho)}
    return out


def _mm1(rho: float | None) -> Fact:
    """M/M/1's mean response over its service time at ρ; past ρ = 1 the queue has no steady state."""
    if rho is not None and rho >= 1:
        return MM1.fact("no steady state", f"{rho:.2f}")
    return MM1.fact(None if rho is None else 1 / (1 - rho), "no capacity" if rho is None else f"{rho:.2f}",
                    fmt="{:.1f}×")


def _trial_facts(trial: ri.TrialSummary | None, key: str, chunk: int, decoders: int, length: int | None) -> dict:
    params = (arms.FA3.label, chunk, decoders, length)
    return {f"{key}_ttft": LONG_TTFT.fact(trial.long_ttft_s if trial else None, *params, fmt="{:.2f} s"),
            f"{key}_max": MAX_GAP.fact(trial.during_max_ms if trial else None, *params, fmt="{:,.0f} ms"),
            f"{key}_steady": STEADY_GAP.fact(trial.steady_ms if trial else None, *params, fmt="{:.1f} ms")}


def interference_facts(root: Path = DATA_DIR) -> dict:
    """The chunk-size trade on FA3 (8 decoders under the longest prompt, 32 under the shorter one) and the backends
    at vLLM's default chunk (8 decoders, 32k)."""
    trials, fa3 = _trials(root), arms.FA3.label
    lengths = sorted({t.long_len for t in trials if t.arm == fa3})
    longest, shortest = (lengths[-1], lengths[0]) if lengths else (None, None)
    cases = {"8l": (8, longest), "32s": (32, shortest)}
    out = {"inter_long_len": LONG_LEN.fact(longest, "longest", fmt=",d"),
           "inter_short_len": LONG_LEN.fact(shortest, "shortest", fmt=",d"),
           "inter_8l_decoders": DECODERS.fact(8 if longest else None, "8l", fmt="d"),
           "inter_chunk_small": CHUNK.fact(CHUNKS[0] if trials else None, "small", fmt="{:,d} tokens"),
           "inter_chunk_big": CHUNK.fact(CHUNKS[1] if trials else None, "large", fmt="{:,d} tokens")}
    for tag, (decoders, length) in cases.items():
        found = {c: ri.find(trials, fa3, c, decoders, length) if length else None for c in CHUNKS}
        for chunk, trial in found.items():
            out |= _trial_facts(trial, f"inter_fa3_{chunk}_{tag}", chunk, decoders, length)
        small, big = found[CHUNKS[0]], found[CHUNKS[1]]
        both = small is not None and big is not None
        out[f"inter_{tag}_stall_cut"] = STALL_CUT.fact(big.during_max_ms / small.during_max_ms if both else None,
                                                       decoders, length, fmt="{:.1f}×")
        out[f"inter_{tag}_ttft_cost"] = TTFT_COST.fact(100 * (small.long_ttft_s / big.long_ttft_s - 1) if both
                                                       else None, decoders, length, fmt="{:.0f}%")
        out |= chunk_cost_facts(tag, decoders, length, root)
    out |= _crowd_facts(trials, longest)
    for arm in STUDY_ARMS:
        name, trial = names.key(arm.label), ri.find(trials, arm.label, CHUNKS[1], 8, LONG_CONTEXT)
        params = (arm.label, CHUNKS[1], 8, LONG_CONTEXT)
        out |= {f"inter_{name}_ttft": LONG_TTFT.fact(trial.long_ttft_s if trial else None, *params, fmt="{:.1f} s"),
                f"inter_{name}_max": MAX_GAP.fact(trial.during_max_ms if trial else None, *params, fmt="{:,.0f} ms"),
                f"inter_{name}_steady": STEADY_GAP.fact(trial.steady_ms if trial else None, *params,
                                                        fmt="{:.1f} ms")}
    return out


def _crowd_facts(trials: list[ri.TrialSummary], longest: int | None) -> dict:
    """The median gap of 8 decoders under the longest prompt at each chunk, and 32 decoders under it at the large
    chunk: what a decoder's stream slows to (the interview's answers)."""
    fa3, out = arms.FA3.label, {"inter_32l_decoders": DECODERS.fact(32 if longest else None, "32l", fmt="d")}
    for chunk in CHUNKS:
        trial = ri.find(trials, fa3, chunk, 8, longest) if longest else None
        out[f"inter_fa3_{chunk}_8l_median"] = DURING_GAP.fact(trial.during_median_ms if trial else None, fa3, chunk,
                                                              8, longest, fmt="{:.0f} ms")
    chunk = CHUNKS[1]
    trial = ri.find(trials, fa3, chunk, 32, longest) if longest else None
    params, key = (fa3, chunk, 32, longest), f"inter_fa3_{chunk}_32l"
    rate = lambda ms: 1000 / ms if trial else None  # noqa: E731
    return out | _trial_facts(trial, key, chunk, 32, longest) | {
        f"{key}_median": DURING_GAP.fact(trial.during_median_ms if trial else None, *params, fmt="{:.0f} ms"),
        f"{key}_steady_tok_s": DECODER_RATE.fact(rate(trial.steady_ms) if trial else None, *params, "before",
                                                 fmt="{:.0f} tokens/s"),
        f"{key}_during_tok_s": DECODER_RATE.fact(rate(trial.during_median_ms) if trial else None, *params, "during",
                                                 fmt="{:.0f} tokens/s")}


def chunk_cost_facts(tag: str, decoders: int, length: int | None, root: Path = DATA_DIR) -> dict:
    """The TTFT the small chunk's extra steps added, in all and per extra step."""
    cost = ri.chunk_cost(arms.FA3.slug, decoders, length, *CHUNKS, root=Path(root) / "h200") if length else None
    key, params = f"chunkcost_{tag}", (decoders, length)
    return {f"{key}_steps": EXTRA_STEPS.fact(cost.extra_steps if cost else None, *params, fmt="d"),
            f"{key}_added_ms": TTFT_ADDED.fact(1e3 * cost.ttft_added_s if cost else None, *params, fmt="{:.0f} ms"),
            f"{key}_per_step_ms": PER_EXTRA_STEP.fact(1e3 * cost.per_step_s if cost else None, *params,
                                                      fmt="{:.1f} ms")}


def agreement_facts(root: Path = DATA_DIR) -> dict:
    """The serial point of vllm bench serve against the project's probe on the same server (the method appendix)."""
    folder = _load(root).folders.get(arms.FA3.label)
    found = rl.agreement(folder) if folder else {"measured": False}
    get = lambda key: found.get(key) if found["measured"] else None  # noqa: E731
    ms = lambda key, who, fmt: AGREE_MS.fact(get(key), who, fmt=fmt)  # noqa: E731
    pct = lambda key, what: AGREE_PCT.fact(100 * (get(key) - 1) if get(key) else None, what,  # noqa: E731
                                           fmt="{:+.1f}%")
    return {"agree_requests": AGREE_REQUESTS.fact(get("requests"), fmt="d"),
            "agree_bench_ttft": ms("bench_ttft_ms", "bench TTFT mean", "{:.1f} ms"),
            "agree_probe_ttft": ms("probe_ttft_ms", "probe TTFT mean", "{:.1f} ms"),
            "agree_bench_itl": ms("bench_itl_ms", "bench ITL mean", "{:.2f} ms"),
            "agree_probe_itl": ms("probe_itl_ms", "probe ITL mean", "{:.2f} ms"),
            "agree_ttft_pct": pct("ttft_ratio", "TTFT"), "agree_itl_pct": pct("itl_ratio", "ITL"),
            "agree_bench_ttft_median": ms("bench_ttft_median_ms", "bench TTFT median", "{:.1f} ms"),
            "agree_probe_ttft_median": ms("probe_ttft_median_ms", "probe TTFT median", "{:.1f} ms"),
            "agree_within": Fact(("within" if found.get("within") else "not within") if found["measured"] else None,
                                 AGREE_MS.source)}


def fp8_facts(root: Path = DATA_DIR) -> dict:
    """Bytes per token, KV capacity and decode steps at the long context, bf16 against FP8 (FA3)."""
    shape, table = qwen25_7b(), _concurrency(root)
    shape_src = "lab.results.modelshape.qwen25_7b"
    out = {"fp8_context": Fact(LONG_CONTEXT, "lab.book.pages.ch06b.LONG_CONTEXT"),
           "kv_token_bf16": Fact(shape.kv_bytes_per_token(2), shape_src, ",d"),
           "kv_token_fp8": Fact(shape.kv_bytes_per_token(1), shape_src, ",d")}
    ones = {}
    for tag, arm in (("bf16", arms.FA3), ("fp8", arms.FA3_FP8)):
        rows = table[(table["arm"] == arm.label) & (table["context"] == LONG_CONTEXT)] if not table.empty else table
        top = rc.point(table, arm.label, LONG_CONTEXT, int(rows["concurrency"].max())) if len(rows) else None
        ones[tag] = rc.point(table, arm.label, LONG_CONTEXT, 1)
        tokens, limit = rc.kv_cache_tokens(arm.label, root=root), rc.max_model_len(arm.label, root=root)
        n = _value(top, "concurrency")
        at = lambda q, key, fmt, row=top, label=arm.label, c=n: q.fact(_value(row, key), label, LONG_CONTEXT, c,  # noqa: E731
                                                                      fmt=fmt)
        out |= {f"fp8_{tag}_cache_tokens": rc.KV_CACHE_TOKENS.fact(tokens, arm.label, fmt="{:,d}"),
                f"fp8_{tag}_fits": FITS.fact(tokens / limit if tokens and limit else None, arm.label, fmt=".1f"),
                f"fp8_{tag}_top_n": rc.POINT_SENT.fact(n, arm.label, LONG_CONTEXT, n, fmt="d"),
                f"fp8_{tag}_top_admitted": at(rc.POINT_ADMITTED, "admitted", "d"),
                f"fp8_{tag}_top_itl": at(rc.POINT_ITL, "itl_ms", "{:.1f} ms"),
                f"fp8_{tag}_top_floor": at(rc.POINT_FLOOR, "floor_ms", "{:.1f} ms"),
                f"fp8_{tag}_top_x_floor": at(rc.POINT_X_FLOOR, "itl_x_floor", "{:.2f}×"),
                f"fp8_{tag}_top_tok_s": at(rc.POINT_TOK_S, "decode_tok_s", "{:,.0f}"),
                f"fp8_{tag}_one_itl": rc.POINT_ITL.fact(_value(ones[tag], "itl_ms"), arm.label, LONG_CONTEXT, 1,
                                               fmt="{:.2f} ms"),
                f"fp8_{tag}_one_floor": rc.POINT_FLOOR.fact(_value(ones[tag], "floor_ms"), arm.label, LONG_CONTEXT, 1,
                                                   fmt="{:.2f} ms")}
    out |= _fp8_same_batch(table, root)
    out["fp8_limit"] = rc.MAX_MODEL_LEN.fact(rc.max_model_len(arms.FA3_FP8.label, root=root), arms.FA3_FP8.label, fmt="{:,d}")
    both = ones["bf16"] and ones["fp8"]
    out["fp8_one_ratio"] = ONE_RATIO.fact(ones["fp8"]["itl_ms"] / ones["bf16"]["itl_ms"] if both else None,
                                          fmt="{:.3f}×")
    out["fp8_one_floor_cut_pct"] = FP8_CUT.fact(100 * (1 - ones["fp8"]["floor_ms"] / ones["bf16"]["floor_ms"]) if both
                                                else None, "floor", 1, fmt="{:.0f}%")
    out["fp8_one_itl_cut_pct"] = FP8_CUT.fact(100 * (1 - ones["fp8"]["itl_ms"] / ones["bf16"]["itl_ms"]) if both
                                              else None, "step", 1, fmt="{:.1f}%")
    return out


def _fp8_same_batch(table, root: Path) -> dict:
    """FP8 against bf16 at the largest concurrency both ran whole at 32k (each step, its floor, how much shorter),
    the cache's growth, the throughput gain at 64 requests, and the range of the FP8 format vLLM stores (E4M3)."""
    bf16, fp8 = arms.FA3.label, arms.FA3_FP8.label
    tokens = {tag: rc.kv_cache_tokens(label, root=root) for tag, label in (("bf16", bf16), ("fp8", fp8))}
    whole = set()
    if not table.empty:
        rows = table[(table["context"] == LONG_CONTEXT) & (table["admitted"] == table["concurrency"])]
        whole = set(rows[rows["arm"] == bf16]["concurrency"]) & set(rows[rows["arm"] == fp8]["concurrency"])
    same = int(max(whole)) if whole else None
    at = {tag: rc.point(table, label, LONG_CONTEXT, same) if same else None for tag, label in (("bf16", bf16),
                                                                                               ("fp8", fp8))}
    tops = {tag: rc.point(table, label, LONG_CONTEXT, 64) for tag, label in (("bf16", bf16), ("fp8", fp8))}
    both = at["bf16"] is not None and at["fp8"] is not None
    cut = lambda key: 100 * (1 - at["fp8"][key] / at["bf16"][key]) if both else None  # noqa: E731
    gain = tops["fp8"]["decode_tok_s"] / tops["bf16"]["decode_tok_s"] if tops["fp8"] and tops["bf16"] else None
    out = {"fp8_same_n": rc.POINT_SENT.fact(same, "both whole", LONG_CONTEXT, same, fmt="d"),
           "fp8_cache_x": CACHE_RATIO.fact(tokens["fp8"] / tokens["bf16"] if tokens["fp8"] and tokens["bf16"]
                                           else None, fmt="{:.2f}×"),
           "fp8_tok_s_gain": TOK_S_GAIN.fact(gain, fmt="{:.2f}×"),
           "fp8_same_itl_cut_pct": FP8_CUT.fact(cut("itl_ms"), "step", same, fmt="{:.0f}%"),
           "fp8_same_floor_cut_pct": FP8_CUT.fact(cut("floor_ms"), "floor", same, fmt="{:.0f}%"),
           "fp8_e4m3_max": Fact(_e4m3_max(), "torch.finfo(torch.float8_e4m3fn).max", "{:.0f}")}
    for tag, label in (("bf16", bf16), ("fp8", fp8)):
        get = lambda key, tag=tag: at[tag][key] if at[tag] else None  # noqa: E731
        out |= {f"fp8_{tag}_same_itl": rc.POINT_ITL.fact(get("itl_ms"), label, LONG_CONTEXT, same, fmt="{:.1f} ms"),
                f"fp8_{tag}_same_floor": rc.POINT_FLOOR.fact(get("floor_ms"), label, LONG_CONTEXT, same,
                                                             fmt="{:.1f} ms"),
                f"fp8_{tag}_same_x_floor": rc.POINT_X_FLOOR.fact(get("itl_x_floor"), label, LONG_CONTEXT, same,
                                                                 fmt="{:.2f}×")}
    return out


def _e4m3_max() -> float:
    """The largest finite value of the FP8 format vLLM's FA3 path stores and computes in (float8_e4m3fn)."""
    import torch  # only here: the rest of the chapter's facts need no torch

    return float(torch.finfo(torch.float8_e4m3fn).max)


def method_settings(root: Path = DATA_DIR) -> dict:
    """The method appendix's settings the interview's answers and this page's prose quote (that page builds after
    the interview)."""
    return {name: fact for name, fact in method_facts(root).items() if name in QUOTED_SETTINGS}


@functools.cache
def facts(root: Path = DATA_DIR) -> dict[str, Fact]:
    """Every fact chapter 6b and its self-check state, by glue name."""
    root = Path(root)
    return (slo_facts() | load_facts(root) | curve_facts(root) | agreement_facts(root) | interference_facts(root)
            | fp8_facts(root) | method_settings(root))


# --- figures and the explorer ----------------------------------------------------------------------------------

def load_curves_figure():
    """p99 TTFT and ITL against the achieved rate, one line per backend (or the note that says what is missing)."""
    study = _load()
    if not study.measured:
        print(missing_note())
        return None
    return plot_load_curves(study, SLO)


def interference_figure():
    """Every decoder's gap around the long prompt's arrival, with the two chunk sizes."""
    fig = plot_interference()
    if fig is None:
        print(f"Not measured yet: {INTER_SRC} is not on file.")
    return fig


def fp8_figure():
    """Decode step against concurrent requests at 32k, bf16 and FP8 KV caches, each beside its floor."""
    return plot_fp8(_concurrency())


def explorer():
    """Every load point of every backend, goodput at other targets (or the note that says what is missing)."""
    found = load_explorer()
    if found is None:
        print(missing_note())
    return found
