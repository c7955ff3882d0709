"""Chapter 7, the trace: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``).

Every number and kernel name an option or explanation states is a fact of the chapter's page module
(:mod:`lab.book.pages.ch07`), cited under the glue name the chapter shows it by.
"""

from __future__ import annotations

from lab.book.pages import ch07 as page
from lab.book.quiz import Cited, Computed, Question, Quiz, chapter_quiz

KEY = "07-the-trace"


def questions() -> list[Question]:
    facts = page.facts()
    cite = lambda name, fmt: Cited(facts[name], fmt)  # noqa: E731
    mm_fa, mm_fx = cite("a10g_mm28_fa", ",.0f"), cite("a10g_mm28_fx", ",.0f")
    at_fa, at_fx = cite("a10g_at28_fa", ",.0f"), cite("a10g_at28_fx", ",.0f")
    return [
        Question(
            "In the A10G study's 28k prefill window, matmul kernels took {mm_flash} ms (FLASH_ATTN) and {mm_flex} ms "
            "(FLEX_ATTENTION); attention took {at_flash} against {at_flex} ms. What do the matmul figures prove?",
            ["They are the control: with matmul time equal, the whole TTFT gap sits in attention's kernels",
             "FLEX's matmuls are slower, so part of the TTFT gap comes from outside attention",
             "The profiler slowed both runs by the same amount, so nothing can be concluded from either",
             "Attention and matmul kernels overlap in time, so the two families cannot be compared"],
            0,
            "Only the attention backend changed between the runs; the matmul family differs by {mm_diff} ms out of "
            "{mm_flash}, so the {at_diff} ms gap is attention's.",
            cites={"mm_flash": mm_fa, "mm_flex": mm_fx, "at_flash": at_fa, "at_flex": at_fx,
                   "mm_diff": Computed("|FLEX - FLASH| matmul ms", lambda a, b: abs(b - a), (mm_fa, mm_fx), ",.0f"),
                   "at_diff": Computed("FLEX - FLASH attention ms", lambda a, b: b - a, (at_fa, at_fx), ",.0f")},
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
            cites={"flash_kernel": cite("a10g_decode_fa", "s"), "flex_kernel": cite("a10g_decode_fx", "s")},
        ),
        Question(
            "The study's 'decode' window at 28k tokens of context lasted {win} s for FLASH_ATTN; in the prefill window "
            "of the same prompt, matmul and attention kernels alone took {prefill} s. Why are the two so close?",
            ["With prefix caching off, the 'decode' window prefilled the prompt again",
             "Decode at long context costs as much as prefill, because every step reads the whole cache",
             "The profiler's own overhead dominates both windows, hiding the kernels' real times",
             "The decode window ran at a larger batch, which multiplied its work"],
            0,
            "Its {gen} generated tokens at the sweep's inter-token latency take about {decode} s, little next to the "
            "{prefill} s prefill. To census decode, keep only single-token engine steps or open the window after "
            "the first token.",
            cites={"win": cite("naive_fa_s", ".1f"), "prefill": cite("naive_fa_prefill_s", ".1f"),
                   "gen": cite("naive_gen", "d"), "decode": cite("naive_fa_decode_s", ".1f")},
            holds=lambda v: v["prefill"] / v["win"] > 0.8 and v["decode"] / v["win"] < 0.2,
        ),
        Question(
            "FlashAttention 3's 2k prefill window on the H200 ran {window} ms of kernels; its one nvidia-smi sample read "
            "{watts} W of board power, with the software power cap among the active clock limits and the SM clock at "
            "{mhz} MHz. How do the power and the flag fit together?",
            ["The power is NVML's one-second average, mostly the idle time before; the flag is read at the moment",
             "The flag is set whenever the GPU idles, so it says nothing about the power limit being reached",
             "The board's power limit had been lowered to about that figure, so the cap was reached at low power",
             "The flag concerns the memory clock, which the power limiter lowers first when a window starts"],
            0,
            "power.draw is nvmlDeviceGetPowerUsage, averaged over the last second on Ampere and newer GPUs; a window "
            "of {window} ms cannot move that average much. The flag says the driver has lowered the clocks to stay "
            "within the power limit, at the instant of the reading, together with the {mhz} MHz clock.",
            cites={"window": cite("clock_fa_2k_window_ms", ".0f"), "watts": cite("clock_fa_2k_w", ".0f"),
                   "mhz": cite("clock_fa_2k_mhz", ",.0f")},
            holds=lambda v: v["window"] < 1000,  # shorter than the second the power is averaged over
        ),
    ]


def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
