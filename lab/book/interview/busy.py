"""The busy server in the interview and the course kit: chapter 6b's facts (lab.book.pages.ch06b), the method's
settings (lab.book.pages.busy_method) and what the answers add on the same data.

    slo      per arm, where the SLO breaks: the highest rate within it (lab.results.load.highest_rate_meeting),
             the next measured rate, which p99 broke there, utilisation (rate over the measured capacity) and
             requests in flight by Little's law
    curve    FA3's load curve per fraction of its capacity, beside the 1/(1 - rho) of the simplest queue
    prompt   a long prompt among decoders (lab.results.interference): the gaps' medians, 32 decoders under the
             longest prompt, and what a decoder's stream slows to
    fp8      an FP8 KV cache against bf16 at the largest batch both admitted whole, and E4M3's range

Values only (a fact that may be missing reads "not measured yet"); the sentences live in the chapters.
"""

from __future__ import annotations

from pathlib import Path

from lab import names
from lab.book.pages.busy_method import method_facts
from lab.book.facts import Fact, shown
from lab.book.pages.ch06b import CONC_SRC, INTER_SRC, LOAD_SRC, LONG_CONTEXT, SLO, STUDY_ARMS
from lab.book.pages.ch06b import facts as chapter06b
from lab.measure.vllm import arms
from lab.results import concurrency as rc
from lab.results import interference as ri
from lab.results import load as rl
from lab.store import DATA_DIR

#: Rows of the course kit's load-curve table (the study's six fractions of capacity).
CURVE_POINTS = 6
MM1 = "lab.book.interview.busy: 1 / (1 - rho) of an M/M/1 queue"
#: The method appendix's settings the answers quote (lab.book.pages.busy_method).
QUOTED_SETTINGS = ("bm_input_len", "bm_output_len", "bm_chunk", "bm_inter_ctx_lo", "bm_inter_ctx_hi")


def _meets(row: dict, slo: dict) -> bool:
    return all(row[f"p99_{metric}_ms"] <= limit for metric, limit in slo.items())


def slo_break(rows: list[dict], slo: dict = SLO) -> tuple[dict | None, dict | None]:
    """(the highest Poisson point within the SLO, the next measured point above it); None where there is none."""
    poisson = rl.poisson_points(rows)
    best = rl.highest_rate_meeting(rows, slo)
    within = next((r for r in poisson if r["rate"] == best), None)
    above = [r for r in poisson if best is None or r["rate"] > best]
    return within, (above[0] if above else None)


def broken_metrics(row: dict | None, slo: dict = SLO) -> str | None:
    """Which p99 of ``row`` is over its limit ("TTFT", "TPOT", "TTFT and TPOT"); None without a row."""
    if row is None:
        return None
    over = [metric.upper() for metric, limit in slo.items() if row[f"p99_{metric}_ms"] > limit]
    return " and ".join(over) or None


def slo_facts(study: rl.LoadStudy) -> dict:
    """Per arm: the rate within the SLO and the one that breaks it, with utilisation, p99s and requests in flight."""
    out = {}
    for name, label in ((names.key(a.label), a.label) for a in STUDY_ARMS):
        rows = study.points.get(label, [])
        cap = rl.capacity(rows)
        within, broke = slo_break(rows) if rows else (None, None)
        low = (rl.poisson_points(rows) or [None])[0]
        rho = lambda row, cap=cap: row["rate"] / cap if row and cap else None  # noqa: E731
        at = lambda row, key: row[key] if row else None  # noqa: E731
        out |= {f"{name}_slo_rho": shown(rho(within), ".2f", LOAD_SRC),
                f"{name}_slo_p99_ttft": shown(at(within, "p99_ttft_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_slo_p99_tpot": shown(at(within, "p99_tpot_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_break_rate": shown(at(broke, "rate"), "g", LOAD_SRC),
                f"{name}_break_rho": shown(rho(broke), ".2f", LOAD_SRC),
                f"{name}_break_p99_ttft": shown(at(broke, "p99_ttft_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_break_p99_tpot": shown(at(broke, "p99_tpot_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_break_throughput": shown(at(broke, "request_throughput"), ".1f", LOAD_SRC),
                f"{name}_break_metric": Fact(broken_metrics(broke), LOAD_SRC),
                f"{name}_low_p50_tpot": shown(at(low, "p50_tpot_ms"), ".1f", LOAD_SRC, " ms"),
                f"{name}_low_in_flight": shown(rl.in_flight(low) if low else None, ".0f", LOAD_SRC),
                f"{name}_slo_in_flight": shown(rl.in_flight(within) if within else None, ".0f", LOAD_SRC),
                f"{name}_break_in_flight": shown(rl.in_flight(broke) if broke else None, ".0f", LOAD_SRC)}
    return out


def curve_facts(study: rl.LoadStudy) -> dict:
    """FA3's Poisson points, lowest rate first: rate, utilisation, p99 TTFT and p50 TPOT, and what the simplest
    queue (one server of fixed speed, M/M/1) predicts for the mean wait, 1 / (1 - rho) service times."""
    rows = study.points.get(arms.FA3.label, [])
    cap, poisson = rl.capacity(rows), rl.poisson_points(rows)
    out = {}
    for i in range(CURVE_POINTS):
        row = poisson[i] if i < len(poisson) else None
        rho = row["rate"] / cap if row and cap else None
        mm1 = None if rho is None else (1 / (1 - rho) if rho < 1 else "no steady state")
        out |= {f"curve_{i + 1}_rate": shown(row["rate"] if row else None, "g", LOAD_SRC),
                f"curve_{i + 1}_rho": shown(rho, ".2f", LOAD_SRC),
                f"curve_{i + 1}_mm1": shown(mm1, ".1f", MM1, "×") if not isinstance(mm1, str) else Fact(mm1, MM1),
                f"curve_{i + 1}_p99_ttft": shown(row["p99_ttft_ms"] if row else None, ".0f", LOAD_SRC, " ms"),
                f"curve_{i + 1}_p50_tpot": shown(row["p50_tpot_ms"] if row else None, ".1f", LOAD_SRC, " ms")}
    return out


def prompt_facts(trials: list[ri.TrialSummary]) -> dict:
    """The longest prompt among FA3's decoders, beside chapter 6b's: the median gap while it prefills (every step
    then carries a chunk of it), the 32 decoders under it, and a decoder's tokens per second before and during."""
    fa3 = arms.FA3.label
    lengths = sorted({t.long_len for t in trials if t.arm == fa3})
    chunks = sorted({t.chunk for t in trials if t.arm == fa3 and t.chunk})
    out = {"inter_chunk_small": shown(chunks[0] if chunks else None, ",d", INTER_SRC, " tokens"),
           "inter_chunk_big": shown(chunks[-1] if len(chunks) > 1 else None, ",d", INTER_SRC, " tokens")}
    longest = lengths[-1] if lengths else None
    out |= {"inter_8l_decoders": shown(None, "d", INTER_SRC), "inter_32l_decoders": shown(None, "d", INTER_SRC)}
    for chunk in (2048, 8192):  # chapter 6b's names: inter_fa3_<chunk>_<decoders><l: the longest prompt>_*
        for tag, decoders, length in (("8l", 8, longest), ("32l", 32, longest)):
            trial = ri.find(trials, fa3, chunk, decoders, length) if length else None
            key = f"inter_fa3_{chunk}_{tag}"
            if trial and not out[f"inter_{tag}_decoders"].measured:  # how many decoded, as the trial recorded
                out[f"inter_{tag}_decoders"] = shown(trial.decoders, "d", INTER_SRC)
            out[f"{key}_median"] = shown(trial.during_median_ms if trial else None, ".0f", INTER_SRC, " ms")
            if tag == "32l":
                out |= {f"{key}_ttft": shown(trial.long_ttft_s if trial else None, ".2f", INTER_SRC, " s"),
                        f"{key}_max": shown(trial.during_max_ms if trial else None, ".0f", INTER_SRC, " ms"),
                        f"{key}_steady": shown(trial.steady_ms if trial else None, ".1f", INTER_SRC, " ms"),
                        f"{key}_steady_tok_s": shown(1000 / trial.steady_ms if trial else None, ".0f", INTER_SRC,
                                                    " tokens/s"),
                        f"{key}_during_tok_s": shown(1000 / trial.during_median_ms if trial else None, ".0f",
                                                     INTER_SRC, " tokens/s")}
    return out


def fp8_facts(root: Path = DATA_DIR) -> dict:
    """FP8 against bf16 at 32k (FA3): the cache's growth, the largest concurrency both arms ran whole with its ITL
    and floor, the throughput gain at the top, and the range of the FP8 format vLLM stores (E4M3)."""
    bandwidth, _ = rc.floor_bandwidth()
    table = rc.with_floor(rc.load_points(root=root), bandwidth)
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
    ratio = lambda a, b: a / b if a is not None and b else None  # noqa: E731
    value = lambda tag, key: at[tag][key] if at[tag] else None  # noqa: E731
    out = {"fp8_cache_x": shown(ratio(tokens["fp8"], tokens["bf16"]), ".2f", CONC_SRC, "×"),
           "fp8_same_n": shown(same, "d", CONC_SRC),
           "fp8_tok_s_gain": shown(ratio(*(tops[t]["decode_tok_s"] if tops[t] else None for t in ("fp8", "bf16"))),
                                   ".2f", CONC_SRC, "×"),
           "fp8_e4m3_max": Fact(_e4m3_max(), "torch.finfo(torch.float8_e4m3fn).max", "{:.0f}")}
    for tag in ("bf16", "fp8"):
        out |= {f"fp8_{tag}_same_itl": shown(value(tag, "itl_ms"), ".1f", CONC_SRC, " ms"),
                f"fp8_{tag}_same_floor": shown(value(tag, "floor_ms"), ".1f", CONC_SRC, " ms"),
                f"fp8_{tag}_same_x_floor": shown(value(tag, "itl_x_floor"), ".2f", CONC_SRC, "×")}
    cut = lambda key: 100 * (1 - value("fp8", key) / value("bf16", key)) if at["fp8"] and at["bf16"] else None  # noqa: E731
    out |= {"fp8_same_itl_cut_pct": shown(cut("itl_ms"), ".0f", CONC_SRC, "%"),
            "fp8_same_floor_cut_pct": shown(cut("floor_ms"), ".0f", CONC_SRC, "%")}
    return out


def _e4m3_max() -> float:
    """The largest finite value of the FP8 format vLLM's FA3 path stores and computes in (float8_e4m3fn)."""
    import torch  # only here: the rest of the interview's facts need no torch

    return float(torch.finfo(torch.float8_e4m3fn).max)


def facts(root: Path | None = None) -> dict[str, Fact]:
    """Chapter 6b's facts, the method appendix's settings the answers quote, and the interview's additions, every
    one from data (or "not measured yet")."""
    root = DATA_DIR if root is None else Path(root)
    study = rl.load_study(root=root / "h200")
    settings = {name: fact for name, fact in method_facts(root).items() if name in QUOTED_SETTINGS}
    added = (settings | slo_facts(study) | curve_facts(study) | prompt_facts(ri.read_trials(root / "h200"))
             | fp8_facts(root))
    return added | chapter06b(root)  # a name chapter 6b states is chapter 6b's fact
