"""Chapter 7, the trace: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.quiz import Computed, Question, Quiz, chapter_quiz, measured
from lab.book.quizzes.common import (
    A10G,
    FLASH,
    FLEX,
    census_long_window,
    length,
    sweep_cell,
    sweep_lengths,
)

KEY = "07-the-trace"


def questions() -> list[Question]:
    census = lambda phase, tokens, arm, metric, fmt=",.0f": measured(A10G, "census.csv", "value", fmt, phase=phase,
                                                                     tokens=tokens, arm=arm, metric=metric)
    long = census_long_window()
    kernel = lambda arm: measured(A10G, "decode_kernels.csv", "kernel", "s", arm=arm, phase="decode")
    matmul = lambda arm: census("prefill", long, arm, "matmul_ms")
    attention = lambda arm: census("prefill", long, arm, "attention_ms")
    prefill_flash = Computed("matmul + attention ms of the FLASH_ATTN 28k prefill window, in s",
                             lambda m, a: (m + a) / 1000, (matmul(FLASH), attention(FLASH)))
    return [
        Question(
            "In the A10G prefill window at {tokens} tokens, matmul kernels took {mm_flash} ms (FLASH) and {mm_flex} ms "
            "(FLEX); attention took {at_flash} vs {at_flex} ms. What do the matmul figures prove?",
            ["They are the control: with matmul time equal, the whole TTFT gap sits in attention's kernels",
             "FLEX's matmuls are slower, so part of the TTFT gap comes from outside attention",
             "The profiler slowed both runs by the same amount, so nothing can be concluded from either",
             "Attention and matmul kernels overlap in time, so the two families cannot be compared"],
            0,
            "Only the attention backend changed between the runs; the matmul family differs by {mm_diff} ms out of "
            "{mm_flash}, so the {at_diff} ms gap is attention's.",
            cites={"tokens": length("census prefill window", long),
                   "mm_flash": matmul(FLASH), "mm_flex": matmul(FLEX),
                   "at_flash": attention(FLASH), "at_flex": attention(FLEX),
                   "mm_diff": Computed("|FLEX − FLASH| matmul ms", lambda a, b: abs(b - a),
                                       (matmul(FLASH), matmul(FLEX)), ",.0f"),
                   "at_diff": Computed("FLEX − FLASH attention ms", lambda a, b: b - a,
                                       (attention(FLASH), attention(FLEX)), ",.0f")},
            holds=lambda v: abs(v["mm_flex"] / v["mm_flash"] - 1) < 0.01,
        ),
        Question(
            "The A10G decode trace shows `{flash_kernel}` for FLASH_ATTN (FlashAttention 2) and `{flex_kernel}` for "
            "FLEX_ATTENTION. What does the FLASH_ATTN kernel's name alone tell you?",
            ["That the cache is paged: FA2 runs every paged call through that kernel, even with one split",
             "That the KV read was split across the SMs, since the kernel's name says so",
             "That FlashDecoding replaced the tiled algorithm with an approximate one for decode",
             "Nothing at all: kernel names in a trace are generated and carry no meaning"],
            0,
            "FA2's flash_api.cpp forces its split-KV kernel whenever the KV cache is paged, as it is in vLLM, so the "
            "name appears with one split too. A split shows as a second launch beside it, the combine kernel "
            "(flash_fwd_splitkv_combine_kernel). FA3 picks the splits at launch and also launches a separate combine "
            "kernel when it splits. `{flex_kernel}` is one Inductor-compiled Triton kernel.",
            cites={"flash_kernel": kernel(FLASH), "flex_kernel": kernel(FLEX)},
        ),
        Question(
            "The published 'decode at {tokens}' window lasted {win} s for FLASH_ATTN; in the prefill window at the same "
            "length, matmul and attention kernels alone took {prefill} s. Why are the two so close?",
            ["With prefix caching off, the 'decode' window prefilled the prompt again",
             "Decode at long context costs as much as prefill, because every step reads the whole cache",
             "The profiler's own overhead dominates both windows, hiding the kernels' real times",
             "The decode window ran at a larger batch, which multiplied its work"],
            0,
            "A decode step at this context costs about {itl} ms, so a generation of a few dozen tokens adds little to the "
            "{prefill} s prefill. To census decode, keep only single-token engine steps or delay the profiler past "
            "the prefill iteration.",
            cites={"tokens": length("census prefill window", long),
                   "win": census("decode", long, FLASH, "window_s", ".1f"), "prefill": prefill_flash,
                   "itl": sweep_cell(FLASH, sweep_lengths()[2], "itl_ms")},
            holds=lambda v: v["prefill"] / v["win"] > 0.8,
        ),
    ]



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
