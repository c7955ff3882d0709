"""Arithmetic intensity and the roofline: which kernels of LLM serving are memory-bound, and by how much.

A kernel that does F FLOPs and moves B bytes through device memory has arithmetic intensity
I = F / B. On a device with peak P FLOP/s and bandwidth W bytes/s it can run no faster than
min(P, I·W) FLOP/s (the roofline, Williams, Waterman & Patterson, CACM 2009), so its time is at least
max(F/P, B/W). The ridge point P/W is the intensity where the two roofs meet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.results import bandwidth, data, iomodel
from lab.results.bandwidth import ceiling
from lab.results.facts import Fact
from lab.results.hardware import DTYPE_BYTES, Ceilings, Device, device, load_measurement
from lab.results.quantities import Quantity

#: FLOPs charged per score in softmax with a mask: running max, subtract, exp, sum, divide (exp counted as one
#: FLOP although the special-function unit spends more). The mask's select rides along uncharged.
SOFTMAX_FLOPS_PER_SCORE = 5


@dataclass(frozen=True)
class Roof:
    """The two ceilings of one device for one dtype."""

    name: str
    peak_flops: float
    bandwidth: float
    dtype: str = "bf16"

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        return attainable(intensity, self.peak_flops, self.bandwidth)


def roof(hardware: Device | Ceilings | Roof, dtype: str = "bf16") -> Roof:
    """The roof of a GPU of the table (for ``dtype``: its datasheet peak, and its one bandwidth ceiling from
    :mod:`lab.results.bandwidth`) or of a machine measured live (its measured dtype, matmul and copy)."""
    if isinstance(hardware, Roof):
        return hardware
    if isinstance(hardware, Device):
        return Roof(hardware.key, hardware.peak_flops(dtype), ceiling(hardware), dtype)
    if isinstance(hardware, Ceilings):
        return Roof(f"{hardware.name} (measured)", hardware.peak_flops, hardware.bandwidth, hardware.dtype)
    raise LabError(f"expected a hardware.Device, hardware.Ceilings or roofline.Roof, got {type(hardware).__name__}")


def datasheet_roof(dev: Device, dtype: str = "bf16") -> Roof:
    """A GPU's roof on paper: its datasheet peak and its datasheet bandwidth (for comparing GPUs, never for
    placing what was measured on the H200: that is :func:`measured_roof`)."""
    return Roof(dev.key, dev.peak_flops(dtype), dev.bandwidth, dtype)


def attainable(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """min(peak, intensity × bandwidth): the best FLOP/s a kernel of this intensity can reach."""
    if intensity < 0 or peak_flops <= 0 or bandwidth <= 0:
        raise LabError("intensity must be >= 0 and peak FLOP/s and bandwidth > 0")
    return min(peak_flops, intensity * bandwidth)


@dataclass(frozen=True)
class Kernel:
    """A unit of work: FLOPs done and bytes moved through device memory."""

    name: str
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOP per byte (infinite for a stage that moves no bytes through HBM, e.g. a fused softmax)."""
        return self.flops / self.bytes if self.bytes else float("inf")

    def time(self, r: Roof) -> float:
        """Lower bound on run time: the slower of doing the FLOPs at peak and moving the bytes at full bandwidth."""
        return max(self.flops / r.peak_flops, self.bytes / r.bandwidth)

    def bound(self, r: Roof) -> str:
        """'memory' when below the ridge, else 'compute'."""
        return "memory" if self.intensity < r.ridge else "compute"

    def __add__(self, other: Kernel) -> Kernel:
        return Kernel(f"{self.name}+{other.name}", self.flops + other.flops, self.bytes + other.bytes)


def _bpe(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise LabError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


# --- matmul ----------------------------------------------------------------------------------------

def matmul_kernel(m: int, n: int, k: int, dtype: str = "bf16", name: str | None = None) -> Kernel:
    """C[m,n] = A[m,k]·B[k,n]: 2·m·n·k FLOPs; A and B read once, C written once."""
    b = _bpe(dtype)
    return Kernel(name or f"matmul {m}x{k}x{n}", 2.0 * m * n * k, float(b * (m * k + k * n + m * n)))


def matmul_intensity(m: int, n: int, k: int, dtype: str = "bf16") -> float:
    """2mnk / (bytes·(mk + kn + mn)); for a square n×n×n product this is n/(3·bytes) FLOP/byte."""
    return matmul_kernel(m, n, k, dtype).intensity


# --- attention, stage by stage ---------------------------------------------------------------------

def attention_stages(n_q: int, n_k: int, d: int, dtype: str = "bf16", fused: bool = False,
                     sram_bytes: int | None = None, causal: bool = True) -> list[Kernel]:
    """QKᵀ, softmax with mask, PV for one head, each with its FLOPs and HBM bytes.

    Naive (``fused=False``): each stage is its own kernel and the n_q×n_k matrices S and P go through HBM
    (passes as in :func:`lab.results.iomodel.naive_attention_passes`); the scores are computed in full and then
    masked, as eager PyTorch does. Fused: one kernel over tiles (``sram_bytes`` sizes them): only visited
    tiles are computed; its HBM bytes are charged to the stage that needs them (Q, K to QKᵀ; V, O to PV)
    and softmax moves nothing through HBM.
    """
    b = _bpe(dtype)
    if not fused:
        passes = {p["stage"]: p["read"] + p["written"] for p in iomodel.naive_attention_passes(n_q, n_k, d, b)}
        scores = n_q * n_k
        return [Kernel("QK^T", 2.0 * scores * d, passes["QK^T"]),
                Kernel("softmax+mask", float(SOFTMAX_FLOPS_PER_SCORE * scores), passes["softmax"]),
                Kernel("PV", 2.0 * scores * d, passes["PV"])]
    if sram_bytes is None:
        raise LabError("fused attention needs sram_bytes (shared memory per SM) to size its tiles")
    block = iomodel.flash_block_size(d, sram_bytes, b)
    total = iomodel.tiled_attention_hbm_bytes(n_q, n_k, d, block, block, b, causal)
    pairs = iomodel.tiled_attention_pairs(n_q, n_k, block, block, causal)
    q_and_o = 2 * n_q * d * b
    kv = total - q_and_o
    return [Kernel("QK^T", 2.0 * pairs * d, n_q * d * b + kv / 2),
            Kernel("softmax+mask", float(SOFTMAX_FLOPS_PER_SCORE * pairs), 0.0),
            Kernel("PV", 2.0 * pairs * d, kv / 2 + n_q * d * b)]


def attention_kernel(n_q: int, n_k: int, d: int, dtype: str = "bf16", fused: bool = False,
                     sram_bytes: int | None = None, causal: bool = True) -> Kernel:
    """All three stages of one head as one point on the roofline."""
    stages = attention_stages(n_q, n_k, d, dtype, fused, sram_bytes, causal)
    return Kernel("flash attention" if fused else "naive attention",
                  sum(s.flops for s in stages), sum(s.bytes for s in stages))


# --- decode attention: when does it leave the memory side? ------------------------------------------

def decode_attention_intensity(q_heads: int, kv_heads: int, query_tokens: int = 1, dtype: str = "bf16") -> float:
    """FLOP per KV-cache byte of one decode step's attention over a long cache (the queries and the output are
    negligible next to the cache): each of the ``query_tokens`` new tokens (1 in plain decode; k+1 when a
    speculative step verifies k drafted tokens) and each of the q_heads query heads does 4·d FLOPs per cached
    token against 2·d elements of K and V per KV head. For bf16 that is (q_heads / kv_heads) × query_tokens."""
    return 4 * q_heads * query_tokens / (2 * kv_heads * _bpe(dtype))


def mla_decode_attention_intensity(heads: int, latent_dim: int, rope_dim: int, query_tokens: int = 1,
                                   dtype: str = "bf16") -> float:
    """The same for multi-head latent attention run as multi-query attention over its cached latent (DeepSeek-V2,
    arXiv:2405.04434; FlashMLA's analysis, docs/20250422-new-kernel-deep-dive.md): every head's query meets the
    same cached vector of latent_dim + rope_dim elements as its key and of latent_dim as its value, so the FLOPs per
    cached token are 2·heads·query_tokens·(2·latent_dim + rope_dim) over one vector's bytes."""
    key_dim = latent_dim + rope_dim
    return 2 * heads * query_tokens * (key_dim + latent_dim) / (key_dim * _bpe(dtype))


# --- a whole model: prefill and decode -------------------------------------------------------------

def _activation_elements_per_token_per_layer(shape) -> int:
    """Activations the layer's matmuls read and write per token: QKV in/out, O in/out, gate+up in/out, down in/out."""
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    return (h + q + 2 * kv) + (q + h) + (h + 2 * i) + (i + h)


def model_phase(shape, phase: str, n: int, dtype: str = "bf16", fused: bool = True, sram_bytes: int | None = None,
                batch: int = 1) -> dict[str, Kernel]:
    """The matmuls ('linear', LM head included) and attention of one forward step of the whole model.

    prefill: ``batch`` prompts of n tokens; decode: one new token for each of ``batch`` sequences holding n
    tokens of context. Weights are read once per step; activations of each matmul are read and written.
    Returns {'linear', 'attention', 'total'}.
    """
    if phase not in iomodel.PHASES:
        raise LabError(f"unknown phase {phase!r}; expected one of {', '.join(iomodel.PHASES)}")
    b = _bpe(dtype)
    tokens = n * batch if phase == "prefill" else batch
    lm_rows = batch  # logits for the last position of each sequence only
    weights = shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights
    linear = Kernel(
        "matmuls",
        float(tokens * shape.linear_flops_per_token() + 2 * lm_rows * shape.lm_head_weights),
        float(b * (weights + tokens * shape.layers * _activation_elements_per_token_per_layer(shape)
                   + lm_rows * (shape.hidden + shape.vocab))),
    )
    method = "flash" if fused else "naive"
    if fused and phase == "prefill" and sram_bytes is None:
        raise LabError("fused attention needs sram_bytes (shared memory per SM) to size its tiles")
    attn_bytes = iomodel.attention_hbm_bytes(shape, n, phase, method, sram_bytes or 1, b, batch=batch)
    if phase == "prefill":
        per_head = attention_kernel(n, n, shape.head_dim, dtype, fused, sram_bytes, causal=True)
        attn_flops = per_head.flops * shape.q_heads * shape.layers * batch
    else:
        per_score = 4 * shape.head_dim + SOFTMAX_FLOPS_PER_SCORE
        attn_flops = float(per_score * n * shape.q_heads * shape.layers * batch)
    attention = Kernel("attention", attn_flops, float(attn_bytes))
    return {"linear": linear, "attention": attention, "total": Kernel(f"{phase} step", linear.flops + attention.flops,
                                                                      linear.bytes + attention.bytes)}


# --- the measured rates and ridges the book states: one definition each ------------------------------------
#
# Two ridges, never mixed: the *datasheet* ridge (a GPU's datasheet peak over its datasheet bandwidth) compares
# GPUs on paper; the *measured* ridge (the H200's measured matmul rate over its measured bandwidth ceiling) is
# the one every H200 measurement is held against. The matmul rate is the best cuBLAS did on square products at
# the clock it got, not a limit: attention kernels pass it (chapter 2). A datasheet peak over a measured bandwidth is neither.

#: Where the H200's matmul rate is measured (its bandwidth ceiling: lab.results.bandwidth).
MATMUL_RUN = "h200/hardware"

DATASHEET_PEAK = Quantity("datasheet.bf16_peak", "a GPU's dense bf16 tensor-core peak, from its datasheet (no 2:4 sparsity)",
                          run="datasheet: lab.results.hardware", unit="FLOP/s")
DATASHEET_RIDGE = Quantity("datasheet.ridge", "a GPU's dense bf16 datasheet peak over its datasheet memory bandwidth",
                           run="datasheet: lab.results.hardware", unit="FLOP/B")
MATMUL_RATE = Quantity("h200.matmul_rate", "the fastest dense bf16 matrix product cuBLAS ran on the lent H200: "
                       "the best of its square sizes, median of CUDA-event timings on random data, clocks not "
                       "recorded (a measured rate, not a limit of the tensor cores)",
                       run=MATMUL_RUN, file="measurements.json", unit="FLOP/s")
MEASURED_RIDGE = Quantity("h200.measured_ridge", "the H200's measured matmul rate over its measured bandwidth "
                          "ceiling (the read-stream slope, lab.results.bandwidth)",
                          run=MATMUL_RUN, file="measurements.json", unit="FLOP/B")


def datasheet_peak(key: str) -> Fact:
    """A GPU's dense bf16 datasheet peak (``key`` of lab.results.hardware.DEVICES)."""
    return DATASHEET_PEAK.fact(device(key).bf16_flops, key)


def datasheet_ridge(key: str) -> Fact:
    """A GPU's datasheet ridge: datasheet peak over datasheet bandwidth (for comparing GPUs on paper)."""
    return DATASHEET_RIDGE.fact(device(key).ridge("bf16"), key)


def matmul_rate(root: Path | None = None) -> Fact:
    """The H200's measured matmul rate: cuBLAS's best on square bf16 products (not measured: a Fact that says so)."""
    found = load_measurement((root or data.DATA_DIR) / MATMUL_RUN)
    return MATMUL_RATE.fact(found.peak_flops if found else None)


def measured_ridge(root: Path | None = None) -> Fact:
    """The H200's measured ridge: its matmul rate over its bandwidth ceiling, both measured."""
    found = load_measurement((root or data.DATA_DIR) / MATMUL_RUN)
    gpu = bandwidth.read_ceiling("NVIDIA H200", root)
    value = found.peak_flops / gpu.bytes_per_s if found and gpu.measured else None
    return MEASURED_RIDGE.fact(value, detail=f"over the bandwidth ceiling of {gpu.source}")


def measured_roof(root: Path | None = None) -> Roof:
    """The H200's roof from its measured matmul rate and bandwidth ceiling: where H200 measurements are placed."""
    found = load_measurement((root or data.DATA_DIR) / MATMUL_RUN)
    if found is None:
        raise LabError(f"data/{MATMUL_RUN}/measurements.json: the H200's matmul rate is not measured")
    return Roof("H200 (measured)", found.peak_flops, bandwidth.ceiling("NVIDIA H200", root), "bf16")
