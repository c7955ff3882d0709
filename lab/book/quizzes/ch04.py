"""Chapter 4, FlashAttention in Triton: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab import LabError
from lab.book.quiz import Computed, Question, Quiz, chapter_quiz, measured, ratio
from lab.book.quizzes.common import (
    H200_KERNELS,
    kernels_table,
    shape_number,
)
from lab.results import data, fused_bound

KEY = "04-flashattention-triton"


def questions() -> list[Question]:
    group = shape_number("query heads per KV head", lambda s: s.q_heads // s.kv_heads)
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
        *_h200_prefill_kernels(),
        *_h200_hand_schedule(),
        *_h200_compute_bound(),
        *_h200_occupancy(),
        *_h200_lineage(),
    ]


def _h200_hand_schedule() -> list[Question]:
    """Chapter 4's hand-scheduled Hopper kernel (lab.book.hopper_facts): which part of FA3's schedule paid."""
    from lab.book.hopper_facts import DEFAULT, RACE

    if not (data.DATA_DIR / RACE / "race.csv").exists():
        return []
    n = 16384
    ms = lambda variant: measured(RACE, "race.csv", "ms", ".3f", n=n, variant=variant)  # noqa: E731
    speed = lambda variant: Computed(f"{RACE}/race.csv at n={n}: FA3's ms / {variant}'s ms",  # noqa: E731
                                     lambda fa3, ours: fa3 / ours, (ms("fa3"), ms(variant)), ".2f")
    gain = lambda before, after: Computed(f"{RACE}/race.csv at n={n}: % faster, {after} against {before}",  # noqa: E731
                                          lambda b, a: 100 * (b / a - 1), (ms(before), ms(after)), ".0f")
    split, overlap = "gluon 128x128 s2, neither", "gluon 128x128 s2, no ping-pong"
    return [Question(
        "On the H200 at 16k tokens our Triton kernel ran at {triton}× FA3's speed, and FlashAttention 3's schedule "
        "written by hand in Gluon at {hand}×, the same algorithm. Which part of that schedule bought the most?",
        ["FA3's structure: a producer warp feeding two consumer warpgroups, registers moved to the consumers",
         "Computing each tile's softmax while the previous tile's P·V product runs",
         "Ping-pong: the two consumer warpgroups taking turns on the tensor cores",
         "A third stage of K and V tiles in shared memory"],
        0,
        "The structure alone, with neither schedule, took the same algorithm from {triton}× to {split}× FA3's speed "
        "({split_gain}% faster than the Triton kernel); the softmax under P·V added {overlap_gain}%, and ping-pong "
        "on top of it {pingpong_gain}%. Once the tensor cores are fed by a warp that does nothing else, hiding the "
        "exponentials is what is left.",
        cites={"triton": speed("+ kv-major order, TMA"), "hand": speed(DEFAULT), "split": speed(split),
               "split_gain": gain("+ kv-major order, TMA", split), "overlap_gain": gain(split, overlap),
               "pingpong_gain": gain(overlap, DEFAULT)},
        holds=lambda v: v["split_gain"] > v["overlap_gain"] > abs(v["pingpong_gain"]),
    )]


def _h200_lineage() -> list[Question]:
    """Two steps of the book's kernel ablation and the FlashAttention version whose theme they follow."""
    if not (data.DATA_DIR / H200_KERNELS / "ablation.csv").exists():
        return []
    table = data.load(H200_KERNELS).csv("ablation.csv", ["n", "step", "ms"])
    n = int(min(set(table["n"]), key=lambda x: abs(x - 16384)))
    if not {0, 1, 2} <= set(table[table["n"] == n]["step"]):
        return []
    ms = lambda step: measured(H200_KERNELS, "ablation.csv", "ms", ".3f", n=n, step=step)
    gain = lambda step: Computed(f"{H200_KERNELS}/ablation.csv: step {step} at n={n}, % faster than step {step - 1}",
                                 lambda before, after: 100 * (before / after - 1), (ms(step - 1), ms(step)), ".0f")
    return [Question(
        "In the book's ablation on the H200 at {n} tokens, computing exponentials as exp2 with log2(e) folded into "
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
        cites={"n": Computed(f"{H200_KERNELS}/ablation.csv: length nearest 16k", lambda: n, (), ",d"),
               "exp2": gain(1), "nomask": gain(2)},
        holds=lambda v: v["exp2"] > 0 and v["nomask"] > 0,
    )]


def _h200_prefill_kernels() -> list[Question]:
    table = kernels_table("prefill.csv")
    if table is None:
        return []
    naive_ok = table[(table["candidate"] == "naive") & (table["status"] == "ok") & table["causal"]]
    both = set(naive_ok["n"]) & set(table[(table["candidate"] == "sdpa-flash") & (table["status"] == "ok")]["n"])
    if not both:
        return []
    n = int(max(both))
    cell = lambda candidate: measured(H200_KERNELS, "prefill.csv", "ms", ".2f", candidate=candidate, n=n, causal=True)
    return [Question(
        "On the H200, a causal GQA prefill of {n} tokens (one layer's attention, bf16, head dim 128) took {naive} ms "
        "with naive attention and {flash} ms with PyTorch's SDPA flash backend. Where does the gap come from?",
        ["Naive attention writes S and P, n×n per head, to HBM and reads them back through a softmax",
         "The naive path does more FLOPs, because it computes the masked half of the scores as well",
         "The flash backend skips part of the attention, keeping only the largest scores of each row",
         "The naive path runs in fp32, which halves the tensor cores' throughput"],
        0,
        "Both compute the same scores and outputs. At {n} tokens the naive path moves the n×n matrices through a "
        "memory-bound softmax several times, {ratio}× slower here; the fused kernel keeps each tile on chip.",
        cites={"n": Computed(f"{H200_KERNELS}/prefill.csv: longest n the naive candidate ran", lambda: n, (), ",d"),
               "naive": cell("naive"), "flash": cell("sdpa-flash"),
               "ratio": ratio(cell("naive"), cell("sdpa-flash"), ".0f")},
        holds=lambda v: v["naive"] > 5 * v["flash"],
    )]


def _h200_compute_bound() -> list[Question]:
    """Chapter 2's stopwatch check (lab.results.fused_bound): the fastest prefill kernel against the tile re-read
    count's time at the H200's bandwidth ceiling and at the datasheet's, a margin too thin to prove the bound."""
    n = 32768
    try:
        candidate = fused_bound.fastest_candidate(n)
        fused_bound.h200_kernel_check(candidate, n)
    except LabError:
        return []
    check = lambda key: Computed(f"lab.results.fused_bound.h200_kernel_check({candidate}, n={n}): {key}",  # noqa: E731
                                 lambda: fused_bound.h200_kernel_check(candidate, n)[key], (), ".1f")
    return [Question(
        "On the H200 the fastest prefill kernel of the first full benchmark at {n} tokens took {ms} ms. Fetching "
        "every K/V tile re-read "
        "from HBM would take {ceiling_ms} ms at the H200's bandwidth ceiling, {ds_ms} ms at the datasheet's. "
        "What does this stopwatch test show?",
        ["Little alone: the margin is thin and flips at the datasheet rate; DRAM counters decide",
         "That the kernel is compute-bound, since it beat the time the re-read bytes need",
         "That the kernel is memory-bound, since its time lies between the two re-read times",
         "That the bandwidth ceiling is wrong, since no kernel can beat its own GPU's memory roof"],
        0,
        "If the re-read count were the traffic, no kernel could finish sooner than those bytes take. Against the "
        "read-stream ceiling the kernel wins by a few percent; against the datasheet it loses, so the verdict hangs on "
        "which bandwidth counts. The DRAM bytes Nsight Compute counts, near the compulsory count, show that L2 serves "
        "most re-reads; the kernel's rate near the measured matmul ceiling says what limits it instead.",
        cites={"n": Computed("the stopwatch check's length (chapter 2)", lambda: n, (), ",d"),
               "ms": measured(H200_KERNELS, "prefill.csv", "ms", ".1f", candidate=candidate, n=n, causal=True),
               "ceiling_ms": check("reread_ms"), "ds_ms": check("reread_ms_datasheet")},
        holds=lambda v: v["ds_ms"] < v["ms"] < v["ceiling_ms"],
    )]


def _h200_occupancy() -> list[Question]:
    """The register cap that let two programs of the tuned kernel share a multiprocessor (tuning runs)."""
    from lab.results import tuning

    if not (data.DATA_DIR / H200_KERNELS / "tuning_forward.csv").exists():
        return []
    try:
        pairs = tuning.register_cap_pairs(data.load(H200_KERNELS).csv("tuning_forward.csv"))
    except LabError:
        return []
    best = pairs.loc[pairs.speedup.idxmax()]
    plain = dict(round=int(best["round"]), shape="prefill 16k", setting=f"tuned {best.launch}", tma=best.tma)
    capped = {**plain, "setting": f"tuned {best.launch} r{best.cap}"}
    cell = lambda column, fmt, where: measured(H200_KERNELS, "tuning_forward.csv", column, fmt, **where)  # noqa: E731
    return [Question(
        "On the H200, the book's tuned Triton kernel at 16k tokens used {regs} registers per thread, and {progs} "
        "program fit on each multiprocessor: {ms} ms. With its registers capped (it then used {regs_capped} per "
        "thread), {progs_capped} programs fit and the same launch took {ms_capped} ms. Why faster, with the same work "
        "to do?",
        ["While one program computes exponentials, the other's matmuls keep the tensor cores busy",
         "Fewer registers per thread make each instruction issue and complete faster",
         "The cap made the compiler skip the masked tiles it used to compute",
         "Two programs share one copy of K and V in their registers, halving the loads"],
        0,
        "A multiprocessor issues from whichever resident warp is ready. With two programs resident, one's "
        "exponentials and the other's tensor-core work overlap ({ratio}× here); with one, each waits for the other "
        "phase. The kernel is compute-bound, so hiding the exponentials is what pays.",
        cites={"regs": cell("registers", ".0f", plain), "progs": cell("programs_per_sm", ".0f", plain),
               "ms": cell("ms", ".2f", plain), "regs_capped": cell("registers", ".0f", capped),
               "progs_capped": cell("programs_per_sm", ".0f", capped), "ms_capped": cell("ms", ".2f", capped),
               "ratio": ratio(cell("ms", ".2f", plain), cell("ms", ".2f", capped), ".2f")},
        holds=lambda v: v["progs_capped"] > v["progs"] and v["ms_capped"] < v["ms"],
    )]



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
