"""Chapter 1, the roofline: its self-check questions (``questions``) and the quiz the chapter shows (``quiz``)."""

from __future__ import annotations

from lab.book.pages import ch01
from lab.book.quiz import Computed, Question, Quiz, chapter_quiz
from lab.book.quizzes.common import ridge, shape_number
from lab.results import hardware, iomodel
from lab.results.modelshape import qwen25_7b

KEY = "01-roofline"


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


def questions() -> list[Question]:
    # Batch-1 decode: every weight is read once (2 bytes in bf16) and used in one multiply-add (2 FLOPs).
    decode_intensity = shape_number("decode matmul FLOP per weight byte at batch 1",
                                    lambda s: s.linear_flops_per_token() / (s.layers * s.linear_weights_per_layer * 2),
                                    ".1f")
    longest = ch01.LONG_N  # the chapter's long prompt
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
            cites={"n": Computed("lab.book.pages.ch01.LONG_N", lambda: longest, (), ",d"),
                   "compulsory": _prefill_intensity("compulsory", longest),
                   "reread": _prefill_intensity("reread", longest), "ridge": ridge("H100-SXM")},
            holds=lambda v: v["reread"] < v["ridge"] < v["compulsory"],
        ),
    ]



def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
