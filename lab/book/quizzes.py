"""The book's self-check questions, one function per chapter (``CHAPTERS`` maps file stems to them).

Every number an option states is a :class:`lab.book.quiz.Measured` cell of a dataset or a
:class:`lab.book.quiz.Computed` value from ``lab`` (hardware table, model shape, I/O model); ``holds``
states, on those values, why the marked option is the right one. ``tests/test_quiz.py`` checks every
question against the data it cites.
"""

from __future__ import annotations

from lab import LabError

from lab.measure import bench
from lab.results import kernel_runs

from lab.results import data

from lab.results import hardware

from lab.results import iomodel

from lab.results import reference
from lab.results.modelshape import qwen25_7b
from lab.book.quiz import Computed, Question, Quiz, measured, ratio

#: The published A10G study (vLLM 0.11, Qwen2.5-7B, bf16), parsed by ``python -m lab reference``.
A10G = reference.DATASET
FLASH, FLEX = "FLASH_ATTN", "FLEX_ATTENTION"
GB = 1e9


def _sweep(arm: str, target_len: int, column: str, fmt: str = ".1f"):
    return measured(A10G, "sweep.csv", column, fmt, arm=arm, target_len=target_len)


def _sweep_lengths() -> tuple[int, int, int]:
    """Shortest, 2k and longest target lengths of the A10G sweep (read from the table, not typed)."""
    lengths = sorted(set(data.load(A10G).csv("sweep.csv", ["target_len"])["target_len"]))
    two_k = min(lengths, key=lambda n: abs(n - 2048))
    return int(lengths[0]), int(two_k), int(lengths[-1])


def _length(what: str, n: int) -> Computed:
    """A prompt length picked from a dataset table, shown as a whole number."""
    return Computed(f"{A10G}: {what}", lambda: n, (), "d")


def _census_long_window() -> int:
    """Longest prefill window of the published census (the study's 28k window)."""
    return int(data.load(A10G).csv("census.csv", ["phase", "tokens"]).query("phase == 'prefill'")["tokens"].max())


def _device(key: str, what: str, fn, fmt: str = ".0f") -> Computed:
    dev = hardware.device(key)
    return Computed(f"lab.results.hardware: {dev.name} {what}", lambda: fn(dev), (), fmt)


def _shape(what: str, fn, fmt: str = "d") -> Computed:
    return Computed(f"lab.results.modelshape: Qwen2.5-7B {what}", lambda: fn(qwen25_7b()), (), fmt)


# --- 01 roofline -----------------------------------------------------------------------------------

def roofline() -> list[Question]:
    ridge = lambda key: _device(key, "ridge (bf16 FLOP/s over bytes/s)", lambda d: d.ridge("bf16"))
    # Batch-1 decode: every weight is read once (2 bytes in bf16) and used in one multiply-add (2 FLOPs).
    decode_intensity = _shape("decode matmul FLOP per weight byte at batch 1",
                              lambda s: s.linear_flops_per_token() / (s.layers * s.linear_weights_per_layer * 2), ".1f")
    return [
        Question(
            "From datasheet figures alone, where is the ridge point of an H100 SXM (dense bf16)?",
            ["About {h100} FLOP per byte", "About {a10g} FLOP per byte", "About {h200} FLOP per byte",
             "It cannot be known without running a benchmark"],
            0,
            "Ridge = peak FLOP/s ÷ bytes/s. The H100 SXM's dense bf16 peak over its HBM bandwidth gives about {h100}; "
            "the A10G's gives {a10g}; the H200 has the same compute but more bandwidth, so its ridge drops to {h200}.",
            cites={"h100": ridge("H100-SXM"), "a10g": ridge("A10G"), "h200": ridge("H200-SXM")},
            holds=lambda v: v["h200"] < v["h100"],
        ),
        Question(
            "A batch-1 decode step multiplies one token's activations by every weight matrix. Which roof limits it?",
            ["Memory bandwidth: about {intensity} FLOP per byte of weights, far left of every ridge in the table",
             "Compute: a 7B model does billions of FLOPs per token",
             "Neither: it is limited by the softmax's exponentials",
             "Compute on an A10G, memory on an H100"],
            0,
            "Each weight is loaded once and used for one multiply-add, so the intensity is about {intensity} FLOP/byte, "
            "while even the A10G's ridge is {a10g}. The step's time is the bytes read divided by the bandwidth.",
            cites={"intensity": decode_intensity, "a10g": ridge("A10G")},
            holds=lambda v: v["intensity"] < v["a10g"] / 10,
        ),
        Question(
            "The H200 keeps the H100's compute and raises its memory bandwidth. Which kernels should get faster?",
            ["Memory-bound ones (decode, naive softmax), in proportion to bandwidth; compute-bound ones barely move",
             "Compute-bound ones (long prefill matmuls), because the ridge point moves right",
             "All kernels by the same factor",
             "None: the ridge point is a property of the model, not of the GPU"],
            0,
            "Attainable FLOP/s = min(peak, intensity × bandwidth). More bandwidth lifts only the sloped part of the "
            "roof, and the ridge moves left (from {h100} to {h200} FLOP/byte).",
            cites={"h100": ridge("H100-SXM"), "h200": ridge("H200-SXM")},
        ),
    ]


# --- 02 the n×n matrix -----------------------------------------------------------------------------

def naive_attention() -> list[Question]:
    shape = qwen25_7b
    s_and_p = lambda n: Computed(f"lab.results.iomodel.naive_intermediate_bytes(Qwen2.5-7B, n={n}) in GB",
                                 lambda: iomodel.naive_intermediate_bytes(shape(), n) / GB, (), ".1f")
    _, _, longest = _sweep_lengths()
    a10g_mem = _device("A10G", "memory (GB)", lambda d: d.memory_bytes / GB)
    max_len = Computed("lab.results.iomodel.max_naive_length(Qwen2.5-7B, A10G memory)",
                       lambda: iomodel.max_naive_length(shape(), hardware.device("A10G").memory_bytes), (), ",.0f")
    return [
        Question(
            "Standard attention keeps the scores S and the probabilities P, n×n per query head, in bf16. For one "
            "layer of Qwen2.5-7B ({heads} query heads), how much memory do they take for a prompt of {n} tokens?",
            ["About {big} GB", "About {quarter} GB", "A few megabytes: only one row is kept at a time",
             "Nothing: the GPU computes them in registers"],
            0,
            "Two matrices × {heads} heads × n² × two bytes. At n = {n} that is {big} GB for a single layer; a prompt of half "
            "the length needs a quarter of it ({quarter} GB): the bill is quadratic.",
            cites={"n": _length("longest sweep length", longest),
                   "heads": _shape("query heads", lambda s: s.q_heads),
                   "big": s_and_p(longest), "quarter": s_and_p(longest // 2)},
            holds=lambda v: abs(v["big"] / v["quarter"] - 4) < 0.01,
        ),
        Question(
            "Why is the softmax the stage of naive attention that starves for bandwidth?",
            ["It reads and writes every one of the n×n scores but does only a handful of FLOPs per element",
             "Exponentials are expensive, so it is compute-bound",
             "It needs the whole KV cache in shared memory",
             "It runs on the CPU"],
            0,
            "The matmuls QKᵀ and PV reuse each loaded element across a whole head dimension; the softmax touches each "
            "score once or twice for a few operations, so its FLOP per byte is far below any ridge.",
        ),
        Question(
            "On a {mem} GB A10G holding the bf16 weights of Qwen2.5-7B, roughly how long can a prompt get before one "
            "layer's S and P no longer fit (ignoring the KV cache)?",
            ["About {n} tokens", "Unlimited: the n×n matrix is never stored",
             "Exactly the model's maximum context length", "It depends only on the number of layers"],
            0,
            "Free memory ÷ (two matrices × {heads} heads × two bytes) = n², so n ≈ {n}. FlashAttention removes this wall because it never "
            "stores the n×n matrix at all.",
            cites={"mem": a10g_mem, "n": max_len, "heads": _shape("query heads", lambda s: s.q_heads)},
        ),
        Question(
            "At {n} tokens attention is {model}% of Qwen2.5-7B's prefill FLOPs. The A10G fits give the quadratic "
            "term {flash}% of FLASH_ATTN's TTFT but {flex}% of FLEX_ATTENTION's. Why is FLEX's share so much higher?",
            ["Its attention runs at a lower FLOP rate, so the same FLOPs take a larger share of the time",
             "FLEX_ATTENTION computes more attention FLOPs",
             "FLEX_ATTENTION's matmuls are faster, which shrinks the linear term",
             "The fit is unreliable for FLEX_ATTENTION only"],
            0,
            "Both backends do the same attention FLOPs ({model}% of the total). A time share matches the FLOP share "
            "when attention runs as fast per FLOP as the matmuls, as FLASH_ATTN nearly does ({flash}%); FLEX's "
            "slower kernel turns the same work into {flex}% of the time. The share measures efficiency as much as work.",
            cites={"n": Computed(f"{A10G}/quad_share.csv: longest n", lambda: _share_len(), (), ",d"),
                   "model": Computed("lab.results.iomodel.attention_flop_share(Qwen2.5-7B, n), in %",
                                     lambda: 100 * iomodel.attention_flop_share(shape(), _share_len()), (), ".1f"),
                   "flash": measured(A10G, "quad_share.csv", "share_pct", ".1f", arm=FLASH, n=_share_len()),
                   "flex": measured(A10G, "quad_share.csv", "share_pct", ".1f", arm=FLEX, n=_share_len())},
            holds=lambda v: abs(v["model"] - v["flash"]) < abs(v["model"] - v["flex"]) and v["flex"] > v["flash"],
        ),
    ]


def _share_len() -> int:
    """Longest length at which the study published quadratic shares."""
    return int(data.load(A10G).csv("quad_share.csv", ["n"])["n"].max())


# --- 03 tiling and online softmax ------------------------------------------------------------------

def tiling() -> list[Question]:
    return [
        Question(
            "Is FlashAttention an approximation of attention?",
            ["No: it computes the same softmax(QKᵀ)V; results differ only by floating-point summation order",
             "Yes: it drops scores below a threshold",
             "Yes: it uses a low-rank approximation of the score matrix",
             "Only in bf16; in fp32 it is exact"],
            0,
            "Tiling with an online softmax reorders the sums but keeps every term. The book's NumPy version matches the "
            "naive reference to rounding error in fp64 at any length, tile-aligned or not.",
        ),
        Question(
            "Processing a new tile of keys raises the running row maximum from m to m′. What happens to the partial "
            "sum ℓ and the partial output O accumulated so far?",
            ["Both are multiplied by exp(m − m′) before the new tile's terms are added",
             "They are thrown away and the row is recomputed",
             "Nothing: the maximum only matters at the end",
             "Only ℓ is rescaled; O is rescaled once at the end"],
            0,
            "Every earlier term was exp(s − m); to express it relative to the new maximum it needs a factor exp(m − m′). "
            "O and ℓ carry the same factor, which is why the final O / ℓ is exact.",
        ),
        Question(
            "FlashAttention's HBM traffic is Θ(n²·d²/M) for on-chip memory of M bytes. What does a larger M buy?",
            ["Bigger tiles: K and V are re-read fewer times, so traffic falls as one over M",
             "Nothing: the n×n matrix still goes to HBM",
             "Fewer FLOPs: the softmax gets cheaper",
             "A different result: larger tiles change the rounding"],
            0,
            "Each query tile streams all of K and V once; with more SRAM the query tiles are larger and fewer, so the "
            "number of full K/V passes (and the bytes) shrinks. The FLOPs stay the same.",
        ),
    ]


# --- 04 FlashAttention in Triton -------------------------------------------------------------------

def triton_kernels() -> list[Question]:
    group = _shape("query heads per KV head", lambda s: s.q_heads // s.kv_heads)
    return [
        Question(
            "In the causal forward kernel, what does skipping key blocks above the diagonal save?",
            ["About half the work at long lengths: those blocks would be fully masked anyway",
             "Nothing: masked scores still have to be computed and zeroed",
             "Memory only: the FLOPs stay the same",
             "It changes the result, so it is only used in inference"],
            0,
            "A block whose every key comes after every query in the tile contributes exp(−∞) = 0. Skipping it changes "
            "no output and removes close to half the tiles of a long causal prompt.",
        ),
        Question(
            "Qwen2.5-7B has {group} query heads per KV head (grouped-query attention). How should a kernel exploit it?",
            ["Load each K/V tile once for the whole group of query heads that share it",
             "Copy K and V once per query head before the kernel",
             "Ignore it: GQA only matters for the weights",
             "Average the query heads into one"],
            0,
            "The query heads of a group read the same keys and values. Loading a tile once and reusing it for the "
            "{group} heads divides the KV traffic by {group}, which matters most in decode, where the KV read is the cost.",
            cites={"group": group},
        ),
        Question(
            "Where does the kernel divide by the softmax normaliser?",
            ["Once, at the end, dividing the accumulated output by the running sum",
             "After every key tile",
             "Before the first tile, using a precomputed row sum",
             "Never: the normaliser cancels out"],
            0,
            "The accumulator holds un-normalised Σ exp(s − m)·v, rescaled as the maximum moves. One division by ℓ at the "
            "end gives the softmax-weighted average and saves a multiply per tile.",
        ),
        *_h200_prefill_kernels(),
        *_h200_occupancy(),
    ]


#: This project's kernel benchmark on the H200 (``python -m lab bench``).
H200_KERNELS = kernel_runs.RECORD


def _kernels_table(name: str):
    """A table of the H200 kernel benchmark, or None before it exists."""
    if not (data.DATA_DIR / H200_KERNELS / name).exists():
        return None
    return data.load(H200_KERNELS).csv(name, ["candidate", "n", "status", "ms"])


def _h200_prefill_kernels() -> list[Question]:
    table = _kernels_table("prefill.csv")
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
        ["The naive path writes S and P, n×n per head, to HBM and reads them back through a memory-bound softmax; "
         "the fused kernel keeps each tile on chip",
         "The naive path does more FLOPs",
         "The flash backend skips part of the attention",
         "The naive path runs in fp32"],
        0,
        "Both compute the same scores and outputs. At {n} tokens the naive path moves the n×n matrices through memory "
        "several times, {ratio}× slower here; the fused kernel's traffic is Q, K, V and O plus K/V re-reads.",
        cites={"n": Computed(f"{H200_KERNELS}/prefill.csv: longest n the naive candidate ran", lambda: n, (), ",d"),
               "naive": cell("naive"), "flash": cell("sdpa-flash"),
               "ratio": ratio(cell("naive"), cell("sdpa-flash"), ".0f")},
        holds=lambda v: v["naive"] > 5 * v["flash"],
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
        ["While one program computes its softmax, the other's matrix products keep the tensor cores busy",
         "Fewer registers make each instruction faster",
         "The cap made the kernel skip masked tiles",
         "Two programs share one copy of K and V in registers"],
        0,
        "A multiprocessor issues from whichever resident warp is ready. With two programs resident, one's "
        "exponentials and the other's tensor-core work overlap ({ratio}× here); with one, each waits for the other phase.",
        cites={"regs": cell("registers", ".0f", plain), "progs": cell("programs_per_sm", ".0f", plain),
               "ms": cell("ms", ".2f", plain), "regs_capped": cell("registers", ".0f", capped),
               "progs_capped": cell("programs_per_sm", ".0f", capped), "ms_capped": cell("ms", ".2f", capped),
               "ratio": ratio(cell("ms", ".2f", plain), cell("ms", ".2f", capped), ".2f")},
        holds=lambda v: v["progs_capped"] > v["progs"] and v["ms_capped"] < v["ms"],
    )]


# --- 05 decode and split-KV ------------------------------------------------------------------------

def decode_split_kv() -> list[Question]:
    short, _, longest = _sweep_lengths()
    sms = _device("A10G", "SM count", lambda d: d.sm_count, "d")
    kv_heads = _shape("KV heads", lambda s: s.kv_heads)
    cites = {"short": _length("shortest sweep length", short), "long": _length("longest sweep length", longest),
             "flash_short": _sweep(FLASH, short, "itl_ms"), "flash_long": _sweep(FLASH, longest, "itl_ms"),
             "flex_short": _sweep(FLEX, short, "itl_ms"), "flex_long": _sweep(FLEX, longest, "itl_ms")}
    return [
        Question(
            "One decode step of Qwen2.5-7B at batch 1 has one query token and {kv} KV heads. If the kernel launches one "
            "program per (sequence, KV head), how busy is an A10G with {sms} SMs?",
            ["Mostly idle: a handful of programs each walk the whole cache while most SMs wait",
             "Fully busy: every SM gets a head",
             "Busy, but compute-bound",
             "It depends only on the head dimension"],
            0,
            "{kv} programs cannot fill {sms} SMs, and each one reads its whole KV sequence alone. Splitting the KV "
            "length across programs puts the idle SMs to work on the same read.",
            cites={"kv": kv_heads, "sms": sms},
            holds=lambda v: v["kv"] < v["sms"],
        ),
        Question(
            "On the A10G, decode inter-token latency from {short} to {long} tokens of context went {flash_short} → "
            "{flash_long} ms with FLASH_ATTN and {flex_short} → {flex_long} ms with FLEX_ATTENTION. Why the difference?",
            ["FLASH_ATTN splits the KV read across the GPU (split-KV); FLEX ran one kernel without a split",
             "FLEX_ATTENTION computes a quadratic term in decode",
             "FLASH_ATTN caches the attention output between steps",
             "FLEX_ATTENTION ran in fp32"],
            0,
            "A decode step has no n×n matrix; its attention cost is reading the KV cache, linear in context. Split-KV "
            "spreads that read over many SMs, so FLASH_ATTN's line stays nearly flat while FLEX's climbs.",
            cites=cites,
            holds=lambda v: (v["flex_long"] - v["flex_short"]) > 3 * (v["flash_long"] - v["flash_short"]),
        ),
        Question(
            "After each split has computed its partial output over its part of the KV cache, how are they combined?",
            ["Rescale each partial output by exp(its log-sum-exp − the global one) and add",
             "Average the partial outputs",
             "Keep the split with the largest score",
             "Concatenate them"],
            0,
            "Each split reports its output normalised by its own sum plus its log-sum-exp. Weighting each by "
            "exp(lseᵢ − lse) recovers the exact softmax over the whole sequence: the same online-softmax algebra, "
            "applied once across splits.",
        ),
        *_h200_decode_kernels(),
    ]


def _h200_decode_kernels() -> list[Question]:
    table = _kernels_table("decode.csv")
    if table is None:
        return []
    ok = table[(table["batch"] == 1) & (table["status"] == "ok")]
    both = set(ok[ok["candidate"] == "flex"]["n"]) & set(ok[ok["candidate"] == "ours-tuned"]["n"])
    if not both:
        return []
    n = int(max(both))
    pct = lambda candidate: Computed(f"{H200_KERNELS}/decode.csv: bw_fraction of {candidate}, batch 1, n={n}, in %",
                                     lambda f: 100 * f, (measured(H200_KERNELS, "decode.csv", "bw_fraction", ".3f",
                                                                 candidate=candidate, batch=1, n=n),), ".0f")
    return [Question(
        "On the H200, one decode step at batch 1 over {n} tokens of context: FlexAttention reached {flex}% of the copy "
        "bandwidth measured in the same run, the book's tuned split-KV kernel {tuned}%. What does the split-KV kernel "
        "do differently?",
        ["It cuts each sequence's cache into pieces read by many programs at once, then merges them by log-sum-exp",
         "It reads fewer bytes by skipping old tokens",
         "It stores the KV cache in fp8",
         "It computes the scores of all heads in one matrix multiply on the tensor cores"],
        0,
        "Both read the same cache. With one program per head the read runs on a few SMs; split-KV spreads it over the "
        "whole GPU, which is what bandwidth needs.",
        cites={"n": Computed(f"{H200_KERNELS}/decode.csv: longest batch-1 context", lambda: n, (), ",d"),
               "flex": pct("flex"), "tuned": pct("ours-tuned")},
        holds=lambda v: v["tuned"] > 2 * v["flex"],
    )]


# --- 06 live vLLM sweeps ---------------------------------------------------------------------------

def vllm_sweeps() -> list[Question]:
    _, two_k, longest = _sweep_lengths()
    c = lambda arm: measured(A10G, "fits.csv", "c_ps_per_token2", ".1f", arm=arm)
    b = lambda arm: measured(A10G, "fits.csv", "b_us_per_token", ".1f", arm=arm)
    chunk = Computed(f"{A10G}/provenance.json: flags.max_num_batched_tokens",
                     lambda: data.load(A10G).provenance["flags"]["max_num_batched_tokens"],
                     (), "d")
    return [
        Question(
            "Fitting TTFT = a + b·n + c·n² to the A10G sweep, how do the two backends compare?",
            ["The linear terms are close ({b_flash} vs {b_flex} µs/token); FLEX's quadratic term is {c_ratio}× FLASH's",
             "FLEX's linear term is {c_ratio}× FLASH's; the quadratic terms are close",
             "Both terms are the same; FLEX just has a larger intercept",
             "FLASH has no quadratic term at all"],
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
            ["A short-context benchmark hides the difference: measure at the context lengths you serve",
             "FLEX is always about as fast in decode",
             "The gap is noise: both are within a few percent",
             "Decode latency does not depend on context length"],
            0,
            "The gap is {gap_2k} ms at {two_k} tokens and {gap_long} ms at {long}: it grows with the KV length, "
            "so a sweep that stops early misses it.",
            cites={"two_k": _length("sweep length nearest 2k", two_k), "long": _length("longest sweep length", longest),
                   "flash_2k": _sweep(FLASH, two_k, "itl_ms"), "flex_2k": _sweep(FLEX, two_k, "itl_ms"),
                   "flash_long": _sweep(FLASH, longest, "itl_ms"), "flex_long": _sweep(FLEX, longest, "itl_ms"),
                   "gap_2k": Computed("FLEX − FLASH ITL near 2k", lambda a, b_: b_ - a,
                                      (_sweep(FLASH, two_k, "itl_ms"), _sweep(FLEX, two_k, "itl_ms"))),
                   "gap_long": Computed("FLEX − FLASH ITL at the longest length", lambda a, b_: b_ - a,
                                        (_sweep(FLASH, longest, "itl_ms"), _sweep(FLEX, longest, "itl_ms")))},
            holds=lambda v: v["gap_long"] > 5 * v["gap_2k"],
        ),
        Question(
            "The A10G server prefilled long prompts in chunks of {chunk} tokens (chunked prefill). What does a chunk "
            "attend to?",
            ["Its own tokens and all the KV cached by earlier chunks, so attention still grows with the square of the prompt",
             "Only its own tokens, so attention becomes linear in the prompt length",
             "Nothing: chunks skip attention and fix it up at the end",
             "Only the first chunk"],
            0,
            "Chunk k attends to k·{chunk} keys, so the sum over chunks is still about n²/2 pairs: the quadratic term "
            "survives, but the prefill runs as a series of bounded steps that decode requests can interleave with.",
            cites={"chunk": chunk},
        ),
        *_h200_questions(),
    ]


def _h200_questions() -> list[Question]:
    """Questions on this project's H200 sweeps, asked only once the data exists and supports them."""
    from lab.book import interview

    table = interview._h200_sweeps()
    if table is None:
        return []
    cell = lambda arm, n, col, fmt=".2f": measured(_dataset_of(table, arm), "sweep.csv", col, fmt, arm=arm, target_len=n)
    questions = []
    n = interview._longest_common(table, (interview.FA3, interview.FA2))
    if n is not None:
        fa3, fa2 = cell(interview.FA3, n, "ttft_s"), cell(interview.FA2, n, "ttft_s")
        if fa3.value() < fa2.value():
            questions.append(Question(
                "On the H200 at {n} tokens, TTFT was {fa3} s with FlashAttention 3 and {fa2} s with FlashAttention 2. "
                "What does FA3 change to get there?",
                ["It maps the same exact algorithm onto Hopper: async wgmma, TMA copies, warp specialisation, "
                 "and overlap of the softmax with the matmuls",
                 "It approximates the softmax with a cheaper function",
                 "It skips attention for tokens far apart",
                 "It stores the score matrix in HBM to avoid recomputation"],
                0,
                "FA3 keeps FlashAttention's tiling and online softmax and rebuilds the pipeline around Hopper's "
                "asynchronous tensor cores and copy engine, so loads, matmuls and exponentials overlap.",
                cites={"n": Computed("longest length both FA arms measured on the H200", lambda: n, (), ",d"),
                       "fa3": fa3, "fa2": fa2},
                holds=lambda v: v["fa3"] < v["fa2"]))
    rows = {arm: table[table["arm"] == arm].sort_values("target_len") for arm in (interview.FA3, interview.FLEX)}
    if all(len(r) >= 2 for r in rows.values()):
        short = max(int(r["target_len"].iloc[0]) for r in rows.values())
        long = min(int(r["target_len"].iloc[-1]) for r in rows.values())
        if short < long and all({short, long} <= set(r["target_len"]) for r in rows.values()):
            c = {f"{k}_{end}": cell(arm, n_, "itl_ms", ".1f") for k, arm in (("fa3", interview.FA3), ("flex", interview.FLEX))
                 for end, n_ in (("short", short), ("long", long))}
            questions.append(Question(
                "On the H200, decode ITL from {short} to {long} tokens of context went {fa3_short} → {fa3_long} ms with "
                "FA3 and {flex_short} → {flex_long} ms with FLEX_ATTENTION. Which statement fits?",
                ["FA3 spreads the KV read over the GPU (split-KV chosen at launch); FLEX's kernel does not keep up "
                 "as the cache grows",
                 "FLEX computes a quadratic term in decode",
                 "The H200's larger memory makes decode compute-bound",
                 "Both curves are flat, so the backend does not matter for decode"],
                0,
                "Decode attention reads the KV cache, linear in context. A kernel that parallelises that read stays "
                "near the bandwidth floor; one that does not climbs with the cache.",
                cites={"short": Computed("shortest common H200 length", lambda: short, (), ",d"),
                       "long": Computed("longest common H200 length", lambda: long, (), ",d"), **c},
                holds=lambda v: (v["flex_long"] - v["flex_short"]) > (v["fa3_long"] - v["fa3_short"])))
    return questions


def _dataset_of(table, arm: str) -> str:
    names = sorted(set(table[table["arm"] == arm]["dataset"]))
    return names[0]


# --- 07 the trace ----------------------------------------------------------------------------------

def the_trace() -> list[Question]:
    census = lambda phase, tokens, arm, metric, fmt=",.0f": measured(A10G, "census.csv", "value", fmt, phase=phase,
                                                                     tokens=tokens, arm=arm, metric=metric)
    long = _census_long_window()
    kernel = lambda arm: measured(A10G, "decode_kernels.csv", "kernel", "s", arm=arm, phase="decode")
    prefill_flash = Computed("matmul + attention ms of the FLASH_ATTN 28k prefill window, in s",
                             lambda m, a: (m + a) / 1000,
                             (census("prefill", long, FLASH, "matmul_ms"), census("prefill", long, FLASH, "attention_ms")))
    return [
        Question(
            "In the A10G prefill window at {tokens} tokens, matmul kernels took {mm_flash} ms (FLASH) and {mm_flex} ms "
            "(FLEX); attention took {at_flash} vs {at_flex} ms. What do the matmul figures prove?",
            ["They are the control: equal matmul time means the whole TTFT difference sits in attention",
             "FLEX's matmuls are slower",
             "The profiler slowed both runs by the same amount, so nothing can be concluded",
             "Attention and matmul overlap, so the figures cannot be compared"],
            0,
            "Only the attention backend changed between the runs; the matmul family differs by {mm_diff} ms out of "
            "{mm_flash}, so the {at_diff} ms gap is attention's.",
            cites={"tokens": _length("census prefill window", long),
                   "mm_flash": census("prefill", long, FLASH, "matmul_ms"),
                   "mm_flex": census("prefill", long, FLEX, "matmul_ms"),
                   "at_flash": census("prefill", long, FLASH, "attention_ms"),
                   "at_flex": census("prefill", long, FLEX, "attention_ms"),
                   "mm_diff": Computed("|FLEX − FLASH| matmul ms", lambda a, b: abs(b - a),
                                       (census("prefill", long, FLASH, "matmul_ms"),
                                        census("prefill", long, FLEX, "matmul_ms")), ",.0f"),
                   "at_diff": Computed("FLEX − FLASH attention ms", lambda a, b: b - a,
                                       (census("prefill", long, FLASH, "attention_ms"),
                                        census("prefill", long, FLEX, "attention_ms")), ",.0f")},
            holds=lambda v: abs(v["mm_flex"] / v["mm_flash"] - 1) < 0.01,
        ),
        Question(
            "Which decode attention kernel name tells you the KV read is split across the GPU?",
            ["`{flash_kernel}`", "`{flex_kernel}`", "Neither: kernel names never reveal the algorithm",
             "Both: every decode kernel splits the KV"],
            0,
            "`{flash_kernel}` is FlashAttention's split-KV decode path (FlashDecoding), paired with a combine step; "
            "`{flex_kernel}` is one compiled Triton kernel with no split. On Hopper, FA3 makes the split a launch "
            "parameter instead, so there the name alone is not enough.",
            cites={"flash_kernel": kernel(FLASH), "flex_kernel": kernel(FLEX)},
        ),
        Question(
            "The published 'decode at {tokens}' window lasted {win} s for FLASH_ATTN; in the prefill window at the same "
            "length, matmul and attention kernels alone took {prefill} s. Why are the two so close?",
            ["With prefix caching off, the profiled request prefilled its whole prompt again inside the 'decode' window",
             "Decode at long context costs as much as prefill",
             "The profiler's own overhead dominates both windows",
             "The decode window ran at a larger batch"],
            0,
            "A decode step at this context costs about {itl} ms, so a generation of a few dozen tokens adds little to the "
            "{prefill} s prefill. To census "
            "decode, keep only single-token engine steps or delay the profiler past the prefill iteration.",
            cites={"tokens": _length("census prefill window", long),
                   "win": census("decode", long, FLASH, "window_s", ".1f"), "prefill": prefill_flash,
                   "itl": _sweep(FLASH, _sweep_lengths()[2], "itl_ms")},
            holds=lambda v: v["prefill"] / v["win"] > 0.8,
        ),
    ]


#: chapter file stem -> its questions.
CHAPTERS = {
    "01-roofline": roofline,
    "02-naive-attention": naive_attention,
    "03-tiling-online-softmax": tiling,
    "04-flashattention-triton": triton_kernels,
    "05-decode-split-kv": decode_split_kv,
    "06-vllm-sweeps": vllm_sweeps,
    "07-the-trace": the_trace,
}


def chapter_quiz(chapter: str) -> Quiz:
    """The self-check quiz for a chapter file stem, e.g. ``chapter_quiz("06-vllm-sweeps")``."""
    if chapter not in CHAPTERS:
        raise LabError(f"no quiz for chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
    return Quiz(key=chapter, questions=CHAPTERS[chapter]())
