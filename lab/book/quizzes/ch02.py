"""Chapter 2, naive attention: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.pages import ch02 as page
from lab.book.quiz import Computed, Question, Quiz, chapter_quiz, cite
from lab.results import iomodel
from lab.results.hardware import GB

KEY = "02-naive-attention"


def _cite(**names) -> dict:
    return cite(page.facts(), **names)


def _reading_the_counters() -> list[Question]:
    """Chapter 2's counters of FA3's prefill kernel (lab.book.pages.ch02): busy tensor pipe, idle DRAM."""
    rows = {row["candidate"]: row for row in page.prefill_rows()}
    if rows["fa3"]["tensor_pct"] is None or rows["ours-tuned"]["warps_per_sm"] is None:
        return []
    cite = lambda candidate, key, fmt: Computed(  # noqa: E731
        f"lab.book.page.prefill_rows(): {candidate} {key} (data/h200/kernel-counters)",
        lambda: rows[candidate][key], (), fmt)
    return [Question(
        "Nsight Compute on FA3's causal prefill kernel at {n} tokens on the H200: the tensor pipe was busy {tensor}% "
        "of the active cycles, the XU pipe {xu}%; it read {reads}× the compulsory bytes from DRAM, and its DRAM "
        "traffic ran at {rate}% of the GPU's read ceiling. What sets its time?",
        ["Its arithmetic: the tensor cores work most cycles while DRAM sits nearly idle",
         "Memory bandwidth: a fused kernel still waits on HBM for every K/V tile it re-reads",
         "Occupancy: too few warps are resident to hide the latency of its loads",
         "Launch overhead: starting and draining the grid takes most of the call"],
        0,
        "A memory-bound kernel shows the reverse: DRAM near the ceiling, the tensor pipe mostly idle. FA3 read about "
        "the compulsory bytes and moved them at {rate}% of the ceiling while its tensor pipe was busy {tensor}% of the "
        "time: the matmuls, with the exponentials on the XU pipe beside them, set the time. Occupancy is not the "
        "limit either: our tuned kernel kept {ours_warps} warps per SM resident against FA3's {fa3_warps}, and was "
        "slower.",
        cites={"n": Computed("lab.book.pages.ch02.N", lambda: page.N, (), ",d"),
               "tensor": cite("fa3", "tensor_pct", ".1f"), "xu": cite("fa3", "xu_pct", ".1f"),
               "reads": cite("fa3", "read_over_compulsory", ".2f"), "rate": cite("fa3", "rate_pct", ".1f"),
               "ours_warps": cite("ours-tuned", "warps_per_sm", ".0f"), "fa3_warps": cite("fa3", "warps_per_sm", ".0f")},
        holds=lambda v: v["tensor"] > 50 and v["rate"] < 10 and v["reads"] < 1.5 and v["ours_warps"] > v["fa3_warps"],
    )]


def questions() -> list[Question]:
    facts = page.facts()
    big_n, share_n = int(facts["big_n"].value), int(facts["share_longest_n"].value)
    quarter = Computed(f"lab.results.iomodel.naive_intermediate_bytes(Qwen2.5-7B, n={big_n // 2}) in GB",
                       lambda: iomodel.naive_intermediate_bytes(page.MODEL, big_n // 2) / GB, (), ".1f")
    return [
        Question(
            "Standard attention keeps the scores S and the probabilities P, n×n per query head, in bf16. For one "
            "layer of Qwen2.5-7B ({heads} query heads), how much memory do they take for a prompt of {n} tokens?",
            ["About {big} GB", "About {quarter} GB",
             "A few megabytes: a standard implementation keeps only one row of scores at a time",
             "Nothing: the GPU computes them in registers and never stores them"],
            0,
            "Two matrices × {heads} heads × n² × two bytes. At n = {n} that is {big} GB for a single layer; a prompt of "
            "half the length needs a quarter of it ({quarter} GB): the bill is quadratic.",
            cites={**_cite(n=("big_n", ",d"), heads=("heads", "d"), big=("big_sp_gb", ".1f")), "quarter": quarter},
            holds=lambda v: abs(v["big"] / v["quarter"] - 4) < 0.01,
        ),
        Question(
            "Why is the softmax the stage of naive attention that starves for bandwidth?",
            ["It moves every n×n score through HBM for a handful of FLOPs each",
             "Its exponentials run on special-function units far slower than the tensor cores, so it is compute-bound",
             "It needs the whole KV cache in shared memory before it can start",
             "It runs on the CPU while the matmuls run on the GPU"],
            0,
            "The matmuls QKᵀ and PV reuse each loaded element across a whole head dimension; the softmax touches each "
            "score once or twice for a few operations, so its FLOP per byte is far below any ridge. Exponential "
            "throughput does matter inside a fused kernel on Hopper and Blackwell, where the bytes are gone; in the "
            "naive pipeline the bytes dominate.",
        ),
        Question(
            "On a {mem} GB A10G holding the bf16 weights of Qwen2.5-7B, roughly how long can a prompt get before one "
            "layer's S and P no longer fit (ignoring the KV cache)?",
            ["About {n} tokens", "Unlimited: standard attention never stores the n×n matrix",
             "Exactly the model's maximum context length, which the weights were sized for",
             "It depends only on the number of layers, since each layer keeps its own copy"],
            0,
            "Free memory ÷ (two matrices × {heads} heads × two bytes) = n², so n ≈ {n}. FlashAttention removes this wall "
            "because it never stores the n×n matrix at all.",
            cites=_cite(mem=("mem_a10g", ".0f"), n=("fit_a10g", ",.0f"), heads=("heads", "d")),
        ),
        Question(
            "At {n} tokens attention is {model}% of Qwen2.5-7B's prefill FLOPs. The A10G fits give the quadratic "
            "term {flash}% of FLASH_ATTN's TTFT but {flex}% of FLEX_ATTENTION's. Why is FLEX's share so much higher?",
            ["Its attention runs at a lower FLOP rate, so the same FLOPs take a larger share of the time",
             "FLEX_ATTENTION computes more attention FLOPs, because its mask evaluates every query-key pair",
             "FLEX_ATTENTION's matmuls are faster, which shrinks the linear term and inflates the quadratic share",
             "The fit is unreliable for FLEX_ATTENTION only, since its TTFT is noisier"],
            0,
            "Both backends do the same attention FLOPs ({model}% of the total). A time share matches the FLOP share "
            "when attention runs as fast per FLOP as the matmuls, as FLASH_ATTN nearly does ({flash}%); FLEX's "
            "slower kernel turns the same work into {flex}% of the time. The share measures efficiency as much as work.",
            cites=_cite(n=("share_longest_n", ",d"), model=(f"model_share_{share_n}", ".1f"),
                        flash=(f"fa_share_{share_n}", ".1f"), flex=(f"flex_share_{share_n}", ".1f")),
            holds=lambda v: abs(v["model"] - v["flash"]) < abs(v["model"] - v["flex"]) and v["flex"] > v["flash"],
        ),
    ] + _reading_the_counters()



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
