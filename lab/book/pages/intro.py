"""The introduction: the short answer's figure and every number it states.

    glue_all(intro.facts())          # the one hidden cell
    intro.answer_figure(), intro.explorer()

The runs it reads, each once, through :mod:`lab.results.sweeps`: the published A10G study
(data/reference/a10g-vllm0.11-qwen2.5-7b) and our H200 prompt-length sweeps (data/h200/vllm0.26-qwen2.5-7b).
For each GPU it states FlexAttention's time over FlashAttention's at the shortest and the longest prompt both
arms ran (the fits of those sweeps are chapter 6's).

Glue names other pages may take from here: ``h200_fa_a_ms`` and ``h200_flex_a_ms`` (the fits' constant terms, as
chapter 6 states them).
"""

from __future__ import annotations

import functools

from lab.book.facts import Fact
from lab.book.plots.answer import plot_answer
from lab.book.sweep_explorer import a10g_prefill_explorer
from lab.results import reference, sweeps
from lab.results.quantities import Quantity

#: The faster arm each study is compared against, and the arm compared.
FAST_ARM = {"A10G": "FLASH_ATTN", "H200-SXM": "FLASH_ATTN/FA3"}
SLOW_ARM = "FLEX_ATTENTION"
H200_SWEEPS = "h200/vllm0.26-qwen2.5-7b"
RUN_OF = {"A10G": reference.DATASET, "H200-SXM": H200_SWEEPS}
TAG = {"A10G": "a10g", "H200-SXM": "h200"}
SWEEP_FILE = {"A10G": "sweep.csv", "H200-SXM": "*/sweep.csv"}


def _ratio(gpu: str) -> Quantity:
    return Quantity(f"{TAG[gpu]}.sweep.flex_over_flash", "FLEX_ATTENTION's time over FlashAttention's (time to first "
                    f"token, or time per output token) at one prompt length, vLLM, Qwen2.5-7B bf16, {FAST_ARM[gpu]} "
                    "the faster arm", run=RUN_OF[gpu], file=SWEEP_FILE[gpu], unit="×")


RATIO = {gpu: _ratio(gpu) for gpu in FAST_ARM}
PROMPT = {"A10G": reference.PROMPT_TOKENS,
          "H200-SXM": Quantity("h200.sweep.prompt_tokens", "the tokens of a prompt both arms of the H200 sweep ran",
                               run=H200_SWEEPS, file="*/sweep.csv", unit="tokens")}
#: A length the book states under one glue name on every page: the A10G's shortest prompt (the tokens it had,
#: which chapter 6 explains; chapter 1 quotes it too).
LENGTH_NAMES = {("a10g", "short"): "a10g_short_len"}
#: In ms without a unit tag: chapter 6 glues the same names as plain numbers in ms.

@functools.cache
def _comparisons() -> dict:
    """study label -> (GPU, FLEX over FlashAttention by prompt length), for each study on file."""
    table = sweeps.sweeps()
    out = {}
    for gpu, fast in FAST_ARM.items():
        study = sweeps.find_study(table, "A10G" if gpu == "A10G" else "H200")
        if study is not None:
            out[sweeps.study_label(table, study)] = (gpu, sweeps.compare_arms(table, study, SLOW_ARM, fast))
    return out


def _end_facts(gpu: str, ratios) -> dict:
    tag, facts = TAG[gpu], {}
    for end, row in (("short", ratios.iloc[0] if ratios is not None else None),
                     ("long", ratios.iloc[-1] if ratios is not None else None)):
        n = int(row["n"]) if row is not None else None
        facts[LENGTH_NAMES.get((tag, end), f"{tag}_{end}_n")] = PROMPT[gpu].fact(n, end)
        for what, column in (("ttft", "TTFT ratio"), ("itl", "ITL ratio")):
            value = float(row[column]) if row is not None else None
            facts[f"{tag}_{end}_{what}"] = RATIO[gpu].fact(value, what, n)
    return facts


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact the introduction states, by glue name."""
    by_gpu = {gpu: ratios for gpu, ratios in _comparisons().values()}
    out = {}
    for gpu in FAST_ARM:
        out |= _end_facts(gpu, by_gpu.get(gpu))
    return out


def answer_figure():
    """How many times longer a request takes with FLEX_ATTENTION than with FlashAttention, by prompt length."""
    return plot_answer(_comparisons(), source="Measured: vLLM prompt-length sweeps, Qwen2.5-7B bf16; A10G: the published "
                                              "study; H200: our runs, FlashAttention 3 (lab.results.sweeps).")


def explorer():
    """The A10G prefill explorer: one request's cost by prompt length and backend, with the quadratic fit."""
    return a10g_prefill_explorer()
