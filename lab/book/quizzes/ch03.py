"""Chapter 3, tiling and the online softmax: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.quiz import Question, Quiz, chapter_quiz

KEY = "03-tiling-online-softmax"


def questions() -> list[Question]:
    return [
        Question(
            "Is FlashAttention an approximation of attention?",
            ["No: it computes the same softmax(QKᵀ)V; results differ only by rounding",
             "Yes: it drops scores below a threshold, which is where its speed at long prompts comes from",
             "Yes: it replaces the score matrix with a low-rank approximation of it",
             "Only in bf16; in fp32 it computes the exact softmax"],
            0,
            "Tiling with an online softmax reorders the sums and rescales partial results but keeps every term, so "
            "only rounding differs. The book's NumPy version matches the naive reference to rounding error in fp64 at "
            "any length, tile-aligned or not.",
        ),
        Question(
            "Processing a new tile of keys raises the running row maximum from m to m′. What happens to the partial "
            "sum ℓ and the partial output O accumulated so far?",
            ["Both are multiplied by exp(m − m′) before the new tile's terms are added",
             "They are thrown away and the row is recomputed from its first tile with the new maximum",
             "Nothing: the maximum only matters once, at the end",
             "Only ℓ is rescaled now; O is rescaled once at the end, when the final maximum is known"],
            0,
            "Every earlier term was exp(s − m); to express it relative to the new maximum it needs a factor exp(m − m′). "
            "O and ℓ carry the same factor, which is why the final O / ℓ is exact.",
        ),
        Question(
            "FlashAttention's HBM traffic is Θ(n²·d²/M) for on-chip memory of M bytes. In FlashAttention-2's loop order "
            "(query tiles outside, key tiles inside), what does a larger M buy?",
            ["Bigger tiles: K and V are re-read fewer times, so the traffic falls as one over M",
             "Nothing: the n×n matrix still goes to HBM, only in smaller pieces that fit the tile",
             "Fewer FLOPs: the softmax gets cheaper because each tile holds more of the row at once",
             "A different result, because larger tiles change the order of the sums and so the rounding"],
            0,
            "Each query tile streams all of K and V once; with more SRAM the query tiles are larger and fewer, so the "
            "number of full K/V passes shrinks. The FLOPs stay the same. The bound counts every re-read as HBM "
            "traffic; on a GPU L2 serves most of them, so at long prompts the fused kernel's limit is compute, not bytes.",
        ),
    ]



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
