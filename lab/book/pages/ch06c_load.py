"""Chapter 6c's load studies: OURS and FA3 under Poisson load (chapter 6b's tools), the quantities they measure and
their facts by glue name: ``oload_*`` from the every-backend lease, ``sload_*`` from the split's, ``wload_*``,
``rload_*`` and ``cload_*`` from the compile-once lease (:func:`load_facts`, :func:`once_facts`). Chapter 6c's
``facts()`` takes them all; its load explorers (lab.book.load_explorer) draw the same runs."""

from __future__ import annotations

import functools
import json

from lab import LabError, names
from lab.book.facts import Fact
from lab.book.pages.ch06b import SLO
from lab.measure.vllm.arms import FA3, OURS
from lab.results import load as rl
from lab.results import ours_serving as serving
from lab.results.quantities import Quantity
from lab.store import DATA_DIR

#: The load leases ran on an H100, as every run of chapter 6c: the GPU names their quantities.
_GPU = serving.LOAD_RUN.split("/")[0]
WORKLOAD = "random-1024-128"
_SPLIT = ("a later lease: OURS with a mixed step's decode rows sent to the decode kernel (the split load study), FA3 "
          "beside it")
_ONCE = {serving.LOAD_ONCE_RUN: "a later lease: OURS with kernels that compile once per server and warm up when it "
                                "starts (the compile-once load study), FA3 beside it",
         serving.LOAD_REPEAT_RUN: "both arms of the compile-once load study again, same lease",
         serving.LOAD_COLD_RUN: "OURS alone with the compile-once kernels and no warm-up, the first server of the "
                                "compile-once load study's lease"}
_LOAD_OTHERS = {serving.LOAD_SPLIT_RUN: _SPLIT, **_ONCE}
_LOAD = dict(run=serving.LOAD_RUN, file=f"{WORKLOAD}/<arm>", others=_LOAD_OTHERS)
_LOADED = "1,024-token prompts, 128 tokens out, OURS and FA3 in one lease"
LOAD_CAPACITY = Quantity(f"{_GPU}.ours_load.capacity", f"requests per second completed with every prompt sent at "
                         f"once, {_LOADED}", unit="req/s", **_LOAD)
LOAD_RATIO = Quantity(f"{_GPU}.ours_load.ratio", f"OURS's over FA3's: capacity, or the throughput of the highest "
                      f"rate within the targets, {_LOADED}", unit="×", **_LOAD)
LOAD_SLO_RATE = Quantity(f"{_GPU}.ours_load.slo_rate", "the highest Poisson rate measured whose p99 TTFT and p99 TPOT "
                         f"are each within chapter 6b's targets, {_LOADED}", unit="req/s", **_LOAD)
LOAD_SETTING = Quantity(f"{_GPU}.ours_load.workload", "a setting of the load lease's workload (tokens, seconds of "
                        "arrivals a point, prompts of the capacity point), as both arms' provenance records it",
                        run=serving.LOAD_RUN, file=f"{WORKLOAD}/<arm>/provenance.json",
                        others=_LOAD_OTHERS)
LOAD_RATE = Quantity(f"{_GPU}.ours_load.rate", f"a Poisson point's offered request rate, {_LOADED}", unit="req/s",
                     **_LOAD)
LOAD_THROUGHPUT = Quantity(f"{_GPU}.ours_load.throughput", f"requests per second a Poisson point completed, {_LOADED}",
                           unit="req/s", **_LOAD)
LOAD_LATENCY = Quantity(f"{_GPU}.ours_load.latency", f"a latency percentile (TTFT, TPOT or ITL) at a load point, "
                        f"{_LOADED}", unit="ms", **_LOAD)
LOAD_FIRST_TOKENS = Quantity(f"{_GPU}.ours_load.burst_first_token", "seconds from the start of the capacity point "
                             "(every prompt sent at once) to the first token of its first request, or of its last, "
                             f"{_LOADED}", unit="s", run=serving.LOAD_RUN, file=f"{WORKLOAD}/<arm>/rate-inf.json",
                             others=_LOAD_OTHERS)
LOAD_JIT_EVENTS = Quantity(f"{_GPU}.ours_load.jit_events", "kernel JIT events vLLM's monitor logged during inference "
                           "in a load study's servers (every event with --jit-monitor-verbose; without it, the first "
                           "per kernel)", unit="events", run=serving.LOAD_ONCE_RUN, file=f"{WORKLOAD}/<arm>/server.log",
                           others={run: _ONCE[run] for run in (serving.LOAD_REPEAT_RUN, serving.LOAD_COLD_RUN)})
WARM_UP = Quantity(f"{_GPU}.ours_load.warm_up", "seconds the OURS backend's warm-up took when its server started, as "
                   "its log says", unit="s", run=serving.LOAD_ONCE_RUN, file=f"{WORKLOAD}/ours/server.log",
                   others={serving.LOAD_REPEAT_RUN: _ONCE[serving.LOAD_REPEAT_RUN]})


@functools.cache
def _ours_load(run: str = serving.LOAD_RUN) -> dict[str, rl.ArmRun]:
    """A load lease's arm folders by label, their points and provenance read once."""
    return {arm.label: arm for arm in rl.arm_runs(DATA_DIR / run / WORKLOAD)}


def _ours_load_workload(run: str = serving.LOAD_RUN) -> tuple[dict, float, int]:
    """A load lease's workload, seconds of arrivals a point and prompts of the capacity point, as both arms'
    provenance records them (one of each, or LabError)."""
    settings = {json.dumps([arm.provenance["flags"][key] for key in ("workload", "span_s", "capacity_prompts")],
                           sort_keys=True) for arm in _ours_load(run).values()}
    if len(settings) != 1:
        raise LabError(f"data/{run}/{WORKLOAD}: the arms ran different workloads, spans or capacity points")
    workload, span, everyone = json.loads(settings.pop())
    return workload, span, everyone


def load_facts(run: str = serving.LOAD_RUN, prefix: str = "oload") -> dict[str, Fact]:
    """OURS and FA3 under Poisson load in one lease (``<prefix>_<arm>_*``): each one's capacity and its median TTFT and
    ITL there, the highest rate within chapter 6b's targets with its p99s and throughput, the highest rate run and
    the p99s of the first rate past the targets; OURS's capacity and in-target throughput over FA3's; when the
    capacity point's first request got its first token, and its last. ``run``: the load lease (``prefix`` names its
    facts)."""
    runs, out, in_target = _ours_load(run), {}, {}
    for label in (OURS.label, FA3.label):
        name, rows = names.key(label), runs[label].rows
        poisson, best = rl.poisson_points(rows), rl.highest_rate_meeting(rows, SLO)
        within = next(r for r in poisson if r["rate"] == best)
        everyone = next(r for r in rows if r["rate"] is None and not r["max_concurrency"])
        past = [r for r in poisson if r["rate"] > best]
        in_target[label] = within["request_throughput"]
        first, last = rl.first_tokens(rows)
        out |= {f"{prefix}_{name}_burst_first": LOAD_FIRST_TOKENS.fact(first, label, "first", fmt="{:.2f} s", run=run),
                f"{prefix}_{name}_burst_span": LOAD_FIRST_TOKENS.fact(last - first, label, "last less first",
                                                                      fmt="{:.1f} s", run=run),
                f"{prefix}_{name}_poisson_ttft_max": LOAD_LATENCY.fact(1000 * rl.longest_first_token(rows), label,
                                                                       "every Poisson point", "longest ttft",
                                                                       fmt="{:.0f} ms", run=run)}
        out |= {f"{prefix}_{name}_capacity": LOAD_CAPACITY.fact(rl.capacity(rows), label, fmt="{:.1f} req/s", run=run),
                f"{prefix}_{name}_cap_ttft": LOAD_LATENCY.fact(everyone["p50_ttft_ms"], label, "capacity", "p50 ttft",
                                                            fmt="{:,.0f} ms", run=run),
                f"{prefix}_{name}_cap_itl": LOAD_LATENCY.fact(everyone["p50_itl_ms"], label, "capacity", "p50 itl",
                                                           fmt="{:.1f} ms", run=run),
                f"{prefix}_{name}_slo_rate": LOAD_SLO_RATE.fact(best, label, fmt="{:g} req/s", run=run),
                f"{prefix}_{name}_top_rate": LOAD_RATE.fact(poisson[-1]["rate"], label, "highest", fmt="{:g} req/s",
                                                            run=run),
                f"{prefix}_{name}_slo_throughput": LOAD_THROUGHPUT.fact(within["request_throughput"], label, best,
                                                                     fmt="{:.1f} req/s", run=run),
                f"{prefix}_{name}_slo_ttft": LOAD_LATENCY.fact(within["p99_ttft_ms"], label, best, "p99 ttft",
                                                            fmt="{:.0f} ms", run=run),
                f"{prefix}_{name}_slo_tpot": LOAD_LATENCY.fact(within["p99_tpot_ms"], label, best, "p99 tpot",
                                                            fmt="{:.0f} ms", run=run)}
        if past:
            out |= {f"{prefix}_{name}_past_rate": LOAD_RATE.fact(past[0]["rate"], label, "past the targets",
                                                              fmt="{:g} req/s", run=run),
                    f"{prefix}_{name}_past_ttft": LOAD_LATENCY.fact(past[0]["p99_ttft_ms"], label, past[0]["rate"],
                                                                 "p99 ttft", fmt="{:.0f} ms", run=run),
                    f"{prefix}_{name}_past_tpot": LOAD_LATENCY.fact(past[0]["p99_tpot_ms"], label, past[0]["rate"],
                                                                 "p99 tpot", fmt="{:.0f} ms", run=run)}
    ours, fa3 = (runs[label].rows for label in (OURS.label, FA3.label))
    top = rl.poisson_points(ours)[-1]
    near = min(rl.poisson_points(fa3), key=lambda r: abs(r["rate"] - top["rate"]))   # FA3's rate nearest OURS's top
    out[f"{prefix}_fa3_near_rate"] = LOAD_RATE.fact(near["rate"], FA3.label, "nearest OURS's highest",
                                                    fmt="{:g} req/s", run=run)
    for name, label, row in (("ours_top", OURS.label, top), ("fa3_near", FA3.label, near)):
        out |= {f"{prefix}_{name}_p50_ttft": LOAD_LATENCY.fact(row["p50_ttft_ms"], label, row["rate"], "p50 ttft",
                                                            fmt="{:.0f} ms", run=run),
                f"{prefix}_{name}_p50_itl": LOAD_LATENCY.fact(row["p50_itl_ms"], label, row["rate"], "p50 itl",
                                                           fmt="{:.1f} ms", run=run),
                f"{prefix}_{name}_p99_ttft": LOAD_LATENCY.fact(row["p99_ttft_ms"], label, row["rate"], "p99 ttft",
                                                              fmt="{:.0f} ms", run=run),
                f"{prefix}_{name}_p99_itl": LOAD_LATENCY.fact(row["p99_itl_ms"], label, row["rate"], "p99 itl",
                                                           fmt="{:.0f} ms", run=run),
                f"{prefix}_{name}_p99_tpot": LOAD_LATENCY.fact(row["p99_tpot_ms"], label, row["rate"], "p99 tpot",
                                                            fmt="{:.0f} ms", run=run)}
    top = top["rate"]
    workload, span, everyone = _ours_load_workload(run)
    out |= {f"{prefix}_input_len": LOAD_SETTING.fact(workload["input_len"], "prompt tokens", fmt=",d", run=run),
            f"{prefix}_capacity_prompts": LOAD_SETTING.fact(everyone, "prompts of the capacity point", fmt=",d",
                                                            run=run),
            f"{prefix}_output_len": LOAD_SETTING.fact(workload["output_len"], "tokens out", fmt=",d", run=run),
            f"{prefix}_span_s": LOAD_SETTING.fact(span, "seconds of arrivals a point", fmt="{:g} s", run=run),
            f"{prefix}_ours_top_rho": LOAD_RATIO.fact(top / rl.capacity(ours), "OURS's highest rate over its capacity",
                                                  fmt="{:.1f}×", run=run),
            f"{prefix}_slo_ttft_ms": Fact(SLO["ttft"], "lab.book.pages.ch06b.SLO", "{:g} ms"),
            f"{prefix}_slo_tpot_ms": Fact(SLO["tpot"], "lab.book.pages.ch06b.SLO", "{:g} ms")}
    out |= {f"{prefix}_capacity_ratio": LOAD_RATIO.fact(rl.capacity(ours) / rl.capacity(fa3), "capacity",
                                                        fmt="{:.2f}×", run=run),
            f"{prefix}_slo_throughput_ratio": LOAD_RATIO.fact(in_target[OURS.label] / in_target[FA3.label],
                                                          "throughput within the targets", fmt="{:.2f}×", run=run)}
    return out


def once_facts() -> dict[str, Fact]:
    """Kernels that compile once per server (``wload_*``: the compile-once load study, as :func:`load_facts`;
    ``rload_*``: its repeat; ``cload_*``: OURS with the warm-up off), the JIT events their servers logged during
    inference, and how long OURS's warm-up took."""
    out = load_facts(serving.LOAD_ONCE_RUN, "wload") | load_facts(serving.LOAD_REPEAT_RUN, "rload")
    cold, run = _ours_load(serving.LOAD_COLD_RUN)[OURS.label].rows, serving.LOAD_COLD_RUN
    out |= {"cload_ours_capacity": LOAD_CAPACITY.fact(rl.capacity(cold), OURS.label, fmt="{:.1f} req/s", run=run),
            "cload_ours_burst_first": LOAD_FIRST_TOKENS.fact(rl.first_tokens(cold)[0], OURS.label, "first",
                                                             fmt="{:.2f} s", run=run)}
    for prefix, run in (("wload", serving.LOAD_ONCE_RUN), ("rload", serving.LOAD_REPEAT_RUN),
                        ("cload", serving.LOAD_COLD_RUN)):
        arms = _ours_load(run)
        out[f"{prefix}_jit_events"] = LOAD_JIT_EVENTS.fact(sum(map(rl.server_jit_events, arms.values())),
                                                           "every server", fmt="d", run=run)
        if prefix != "cload":   # the cold run's server had its warm-up off
            out[f"{prefix}_warm_up_s"] = WARM_UP.fact(rl.server_warm_up(arms[OURS.label]), fmt="{:.1f} s", run=run)
    return out
