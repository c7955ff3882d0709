"""Chapter 6, vLLM sweeps: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.pages import ch06
from lab.book.quiz import Computed, Question, Quiz, chapter_quiz, cite
from lab.results import flex_counters as fc

KEY = "06-vllm-sweeps"


def _cite(**names) -> dict:
    return cite(ch06.facts(), **names)


def _measured(*names: str) -> bool:
    """Whether the page measured every one of these facts (a question on a run not on file is not asked)."""
    facts = ch06.facts()
    return all(facts[name].measured for name in names)


def questions() -> list[Question]:
    fits = _cite(b_flash=("a10g_fa_b", ".1f"), b_flex=("a10g_flex_b", ".1f"), c_flash=("a10g_fa_c", ",.0f"),
                 c_flex=("a10g_flex_c", ",.0f"), c_ratio=("a10g_c_ratio", ".1f"))
    itl = _cite(two_k=("a10g_two_k_len", "d"), long=("a10g_fa_long_len", "d"), flash_2k=("a10g_fa_itl_2k", ".1f"),
                flex_2k=("a10g_flex_itl_2k", ".1f"), flash_long=("a10g_fa_itl_long", ".1f"),
                flex_long=("a10g_flex_itl_long", ".1f"), gap_2k=("itl_gap_2k", ".1f"), gap_long=("itl_gap_long", ".1f"))
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
            cites=fits,
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
            cites=itl,
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
            cites=_cite(chunk=("a10g_chunk", "d")),
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
    questions = []
    if _measured("h200_ttft_fa3_fa2_len", "h200_ttft_fa2"):
        cites = _cite(n=("fa2_long_n", ",d"), fa3=("h200_ttft_fa3_fa2_len", ".2f"), fa2=("h200_ttft_fa2", ".2f"))
        if cites["fa3"].value() < cites["fa2"].value():
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
                cites=cites,
                holds=lambda v: v["fa3"] < v["fa2"]))
    if _measured("h200_fa_itl_short", "h200_fa_itl_long", "h200_flex_itl_short", "h200_flex_itl_long"):
        questions.append(Question(
            "On the H200, decode ITL from {short} tokens of context went {fa3_short} → {fa3_long} ms with FA3 at "
            "{fa3_n} tokens, and {flex_short} → {flex_long} ms with FLEX_ATTENTION at {flex_n}. Which statement fits?",
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
            cites=_cite(short=("h200_short_len", ",d"), fa3_n=("h200_fa_long_len", ",d"),
                        flex_n=("h200_flex_long_len", ",d"), fa3_short=("h200_fa_itl_short", ".1f"),
                        fa3_long=("h200_fa_itl_long", ".1f"), flex_short=("h200_flex_itl_short", ".1f"),
                        flex_long=("h200_flex_itl_long", ".1f"), group=("group", "d")),
            # FLEX's ITL grows more over a shorter stretch of context than FA3's over the longest
            holds=lambda v: (v["flex_long"] - v["flex_short"]) > (v["fa3_long"] - v["fa3_short"])
            and v["flex_n"] <= v["fa3_n"]))
    return questions + _flex_decomposition_questions() + _flex_counter_questions()


def _flex_decomposition_questions() -> list[Question]:
    """The H200 decomposition of vLLM's Flex recipe (lab.measure.flex_decomposition), once it is on file."""
    if not _measured("flexdec_b1_flex_paged_ms"):
        return []
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
        cites=_cite(n=("flexdec_decode_n", ",d"), default=("flexdec_b1_flex_default_ms", ".3f"),
                    forced=("flexdec_b1_flex_forced_ms", ".3f"), tiles=("flexdec_b1_flex_tiles16_ms", ".3f"),
                    paged=("flexdec_b1_flex_paged_ms", ".3f"), tiles_x=("flexdec_b1_tiles16_x", ".1f"),
                    paged_x=("flexdec_b1_paged_x", ".1f"), group=("group", "d")),
        holds=lambda v: abs(v["forced"] / v["default"] - 1) < 0.05 and v["paged"] > 1.5 * v["forced"]
        and int(v["group"]) & (int(v["group"]) - 1) != 0)]


def _percent(text: str) -> float:
    """The number of a counter the page glued as text ("49.8%")."""
    return float(text.rstrip("%"))


def _flex_counter_questions() -> list[Question]:
    """What Nsight Compute says Flex's general kernel does in batch-1 decode (the page's flexctr_* facts)."""
    if not _measured("flexctr_default_b1_programs"):
        return []
    return [Question(
        "Nsight Compute on FlexAttention's general kernel in batch-1 decode (32k tokens, one query token, "
        "{programs} programs): the tensor pipe was {tensor} busy on the SMs it ran on, DRAM delivered {read} of the "
        "read ceiling, and warps were mostly issuing, not waiting. What sets its time?",
        ["Arithmetic on padding: each program multiplies a {rows}-row query tile for one real row",
         "Memory bandwidth: decode reads the whole cache, so it waits on DRAM",
         "Launch overhead: {programs} programs are too few to amortise the launch",
         "The missing split-KV template: with a split the same arithmetic would spread over all SMs at no cost"],
        0,
        "PyTorch 2.11's default tile for Hopper, bf16 and this head dimension is {rows} query rows; in decode one "
        "row is real, so the tensor cores do about {rows} times the useful work, on one SM per query head. A kernel "
        "waiting on memory shows a low tensor pipe and long-scoreboard stalls; this one shows the opposite.",
        cites={**_cite(programs=("flexctr_default_b1_programs", ""), tensor=("flexctr_default_b1_tensor", ""),
                       read=("flexctr_default_b1_read_pct", "")),
               "rows": Computed("lab.results.flex_counters.GENERAL_BLOCK_M (torch 2.11's h100_default_flex_config)",
                                lambda: fc.GENERAL_BLOCK_M, (), "d")},
        holds=lambda v: _percent(v["tensor"]) > 25 and _percent(v["read"]) < 10)]


def _batch_questions() -> list[Question]:
    """Decode against concurrent requests in vLLM on the H200 (FA3, 32k), each point beside its floor."""
    if not _measured("batch_1_fa_itl", "batch_16_fa_itl", "batch_64_fa_itl"):
        return []
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
        "From {kvb} sequences of 32k tokens on, the KV bytes of a step exceed the weights'. Below that the step is "
        "the weights plus a fixed per-step cost; above it every request adds its whole cache, and FA3 reads it near "
        "the bandwidth ceiling, so ITL tracks the floor ({x64}× of it at the end). That is why GQA, MLA and FP8 KV "
        "caches exist.",
        cites=_cite(itl1=("batch_1_fa_itl", ".1f"), itl16=("batch_16_fa_itl", ".1f"), itl64=("batch_64_fa_itl", ".1f"),
                    admitted=("batch_64_fa_admitted", "d"), f1=("conc_fa3_32k_1_floor", ".1f"),
                    f16=("conc_fa3_32k_16_floor", ".1f"), f64=("conc_fa3_32k_64_floor", ".1f"),
                    kvb=("batch_kv_bound_long", "d"), x64=("batch_64_fa_x_floor", ".2f")),
        holds=lambda v: (v["itl1"] / v["f1"] > v["itl16"] / v["f16"] > v["itl64"] / v["f64"]
                         and v["itl64"] / v["f64"] < 1.2 and 1 < v["kvb"] < 16),
    )]


def _mask_questions() -> list[Question]:
    """Flex on plain causal attention against SDPA's fastest backend there (cuDNN, is_causal=True, chapter 4's race),
    and Flex's window mask against the SDPA backend that takes it as a dense mask (the mask study)."""
    if not _measured("window_flex_ms", "window_sdpa_ms"):
        return []
    return [Question(
        "On the H200 at {n} tokens, FlexAttention took {flex_causal} ms on plain causal attention, and SDPA's fastest "
        "backend there, cuDNN with is_causal=True, {cudnn_causal} ms: Flex ran at {speed}× cuDNN's speed (both timed "
        "in chapter 4's race). With a causal window of {w} tokens Flex took {flex_window} ms against "
        "{sdpa_window} ms for the fastest SDPA backend that accepts that mask ({window_impl}, a dense boolean mask; "
        "both timed in chapter 5b's mask study, whose plain causal row gave cuDNN a dense mask too, hence the causal "
        "pair from chapter 4's race). Where does Flex's large win on the window come from?",
        ["Its BlockMask skips the blocks the mask empties; a dense mask visits all",
         "Flex computes its scores in a lower precision than any of SDPA's backends",
         "SDPA recompiles its kernel on every call, while Flex is compiled only once",
         "Flex caches the previous call's output and returns it whenever the same inputs come back"],
        0,
        "On plain causal attention SDPA's hand-written backends skip the masked half as well, and cuDNN is faster "
        "than Flex. A window mask reaches SDPA only as a dense n×n boolean tensor, so its backend computes every "
        "block; Flex's create_block_mask recorded which blocks hold any kept pair, and the kernel never visits the "
        "rest.",
        cites=_cite(n=("causal_n", ",d"), w=("mask_window", ",d"), flex_causal=("flex_causal_ms", ".2f"),
                    cudnn_causal=("cudnn_causal_ms", ".2f"), speed=("flex_vs_cudnn_causal", ".2f"),
                    flex_window=("window_flex_ms", ".2f"), sdpa_window=("window_sdpa_ms", ".2f"),
                    window_impl=("window_sdpa_impl", "")),
        holds=lambda v: v["speed"] < 1 and v["sdpa_window"] / v["flex_window"] > 3,
    )]


def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
