"""Chapter 6, vLLM sweeps: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.pages import ch06
from lab.book.quiz import Cited, Computed, Question, Quiz, chapter_quiz, measured, ratio
from lab.book.quizzes.common import (
    A10G,
    FLASH,
    FLEX,
    length,
    shape_number,
    sweep_cell,
    sweep_lengths,
)
from lab.results import data, sweeps
from lab.results.sweeps import FA2, FA3
from lab.results import flex_decomposition as fd
from lab.results import flex_counters as fc
from lab.results import concurrency as rc

KEY = "06-vllm-sweeps"
#: FlexAttention's masks against SDPA's backends (lab.measure.attention.flex_masks).
MASKS_RUN = "h200/flex-masks"


GROUP = shape_number("query heads per KV head", lambda s: s.q_heads // s.kv_heads)


def questions() -> list[Question]:
    _, two_k, longest = sweep_lengths()
    c = lambda arm: measured(A10G, "fits.csv", "c_ps_per_token2", ".1f", arm=arm)
    b = lambda arm: measured(A10G, "fits.csv", "b_us_per_token", ".1f", arm=arm)
    chunk = Computed(f"{A10G}/provenance.json: flags.max_num_batched_tokens",
                     lambda: data.load(A10G).provenance["flags"]["max_num_batched_tokens"], (), "d")
    itl_gap = lambda n, what: Computed(f"FLEX − FLASH ITL {what}", lambda a, b_: b_ - a,
                                       (sweep_cell(FLASH, n, "itl_ms"), sweep_cell(FLEX, n, "itl_ms")))
    return [
        Question(
            "Fitting TTFT = a + b·n + c·n² to the A10G sweep, how do the two backends compare?",
            ["Linear terms close ({b_flash} vs {b_flex} µs/token); FLEX's quadratic term {c_ratio}× FLASH's",
             "FLEX's linear term is {c_ratio}× FLASH's, while the quadratic terms of the two backends are close",
             "Both terms are the same for the two backends; FLEX just has a larger intercept",
             "FLASH has no quadratic term at all, since it never builds the n×n matrix"],
            0,
            "The linear term is mostly the model's matmuls, which both backends share; the quadratic term is attention. "
            "c = {c_flash} vs {c_flex} ps/token²: FLEX pays {c_ratio}× more for every pair of tokens.",
            cites={"b_flash": b(FLASH), "b_flex": b(FLEX), "c_flash": c(FLASH), "c_flex": c(FLEX),
                   "c_ratio": ratio(c(FLEX), c(FLASH))},
            holds=lambda v: abs(v["b_flex"] / v["b_flash"] - 1) < 0.1 and v["c_ratio"] > 2,
        ),
        Question(
            "At {two_k} tokens of context the A10G decode ITL was {flash_2k} ms (FLASH) vs {flex_2k} ms (FLEX); at "
            "{long} it was {flash_long} vs {flex_long} ms. What does this say about benchmarking backends?",
            ["A short-context benchmark hides the gap: measure at the context lengths you serve",
             "FLEX is about as fast in decode at every length, so the long-context figure is an outlier",
             "The gap is noise: both backends are within a few percent of each other",
             "Decode latency does not depend on context length, only on the model's weights"],
            0,
            "The gap is {gap_2k} ms at {two_k} tokens and {gap_long} ms at {long}: it grows with the KV length, "
            "so a sweep that stops early misses it.",
            cites={"two_k": length("sweep length nearest 2k", two_k), "long": length("longest sweep length", longest),
                   "flash_2k": sweep_cell(FLASH, two_k, "itl_ms"), "flex_2k": sweep_cell(FLEX, two_k, "itl_ms"),
                   "flash_long": sweep_cell(FLASH, longest, "itl_ms"), "flex_long": sweep_cell(FLEX, longest, "itl_ms"),
                   "gap_2k": itl_gap(two_k, "near 2k"), "gap_long": itl_gap(longest, "at the longest length")},
            holds=lambda v: v["gap_long"] > 5 * v["gap_2k"],
        ),
        Question(
            "The A10G server prefilled long prompts in chunks of {chunk} tokens (chunked prefill). What does a chunk "
            "attend to?",
            ["Its own tokens and all the KV cached by earlier chunks, so the work stays quadratic",
             "Only its own tokens, so attention becomes linear in the prompt length",
             "Nothing: chunks skip attention and a final pass fixes it up once the whole prompt is cached",
             "Only the first chunk, which holds the system prompt every later chunk needs"],
            0,
            "Chunk k attends to k·{chunk} keys, so the sum over chunks is still about n²/2 pairs: the quadratic term "
            "survives, but the prefill runs as a series of bounded steps that decode requests can interleave with.",
            cites={"chunk": chunk},
        ),
        Question(
            "In FlexAttention, what do `score_mod`, `mask_mod` and the `BlockMask` each do?",
            ["One edits a score, one says if a pair is kept, and the BlockMask lists the blocks to visit",
             "The kernel reads a dense n×n boolean matrix from HBM for every score it computes",
             "`score_mod` runs on the CPU before the kernel to precompute a bias matrix in HBM",
             "The BlockMask is a paged KV layout: a table of pages, like vLLM's block table"],
            0,
            "`score_mod(score, b, h, q_idx, kv_idx)` returns a changed score; `mask_mod(b, h, q_idx, kv_idx)` returns "
            "whether the pair counts. `create_block_mask` evaluates the mask on every pair (O(n²) work when run "
            "eagerly, and still every pair when compiled) and reduces that to blocks; the compiled kernel never reads "
            "a dense mask, skips empty blocks and applies `mask_mod` only where a block is partly kept. vLLM 0.26 with "
            "PyTorch 2.9 or later calls neither for causal decoding: it builds the BlockMask straight from its block "
            "table (`BlockMask.from_kv_blocks`), keeping a torch.compile'd `create_block_mask` for other masks.",
        ),
        *_h200_questions(),
        *_batch_questions(),
        *_mask_questions(),
    ]


def _h200_questions() -> list[Question]:
    """Questions on this project's H200 sweeps, asked only once the data exists and supports them."""
    table = sweeps.h200_sweeps()
    if table is None:
        return []
    cell = lambda arm, n, col, fmt=".2f": measured(dataset_of(table, arm), "sweep.csv", col, fmt, arm=arm, target_len=n)
    questions = []
    n = sweeps.longest_common(table, (FA3, FA2))
    if n is not None:
        fa3, fa2 = cell(FA3, n, "ttft_s"), cell(FA2, n, "ttft_s")
        if fa3.value() < fa2.value():
            questions.append(Question(
                "On the H200 at {n} tokens, TTFT was {fa3} s with FlashAttention 3 and {fa2} s with FlashAttention 2. "
                "What does FA3 change to get there?",
                ["The same exact algorithm on Hopper's async tensor cores, TMA and warp specialisation",
                 "It approximates the softmax with a cheaper function that needs no exponentials at all",
                 "It skips attention between tokens far apart, keeping a sliding window of recent keys",
                 "It stores the score matrix in HBM so the backward pass needs no recomputation"],
                0,
                "FA3 keeps FlashAttention's tiling and online softmax and rebuilds the pipeline around Hopper's "
                "asynchronous tensor cores and copy engine, so loads, matmuls and exponentials overlap. At long "
                "prompts the kernel is compute-bound, so this overlap is where the time goes.",
                cites={"n": Computed("longest length both FA arms measured on the H200", lambda: n, (), ",d"),
                       "fa3": fa3, "fa2": fa2},
                holds=lambda v: v["fa3"] < v["fa2"]))
    rows = {arm: table[table["arm"] == arm].sort_values("target_len") for arm in (FA3, FLEX)}
    if all(len(r) >= 2 for r in rows.values()):
        short = max(int(r["target_len"].iloc[0]) for r in rows.values())
        long = min(int(r["target_len"].iloc[-1]) for r in rows.values())
        if short < long and all({short, long} <= set(r["target_len"]) for r in rows.values()):
            c = {f"{k}_{end}": cell(arm, n_, "itl_ms", ".1f") for k, arm in (("fa3", FA3), ("flex", FLEX))
                 for end, n_ in (("short", short), ("long", long))}
            questions.append(Question(
                "On the H200, decode ITL from {short} to {long} tokens of context went {fa3_short} → {fa3_long} ms with "
                "FA3 and {flex_short} → {flex_long} ms with FLEX_ATTENTION. Which statement fits?",
                ["vLLM's FLEX arm runs Flex's general kernel with small tiles over a lookup-masked paged cache",
                 "vLLM's FORCE_USE_FLEX_ATTENTION switches off the split-KV decoding template Flex would otherwise "
                 "use for this model",
                 "The H200's larger memory makes decode compute-bound, and FLEX does more FLOPs per token",
                 "Both curves are flat, so the backend does not matter for decode on this GPU"],
                0,
                "Decode attention reads the KV cache, linear in context. FA3 reads it near the bandwidth floor. Flex's "
                "split-KV decoding template needs a power-of-two number of query heads per KV head and Qwen2.5-7B has "
                "{group}, so Flex decodes with its general kernel here, forced or not. vLLM runs it with 16 × 16 tiles over "
                "its paged physical cache, masked through a block-table lookup; the arm measures that integration, "
                "not Flex as a kernel.",
                cites={"short": Computed("shortest common H200 length", lambda: short, (), ",d"),
                       "long": Computed("longest common H200 length", lambda: long, (), ",d"), **c,
                       "group": GROUP},
                holds=lambda v: (v["flex_long"] - v["flex_short"]) > (v["fa3_long"] - v["fa3_short"])))
    return questions + _flex_decomposition_questions() + _flex_counter_questions()


def _flex_decomposition_questions() -> list[Question]:
    """The H200 decomposition of vLLM's Flex recipe (lab.measure.flex_decomposition), once it is on file."""
    dec = fd.read(data.DATA_DIR)  # looked up now, so a test's data tree applies
    if dec is None or dec.ms("decode", 1, "flex-paged") is None:
        return []
    n = dec.length("decode")
    ms = lambda variant: measured(fd.DATASET, fd.FILE, "ms", ".3f", phase="decode", batch=1, n=n, variant=variant)  # noqa: E731
    return [Question(
        "On the H200, one decode step at batch 1 over {n} tokens with Qwen2.5-7B's shape: Flex as PyTorch ships it "
        "took {default} ms, the same call with vLLM's FORCE_USE_FLEX_ATTENTION {forced} ms, with vLLM's 16 × 16 tiles "
        "as well {tiles} ms, and with vLLM's paged block-table mask on top {paged} ms. What does the option cost here?",
        ["Nothing: with a group of {group} query heads PyTorch never picks Flex's decoding template anyway",
         "Most of the gap: the option turns off the split-KV decoding template, and the rest is noise in the timings",
         "Nothing, because FORCE_USE_FLEX_ATTENTION only changes the kernel in prefill",
         "It doubles the time, because the option makes Flex compute every query head twice"],
        0,
        "PyTorch's _use_flex_decoding asks for a power-of-two number of query heads per KV head; Qwen2.5-7B has {group}, so "
        "both calls run the same general kernel (the profiler shows the same grid). What vLLM's recipe costs is the "
        "tiles ({tiles_x}×) and the paged mask, which marks no block full and looks up every key ({paged_x}×).",
        cites={"n": Computed(f"data/{fd.DATASET}/{fd.FILE}: decode context", lambda: n, (), ",d"),
               "default": ms("flex-default"), "forced": ms("flex-forced"), "tiles": ms("flex-tiles16"),
               "paged": ms("flex-paged"), "tiles_x": ratio(ms("flex-tiles16"), ms("flex-forced")),
               "paged_x": ratio(ms("flex-paged"), ms("flex-tiles16")), "group": GROUP},
        holds=lambda v: abs(v["forced"] / v["default"] - 1) < 0.05 and v["paged"] > 1.5 * v["forced"]
        and int(v["group"]) & (int(v["group"]) - 1) != 0)]


def _flex_counter_questions() -> list[Question]:
    """What Nsight Compute says Flex's general kernel does in batch-1 decode (lab.results.flex_counters)."""
    rows = {(r["candidate"], r["batch"]): r for r in fc.table(data.DATA_DIR)}
    if ("flex-default", 1) not in rows:
        return []
    what = "data/h200/kernel-counters/raw.csv via lab.results.flex_counters.table: flex-default, batch 1"
    cell = lambda column, fmt: Computed(f"{what}: {column}", lambda: rows[("flex-default", 1)][column], (), fmt)  # noqa: E731
    return [Question(
        "Nsight Compute on FlexAttention's general kernel in batch-1 decode (32k tokens, one query token, "
        "{programs} programs): the tensor pipe was {tensor}% busy on the SMs it ran on, DRAM delivered {read}% of the "
        "read ceiling, and warps were mostly issuing, not waiting. What sets its time?",
        ["Arithmetic on padding: each program multiplies a {rows}-row query tile for one real row",
         "Memory bandwidth: decode reads the whole cache, so it waits on DRAM",
         "Launch overhead: {programs} programs are too few to amortise the launch",
         "The missing split-KV template: with a split the same arithmetic would spread over all SMs at no cost"],
        0,
        "PyTorch 2.11's default tile for Hopper, bf16 and this head dimension is {rows} query rows; in decode one "
        "row is real, so the tensor cores do about {rows} times the useful work, on one SM per query head. A kernel "
        "waiting on memory shows a low tensor pipe and long-scoreboard stalls; this one shows the opposite.",
        cites={"programs": cell("programs", "d"), "tensor": cell("tensor_pct", ".0f"),
               "rows": Computed("lab.results.flex_counters.GENERAL_BLOCK_M (torch 2.11's h100_default_flex_config)",
                                lambda: fc.GENERAL_BLOCK_M, (), "d"),
               "read": cell("read_pct_of_ceiling", ".1f")},
        holds=lambda v: v["tensor"] > 25 and v["read"] < 10)]


def _batch_questions() -> list[Question]:
    """Decode against concurrent requests in vLLM on the H200 (FA3, 32k), each point beside its floor."""
    points = rc.load_points(root=data.DATA_DIR)
    fa3 = points[(points["arm"] == FA3) & (points["context"] == 32768)] if not points.empty else points
    if fa3.empty or not {1, 16, 64} <= set(int(c) for c in fa3["concurrency"]):
        return []
    dataset = str(fa3["dataset"].iloc[0])
    bandwidth, where = rc.floor_bandwidth()
    cell = lambda column, c, fmt=".1f": measured(dataset, "concurrency.csv", column, fmt, arm=FA3,
                                                 context=32768, concurrency=c)
    floor = lambda c: Computed(f"lab.results.concurrency: floor of the admitted batch over {where}",
                               lambda b: 1e3 * rc.floor_step_s(int(b), 32768, bandwidth), (cell("admitted", c, "d"),))
    return [Question(
        "In vLLM on the H200, FA3 decoding requests of 32k tokens took {itl1} ms per step with one request, {itl16} "
        "with 16 and {itl64} with 64 sent ({admitted} admitted). The floor of each step, the weights once plus every "
        "admitted sequence's KV cache at the H200's bandwidth ceiling, was {f1}, {f16} and {f64} ms. What do the "
        "numbers say?",
        ["Past a handful of requests the KV read dominates, and ITL follows its floor",
         "The step stays bound by reading the weights, so ITL should not grow with the batch",
         "FA3 falls further behind its floor as the batch grows: the kernel is the bottleneck",
         "Decode turned compute-bound at sixteen requests, so the floor no longer applies"],
        0,
        "The KV bytes of a step equal the weights' at about {kvb} sequences of 32k tokens. Below that the step is the "
        "weights plus a fixed per-step cost; above it every request adds its whole cache, and FA3 reads it near the "
        "bandwidth ceiling, so ITL tracks the floor ({x64}× of it at the end). That is why GQA, MLA and FP8 KV caches "
        "exist.",
        cites={"itl1": cell("itl_ms", 1), "itl16": cell("itl_ms", 16), "itl64": cell("itl_ms", 64),
               "admitted": cell("admitted", 64, "d"), "f1": floor(1), "f16": floor(16), "f64": floor(64),
               "kvb": Computed("lab.results.concurrency: batch whose KV bytes equal the weights' at 32k",
                               lambda: rc.kv_bound_batch(32768)),
               "x64": ratio(cell("itl_ms", 64), floor(64), ".2f")},
        holds=lambda v: (v["itl1"] / v["f1"] > v["itl16"] / v["f16"] > v["itl64"] / v["f64"]
                         and v["itl64"] / v["f64"] < 1.2 and 1 < v["kvb"] < 16),
    )]


def _mask_questions() -> list[Question]:
    """Flex on plain causal attention against SDPA's fastest backend there (cuDNN, is_causal=True, race of record),
    and Flex's window mask against the SDPA backend that takes it as a dense mask (the flex-masks run)."""
    if not (data.DATA_DIR / MASKS_RUN / "masks.csv").exists():
        return []
    masks = data.load(MASKS_RUN).csv("masks.csv", ["mask", "impl", "n", "ms"])
    sdpa = masks[(masks["mask"] == "sliding-window") & (masks.n == ch06.CAUSAL_N) & masks.impl.str.startswith("sdpa")
                 & masks.ms.notna()]
    if sdpa.empty:
        return []
    window_impl = str(sdpa.loc[sdpa.ms.idxmin(), "impl"])  # the fastest SDPA backend that accepts the mask
    facts = ch06.facts()
    ms = lambda mask, impl: measured(MASKS_RUN, "masks.csv", "ms", ".2f", mask=mask, impl=impl, n=ch06.CAUSAL_N)  # noqa: E731
    window = data.load(MASKS_RUN).provenance["flags"]["window"]
    return [Question(
        "On the H200 at {n} tokens, FlexAttention took {flex_causal} ms on plain causal attention, and SDPA's fastest "
        "backend there, cuDNN with is_causal=True, {cudnn_causal} ms: Flex ran at {speed}× cuDNN's speed (both in "
        "the prefill race of record). With a causal window of {w} tokens Flex took {flex_window} ms against "
        "{sdpa_window} ms for the fastest SDPA backend that accepts that mask ({window_impl}, a dense boolean mask; "
        "the mask study's own run). Where does Flex's large win on the window come from?",
        ["Its BlockMask skips the blocks the mask empties; a dense mask visits all",
         "Flex computes its scores in a lower precision than any of SDPA's backends",
         "SDPA recompiles its kernel on every call, while Flex is compiled only once",
         "Flex caches the previous call's output and returns it whenever the same inputs come back"],
        0,
        "On plain causal attention SDPA's hand-written backends skip the masked half as well, and cuDNN is faster "
        "than Flex. A window mask reaches SDPA only as a dense n×n boolean tensor, so its backend computes every "
        "block; Flex's create_block_mask recorded which blocks hold any kept pair, and the kernel never visits the "
        "rest.",
        cites={"n": Computed("lab.book.pages.ch06.CAUSAL_N", lambda: ch06.CAUSAL_N, (), ",d"),
               "w": Computed(f"{MASKS_RUN}/provenance.json: flags.window", lambda: window, (), ",d"),
               "flex_causal": Cited(facts["flex_causal_ms"], ".2f"), "cudnn_causal": Cited(facts["cudnn_causal_ms"], ".2f"),
               "speed": Cited(facts["flex_vs_cudnn_causal"], ".2f"),
               "flex_window": ms("sliding-window", "flex"), "sdpa_window": ms("sliding-window", window_impl),
               "window_impl": measured(MASKS_RUN, "masks.csv", "impl", "", mask="sliding-window",
                                       impl=window_impl, n=ch06.CAUSAL_N)},
        holds=lambda v: v["speed"] < 1 and v["sdpa_window"] / v["flex_window"] > 3,
    )]


def dataset_of(table, arm: str) -> str:
    """The dataset an arm's rows of a combined sweep table come from."""
    return sorted(set(table[table["arm"] == arm]["dataset"]))[0]



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
