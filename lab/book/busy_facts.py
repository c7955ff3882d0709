"""The facts of the busy-server chapter (book/06b-busy-server.md): load curves, the probe-vs-bench check,
a long prompt among decoders, and the FP8 KV cache. Every value from data through lab.results; a study
that is not on file gives "not measured yet", never a typed number."""

from __future__ import annotations

from lab.book.facts import Fact, shown
from lab.measure.vllm import arms
from lab.results import concurrency as rc
from lab.results import interference as ri
from lab.results import load as rl
from lab.results.modelshape import qwen25_7b
from lab.store import DATA_DIR

#: The SLO the chapter scores goodput against (vllm bench serve's --goodput of the run).
SLO = {"ttft": 500.0, "tpot": 50.0}
#: The glue-name prefix of each backend the study ran (the arms themselves are lab.measure.vllm.arms').
GLUE_PREFIX = {"fa3": arms.FA3, "flex": arms.FLEX, "triton": arms.TRITON}
LOAD_SRC = "data/h200/vllm0.26-qwen2.5-7b-load/random-1024-128"
INTER_SRC = f"data/h200/{ri.STUDY}"
CONC_SRC = f"data/{rc.H200_STUDY}"
LONG_CONTEXT = 32768


def load_facts(study: rl.LoadStudy) -> dict:
    """Per arm: capacity, the lightest and heaviest Poisson points, the highest rate within the SLO."""
    out = {"slo_ttft_ms": Fact(SLO["ttft"], "lab.book.busy_facts.SLO"),
           "slo_tpot_ms": Fact(SLO["tpot"], "lab.book.busy_facts.SLO")}
    for name, label in ((n, a.label) for n, a in GLUE_PREFIX.items()):
        rows = study.points.get(label, [])
        poisson = rl.poisson_points(rows)
        cap = rl.capacity(rows)
        low, high = (poisson[0], poisson[-1]) if poisson else ({}, {})
        best = rl.highest_rate_meeting(rows, SLO) if rows else None
        out |= {f"{name}_capacity": shown(cap, ".1f", LOAD_SRC),
                f"{name}_rates": shown(len(poisson) or None, "d", LOAD_SRC),
                f"{name}_low_rate": shown(low.get("rate"), "g", LOAD_SRC),
                f"{name}_high_rate": shown(high.get("rate"), "g", LOAD_SRC),
                f"{name}_low_p99_ttft": shown(low.get("p99_ttft_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_high_p99_ttft": shown(high.get("p99_ttft_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_low_p99_itl": shown(low.get("p99_itl_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_high_p99_itl": shown(high.get("p99_itl_ms"), ".0f", LOAD_SRC, " ms"),
                f"{name}_low_p50_itl": shown(low.get("p50_itl_ms"), ".1f", LOAD_SRC, " ms"),
                f"{name}_high_throughput": shown(high.get("request_throughput"), ".1f", LOAD_SRC),
                f"{name}_high_goodput": shown(high.get("goodput_bench"), ".1f", LOAD_SRC),
                f"{name}_slo_rate": shown(best, "g", LOAD_SRC)}
    fa3 = study.points.get(arms.FA3.label, [])
    out["fa3_capacity_p50_ttft"] = shown(next((r["p50_ttft_ms"] for r in fa3 if r["rate"] is None
                                               and not r["max_concurrency"]), None), ".0f", LOAD_SRC, " ms")
    return out


def agreement_facts(study: rl.LoadStudy) -> dict:
    folder = study.folders.get(arms.FA3.label)
    found = rl.agreement(folder) if folder else {"measured": False}
    src = f"{LOAD_SRC}/{arms.FA3.slug}/rate-inf-c1.json + probe.jsonl"

    def value(key, fmt, suffix=""):
        return shown(found.get(key) if found["measured"] else None, fmt, src, suffix)

    return {"agree_requests": value("requests", "d"), "agree_bench_ttft": value("bench_ttft_ms", ".1f", " ms"),
            "agree_probe_ttft": value("probe_ttft_ms", ".1f", " ms"), "agree_bench_itl": value("bench_itl_ms", ".2f", " ms"),
            "agree_probe_itl": value("probe_itl_ms", ".2f", " ms"),
            "agree_ttft_pct": shown(100 * (found["ttft_ratio"] - 1) if found["measured"] else None, "+.1f", src, "%"),
            "agree_itl_pct": shown(100 * (found["itl_ratio"] - 1) if found["measured"] else None, "+.1f", src, "%"),
            "agree_bench_ttft_median": value("bench_ttft_median_ms", ".1f", " ms"),
            "agree_probe_ttft_median": value("probe_ttft_median_ms", ".1f", " ms"),
            "agree_within": Fact(("within" if found.get("within") else "not within") if found["measured"] else None,
                                 src)}


def interference_facts(trials: list[ri.TrialSummary]) -> dict:
    """The chunk-size trade on FA3 (8 decoders, the longest prompt) and the backends at vLLM's default chunk."""
    out = {}
    fa3 = arms.FA3.label
    long_lens = sorted({t.long_len for t in trials if t.arm == fa3})
    longest = long_lens[-1] if long_lens else None
    out["inter_long_len"] = shown(longest, ",d", INTER_SRC)
    out["inter_short_len"] = shown(long_lens[0] if long_lens else None, ",d", INTER_SRC)
    for chunk in (2048, 8192):
        for decoders, length, tag in ((8, longest, "8l"), (32, long_lens[0] if long_lens else None, "32s")):
            trial = ri.find(trials, fa3, chunk, decoders, length) if length else None
            key = f"inter_fa3_{chunk}_{tag}"
            out[f"{key}_ttft"] = shown(trial.long_ttft_s if trial else None, ".2f", INTER_SRC, " s")
            out[f"{key}_max"] = shown(trial.during_max_ms if trial else None, ".0f", INTER_SRC, " ms")
            out[f"{key}_steady"] = shown(trial.steady_ms if trial else None, ".1f", INTER_SRC, " ms")
    for tag in ("8l", "32s"):
        small, big = (ri.find(trials, fa3, c, 8 if tag == "8l" else 32, longest if tag == "8l" else
                              (long_lens[0] if long_lens else None)) for c in (2048, 8192))
        both = small is not None and big is not None
        out[f"inter_{tag}_stall_cut"] = shown(big.during_max_ms / small.during_max_ms if both else None, ".1f",
                                              INTER_SRC, "×")
        out[f"inter_{tag}_ttft_cost"] = shown(100 * (small.long_ttft_s / big.long_ttft_s - 1) if both else None,
                                              ".0f", INTER_SRC, "%")
    for name, label in ((n, a.label) for n, a in GLUE_PREFIX.items()):
        trial = ri.find(trials, label, 8192, 8, 32768)
        out[f"inter_{name}_ttft"] = shown(trial.long_ttft_s if trial else None, ".1f", INTER_SRC, " s")
        out[f"inter_{name}_max"] = shown(trial.during_max_ms if trial else None, ",.0f", INTER_SRC, " ms")
        out[f"inter_{name}_steady"] = shown(trial.steady_ms if trial else None, ".1f", INTER_SRC, " ms")
    return out


def fp8_facts(root=DATA_DIR) -> dict:
    """Bytes per token, KV capacity and decode steps at the long context, bf16 against FP8 (FA3)."""
    shape = qwen25_7b()
    bandwidth, _ = rc.floor_bandwidth()
    table = rc.with_floor(rc.load_points(root=root), bandwidth)
    out = {"fp8_context": Fact(LONG_CONTEXT, "lab.book.busy_facts.LONG_CONTEXT"),
           "kv_token_bf16": Fact(shape.kv_bytes_per_token(2), "lab.results.modelshape.qwen25_7b", ",d"),
           "kv_token_fp8": Fact(shape.kv_bytes_per_token(1), "lab.results.modelshape.qwen25_7b", ",d")}
    for tag, arm in (("bf16", arms.FA3), ("fp8", arms.FA3_FP8)):
        rows = table[(table["arm"] == arm.label) & (table["context"] == LONG_CONTEXT)] if not table.empty else table
        top = rc.point(table, arm.label, LONG_CONTEXT, int(rows["concurrency"].max())) if len(rows) else None
        one = rc.point(table, arm.label, LONG_CONTEXT, 1)
        tokens = rc.kv_cache_tokens(arm.label, root=root)
        limit = rc.max_model_len(arm.label, root=root)
        out |= {f"fp8_{tag}_cache_tokens": shown(tokens, ",d", CONC_SRC),
                f"fp8_{tag}_fits": shown(tokens / limit if tokens and limit else None, ".1f", CONC_SRC),
                f"fp8_{tag}_top_n": shown(top["concurrency"] if top else None, "d", CONC_SRC),
                f"fp8_{tag}_top_admitted": shown(top["admitted"] if top else None, "d", CONC_SRC),
                f"fp8_{tag}_top_itl": shown(top["itl_ms"] if top else None, ".1f", CONC_SRC, " ms"),
                f"fp8_{tag}_top_floor": shown(top["floor_ms"] if top else None, ".1f", CONC_SRC, " ms"),
                f"fp8_{tag}_top_x_floor": shown(top["itl_x_floor"] if top else None, ".2f", CONC_SRC, "×"),
                f"fp8_{tag}_top_tok_s": shown(top["decode_tok_s"] if top else None, ",.0f", CONC_SRC),
                f"fp8_{tag}_one_itl": shown(one["itl_ms"] if one else None, ".2f", CONC_SRC, " ms")}
    out["fp8_limit"] = shown(rc.max_model_len(arms.FA3_FP8.label, root=root), ",d", CONC_SRC)
    return out


def chapter06b(root=DATA_DIR) -> dict:
    study = rl.load_study(root=root / "h200")
    return (load_facts(study) | agreement_facts(study) | interference_facts(ri.read_trials(root / "h200"))
            | fp8_facts(root))
