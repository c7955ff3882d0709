"""Questions of chapters 01-03: the roofline, the n×n matrix, tiling and the online softmax.

Long-prompt FlashAttention prefill is compute-bound (tensor cores and exponentials); naive attention and its
softmax pass are memory-bound. The roofline question places the fused kernel with two byte counts, the
compulsory bytes (a lower bound) and the tile re-read count (an upper estimate: no help from L2).
"""

from __future__ import annotations

from lab.book import counter_facts
from lab.book.quiz import Computed, Question, measured
from lab.book.quizzes.common import A10G, FLASH, FLEX, GB, device_number, length, ridge, shape_number, sweep_lengths
from lab.results import data, hardware, iomodel
from lab.results.modelshape import qwen25_7b

# --- 01 roofline -----------------------------------------------------------------------------------

def _prefill_intensity(count: str, n: int, device: str = "H100-SXM") -> Computed:
    """FLOP per byte of one layer's causal prefill attention at n tokens, with compulsory or tile re-read bytes."""
    def value():
        shape = qwen25_7b()
        flops = iomodel.prefill_flops(shape, n)["attention"] / shape.layers
        if count == "compulsory":
            return flops / iomodel.attention_compulsory_bytes(shape, n, "prefill", per="layer")
        sram = hardware.device(device).smem_per_sm
        return flops / iomodel.attention_hbm_bytes(shape, n, "prefill", "flash", sram, per="layer")
    what = ("Q, K, V and O moved once" if count == "compulsory"
            else f"every K/V tile re-read from HBM ({device} shared memory)")
    return Computed(f"lab.results.iomodel: Qwen2.5-7B causal prefill attention at n={n}, FLOP per byte, {what}",
                    value, (), ",.0f")


def roofline() -> list[Question]:
    # Batch-1 decode: every weight is read once (2 bytes in bf16) and used in one multiply-add (2 FLOPs).
    decode_intensity = shape_number("decode matmul FLOP per weight byte at batch 1",
                                    lambda s: s.linear_flops_per_token() / (s.layers * s.linear_weights_per_layer * 2),
                                    ".1f")
    _, _, longest = sweep_lengths()
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
            ["Memory bandwidth: about {intensity} FLOP per weight byte, far left of every ridge",
             "Compute: a 7B model does billions of multiply-adds for every token it generates",
             "Neither: the softmax's exponentials set the pace of a decode step",
             "Compute on an A10G, whose tensor cores are slow, and memory on an H100"],
            0,
            "Each weight is loaded once and used for one multiply-add, so the intensity is about {intensity} FLOP/byte, "
            "while even the A10G's ridge is {a10g}. The step's time is the bytes read divided by the bandwidth.",
            cites={"intensity": decode_intensity, "a10g": ridge("A10G")},
            holds=lambda v: v["intensity"] < v["a10g"] / 10,
        ),
        Question(
            "The H200 keeps the H100's compute and raises its memory bandwidth. Which kernels should get faster?",
            ["Memory-bound ones (decode, naive softmax), roughly in proportion to bandwidth",
             "Compute-bound ones, such as long-prompt prefill matmuls and FlashAttention's forward pass",
             "All kernels by the same factor, since every kernel reads its inputs from HBM",
             "None: the ridge point is a property of the model, not of the GPU"],
            0,
            "Attainable FLOP/s = min(peak, intensity × bandwidth). More bandwidth lifts only the sloped part of the "
            "roof, and the ridge moves left (from {h100} to {h200} FLOP/byte); kernels already under the flat roof, "
            "long-prompt FlashAttention among them, keep their speed.",
            cites={"h100": ridge("H100-SXM"), "h200": ridge("H200-SXM")},
        ),
        Question(
            "One layer of Qwen2.5-7B, causal prefill attention at {n} tokens. Counting Q, K, V and O once gives "
            "{compulsory} FLOP per byte; counting every K/V tile re-read from HBM gives {reread}. The H100's ridge is "
            "{ridge}. Where does a fused FlashAttention kernel sit?",
            ["Right of the ridge: L2 serves most re-reads, so it is compute-bound",
             "Left of the ridge: the re-read count is below it, so bandwidth sets the kernel's time",
             "Exactly on the ridge, since tiling balances the bytes against the FLOPs",
             "Nowhere fixed: its intensity falls as the prompt grows"],
            0,
            "The two counts bound the real traffic: the compulsory bytes are the least any kernel moves, the re-read "
            "count is what happens with no cache reuse. Query tiles of one head stream the same K/V tiles at about "
            "the same time, so L2 absorbs most re-reads and the traffic sits near the compulsory count, far right of "
            "the ridge. At long prompts the fused forward pass is limited by tensor cores and exponentials, which "
            "is why FA2, FA3 and FA4 chase tensor-core utilisation.",
            cites={"n": length("longest sweep length", longest, ",d"),
                   "compulsory": _prefill_intensity("compulsory", longest),
                   "reread": _prefill_intensity("reread", longest), "ridge": ridge("H100-SXM")},
            holds=lambda v: v["reread"] < v["ridge"] < v["compulsory"],
        ),
    ]


# --- 02 the n×n matrix -----------------------------------------------------------------------------

def _share_len() -> int:
    """Longest length at which the study published quadratic shares."""
    return int(data.load(A10G).csv("quad_share.csv", ["n"])["n"].max())


def _reading_the_counters() -> list[Question]:
    """Chapter 2's counters of FA3's prefill kernel (lab.book.counter_facts): busy tensor pipe, idle DRAM."""
    rows = {row["candidate"]: row for row in counter_facts.prefill_rows()}
    if rows["fa3"]["tensor_pct"] is None or rows["ours-tuned"]["warps_per_sm"] is None:
        return []
    cite = lambda candidate, key, fmt: Computed(  # noqa: E731
        f"lab.book.counter_facts.prefill_rows(): {candidate} {key} (data/h200/kernel-counters)",
        lambda: rows[candidate][key], (), fmt)
    return [Question(
        "Nsight Compute on FA3's causal prefill kernel at {n} tokens on the H200: the tensor pipe was busy {tensor}% "
        "of the active cycles, the XU pipe {xu}%; it read {reads}× the compulsory bytes from DRAM, and its DRAM "
        "traffic ran at {rate}% of the GPU's read ceiling. What sets its time?",
        ["Its arithmetic: the tensor cores work most cycles while DRAM sits nearly idle",
         "Memory bandwidth: a fused kernel still waits on HBM for every K/V tile it re-reads",
         "Occupancy: too few warps are resident to hide the latency of its loads",
         "Launch overhead: starting and draining the grid takes most of the call"],
        0,
        "A memory-bound kernel shows the reverse: DRAM near the ceiling, the tensor pipe mostly idle. FA3 read about "
        "the compulsory bytes and moved them at {rate}% of the ceiling while its tensor pipe was busy {tensor}% of the "
        "time: the matmuls, with the exponentials on the XU pipe beside them, set the time. Occupancy is not the "
        "limit either: our tuned kernel kept {ours_warps} warps per SM resident against FA3's {fa3_warps}, and was "
        "slower.",
        cites={"n": Computed("lab.book.counter_facts.N", lambda: counter_facts.N, (), ",d"),
               "tensor": cite("fa3", "tensor_pct", ".1f"), "xu": cite("fa3", "xu_pct", ".1f"),
               "reads": cite("fa3", "read_over_compulsory", ".2f"), "rate": cite("fa3", "rate_pct", ".1f"),
               "ours_warps": cite("ours-tuned", "warps_per_sm", ".0f"), "fa3_warps": cite("fa3", "warps_per_sm", ".0f")},
        holds=lambda v: v["tensor"] > 50 and v["rate"] < 10 and v["reads"] < 1.5 and v["ours_warps"] > v["fa3_warps"],
    )]


def naive_attention() -> list[Question]:
    s_and_p = lambda n: Computed(f"lab.results.iomodel.naive_intermediate_bytes(Qwen2.5-7B, n={n}) in GB",
                                 lambda: iomodel.naive_intermediate_bytes(qwen25_7b(), n) / GB, (), ".1f")
    _, _, longest = sweep_lengths()
    heads = shape_number("query heads", lambda s: s.q_heads)
    a10g_mem = device_number("A10G", "memory (GB)", lambda d: d.memory_bytes / GB)
    max_len = Computed("lab.results.iomodel.max_naive_length(Qwen2.5-7B, A10G memory)",
                       lambda: iomodel.max_naive_length(qwen25_7b(), hardware.device("A10G").memory_bytes), (), ",.0f")
    share_n = _share_len()
    return [
        Question(
            "Standard attention keeps the scores S and the probabilities P, n×n per query head, in bf16. For one "
            "layer of Qwen2.5-7B ({heads} query heads), how much memory do they take for a prompt of {n} tokens?",
            ["About {big} GB", "About {quarter} GB",
             "A few megabytes: a standard implementation keeps only one row of scores at a time",
             "Nothing: the GPU computes them in registers and never stores them"],
            0,
            "Two matrices × {heads} heads × n² × two bytes. At n = {n} that is {big} GB for a single layer; a prompt of "
            "half the length needs a quarter of it ({quarter} GB): the bill is quadratic.",
            cites={"n": length("longest sweep length", longest), "heads": heads,
                   "big": s_and_p(longest), "quarter": s_and_p(longest // 2)},
            holds=lambda v: abs(v["big"] / v["quarter"] - 4) < 0.01,
        ),
        Question(
            "Why is the softmax the stage of naive attention that starves for bandwidth?",
            ["It moves every n×n score through HBM for a handful of FLOPs each",
             "Its exponentials run on special-function units far slower than the tensor cores, so it is compute-bound",
             "It needs the whole KV cache in shared memory before it can start",
             "It runs on the CPU while the matmuls run on the GPU"],
            0,
            "The matmuls QKᵀ and PV reuse each loaded element across a whole head dimension; the softmax touches each "
            "score once or twice for a few operations, so its FLOP per byte is far below any ridge. Exponential "
            "throughput does matter inside a fused kernel on Hopper and Blackwell, where the bytes are gone; in the "
            "naive pipeline the bytes dominate.",
        ),
        Question(
            "On a {mem} GB A10G holding the bf16 weights of Qwen2.5-7B, roughly how long can a prompt get before one "
            "layer's S and P no longer fit (ignoring the KV cache)?",
            ["About {n} tokens", "Unlimited: standard attention never stores the n×n matrix",
             "Exactly the model's maximum context length, which the weights were sized for",
             "It depends only on the number of layers, since each layer keeps its own copy"],
            0,
            "Free memory ÷ (two matrices × {heads} heads × two bytes) = n², so n ≈ {n}. FlashAttention removes this wall "
            "because it never stores the n×n matrix at all.",
            cites={"mem": a10g_mem, "n": max_len, "heads": heads},
        ),
        Question(
            "At {n} tokens attention is {model}% of Qwen2.5-7B's prefill FLOPs. The A10G fits give the quadratic "
            "term {flash}% of FLASH_ATTN's TTFT but {flex}% of FLEX_ATTENTION's. Why is FLEX's share so much higher?",
            ["Its attention runs at a lower FLOP rate, so the same FLOPs take a larger share of the time",
             "FLEX_ATTENTION computes more attention FLOPs, because its mask evaluates every query-key pair",
             "FLEX_ATTENTION's matmuls are faster, which shrinks the linear term and inflates the quadratic share",
             "The fit is unreliable for FLEX_ATTENTION only, since its TTFT is noisier"],
            0,
            "Both backends do the same attention FLOPs ({model}% of the total). A time share matches the FLOP share "
            "when attention runs as fast per FLOP as the matmuls, as FLASH_ATTN nearly does ({flash}%); FLEX's "
            "slower kernel turns the same work into {flex}% of the time. The share measures efficiency as much as work.",
            cites={"n": Computed(f"{A10G}/quad_share.csv: longest n", lambda: share_n, (), ",d"),
                   "model": Computed("lab.results.iomodel.attention_flop_share(Qwen2.5-7B, n), in %",
                                     lambda: 100 * iomodel.attention_flop_share(qwen25_7b(), share_n), (), ".1f"),
                   "flash": measured(A10G, "quad_share.csv", "share_pct", ".1f", arm=FLASH, n=share_n),
                   "flex": measured(A10G, "quad_share.csv", "share_pct", ".1f", arm=FLEX, n=share_n)},
            holds=lambda v: abs(v["model"] - v["flash"]) < abs(v["model"] - v["flex"]) and v["flex"] > v["flash"],
        ),
    ] + _reading_the_counters()


# --- 03 tiling and online softmax ------------------------------------------------------------------

def tiling() -> list[Question]:
    return [
        Question(
            "Is FlashAttention an approximation of attention?",
            ["No: it computes the same softmax(QKᵀ)V; results differ only by summation order",
             "Yes: it drops scores below a threshold, which is where its speed at long prompts comes from",
             "Yes: it replaces the score matrix with a low-rank approximation of it",
             "Only in bf16; in fp32 it computes the exact softmax"],
            0,
            "Tiling with an online softmax reorders the sums but keeps every term. The book's NumPy version matches the "
            "naive reference to rounding error in fp64 at any length, tile-aligned or not.",
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
            "FlashAttention's HBM traffic is Θ(n²·d²/M) for on-chip memory of M bytes. What does a larger M buy?",
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
