"""Chapter 6c, our kernels in a real server: every fact the chapter and its self-check state, its tables, its load
explorer and the code it shows (``glue_all(ch06c.facts())`` in the one hidden cell; ``show(ch06c.server_step)``, ...).

Every number is from H100 leases, each ratio within one lease (lab.results.ours_serving names the runs): the first
lease's sweep, race, agreement check and profiler windows; ``gluon_*`` from the lease with the Gluon prefill, ``arms_*``
from the every-backend lease, ``fa2arm_*`` from the FA2 lease, ``mixed_*`` and ``split_*`` from the split's leases, and
the load studies' facts from lab.book.pages.ch06c_load (each quantity declares its other runs). The interview page
quotes some of them.
"""

from __future__ import annotations

import functools
import json
import re

import pandas as pd

from lab import LabError, names
from lab.book.facts import Fact
from lab.book.load_explorer import once_load_explorer, ours_load_explorer
from lab.book.pages import ch06c_load
from lab.measure.attention.hopper import ROWS
from lab.measure.attention.hopper_paged import copy_tile, hopper_paged_kernel, paged_unit
from lab.measure.attention.serving import server_step, warm_up
from lab.measure.serving_race import CHUNK_CANDIDATES, MIXED_CANDIDATES, fastest_of_ours
from lab.measure.vllm.arms import FA2, FA3, OURS, known
from lab.results import kernel_counters
from lab.results import ours_serving as serving
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity
from lab.store import DATA_DIR, read_json

__all__ = ["arms_table", "copy_tile", "counters_table", "facts", "gluon_race_table", "gluon_sweep_table",
           "hopper_paged_kernel", "once_load_explorer", "ours_load_explorer", "paged_unit", "race_table", "server_step",
           "sweep_table", "warm_up"]
LONG = 32768                              # the longest prompt both arms ran: where the section compares them
LAST_CHUNK, FIRST_CHUNK = "prefill 8192 over 24576", "prefill 8192 over 0"
DECODE_ONE, DECODE_16 = "decode 1 x 32768", "decode 16 x 32768"
_GLUON = "the same study a later lease, OURS's prefill the Gluon kernel for Hopper (its FA3 arm served again beside it)"
_SWEEP = dict(run=serving.SWEEP_RUN, file="ours/sweep.csv", others={serving.GLUON_SWEEP_RUN: _GLUON})
TTFT_RATIO = Quantity("h100.ours.ttft_ratio", "OURS's TTFT over FA3's at one prompt length, both arms served in one "
                      "lease", unit="×", **_SWEEP)
ITL_RATIO = Quantity("h100.ours.itl_ratio", "OURS's decode ITL over FA3's after a prompt of that length, same lease",
                     unit="×", **_SWEEP)
TTFT = Quantity("h100.ours.ttft", "time to first token of one arm of the OURS lease at a prompt length", unit="s",
                **_SWEEP)
ITL = Quantity("h100.ours.itl", "decode ITL (median) of one arm of the OURS lease after a prompt of that length",
               unit="ms", **_SWEEP)
_MIXED = ("a later lease's race of a busy server's mixed step alone, our decode rows in the prefill kernel's tiles "
          "and split off to the decode kernel")
RACE_SPEED = Quantity("h100.serving_race.speed", "a candidate's speed over FA3's at one step of a server (FA3's time "
                      "over its own)", run=serving.RACE_RUN, file="race.csv", unit="×",
                      others={serving.GLUON_RACE_RUN: _GLUON, serving.MIXED_RACE_RUN: _MIXED})
RACE_MS = Quantity("h100.serving_race.ms", "a candidate's time at one step of a server (median of graph replays)",
                   run=serving.RACE_RUN, file="race.csv", unit="ms",
                   others={serving.GLUON_RACE_RUN: _GLUON, serving.MIXED_RACE_RUN: _MIXED})
MIXED_SHAPE = Quantity("h100.serving_race.mixed_step", "the mixed step of the mixed-step race: decoding sequences, "
                       "their keys, new prompts beside them and each prompt's tokens", run=serving.MIXED_RACE_RUN,
                       file="provenance.json")
MIXED_PROGRAMS = Quantity("h100.mixed_counters.programs", "programs (thread blocks) the longest kernel of one layer's "
                          "attention call of the mixed-step race's step launched, as Nsight Compute counted them "
                          "(launch__grid_size)", run=serving.MIXED_COUNTERS_RUN, file="raw.csv", unit="programs")
_SPLIT_SERVER = "a later lease's server that sends a mixed step's decode rows to the decode kernel"
CALLS = Quantity("h100.agreement.calls", "attention calls the agreement check compared, per kind of step",
                 run=serving.AGREEMENT_RUN, file="summary.json", unit="calls",
                 others={serving.GLUON_AGREEMENT_RUN: _GLUON, serving.SPLIT_AGREEMENT_RUN: _SPLIT_SERVER})
WORST = Quantity("h100.agreement.worst", "the largest difference between our output and FA3's on the same inputs, "
                 "over every call, as a share of the largest output", run=serving.AGREEMENT_RUN, file="summary.json",
                 unit="%", others={serving.GLUON_AGREEMENT_RUN: _GLUON, serving.SPLIT_AGREEMENT_RUN: _SPLIT_SERVER})
TOLERANCE = Quantity("h100.agreement.tolerance", "the largest difference the agreement check allows, as a share of "
                     "the largest output", run=serving.AGREEMENT_RUN, file="summary.json", unit="%")
BROKEN = Quantity("h100.agreement_bug.not_finite", "attention calls whose output was not finite with every sequence "
                  "one key short", run=serving.PLANTED_RUN, file="summary.json", unit="calls",
                  others={serving.GLUON_PLANTED_RUN: _GLUON, serving.SPLIT_PLANTED_RUN: _SPLIT_SERVER})
LENGTH = Quantity("h100.ours.length", "a prompt length both arms of the OURS lease ran", unit="tokens", **_SWEEP)
FLASH_KERNELS = Quantity("h100.ours.flash_kernels", "FlashAttention kernels among the attention kernels of the OURS "
                         "server's profiler windows", run=serving.SWEEP_RUN, file="traces/ours/*.census.json",
                         unit="kernels", others={serving.GLUON_SWEEP_RUN: _GLUON})
WINDOW_SHARE = Quantity("h100.ours.window_attention_share", "attention's share of the GPU time in one profiler "
                        "window of the OURS server", run=serving.SWEEP_RUN, file="traces/ours/census.csv", unit="%",
                        others={serving.GLUON_SWEEP_RUN: _GLUON})
_CHUNK = dict(run=serving.CHUNK_COUNTERS_RUN, file="raw.csv")
_ON_CHUNK = ("the attention kernel of the last 8,192-token chunk of a 32k prompt on a paged cache (one layer's call, "
             "alone, under Nsight Compute after three warm-ups, caches flushed, clocks left free): ")
CHUNK_MS = Quantity("h100.chunk_counters.ms", _ON_CHUNK + "its duration", unit="ms", **_CHUNK)
CHUNK_SPEED = Quantity("h100.chunk_counters.speed", _ON_CHUNK + "our kernel's speed over FA3's (FA3's duration over "
                       "ours)", unit="×", **_CHUNK)
CHUNK_CLOCK = Quantity("h100.chunk_counters.clock", _ON_CHUNK + "the clock it ran at", unit="GHz", **_CHUNK)
CHUNK_TENSOR = Quantity("h100.chunk_counters.tensor_busy", _ON_CHUNK + "tensor-pipe cycles as a share of the active "
                        "cycles of the SMs that ran it", unit="%", **_CHUNK)
CHUNK_TENSOR_CYCLES = Quantity("h100.chunk_counters.tensor_cycles", _ON_CHUNK + "SM-cycles in which the tensor pipe "
                               "was busy, summed over the SMs", unit="G cycles", **_CHUNK)
CHUNK_SM_CYCLES = Quantity("h100.chunk_counters.sm_cycles", _ON_CHUNK + "SM-cycles with work, summed over the SMs",
                           unit="G cycles", **_CHUNK)
CHUNK_CYCLES_RATIO = Quantity("h100.chunk_counters.sm_cycles_ratio", _ON_CHUNK + "our SM-cycles with work over FA3's",
                              unit="×", **_CHUNK)
CHUNK_WARPS = Quantity("h100.chunk_counters.warps_per_sm", _ON_CHUNK + "warps resident per SM per active cycle",
                       unit="warps", **_CHUNK)
CHUNK_REGISTERS = Quantity("h100.chunk_counters.registers", _ON_CHUNK + "registers per thread", unit="registers",
                           **_CHUNK)
CHUNK_SHARED = Quantity("h100.chunk_counters.shared", _ON_CHUNK + "shared memory per program", unit="KiB", **_CHUNK)
CHUNK_PROGRAMS = Quantity("h100.chunk_counters.programs", _ON_CHUNK + "programs launched", unit="programs", **_CHUNK)
CHUNK_ISSUE = Quantity("h100.chunk_counters.issue", _ON_CHUNK + "cycles in which a warp scheduler issued an "
                       "instruction, as a share of its active cycles", unit="%", **_CHUNK)
CHUNK_BARRIER = Quantity("h100.chunk_counters.barrier", _ON_CHUNK + "cycles warps spent stalled at a barrier, per "
                         "issued instruction", unit="cycles", **_CHUNK)
CHUNK_DRAM = Quantity("h100.chunk_counters.dram_read", _ON_CHUNK + "bytes read from DRAM", unit="MB", **_CHUNK)
CHUNK_MEMORY = Quantity("h100.chunk_counters.memory_busy", _ON_CHUNK + "how busy its busiest memory unit (L1, L2 "
                        "or DRAM) was, as a share of that unit's peak", unit="%", **_CHUNK)
#: The last chunk's counters, a table row each and a fact per kernel (``chunk_<fa3|ours>_<key>``): key -> (row,
#: quantity, its value in a job's counters, the number's format, the unit the fact shows after it)
_CHUNK_ROWS = {
    "ms": ("time (ms)", CHUNK_MS, lambda j: j.main["ms"], "{:.2f}", " ms"),
    "clock": ("clock (GHz)", CHUNK_CLOCK, lambda j: j.main["clock_hz"] / 1e9, "{:.2f}", " GHz"),
    "tensor_gcycles": ("tensor-pipe cycles, summed over SMs (G)", CHUNK_TENSOR_CYCLES,
                       lambda j: kernel_counters.tensor_cycles(j) / 1e9, "{:.2f}", ""),
    "sm_gcycles": ("SM-cycles with work, summed (G)", CHUNK_SM_CYCLES, lambda j: j.main["sm_cycles_sum"] / 1e9,
                   "{:.2f}", ""),
    "tensor": ("tensor pipe busy (% of active cycles)", CHUNK_TENSOR, lambda j: j.main["tensor_pct"], "{:.0f}", "%"),
    "programs": ("programs launched", CHUNK_PROGRAMS, lambda j: int(j.main["programs"]), "{:,d}", ""),
    "warps": ("warps resident per SM", CHUNK_WARPS, lambda j: j.main["warps_per_sm"], "{:.0f}", ""),
    "registers": ("registers per thread", CHUNK_REGISTERS, lambda j: int(j.main["registers"]), "{:d}", ""),
    "shared_kb": ("shared memory per program (KiB)", CHUNK_SHARED, lambda j: j.main["shared_bytes"] / 1024, "{:.0f}",
                  " KiB"),
    "issue": ("scheduler issuing (% of cycles)", CHUNK_ISSUE, lambda j: j.main["issue_pct"], "{:.0f}", "%"),
    "barrier": ("barrier stall (cycles per instruction)", CHUNK_BARRIER, lambda j: j.stall_cycles["barrier"],
                "{:.2f}", ""),
    "memory": ("busiest memory unit (% of its peak)", CHUNK_MEMORY, lambda j: j.main["memory_pct"], "{:.0f}", "%"),
    "dram_mb": ("DRAM read (MB)", CHUNK_DRAM, lambda j: j.totals["dram_read"] / 1e6, "{:,.0f}", " MB"),
}

#: The fourth lease (every backend swept beside OURS to 128k, OURS and FA3 under load): its GPU names its quantities.
_GPU = serving.ARMS_RUN.split("/")[0]
_FA2_LEASE = "a later lease: FA2 swept beside FA3 and OURS (the FA2 lease), every ratio within it"
_ARMS = dict(run=serving.ARMS_RUN, file="<arm>/sweep.csv", others={serving.FA2_RUN: _FA2_LEASE})
ARMS_TTFT = Quantity(f"{_GPU}.ours_arms.ttft", "time to first token of one backend at a prompt length, every backend "
                     "swept in one lease (OURS's prefill the Gluon kernel)", unit="s", **_ARMS)
ARMS_RATIO = Quantity(f"{_GPU}.ours_arms.ttft_ratio", "OURS's TTFT over FA3's at a prompt length, every backend swept "
                      "in one lease", unit="×", **_ARMS)
ARMS_OVER = Quantity(f"{_GPU}.ours_arms.over_ours", "one of vLLM's other backends' TTFT over OURS's at a prompt "
                     "length, same lease (how many times as long its first token took)", unit="×", **_ARMS)
ARMS_ITL = Quantity(f"{_GPU}.ours_arms.itl", "decode ITL (median) of one backend after a prompt of that length, same "
                    "lease", unit="ms", **_ARMS)
ARMS_ITL_RATIO = Quantity(f"{_GPU}.ours_arms.itl_ratio", "OURS's decode ITL over FA3's after a prompt of one length, "
                          "same lease", unit="×", **_ARMS)
ARMS_MARGIN = Quantity(f"{_GPU}.ours_arms.apart_margin", "how much shorter OURS's slowest repeat of the TTFT was than "
                       "FA3's fastest, as a share of FA3's fastest, at a length where the two sets of repeats do not "
                       "overlap", unit="%", **_ARMS)
FA2_OVER_FA3 = Quantity(f"{_GPU}.ours_arms.fa2_over_fa3", "FA2's TTFT, or its decode ITL, over FA3's at a prompt "
                        "length, both served in one lease", unit="×", run=serving.FA2_RUN, file="<arm>/sweep.csv")
SERVER_READY = Quantity(f"{_GPU}.ours_arms.server_ready", "seconds from a sweep's server start until its health "
                        "check answers (weights, torch.compile, CUDA graphs, warm-up)", unit="s", run=serving.FA2_RUN,
                        file="<arm>/provenance.json")
GRAPH_CAPTURE = Quantity(f"{_GPU}.ours_arms.graph_capture", "seconds vLLM's model runner took to capture the CUDA "
                         "graphs while a sweep's server started, as its log says", unit="s", run=serving.FA2_RUN,
                         file="<arm>/server.log")
ARMS_LENGTH = Quantity(f"{_GPU}.ours_arms.length", "a prompt length of the lease that swept every backend beside "
                       "OURS", unit="tokens", **_ARMS)

_pair, _race = functools.cache(serving.sweep_pair), functools.cache(serving.race_table)
_chunk, _arms = functools.cache(serving.chunk_counters), functools.cache(serving.arms_sweep)


def _row(step: str, candidate: str = "fa3", run: str = serving.RACE_RUN):
    race = _race(run=run)
    return race[(race.step == step) & (race.candidate == candidate)].iloc[0]


def _served(step: str, run: str = serving.RACE_RUN):
    """Ours at a step as the server ran it: the fastest prefill setting, decode splits planned for a graph."""
    race = _race(run=run)
    if step.startswith("decode"):
        return race[(race.step == step) & race.candidate.str.contains("captured graph")].iloc[0]
    return fastest_of_ours(race, step)


def sweep_facts() -> dict[str, Fact]:
    pair = _pair()
    at = pair.loc[LONG]
    out = {"ours_long_n": LENGTH.fact(LONG, "longest", fmt=",d"),
           "ours_ttft_ratio_long": TTFT_RATIO.fact(at.ttft_ratio, LONG, fmt="{:.2f}×"),
           "ours_itl_ratio_long": ITL_RATIO.fact(at.itl_ratio, LONG, fmt="{:.2f}×"),
           "ours_ttft_long_s": TTFT.fact(at.ttft_s_ours, OURS.label, LONG, fmt="{:.2f} s"),
           "ours_fa3_ttft_long_s": TTFT.fact(at.ttft_s_fa3, FA3.label, LONG, fmt="{:.2f} s"),
           "ours_itl_long_ms": ITL.fact(at.itl_ms_ours, OURS.label, LONG, fmt="{:.2f} ms"),
           "ours_fa3_itl_long_ms": ITL.fact(at.itl_ms_fa3, FA3.label, LONG, fmt="{:.2f} ms")}
    short = int(pair.index.min())
    out |= {"ours_short_n": LENGTH.fact(short, "shortest", fmt=",d"),
            "ours_ttft_ratio_short": TTFT_RATIO.fact(pair.loc[short].ttft_ratio, short, fmt="{:.2f}×"),
            "ours_itl_ratio_max": ITL_RATIO.fact(pair.itl_ratio.max(), "largest", fmt="{:.2f}×")}
    return out


def race_facts() -> dict[str, Fact]:
    last, first, one, sixteen = (_served(step) for step in (LAST_CHUNK, FIRST_CHUNK, DECODE_ONE, DECODE_16))
    return {"race_last_chunk_speed": RACE_SPEED.fact(last.vs_fa3, LAST_CHUNK, "ours", fmt="{:.2f}×"),
            "race_last_chunk_ms": RACE_MS.fact(last.ms, LAST_CHUNK, "ours", fmt="{:.2f} ms"),
            "race_last_chunk_fa3_ms": RACE_MS.fact(_row(LAST_CHUNK).ms, LAST_CHUNK, "fa3", fmt="{:.2f} ms"),
            "race_first_chunk_speed": RACE_SPEED.fact(first.vs_fa3, FIRST_CHUNK, "ours", fmt="{:.2f}×"),
            "race_best_tiles": Fact(first.candidate.removeprefix("ours ") if first.candidate == last.candidate
                                    else None, RACE_SPEED.source),
            "race_decode1_speed": RACE_SPEED.fact(one.vs_fa3, DECODE_ONE, "ours", fmt="{:.2f}×"),
            "race_decode16_speed": RACE_SPEED.fact(sixteen.vs_fa3, DECODE_16, "ours", fmt="{:.2f}×")}


def _agreement_check(prefix: str, run: str, planted_run: str) -> dict[str, Fact]:
    """One lease's agreement check (``<prefix>agree_*``: passed, calls in all and per kind of step, the worst
    difference) and the same check with the planted bug (``<prefix>bug_*``: passed, calls, non-finite outputs)."""
    honest, planted = serving.agreement(run=run), serving.agreement(run=planted_run)
    kinds = honest["kinds"]
    out = {f"{prefix}agree_{kind}_calls": CALLS.fact(kinds[kind]["calls"], kind, fmt=",d", run=run) for kind in kinds}
    return out | {
        f"{prefix}agree_calls": CALLS.fact(honest["calls"], "all", fmt=",d", run=run),
        f"{prefix}agree_worst": WORST.fact(100 * max(k["worst_relative_error"] for k in kinds.values()),
                                           fmt="{:.2f}%", run=run),
        f"{prefix}agree_passed": Fact("passed" if honest["passed"] else "failed", CALLS.source_in(run)),
        f"{prefix}bug_passed": Fact("passed" if planted["passed"] else "failed", BROKEN.source_in(planted_run)),
        f"{prefix}bug_not_finite": BROKEN.fact(sum(k["not_finite"] for k in planted["kinds"].values()), fmt=",d",
                                               run=planted_run),
        f"{prefix}bug_calls": BROKEN.fact(planted["calls"], "all", fmt=",d", run=planted_run)}


def agreement_facts() -> dict[str, Fact]:
    """The first lease's agreement check (``agree_*``, ``bug_*``) and its tolerance."""
    honest = serving.agreement()
    return _agreement_check("", serving.AGREEMENT_RUN, serving.PLANTED_RUN) | {
        "agree_tolerance": TOLERANCE.fact(100 * honest["tolerance"], fmt="{:.0f}%")}


def census_facts() -> dict[str, Fact]:
    windows = serving.attention_kernels()
    flash = sorted({name for w in windows.values() for name in w["flash"]})
    return {"ours_flash_kernels": FLASH_KERNELS.fact(len(flash), fmt="d"),
            "ours_prefill_share": WINDOW_SHARE.fact(100 * windows["prefill-8192"]["attention_share"], "prefill-8192",
                                                    fmt="{:.1f}%"),
            "ours_decode_share": WINDOW_SHARE.fact(100 * windows["decode-8192"]["attention_share"], "decode-8192",
                                                   fmt="{:.1f}%")}


def _fastest_triton(step: str, run: str):
    """The fastest Triton prefill setting of a race at a step (the race's settings without the Gluon kernel)."""
    race = _race(run=run)
    return fastest_of_ours(race[~race.candidate.str.contains("gluon")], step)


def _gluon_setting(config: str) -> str:
    """A Gluon setting of the race as the prose names it: ``128-key tiles, 3 stages``."""
    setting = json.loads(config)
    return f"{setting['BLOCK_N']}-key tiles, {setting['STAGES']} stages"


def fa2_facts() -> dict[str, Fact]:
    """The FA2 lease (``fa2arm_*``): FA2's and FA3's TTFT at the longest prompt, FA2's TTFT over FA3's at each length,
    its ITL over FA3's (smallest and largest), OURS's TTFT over FA3's in the same lease (smallest and largest), and
    how long each arm's server took to start and to capture its CUDA graphs."""
    run = serving.FA2_RUN
    ttft, itl = serving.arms_sweep(run=run), serving.arms_sweep(run=run, metric="itl_ms")
    fa2, fa3, longest = ttft[FA2.label], ttft[FA3.label], int(ttft.index.max())
    out = {"fa2arm_ttft_long": ARMS_TTFT.fact(fa2[longest], FA2.label, longest, fmt="{:.1f} s", run=run),
           "fa2arm_fa3_ttft_long": ARMS_TTFT.fact(fa3[longest], FA3.label, longest, fmt="{:.1f} s", run=run),
           "fa2arm_long_n": ARMS_LENGTH.fact(longest, "longest", fmt=",d", run=run)}
    out |= {f"fa2arm_over_fa3_{n}": FA2_OVER_FA3.fact(v, "ttft", n, fmt="{:.2f}×") for n, v in (fa2 / fa3).items()}
    itl_ratio, ours_ratio = itl[FA2.label] / itl[FA3.label], ttft[OURS.label] / fa3
    out |= {"fa2arm_itl_over_fa3_min": FA2_OVER_FA3.fact(itl_ratio.min(), "itl", "smallest", fmt="{:.2f}×"),
            "fa2arm_itl_over_fa3_max": FA2_OVER_FA3.fact(itl_ratio.max(), "itl", "largest", fmt="{:.2f}×"),
            "fa2arm_ours_ratio_min": ARMS_RATIO.fact(ours_ratio.min(), "smallest", fmt="{:.2f}×", run=run),
            "fa2arm_ours_ratio_max": ARMS_RATIO.fact(ours_ratio.max(), "largest", fmt="{:.2f}×", run=run)}
    for arm in map(known, ttft.columns):   # the arms the lease swept, from its folders
        ready = read_json(DATA_DIR / run / arm.slug / "provenance.json")["server"]["ready_s"]
        out[f"fa2arm_{names.key(arm.label)}_ready_s"] = SERVER_READY.fact(ready, arm.label, fmt="{:.0f} s")
        out[f"fa2arm_{names.key(arm.label)}_capture_s"] = GRAPH_CAPTURE.fact(
            serving.graph_capture(arm, run), arm.label, fmt="{:.0f} s")
    return out


def gluon_facts() -> dict[str, Fact]:
    """The later lease, OURS's prefill the Gluon kernel: the race's chunks (the Gluon setting the server ran, and
    Triton's best in the same race), the sweep at the longest prompt, the agreement check, the census."""
    race_run, sweep_run = serving.GLUON_RACE_RUN, serving.GLUON_SWEEP_RUN
    last, first = _served(LAST_CHUNK, race_run), _served(FIRST_CHUNK, race_run)
    triton = _fastest_triton(LAST_CHUNK, race_run)
    pair = _pair(run=sweep_run)
    at = pair.loc[LONG]
    honest = serving.agreement(run=serving.GLUON_AGREEMENT_RUN)
    windows = serving.attention_kernels(run=sweep_run)
    flash = sorted({name for w in windows.values() for name in w["flash"]})
    return _agreement_check("gluon_", serving.GLUON_AGREEMENT_RUN, serving.GLUON_PLANTED_RUN) | {
        "gluon_race_last_chunk_speed": RACE_SPEED.fact(last.vs_fa3, LAST_CHUNK, "ours", fmt="{:.2f}×", run=race_run),
        "gluon_race_last_chunk_ms": RACE_MS.fact(last.ms, LAST_CHUNK, "ours", fmt="{:.2f} ms", run=race_run),
        "gluon_race_last_chunk_fa3_ms": RACE_MS.fact(_row(LAST_CHUNK, run=race_run).ms, LAST_CHUNK, "fa3",
                                                     fmt="{:.2f} ms", run=race_run),
        "gluon_race_first_chunk_speed": RACE_SPEED.fact(first.vs_fa3, FIRST_CHUNK, "ours", fmt="{:.2f}×",
                                                        run=race_run),
        "gluon_race_triton_speed": RACE_SPEED.fact(triton.vs_fa3, LAST_CHUNK, "ours, Triton's best", fmt="{:.2f}×",
                                                   run=race_run),
        "gluon_ttft_ratio_long": TTFT_RATIO.fact(at.ttft_ratio, LONG, fmt="{:.2f}×", run=sweep_run),
        "gluon_itl_ratio_long": ITL_RATIO.fact(at.itl_ratio, LONG, fmt="{:.2f}×", run=sweep_run),
        "gluon_ttft_ratio_max": TTFT_RATIO.fact(pair.ttft_ratio.max(), "largest", fmt="{:.2f}×", run=sweep_run),
        "gluon_ttft_long_s": TTFT.fact(at.ttft_s_ours, OURS.label, LONG, fmt="{:.2f} s", run=sweep_run),
        "gluon_fa3_ttft_long_s": TTFT.fact(at.ttft_s_fa3, FA3.label, LONG, fmt="{:.2f} s", run=sweep_run),
        "gluon_agree_gluon_calls": CALLS.fact(sum(honest["kinds"][k]["calls"] for k in ("prefill", "mixed")),
                                              "prefill and mixed", fmt=",d", run=serving.GLUON_AGREEMENT_RUN),
        "gluon_setting": Fact(_gluon_setting(last.config), RACE_SPEED.source_in(race_run)),
        "gluon_flash_kernels": FLASH_KERNELS.fact(len(flash), fmt="d", run=sweep_run),
        "gluon_prefill_share": WINDOW_SHARE.fact(100 * windows["prefill-8192"]["attention_share"], "prefill-8192",
                                                 fmt="{:.1f}%", run=sweep_run)}


def chunk_counter_facts() -> dict[str, Fact]:
    """The last chunk's counters, ours and FA3's (one ncu call of their own, a later lease than the race)."""
    jobs = _chunk()
    out = {f"chunk_{name}_{key}": quantity.fact(value(job), name, fmt=number + unit)
           for name, job in jobs.items() for key, (_, quantity, value, number, unit) in _CHUNK_ROWS.items()}
    ours, fa3 = jobs["ours"], jobs["fa3"]
    out |= {"chunk_ncu_speed": CHUNK_SPEED.fact(fa3.main["ms"] / ours.main["ms"], fmt="{:.2f}×"),
            "chunk_cycles_ratio": CHUNK_CYCLES_RATIO.fact(ours.main["sm_cycles_sum"] / fa3.main["sm_cycles_sum"],
                                                          fmt="{:.1f}×")}
    return out


def _lengths(values) -> str:
    """Prompt lengths as the prose lists them: ``65,536 and 131,072``; ``none`` for no length."""
    shown = [f"{int(n):,}" for n in values]
    return " and ".join([", ".join(shown[:-1]), shown[-1]] if len(shown) > 1 else shown) or "none"


def arms_facts() -> dict[str, Fact]:
    """The lease that swept every backend beside OURS: each arm's TTFT at each length it ran (``arms_<arm>_ttft_<n>``),
    OURS's over FA3's (``arms_ttft_ratio_<n>``), the others' over OURS's (``arms_<arm>_over_ours_<n>``), each arm's ITL
    after the longest prompt it ran, the lengths where OURS's slowest repeat was shorter than FA3's fastest and by how
    much, OURS's ITL over FA3's, the rows a call's time limit cut short."""
    ttft, itl = _arms(), _arms(metric="itl_ms")
    ours = ttft[OURS.label]
    out = {"arms_long_n": ARMS_LENGTH.fact(int(ours.dropna().index.max()), "longest", fmt=",d"),
           "arms_short_n": ARMS_LENGTH.fact(int(ours.dropna().index.min()), "shortest", fmt=",d")}
    for label in ttft.columns:
        name = names.key(label)
        for n, value in ttft[label].dropna().items():
            out[f"arms_{name}_ttft_{n}"] = ARMS_TTFT.fact(value, label, n, fmt="{:.2f} s")
            if label == FA3.label:
                out[f"arms_ttft_ratio_{n}"] = ARMS_RATIO.fact(ours[n] / value, n, fmt="{:.2f}×")
            elif label != OURS.label:
                out[f"arms_{name}_over_ours_{n}"] = ARMS_OVER.fact(value / ours[n], label, n, fmt="{:.1f}×")
        longest = int(itl[label].dropna().index.max())
        out[f"arms_{name}_longest"] = ARMS_LENGTH.fact(longest, label, fmt=",d")
        out[f"arms_{name}_itl_longest"] = ARMS_ITL.fact(itl[label][longest], label, longest, fmt="{:.2f} ms")
    slowest_ours, fastest_fa3 = _arms(metric="ttft_max_s")[OURS.label], _arms(metric="ttft_min_s")[FA3.label]
    apart = slowest_ours < fastest_fa3
    out["arms_apart"] = Fact(_lengths(apart[apart].index), ARMS_TTFT.source + " (ttft_min_s, ttft_max_s)")
    margin = (1 - slowest_ours / fastest_fa3)[apart]
    out["arms_apart_margin"] = ARMS_MARGIN.fact(100 * margin.max() if len(margin) else None, "largest",
                                                fmt="{:.1f}%")
    itl_ratio = (itl[OURS.label] / itl[FA3.label]).dropna()
    out |= {"arms_itl_ratio_min": ARMS_ITL_RATIO.fact(itl_ratio.min(), "smallest", fmt="{:.2f}×"),
            "arms_itl_ratio_max": ARMS_ITL_RATIO.fact(itl_ratio.max(), "largest", fmt="{:.2f}×")}
    for (label, n), what in serving.arms_partial().items():
        out[f"arms_{names.key(label)}_partial_{n}"] = Fact(what, ARMS_TTFT.source + " (status partial)")
    return out


def split_facts() -> dict[str, Fact]:
    """A server that splits a mixed step's decode rows off (``sload_*``: the load study again, as
    :func:`load_facts`; ``split_*``: its agreement check, honest and with the planted bug)."""
    return ch06c_load.load_facts(serving.LOAD_SPLIT_RUN, "sload") | _agreement_check(
        "split_", serving.SPLIT_AGREEMENT_RUN, serving.SPLIT_PLANTED_RUN)


def mixed_facts() -> dict[str, Fact]:
    """The mixed-step race (``mixed_*``): the step's shape from its provenance, FA3's time and ours with the Gluon
    prefill, the decode rows in its tiles (``chunks``) and split off to the decode kernel (``split``)."""
    run = serving.MIXED_RACE_RUN
    [(name, sequences, _, keys)] = serving.raced_steps(run=run)
    decodes, prompts, tokens = map(int, re.fullmatch(r"mixed (\d+) decodes \+ (\d+) x (\d+)", name).groups())
    if decodes + prompts != sequences:
        raise LabError(f"data/{run}/provenance.json: step {name!r} does not hold its {sequences} sequences")
    race = _race(run=run)
    gluon = race[race.config.fillna("").str.contains('"gluon"')]
    chunks = gluon[gluon.candidate.str.endswith("decodes with the chunks")].iloc[0]
    split = gluon[gluon.candidate.str.endswith("decodes to the decode kernel")].iloc[0]
    fa3 = _row(name, run=run)
    counted = serving.mixed_counters()
    programs = {f"mixed_{candidate.replace('-', '_')}_programs": MIXED_PROGRAMS.fact(
        int(counted[candidate].main["programs"]), candidate, fmt=",d") for candidate in MIXED_CANDIDATES}
    return programs | {"mixed_decodes": MIXED_SHAPE.fact(decodes, "decoding sequences", fmt="d"),
            "mixed_keys": MIXED_SHAPE.fact(keys, "keys", fmt=",d"),
            "mixed_prompts": MIXED_SHAPE.fact(prompts, "new prompts", fmt="d"),
            "mixed_prompt_tokens": MIXED_SHAPE.fact(tokens, "tokens each", fmt=",d"),
            "mixed_fa3_ms": RACE_MS.fact(fa3.ms, name, "fa3", fmt="{:.3f} ms", run=run),
            "mixed_chunks_ms": RACE_MS.fact(chunks.ms, name, chunks.candidate, fmt="{:.3f} ms", run=run),
            "mixed_split_ms": RACE_MS.fact(split.ms, name, split.candidate, fmt="{:.3f} ms", run=run),
            "mixed_chunks_speed": RACE_SPEED.fact(chunks.vs_fa3, name, chunks.candidate, fmt="{:.2f}×", run=run),
            "mixed_split_speed": RACE_SPEED.fact(split.vs_fa3, name, split.candidate, fmt="{:.2f}×", run=run)}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 6c and its self-check state, by glue name."""
    model, origin = qwen25_7b(), "lab.results.modelshape: Qwen2.5-7B config.json"
    shape = {"layers": Fact(model.layers, origin), "q_heads": Fact(model.q_heads, origin),
             "kv_heads": Fact(model.kv_heads, origin), "group": Fact(model.q_heads // model.kv_heads, origin),
             "tile_rows": Fact(ROWS, "lab.measure.attention.hopper.ROWS")}
    return (shape | sweep_facts() | race_facts() | chunk_counter_facts() | agreement_facts() | census_facts()
            | gluon_facts() | arms_facts() | fa2_facts() | ch06c_load.load_facts() | mixed_facts() | split_facts()
            | ch06c_load.once_facts())


def sweep_table(run: str = serving.SWEEP_RUN):
    """Both arms at every prompt length they ran, and OURS over FA3."""
    p = _pair(run=run).reset_index()
    columns = {"prompt (tokens)": (p.target_len, "{:,d}"), "FA3 TTFT (s)": (p.ttft_s_fa3, "{:.3f}"),
               "OURS TTFT (s)": (p.ttft_s_ours, "{:.3f}"), "TTFT, OURS / FA3": (p.ttft_ratio, "{:.2f}×"),
               "FA3 ITL (ms)": (p.itl_ms_fa3, "{:.2f}"), "OURS ITL (ms)": (p.itl_ms_ours, "{:.2f}"),
               "ITL, OURS / FA3": (p.itl_ratio, "{:.2f}×")}
    table = pd.DataFrame({name: values for name, (values, _) in columns.items()})
    return table.style.hide(axis="index").format({name: fmt for name, (_, fmt) in columns.items()})


def _thousands(label: str) -> str:
    """A step's or a setting's name with its token counts written as the prose writes them (24,576)."""
    return re.sub(r"\d{4,}", lambda m: f"{int(m.group()):,}", label)


def race_table():
    """The serving race: each step, FA3 and ours as the server ran it, their times and our speed over FA3's."""
    rows = []
    for step in (FIRST_CHUNK, LAST_CHUNK, DECODE_ONE, DECODE_16):
        ours = _served(step)
        rows.append({"step": _thousands(step.replace(" x ", " × ")), "FA3 (ms)": _row(step).ms, "ours (ms)": ours.ms,
                     "ours, speed over FA3": ours.vs_fa3, "our setting": _thousands(ours.candidate[4:].strip(" ,"))})
    fmt = {"FA3 (ms)": "{:.3f}", "ours (ms)": "{:.3f}", "ours, speed over FA3": "{:.2f}×"}
    return pd.DataFrame(rows).style.hide(axis="index").format(fmt)


def gluon_sweep_table():
    """The later lease's sweep: FA3 and OURS with the Gluon prefill at each prompt length they ran."""
    return sweep_table(serving.GLUON_SWEEP_RUN)


def gluon_race_table():
    """The later lease's race at the two prefill steps: FA3, Triton's fastest setting and the Gluon kernel's."""
    run, rows = serving.GLUON_RACE_RUN, []
    for step in (FIRST_CHUNK, LAST_CHUNK):
        triton, gluon = _fastest_triton(step, run), _served(step, run)
        rows.append({"step": _thousands(step), "FA3 (ms)": _row(step, run=run).ms, "Triton (ms)": triton.ms,
                     "Triton, speed over FA3": triton.vs_fa3, "Gluon (ms)": gluon.ms,
                     "Gluon, speed over FA3": gluon.vs_fa3})
    fmt = {"FA3 (ms)": "{:.3f}", "Triton (ms)": "{:.3f}", "Gluon (ms)": "{:.3f}", "Triton, speed over FA3": "{:.2f}×",
           "Gluon, speed over FA3": "{:.2f}×"}
    return pd.DataFrame(rows).style.hide(axis="index").format(fmt)


def arms_table():
    """Every backend's TTFT at each prompt length of the lease that swept them beside OURS, FA3 and OURS first with
    OURS's TTFT and ITL over FA3's; a row a call's time limit cut short is marked and the caption says what it has."""
    ttft, itl, partial = _arms(), _arms(metric="itl_ms"), serving.arms_partial()
    table = pd.DataFrame({"prompt (tokens)": [f"{n:,d}" for n in ttft.index]})

    def times(label):
        return [("not run" if pd.isna(v) else f"{1000 * v:,.1f}") + ("*" if (label, n) in partial else "")
                for n, v in ttft[label].items()]

    order = [FA3.label, OURS.label] + [label for label in ttft.columns if label not in (FA3.label, OURS.label)]
    for label in order[:2]:
        table[f"{label} TTFT (ms)"] = times(label)
    table["TTFT, OURS / FA3"] = [f"{v:.2f}×" for v in ttft[OURS.label] / ttft[FA3.label]]
    table["ITL, OURS / FA3"] = [f"{v:.2f}×" for v in itl[OURS.label] / itl[FA3.label]]
    for label in order[2:]:
        table[f"{label} TTFT (ms)"] = times(label)
    notes = "; ".join(f"* {label} at {n:,d} tokens: {what}" for (label, n), what in partial.items())
    return table.style.hide(axis="index").set_caption(notes or None)


def counters_table():
    """The last chunk's kernel under Nsight Compute, a row per counter, a column per call of the race's chunk
    candidates (FA3's varlen call, ours), headed as the race names them."""
    jobs = _chunk()
    rows = _CHUNK_ROWS.values()
    table = pd.DataFrame({"counter": [row for row, *_ in rows]} |
                         {name: [number.format(value(jobs[name])) for _, _, value, number, _ in rows]
                          for name in CHUNK_CANDIDATES})
    return table.style.hide(axis="index")
