"""Chapter 6b, a busy server: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.facts import Fact
from lab.book.pages import ch06b
from lab.book.quiz import Cited, Question, Quiz, chapter_quiz

KEY = "06b-busy-server"


def _cited(facts: dict[str, Fact], names: dict[str, tuple[str, str]]) -> dict[str, Cited] | None:
    """placeholder -> Cited(fact, format) for ``names`` (placeholder -> (fact name, format)); None when one is
    not measured."""
    if not all(facts[name].measured and not isinstance(facts[name].value, str) for name, _ in names.values()):
        return None
    return {key: Cited(facts[name], fmt) for key, (name, fmt) in names.items()}


def questions() -> list[Question]:
    facts = ch06b.facts()
    return [q for make in (_queueing, _flex_tpot, _chunk_trade, _fp8_limits) for q in make(facts)]


def _queueing(facts: dict) -> list[Question]:
    points = {f"{what}{i}": (f"curve_{i}_{key}", fmt) for i in (1, 3, 5, 6)
              for what, key, fmt in (("r", "rate", "g"), ("q", "rho", ".2f"), ("t", "p99_ttft", ".0f"))}
    cites = _cited(facts, {**points, "m2": ("curve_2_mm1", ".0f"), "q2": ("curve_2_rho", ".2f"),
                           "low": ("fa3_low_in_flight", ".0f"), "high": ("fa3_break_in_flight", ".0f")})
    if cites is None:
        return []
    return [Question(
        "In vLLM on the H200 with FA3, Poisson arrivals at {r1}, {r3}, {r5} and {r6} requests/s ({q1}, {q3}, {q5} and "
        "{q6} of the capacity measured with every prompt sent at once) gave a p99 TTFT of {t1}, {t3}, {t5} and {t6} "
        "ms. Why does the tail climb so steeply at the end?",
        ["Waiting grows like one over the idle fraction, so near capacity each bit of rate adds queue",
         "The GPU lowers its clock under sustained load, and that slows every kernel of every step alike",
         "Prefill attention is quadratic, and a higher request rate makes each prompt longer to process",
         "The benchmark client cannot send requests fast enough, so its own timestamps drift at high rates"],
        0,
        "Utilisation ρ is the arrival rate over the rate the server completes requests. In the simplest queue (M/M/1, "
        "first come first served) the time in the system is exponential with mean service time / (1 − ρ) ({m2} times "
        "it at ρ = {q2}), so every percentile, the p99 too, scales by that same 1 / (1 − ρ); past ρ = 1 there is no "
        "steady state. Requests in flight by Little's law (rate × mean latency) went from {low} to {high}. The "
        "capacity here is what a burst of prompts completes, a conservative stand-in for what the server sustains "
        "(at its last point, ρ = {q6} of it, FA3 still completed more than the burst rate), so the ρ values overstate "
        "the load; a batching server also bends later than that queue, since a bigger batch makes each step do more "
        "work. But it bends.",
        cites=cites,
        holds=lambda v: (v["t6"] - v["t5"]) / (v["r6"] - v["r5"]) > 3 * (v["t3"] - v["t1"]) / (v["r3"] - v["r1"]),
    )]


def _flex_tpot(facts: dict) -> list[Question]:
    cites = _cited(facts, {"ok": ("flex_slo_rate", "g"), "bad": ("flex_break_rate", "g"),
                           "rho": ("flex_break_rho", ".2f"), "ttft": ("flex_break_p99_ttft", ".0f"),
                           "tpot": ("flex_break_p99_tpot", ".0f"), "slo_ttft": ("slo_ttft_ms", ".0f"),
                           "slo_tpot": ("slo_tpot_ms", ".0f"), "flex_tpot": ("flex_low_p50_tpot", ".1f"),
                           "fa3_tpot": ("fa3_low_p50_tpot", ".1f"), "flight": ("flex_break_in_flight", ".0f")})
    if cites is None:
        return []
    return [Question(
        "The targets were TTFT within {slo_ttft} ms and TPOT within {slo_tpot} ms, scored at the p99 of each rate's "
        "requests. FLEX_ATTENTION met them up to {ok} "
        "requests/s and broke it at {bad} ({rho} of its capacity), with p99 TTFT {ttft} ms but p99 TPOT {tpot} ms. "
        "Why does it break on TPOT, so far below capacity?",
        ["Its decode step is slow, and every request in flight lengthens every step",
         "Its prefill is slow, so prompts queue and TTFT is the target it misses first",
         "Its KV cache fills, so vLLM preempts requests and recomputes their prompts",
         "Its kernels compile on the first requests, and those stalls land in TPOT"],
        0,
        "At the lightest load FLEX's p50 TPOT was {flex_tpot} ms against FA3's {fa3_tpot}: vLLM's Flex decode is the "
        "slow part. Every request in flight shares each engine step, so TPOT grows with the batch; {flight} in flight "
        "was already too many for the target, while the prefills kept TTFT within it.",
        cites=cites,
        holds=lambda v: v["tpot"] > v["slo_tpot"] and v["ttft"] <= v["slo_ttft"] and v["flex_tpot"] > 2 * v["fa3_tpot"],
    )]


def _chunk_trade(facts: dict) -> list[Question]:
    cites = _cited(facts, {"long": ("inter_long_len", ",d"), "steady": ("inter_fa3_8192_8l_steady", ".1f"),
                           "small": ("inter_chunk_small", ",d"), "big": ("inter_chunk_big", ",d"),
                           "max_small": ("inter_fa3_2048_8l_max", ".0f"), "max_big": ("inter_fa3_8192_8l_max", ".0f"),
                           "ttft_small": ("inter_fa3_2048_8l_ttft", ".2f"),
                           "ttft_big": ("inter_fa3_8192_8l_ttft", ".2f"), "n": ("inter_8l_decoders", "d"),
                           "per_step": ("chunkcost_8l_per_step_ms", ".1f")})
    if cites is None:
        return []
    return [Question(
        "A {long}-token prompt arrives while {n} requests decode with FA3 (a steady gap of {steady} ms between their "
        "tokens). With max_num_batched_tokens at {big}, the decoders' worst gap was {max_big} ms and the prompt's TTFT "
        "{ttft_big} s; at {small}, {max_small} ms and {ttft_small} s. What does the setting trade?",
        ["Shorter stalls for the decoders against a slightly later first token for the long prompt",
         "Nothing: the smaller chunk makes every step shorter and the whole prefill faster as well",
         "KV memory: a smaller chunk reserves less cache for the decoders while the prompt is read",
         "Accuracy: a smaller chunk lets each query attend to fewer of the earlier prompt tokens"],
        0,
        "An engine step has a budget of max_num_batched_tokens: one token for each decoding request, the rest a chunk "
        "of the prompt, and every decoder waits for the whole step. A smaller chunk makes each step shorter; the "
        "prompt then takes more steps, and each extra step has its fixed work and smaller, less efficient matmuls, so "
        "its first token comes later: here {per_step} ms per extra step.",
        cites=cites,
        holds=lambda v: v["max_small"] < 0.5 * v["max_big"] and v["ttft_big"] < v["ttft_small"] < 1.25 * v["ttft_big"],
    )]


def _fp8_limits(facts: dict) -> list[Question]:
    cites = _cited(facts, {"fp8_tokens": ("fp8_fp8_cache_tokens", ",d"), "bf16_tokens": ("fp8_bf16_cache_tokens", ",d"),
                           "n": ("fp8_bf16_top_n", "d"), "ctx": ("fp8_context", ",d"),
                           "fp8_adm": ("fp8_fp8_top_admitted", "d"), "bf16_adm": ("fp8_bf16_top_admitted", "d"),
                           "fp8_itl": ("fp8_fp8_top_itl", ".1f"), "bf16_itl": ("fp8_bf16_top_itl", ".1f"),
                           "bytes_bf16": ("kv_token_bf16", ",d"), "bytes_fp8": ("kv_token_fp8", ",d")})
    if cites is None:
        return []
    return [Question(
        "With `--kv-cache-dtype fp8` (FA3 on the H200, random weights), vLLM's log reported a KV cache of {fp8_tokens} "
        "tokens against {bf16_tokens} in bf16; of {n} requests of {ctx} tokens it ran {fp8_adm} at once against "
        "{bf16_adm}, and a decode step took {fp8_itl} ms against {bf16_itl} ms. What can this run not tell you?",
        ["Whether the answers stay as good, with random weights and default scales",
         "Whether each token's keys and values take half the bytes they took in bf16",
         "Whether more long requests fit into the same GPU memory at the same time",
         "Whether a decode step gets shorter when the cache it reads is smaller"],
        0,
        "Each of the others is measured here: {bytes_bf16} against {bytes_fp8} bytes per token, twice the tokens, "
        "every request admitted, a shorter step. Accuracy needs real weights and an evaluation. vLLM 0.26 keeps one "
        "scale per layer for K, V and the queries, left at 1.0 unless the checkpoint carries them "
        "(`set_default_quant_scales`); with FA3 the queries are quantized too, so QKᵀ runs in FP8.",
        cites=cites,
        holds=lambda v: (abs(v["fp8_tokens"] / v["bf16_tokens"] - 2) < 0.02 and v["fp8_adm"] > v["bf16_adm"]
                         and v["fp8_itl"] < v["bf16_itl"]),
    )]



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
