"""Chapter 4b, the backward pass: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``).

Every number an option or explanation states is a fact of the chapter's page module (:mod:`lab.book.pages.ch04b`),
cited as it is (:class:`lab.book.quiz.Cited`): the quiz reads no data of its own.
"""

from __future__ import annotations

from lab.book.pages import ch04b
from lab.book.quiz import Question, Quiz, chapter_quiz, cite

KEY = "04b-backward-pass"


def _cite(**names) -> dict:
    return cite(ch04b.facts(), **names)


def questions() -> list[Question]:
    return [
        Question(
            "The forward saved O and each row's log-sum-exp L, not P. What does the softmax's backward need in place "
            "of rowsum(P ∘ dP)?",
            ["D = rowsum(dO ∘ O), one number per query row, computed before the main loop",
             "The row maximum of S, saved by the forward beside L",
             "Nothing: dS = dP, because the softmax's Jacobian is the identity on the diagonal",
             "The whole matrix P, written by the forward and read back from memory once per key tile, since the "
             "log-sum-exp alone cannot give the softmax's Jacobian"],
            0,
            "Since O = P V, rowsum(P ∘ dP) = rowsum(P ∘ (dO Vᵀ)) = rowsum(dO ∘ O): the correction term is read off O "
            "and dO, O(n·d) work, so dS = P ∘ (dP − D) needs no stored P.",
        ),
        Question(
            "Our kernels compute dK and dV with the key tiles outside and dQ in a second pass with the query tiles "
            "outside. Why not add each key tile's dS K into dQ with atomics, as FlashAttention 2 does?",
            ["In Triton an atomic add from the tensor-core layout needs a conversion costing more than the extra "
             "products; and a second pass is deterministic",
             "Atomics cannot add fp32 values on a GPU, so dQ would have to be kept in bf16",
             "A second pass reads fewer bytes than atomics do, so it is the IO-optimal choice in any language and on "
             "any GPU, whatever the products it repeats cost",
             "Atomics would make dK and dV wrong under grouped-query attention"],
            0,
            "The second pass rebuilds S and dP once more (seven products where five suffice), but it keeps dQ in "
            "registers and adds in a fixed order; an atomic add from Triton's tensor-core layout is slow enough to "
            "lose more than that (the kernel's docstring cites the measured case).",
        ),
        _measured(),
        _recompute(),
    ]


def _measured() -> Question:
    """What the race says of our backward at 16k, and where the counters put the gap to cuDNN."""
    cites = _cite(flash=("bwd_vs_flash_16k", ".2f"), cudnn=("bwd_vs_cudnn_16k", ".2f"),
                  dkdv=("ctr_dkdv_tensor", ".0f"), best=("ctr_cudnn_tensor", ".0f"))
    return Question(
        "At 16k tokens on the H200 our backward ran at {flash}× SDPA-flash's speed and {cudnn}× cuDNN's. Its "
        "dK/dV kernel kept the tensor pipe {dkdv}% busy, cuDNN's main kernel {best}%. What limits ours most?",
        ["The dK/dV kernel: short query tiles under two fp32 accumulators leave the tensor cores idle more than "
         "half the time",
         "Memory bandwidth: the backward reads P back from HBM",
         "The pre-pass D = rowsum(dO ∘ O), which streams O and dO once more and runs longer than both of the main "
         "kernels together",
         "Nothing: within measurement noise it matches cuDNN"],
        0,
        "Ours beats FlashAttention 2 ({flash}×) but reaches only {cudnn}× of cuDNN. The dK/dV kernel is most of our "
        "time, its tensor pipe busy {dkdv}% against cuDNN's {best}%: dK and dV, each a key tile by the head dim in "
        "fp32, fill the registers and leave the autotuner thin query tiles. No P is read at all.",
        cites=cites,
        holds=lambda v: v["flash"] >= 1 and v["cudnn"] < 0.9 and v["dkdv"] < v["best"],
    )


def _recompute() -> Question:
    """Recomputation against storing P, on the measured ridge."""
    cites = _cite(intensity=("recompute_intensity", ".0f"), ridge=("h200_ridge_measured", ".0f"), p=("p_gb_16k", ".1f"),
                  heads=("model_heads", "d"))
    return Question(
        "Rebuilding one probability costs a d-long dot product (2d FLOPs); storing it costs two bytes written and "
        "two read: {intensity} FLOP per byte at d = 128, against the H200's measured ridge of {ridge}. And P of one "
        "layer at 16k is {p} GB. Which is true?",
        ["Recomputing is faster and, decisively, keeps P out of memory: over {heads} heads of a model's layers "
         "P could not be kept at all",
         "Storing P is faster, since {intensity} FLOP/B is a compute-bound intensity",
         "They cost the same; FlashAttention recomputes only to save memory",
         "Storing P is faster below the ridge, because bytes are cheap there, so FlashAttention's recomputation pays "
         "only on GPUs with little memory"],
        0,
        "Below the ridge, bytes cost more time than FLOPs: {intensity} FLOP/B < {ridge}, so rebuilding S is cheaper "
        "than moving P. The memory argument is larger still: {p} GB for one layer at 16k, per training step, per "
        "layer.",
        cites=cites,
        holds=lambda v: v["intensity"] < v["ridge"],
    )


def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
