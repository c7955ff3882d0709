"""Chapter 5, decode and split-KV: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``).

Every number from data is a fact of the chapter's page module (:mod:`lab.book.pages.ch05`), cited as it glues it."""

from __future__ import annotations

from lab.book.pages import ch05
from lab.book.quiz import Cited, Computed, Question, Quiz, chapter_quiz
from lab.book.quizzes.common import bandwidth_ceiling_gb_s, device_number, shape_number

KEY = "05-decode-split-kv"


def questions() -> list[Question]:
    sms = device_number("A10G", "SM count", lambda d: d.sm_count, "d")
    kv_heads = shape_number("KV heads", lambda s: s.kv_heads)
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
        _speculative_step(),
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
        _h200_decode_kernels(),
    ]


def _cited(name: str, fmt: str = ".0f") -> Cited:
    return Cited(ch05.facts()[name], fmt)


def _speculative_step() -> Question:
    """Verifying drafted tokens multiplies the rows each cached byte serves: where that reaches the measured ridge."""
    return Question(
        "Qwen2.5-7B's decode attention does about {ai} FLOP per KV-cache byte with one query token per step; the H200's "
        "measured ridge is {ridge}. A speculative step verifies drafted tokens, several query tokens against the same "
        "cache. How many query tokens can a step bring before its attention leaves the memory side?",
        ["About {tokens}: each cached byte then serves enough query rows to reach the ridge",
         "None beyond one: decode attention stays memory-bound however many tokens a step verifies",
         "Only one, because every extra query token reads the whole cache again",
         "As many as the batch holds sequences, since batching raises attention's intensity too"],
        0,
        "Every cached byte serves each query row that reads it: the {group} query heads of its group times the query "
        "tokens of the step, so the ridge comes at about {tokens} tokens. On the H200, FA3's step over a 32k cache cost "
        "the same with {flat} query tokens as with one and rose by {off}.",
        cites={"ai": _cited("dec_intensity"), "ridge": _cited("h200_ridge_measured"),
               "tokens": _cited("dec_tokens_at_ridge"), "group": _cited("dec_group", "d"),
               "flat": _cited("rows_tok_flat_tokens", "d"), "off": _cited("rows_tok_off_tokens", "d")},
        holds=lambda v: v["flat"] < v["tokens"] < v["off"],
    )


def _batch_on_the_roofline() -> Question:
    """Weight matmuls gain intensity with the batch; decode attention stays near the GQA group size."""
    batch = 64
    matmul = shape_number(f"decode matmul FLOP per weight byte at batch {batch}",
                          lambda s: batch * s.linear_flops_per_token() / (s.layers * s.linear_weights_per_layer * 2),
                          ".0f")
    return Question(
        "At batch {b}, a decode step's weight matmuls do about {matmul} FLOP per weight byte, while decode attention "
        "does {attention} FLOP per KV-cache byte whatever the batch. The H200's measured ridge is {ridge}. What happens "
        "as batch × context grows?",
        ["The step becomes bound by reading the KV cache, whose bytes grow with batch × context",
         "The whole step turns compute-bound once the batch is large enough, attention included",
         "Attention's intensity grows with the batch like the matmuls', so batching helps both alike",
         "Nothing changes: a decode step is always bound by reading the weights"],
        0,
        "Every sequence brings its own cache, so attention's bytes grow with batch × context while its intensity stays "
        "at the query heads per KV head ({attention}). The weights are read once for the whole batch. Large-batch, "
        "long-context decode is therefore KV-bound: the reason for GQA, MQA/MLA and FP8 KV caches.",
        cites={"b": Computed("batch picked for the question", lambda: batch, (), "d"), "matmul": matmul,
               "attention": _cited("dec_intensity"), "ridge": _cited("h200_ridge_measured")},
        holds=lambda v: v["attention"] < v["matmul"] and v["attention"] < v["ridge"] / 10,
    )


def _h200_decode_kernels() -> Question:
    """Split-KV against FlexAttention's general kernel at batch 1, as the chapter measured them."""
    return Question(
        "On the H200, one decode step at batch 1 over {n} tokens of context: FlexAttention reached {flex}% of the GPU's "
        "bandwidth ceiling of {ceiling} GB/s, the book's tuned split-KV kernel {tuned}%. What does the split-KV kernel do differently?",
        ["It splits each sequence's cache over many programs, merged by log-sum-exp",
         "It reads fewer bytes, because it skips the oldest tokens of the cache",
         "It stores the KV cache in fp8, halving the bytes each step reads",
         "It runs on the copy engine instead of the SMs, which reads memory faster than they can"],
        0,
        "Both read the same cache. Here FlexAttention ran its general kernel: its own split-KV decode path requires "
        "the query heads per KV head to be a power of two (PyTorch's _use_flex_decoding), and Qwen2.5-7B's group is "
        "{group}. With a few programs per head the read runs on a few SMs; split-KV spreads it over the GPU.",
        cites={"n": Computed("the context the chapter quotes", lambda: ch05.CONTEXT, (), ",d"),
               "flex": _cited("d_flex_b1_pct"), "tuned": _cited("d_tuned_b1_pct"), "group": _cited("dec_group", "d"),
               "ceiling": bandwidth_ceiling_gb_s()},
        holds=lambda v: v["tuned"] > 2 * v["flex"] and int(v["group"]) & (int(v["group"]) - 1) != 0,
    )


def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
