"""Chapter 4, FlashAttention in Triton: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``).

Every number an option or explanation states is a fact of the chapter's page module (:mod:`lab.book.pages.ch04`),
cited as it is (:class:`lab.book.quiz.Cited`): the quiz reads no data of its own.
"""

from __future__ import annotations

from lab.book.pages import ch04
from lab.book.quiz import Computed, Question, Quiz, chapter_quiz, cite, ratio
from lab.results.modelshape import qwen25_7b

KEY = "04-flashattention-triton"


def _cite(**names) -> dict:
    return cite(ch04.facts(), **names)


def questions() -> list[Question]:
    shape = qwen25_7b()
    group = Computed("lab.results.modelshape: Qwen2.5-7B query heads per KV head", lambda: shape.q_heads // shape.kv_heads,
                     (), "d")
    return [
        Question(
            "In the causal forward kernel, what does skipping key blocks above the diagonal save?",
            ["About half the work at long lengths: those blocks would be fully masked anyway",
             "Nothing: masked scores still have to be computed and zeroed before the softmax",
             "Memory only: the FLOPs stay the same because the mask is applied after the matmul",
             "It changes the result, so it is only used in inference, never in training"],
            0,
            "A block whose every key comes after every query in the tile contributes exp(−∞) = 0. Skipping it changes "
            "no output and removes close to half the tiles of a long causal prompt.",
        ),
        Question(
            "Qwen2.5-7B has {group} query heads per KV head (grouped-query attention). How should a kernel exploit it?",
            ["Load each K/V tile once for the whole group of query heads that share it",
             "Copy K and V once per query head before the kernel, so every head reads a contiguous tensor",
             "Ignore it: GQA only changes the size of the weight matrices",
             "Average the query heads of a group into one before computing the scores"],
            0,
            "The query heads of a group read the same keys and values. Loading a tile once and reusing it for the "
            "{group} heads divides the KV traffic by {group}, which matters most in decode, where the KV read is the cost.",
            cites={"group": group},
        ),
        Question(
            "Where does the kernel divide by the softmax normaliser?",
            ["Once, at the end, dividing the accumulated output by the running sum",
             "After every key tile",
             "Before the first tile, using a row sum computed in a separate pass over the keys",
             "Never: the normaliser cancels out between the numerator and the denominator"],
            0,
            "The accumulator holds un-normalised Σ exp(s − m)·v, rescaled as the maximum moves. One division by ℓ at the "
            "end gives the softmax-weighted average and saves a multiply per tile.",
        ),
        _naive_against_fused(), _compute_bound(), _hand_schedule(), _counters(), _persistent(), _occupancy(),
        _lineage(),
    ]


def _naive_against_fused() -> Question:
    cites = _cite(naive=("pf_naive_ms_16k", ".0f"), flash=("bench_flash_ms_16k", ".2f"))
    return Question(
        "On the H200, in the benchmark's earlier full run, a causal GQA prefill of 16,384 tokens (one layer's "
        "attention, bf16, head dim 128) took {naive} ms with naive attention and {flash} ms with PyTorch's SDPA flash "
        "backend. Where does the gap come from?",
        ["Naive attention writes S and P, n×n per head, to HBM and reads them back through a softmax",
         "The naive path does more FLOPs, because it computes the masked half of the scores as well",
         "The flash backend skips part of the attention, keeping only the largest scores of each row",
         "The naive path runs in fp32, which halves the tensor cores' throughput"],
        0,
        "Both compute the same scores and outputs. The naive path moves the n×n matrices through a memory-bound "
        "softmax several times, {times}× slower here; the fused kernel keeps each tile on chip.",
        cites={**cites, "times": ratio(cites["naive"], cites["flash"], ".0f")},
        holds=lambda v: v["naive"] > 5 * v["flash"],
    )


def _compute_bound() -> Question:
    cites = _cite(ms=("pf_best_ms_32k", ".1f"), bytes_ms=("compulsory_ms_32k", ".2f"), tf=("pf_best_tf_32k", ".0f"))
    return Question(
        "In the race, the fastest kernel took {ms} ms at 32k tokens ({tf} TFLOP/s); reading Q, K and V once and "
        "writing O once would take {bytes_ms} ms at the H200's bandwidth ceiling. What holds the kernel back?",
        ["Arithmetic: the matrix products and the exponentials beside them, not memory traffic",
         "Memory bandwidth: every K/V tile is re-read from HBM for every query tile",
         "The host: Python launches the kernel once per query tile",
         "The causal mask, which forces every score to be computed and then discarded"],
        0,
        "The compulsory bytes would take a small fraction of the kernel's time, and the cache serves the re-reads, so "
        "the time goes to the tensor cores' products and the exponentials: the compute regime.",
        cites=cites,
        holds=lambda v: v["bytes_ms"] < 0.05 * v["ms"],
    )


def _hand_schedule() -> Question:
    cites = _cite(triton=("hk_triton_vs_16k", ".2f"), hand=("hk_vs_16k", ".2f"), split=("hk_neither_vs_16k", ".2f"),
                  split_gain=("hk_structure_pct_16k", ".0f"), overlap_gain=("hk_overlap_pct_16k", ".0f"),
                  pingpong_gain=("hk_pingpong_pct_16k", ".1f"))
    return Question(
        "In the Gluon race at 16k tokens our Triton kernel ran at {triton}× FA3's speed, and FlashAttention 3's schedule "
        "written by hand in Gluon at {hand}×, the same algorithm. Which part of that schedule bought the most?",
        ["FA3's structure: a producer warp feeding two consumer warpgroups, registers moved to the consumers",
         "Computing each tile's softmax while the previous tile's P·V product runs",
         "Ping-pong: the two consumer warpgroups taking turns on the tensor cores",
         "A third stage of K and V tiles in shared memory"],
        0,
        "The structure alone, with neither schedule, took the same algorithm from {triton}× to {split}× FA3's speed "
        "({split_gain}% faster than the Triton kernel); the softmax under P·V made it {overlap_gain}% faster again, "
        "and ping-pong on top of that changed its speed by {pingpong_gain}%, inside the drift. Once the tensor cores "
        "are fed by a warp that does nothing else, hiding the exponentials is what is left.",
        cites=cites,
        holds=lambda v: v["split_gain"] > v["overlap_gain"] > abs(v["pingpong_gain"]),
    )


def _counters() -> Question:
    cites = _cite(time=("hk_ctr_speed", ".2f"), cycles=("hk_ctr_cycles", ".2f"), apart=("hk_tensor_apart_pct", ".1f"),
                  fa3_clock=("hk_fa3_clock", ".2f"), ours_clock=("hk_gluon_clock", ".2f"))
    return Question(
        "Under Nsight Compute at 16k the Gluon kernel ran at {time}× FA3's speed in time and {cycles}× in SM-cycles "
        "(FA3's clock {fa3_clock} GHz, ours {ours_clock} GHz), and the tensor pipe was busy for the same number of "
        "cycles in both (apart by {apart}%). Where is the rest of the gap?",
        ["Outside the matrix products: the same tensor-pipe work, spread over more cycles",
         "In the matrix products: the Gluon kernel's wgmma instructions are slower than FA3's",
         "In the clock: once the clocks are equal the two kernels take the same time",
         "In DRAM: the Gluon kernel reads K and V more often than FA3 does"],
        0,
        "Cycles take the clock out, and the ratio in cycles ({cycles}×) is lower than in time ({time}×) because our "
        "kernel ran at the higher clock. Both kernels keep the tensor pipe busy for the same cycles, so the "
        "extra cycles are spent on everything else: loads, barriers, the softmax, starting and ending programs.",
        cites=cites,
        holds=lambda v: v["cycles"] < v["time"] < 1 and v["apart"] < 1 and v["ours_clock"] > v["fa3_clock"],
    )


def _persistent() -> Question:
    cites = _cite(programs=("pers_programs_balanced", ",d"), tiles=("pers_programs_default", ",d"),
                  cycles=("pers_cycles_vs_tile_16k", ".3f"), fa3=("pers_default_cycles_vs_fa3_16k", ".2f"))
    return Question(
        "On an H100 at 16k, the Gluon kernel launched persistently ran {programs} programs instead of {tiles}, with "
        "a balanced plan, and used {cycles}× the SM-cycles of its launch of a program per tile; both used about "
        "{fa3}× FA3's cycles. What does that say about FA3's lead?",
        ["Not in the launch: walking units in a program per multiprocessor left the extra cycles in place",
         "It is the persistent launch: FA3's one program per multiprocessor is what makes it faster",
         "It is the plan: a better assignment of units to programs would close it",
         "It cannot be told: SM-cycles count idle multiprocessors, so the two launches are not comparable"],
        0,
        "A persistent launch overlaps one unit's end with the next one's copies. With that the kernel still spent "
        "{cycles}× the per-tile launch's cycles, both about {fa3}× FA3's, so what FA3 does better lies within each "
        "unit's work. SM-cycles count the cycles with at least one warp resident, busy or stalled, so waiting at a "
        "program's start is counted too.",
        cites=cites,
        holds=lambda v: v["programs"] < v["tiles"] and v["cycles"] > 0.98 and v["fa3"] > 1.02,
    )


def _occupancy() -> Question:
    cites = _cite(regs=("cap_regs", "d"), progs=("cap_progs", "d"), ms=("cap_ms", ".2f"), regs_capped=("cap_cap", "d"),
                  progs_capped=("cap_progs_capped", "d"), ms_capped=("cap_ms_capped", ".2f"))
    return Question(
        "On the H200, a launch of the book's tuned Triton kernel at 16k tokens used {regs} registers per thread, and "
        "{progs} program fit on each multiprocessor: {ms} ms. With its registers capped at {regs_capped} per thread, "
        "{progs_capped} programs fit and the same launch took {ms_capped} ms. Why faster, with the same work to do?",
        ["While one program computes exponentials, the other's matmuls keep the tensor cores busy",
         "Fewer registers per thread make each instruction issue and complete faster",
         "The cap made the compiler skip the masked tiles it used to compute",
         "Two programs share one copy of K and V in their registers, halving the loads"],
        0,
        "A multiprocessor issues from whichever resident warp is ready. With two programs resident, one's "
        "exponentials and the other's tensor-core work overlap ({times}× here); with one, each waits for the other "
        "phase. The kernel is compute-bound, so hiding the exponentials is what pays.",
        cites={**cites, "times": ratio(cites["ms"], cites["ms_capped"], ".2f")},
        holds=lambda v: v["progs_capped"] > v["progs"] and v["ms_capped"] < v["ms"],
    )


def _lineage() -> Question:
    cites = _cite(exp2=("abl_16k_1_pct", ".0f"), nomask=("abl_16k_2_pct", ".0f"))
    return Question(
        "In the book's ablation on the H200 at 16k tokens, computing exponentials as exp2 with log2(e) folded into "
        "the scale made the kernel {exp2}% faster, and skipping mask work on off-diagonal tiles {nomask}% more. "
        "Which FlashAttention version's theme do these steps follow?",
        ["FA2's: fewer non-matmul operations, because tensor cores outrun the rest of the SM",
         "FA1's: keeping the n×n matrix out of HBM by tiling it with an online softmax",
         "FA3's: warp specialisation, asynchronous copies and ping-pong between warpgroups",
         "FA4's: exponentials computed as polynomials on the FMA units of a Blackwell SM"],
        0,
        "Neither step changes the bytes or the matmuls; both cut the work around them. FA2 made that its theme, "
        "since a tensor-core FLOP is many times cheaper than any other operation; FA3 and FA4 push the same "
        "pressure further with overlap and, on Blackwell, polynomial exponentials.",
        cites=cites,
        holds=lambda v: v["exp2"] > 0 and v["nomask"] > 0,
    )


def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
