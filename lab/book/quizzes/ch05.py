"""Chapter 5, decode and split-KV: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.quiz import Computed, Question, Quiz, chapter_quiz, measured
from lab.book.quizzes.common import (
    FLASH,
    FLEX,
    H200_KERNELS,
    bandwidth_ceiling_gb_s,
    device_number,
    kernels_table,
    length,
    ridge,
    shape_number,
    sweep_cell,
    sweep_lengths,
)
from lab.results import data

KEY = "05-decode-split-kv"


def questions() -> list[Question]:
    short, _, longest = sweep_lengths()
    sms = device_number("A10G", "SM count", lambda d: d.sm_count, "d")
    kv_heads = shape_number("KV heads", lambda s: s.kv_heads)
    cites = {"short": length("shortest sweep length", short), "long": length("longest sweep length", longest),
             "flash_short": sweep_cell(FLASH, short, "itl_ms"), "flash_long": sweep_cell(FLASH, longest, "itl_ms"),
             "flex_short": sweep_cell(FLEX, short, "itl_ms"), "flex_long": sweep_cell(FLEX, longest, "itl_ms")}
    return [
        Question(
            "One decode step of Qwen2.5-7B at batch 1 has one query token and {kv} KV heads. If the kernel launches one "
            "program per (sequence, KV head), how busy is an A10G with {sms} SMs?",
            ["Mostly idle: a handful of programs each walk the whole cache",
             "Fully busy: one head per SM",
             "Busy, but compute-bound, because each program computes scores for a whole group of query heads",
             "It depends only on the head dimension, which sets how much each program loads"],
            0,
            "{kv} programs cannot fill {sms} SMs, and each one reads its whole KV sequence alone. Splitting the KV "
            "length across programs puts the idle SMs to work on the same read.",
            cites={"kv": kv_heads, "sms": sms},
            holds=lambda v: v["kv"] < v["sms"],
        ),
        Question(
            "On the A10G, decode inter-token latency from {short} to {long} tokens of context went {flash_short} → "
            "{flash_long} ms with FLASH_ATTN and {flex_short} → {flex_long} ms with FLEX_ATTENTION. What does the "
            "FLEX arm measure?",
            ["vLLM's integration of Flex: small tiles over a paged cache masked by a lookup",
             "FlexAttention's split-KV decoding template, which vLLM's FORCE_USE_FLEX_ATTENTION option turns off",
             "A quadratic term that FlexAttention computes in decode and FlashAttention avoids",
             "FlexAttention running in fp32, because vLLM cannot compile it in bf16"],
            0,
            "A decode step has no n×n matrix; its attention cost is reading the KV cache, linear in context. Flex has "
            "a split-KV decoding template, but vLLM forces the general kernel (FORCE_USE_FLEX_ATTENTION), and current "
            "PyTorch picks the template only for a power-of-two number of query heads per KV head, where Qwen2.5-7B "
            "has {group}. vLLM runs the general kernel over its paged cache, reached through a block lookup in the "
            "mask function. FLASH_ATTN's line stays nearly flat; the FLEX arm's climbs with the cache.",
            cites={**cites, "group": shape_number("query heads per KV head", lambda s: s.q_heads // s.kv_heads)},
            holds=lambda v: (v["flex_long"] - v["flex_short"]) > 3 * (v["flash_long"] - v["flash_short"]),
        ),
        Question(
            "After each split has computed its partial output over its part of the KV cache, how are they combined?",
            ["Rescale each partial output by exp(its log-sum-exp − the global one), then add",
             "Average the partial outputs, weighting every split by the number of keys it covered",
             "Keep the split whose scores reached the largest maximum and drop the others",
             "Concatenate them along the head dimension and project back with a matmul"],
            0,
            "Each split reports its output normalised by its own sum plus its log-sum-exp. Weighting each by "
            "exp(lseᵢ − lse) recovers the exact softmax over the whole sequence: the same online-softmax algebra, "
            "applied once across splits.",
        ),
        _batch_on_the_roofline(),
        _paging(),
        *_h200_decode_kernels(),
    ]


def _batch_on_the_roofline() -> Question:
    """Weight matmuls gain intensity with the batch; decode attention stays near the GQA group size."""
    batch = 64
    matmul = shape_number(f"decode matmul FLOP per weight byte at batch {batch}",
                          lambda s: batch * s.linear_flops_per_token() / (s.layers * s.linear_weights_per_layer * 2),
                          ".0f")
    # One query per sequence: 4·d FLOPs per cached token per query head, over 2·d bf16 elements per KV head.
    attention = shape_number("decode attention FLOP per KV-cache byte (any batch)",
                             lambda s: 4 * s.head_dim * s.q_heads / (2 * 2 * s.head_dim * s.kv_heads), ".0f")
    return Question(
        "At batch {b}, a decode step's weight matmuls do about {matmul} FLOP per weight byte, while decode attention "
        "does {attention} FLOP per KV-cache byte whatever the batch. The H200's ridge is {ridge}. What happens as "
        "batch × context grows?",
        ["The step becomes bound by reading the KV cache, whose bytes grow with batch × context",
         "The whole step turns compute-bound once the batch is large enough, attention included",
         "Attention's intensity grows with the batch like the matmuls', so batching helps both alike",
         "Nothing changes: a decode step is always bound by reading the weights"],
        0,
        "Every sequence brings its own cache, so attention's bytes grow with batch × context while its intensity stays "
        "at the query heads per KV head ({attention}). The weights are read once for the whole batch. Large-batch, "
        "long-context decode is therefore KV-bound: the reason for GQA, MQA/MLA and FP8 KV caches.",
        cites={"b": Computed("batch picked for the question", lambda: batch, (), "d"), "matmul": matmul,
               "attention": attention, "ridge": ridge("H200-SXM")},
        holds=lambda v: v["attention"] < v["matmul"] and v["attention"] < v["ridge"] / 10,
    )


PAGED_RUN = "h200/paged-decode"


def _paging() -> Question:
    """What a block table costs a decode kernel: measured on the H200 once the paged-decode run is on file."""
    options = ["A lookup per page and shorter reads; it saves the memory a maximum-length reservation wastes",
               "It reads fewer bytes, because only the pages that are full get read",
               "Nothing: the engine copies each sequence's pages into one contiguous buffer before every step",
               "It makes attention approximate, since tokens that straddle two pages are dropped"]
    why = ("The kernel reads K and V through the block table, one indirection per page, in page-sized pieces "
           "scattered over memory. In return the engine reserves no maximum-length region per request, wastes at "
           "most one partly filled page per sequence, and can share pages between sequences with a common prefix.")
    if not (data.DATA_DIR / PAGED_RUN / "paged.csv").exists():
        return Question("vLLM keeps the KV cache in pages of a few tokens, with a block table per sequence. What does "
                        "paging cost a decode kernel, and what does it buy?", options, 0, why)
    batch, n, page = 16, 32768, 16
    gbps = lambda kernel, **where: measured(PAGED_RUN, "paged.csv", "gb_per_s", ",.0f", kernel=kernel, batch=batch,
                                            n=n, **where)  # page_size is a float column: contiguous rows leave it empty
    return Question(
        "On the H200 the book's split-KV decode kernel read a batch of {b} sequences of {n} tokens at {contiguous} "
        "GB/s from a contiguous cache, and at {paged} GB/s through a block table of shuffled {page}-token pages. "
        "What does paging cost a decode kernel, and what does it buy?",
        options, 0, why + " Here the lookups cost {pct}% of the contiguous kernel's bandwidth.",
        cites={"b": Computed("batch of the paged-decode run", lambda: batch, (), "d"),
               "n": Computed("context of the paged-decode run", lambda: n, (), ",d"),
               "page": Computed("page size of the paged-decode run", lambda: page, (), "d"),
               "contiguous": gbps("contiguous"), "paged": gbps("paged", page_size=float(page)),
               "pct": Computed("100 × (1 − paged / contiguous bandwidth)", lambda c, p_: 100 * (1 - p_ / c),
                               (gbps("contiguous"), gbps("paged", page_size=float(page))), ".0f")},
        holds=lambda v: 0.9 < v["paged"] / v["contiguous"] < 1.0,
    )


def _h200_decode_kernels() -> list[Question]:
    table = kernels_table("decode.csv")
    if table is None:
        return []
    ok = table[(table["batch"] == 1) & (table["status"] == "ok")]
    both = set(ok[ok["candidate"] == "flex"]["n"]) & set(ok[ok["candidate"] == "ours-tuned"]["n"])
    if not both:
        return []
    n = int(max(both))
    ceiling = bandwidth_ceiling_gb_s()
    pct = lambda candidate: Computed(f"{H200_KERNELS}/decode.csv: gbps of {candidate}, batch 1, n={n}, as % of the ceiling",
                                     lambda g, c: 100 * g / c, (measured(H200_KERNELS, "decode.csv", "gbps", ",.0f",
                                                                        candidate=candidate, batch=1, n=n), ceiling), ".0f")
    return [Question(
        "On the H200, one decode step at batch 1 over {n} tokens of context: FlexAttention reached {flex}% of the GPU's "
        "bandwidth ceiling, the book's tuned split-KV kernel {tuned}%. What does the split-KV kernel do differently?",
        ["It splits each sequence's cache over many programs, merged by log-sum-exp",
         "It reads fewer bytes, because it skips the oldest tokens of the cache",
         "It stores the KV cache in fp8, halving the bytes each step reads",
         "It runs on the copy engine instead of the SMs, which reads memory faster than they can"],
        0,
        "Both read the same cache. Here FlexAttention ran its general kernel: its own split-KV decode path requires "
        "the query heads per KV head to be a power of two (PyTorch's _use_flex_decoding), and Qwen2.5-7B's group is "
        "{group}. With a few programs per head the read runs on a few SMs; split-KV spreads it over the GPU.",
        cites={"n": Computed(f"{H200_KERNELS}/decode.csv: longest batch-1 context", lambda: n, (), ",d"),
               "flex": pct("flex"), "tuned": pct("ours-tuned"),
               "group": shape_number("query heads per KV head", lambda s: s.q_heads // s.kv_heads)},
        holds=lambda v: v["tuned"] > 2 * v["flex"] and int(v["group"]) & (int(v["group"]) - 1) != 0,
    )]



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
