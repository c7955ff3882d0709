"""FlashAttention's backward pass in Triton: the gradients of softmax(Q Kᵀ·scale) V, with P recomputed.

The forward saves its output O and each query row's log-sum-exp L (natural log, fp32), never the
n_q × n_k matrix of probabilities P. The backward rebuilds P one tile at a time, P = exp(S·scale − L) with
S = Q Kᵀ, from Q, K and L, and with dO the gradient of the output computes

    dV = Pᵀ dO,    dP = dO Vᵀ,    dS = P ∘ (dP − D)  with  D = rowsum(dO ∘ O),    dQ = dS K·scale,    dK = dSᵀ Q·scale

(D is rowsum(P ∘ dP), the softmax's correction term, read off O instead of P). Three kernels:

* :func:`delta_kernel` -- the pre-pass: D for every query row (fp32).
* :func:`dkdv_kernel` -- one program per key/value tile: walks the query tiles of every query head of its
  KV head's group (grouped-query attention: dK and dV are sums over the group, accumulated inside the one
  program, so they are written once, with no atomics and no per-head copies to reduce afterwards),
  recomputes S and P, accumulates dV and dK in registers and writes them once.
* :func:`dq_kernel` -- one program per query tile: walks the key tiles, recomputes S, P and dP once more and
  accumulates dQ in registers. A second pass, not atomics (what FlashAttention 2 does: every key tile's
  program adds its dS K into an fp32 dQ in memory): in Triton an atomic add of a tile from the tensor-core
  layout goes through a layout conversion (triton-lang/triton#4717, open: a Triton attention backward at 16k
  tokens on an H100 ran at 128 TFLOP/s adding dQ by tl.atomic_add, 226 with the atomics in inline assembly,
  315 with none), a slowdown larger than the 7/5 the extra products cost; and a second pass is deterministic. Triton's fused-attention tutorial does the same (its dQ loop
  runs in the same launch, over other tiles). It costs two more matrix products per pair of tiles (S and dP
  again): seven where the backward needs five.

Causal masks align the queries to the end of the keys (query i sees keys 0 .. i + n_k − n_q), as the
forward does: tiles no row can see are skipped, the causal mask is applied only on the tiles the diagonal
crosses, and rows or keys past the end are zeros from masked loads. Scores are
kept in log2 units (log2 e folded into the scale) so that each exponential is one ``exp2``. Head dims 16
to 256 (powers of two), any lengths, fp16/bf16 (fp32 with exact fp32 products); without a GPU the kernels
run in Triton's interpreter, where bf16 products are wrong and therefore refused.

:class:`FlashAttention` wires the kernels into autograd with any forward that returns (O, L):
:func:`forward_with_lse` (the book's tuned forward) by default, :func:`reference_forward_with_lse` (torch)
where that forward is not available. It saves Q, K, V, O and L, nothing of size n_q × n_k.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import torch

from lab import LabError, env
from lab.measure.attention.reference import LOG2E as _LOG2E
from lab.measure.attention.reference import attention_flops, attention_torch, check_shapes, softmax_scale

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from lab.measure.attention.kernel_inputs import interpreting  # noqa: E402
from lab.measure.attention.tuned import tuned_forward  # noqa: E402

if env.use_triton_interpreter_without_gpu():
    from lab.measure import triton_interpreter

    triton_interpreter.apply()

#: log2(e) as a constexpr, so the kernels can read it.
LOG2E = tl.constexpr(_LOG2E)
#: The backward's matrix work counted as 2.5 times the forward's (five n_q x n_k x d products against two),
#: the count FlashAttention's papers and benchmarks use. Our kernels do seven (dq_kernel recomputes S and dP).
BACKWARD_FLOP_FACTOR = 2.5
#: The check of a backward: each gradient's largest error against the reference (fp32 autograd; fp64 on the
#: CPU) at most this share of the reference gradient's largest entry. bf16: rounding the outputs alone costs
#: about 2e-3 of it, and an emulation of these kernels' roundings in torch (P and dS to bf16 before their
#: products) gave 2.5e-3 to 5.5e-3 at 512 to 4096 tokens, d 64 and 128: 2e-2 leaves a margin of four,
#: while a wrong mask or a missed tile is off by the size of the gradient itself.
GRAD_TOLERANCE = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 2e-2}
#: Rows per program of the pre-pass.
DELTA_BLOCK = 64


# --- the pre-pass ---------------------------------------------------------------------------------

@triton.jit
def delta_kernel(Out, DO, Delta, n_q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    # D = rowsum(dO ∘ O) for one tile of query rows of one head; (batch, head) rows are contiguous
    start_m, bh = tl.program_id(0), tl.program_id(1)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    offsets = (bh * n_q + rows[:, None]) * HEAD_DIM + dims[None, :]
    o = tl.load(Out + offsets, mask=rows[:, None] < n_q, other=0.0).to(tl.float32)
    do = tl.load(DO + offsets, mask=rows[:, None] < n_q, other=0.0).to(tl.float32)
    tl.store(Delta + bh * n_q + rows, tl.sum(o * do, 1), mask=rows < n_q)


# --- dK and dV: key/value tiles outside, query tiles inside ---------------------------------------

@triton.jit
def dkdv_tiles(dk, dv, k, v, Q, DO, LSE, Delta, bh, keys, rows0, dims, lo, hi, n_q, diag, qk_scale,
               DIAGONAL: tl.constexpr, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, PRECISION: tl.constexpr):
    """Add query tiles [lo, hi) of query head ``bh`` to one key tile's dK (unscaled) and dV; DIAGONAL: tiles
    the causal diagonal crosses, masked."""
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + rows0
        offsets = (bh * n_q + rows[:, None]) * HEAD_DIM + dims[None, :]
        # rows past the end load as zeros, and a log-sum-exp of +inf makes their P zero
        q = tl.load(Q + offsets, mask=rows[:, None] < n_q, other=0.0)
        do = tl.load(DO + offsets, mask=rows[:, None] < n_q, other=0.0)
        lse = tl.load(LSE + bh * n_q + rows, mask=rows < n_q, other=float("inf"))
        delta = tl.load(Delta + bh * n_q + rows, mask=rows < n_q, other=0.0)
        # transposed (rows are keys), so that dV and dK come out of the products with no transpose
        st = tl.dot(k, tl.trans(q), input_precision=PRECISION)           # Sᵀ, BLOCK_N x BLOCK_M
        pt = tl.math.exp2(st * qk_scale - lse[None, :] * LOG2E)          # Pᵀ, rebuilt from the saved L
        if DIAGONAL:
            pt = tl.where(keys[:, None] <= rows[None, :] + diag, pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PRECISION)  # dV += Pᵀ dO
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)         # dPᵀ = V dOᵀ
        dst = pt * (dpt - delta[None, :])                                # dSᵀ = Pᵀ ∘ (dPᵀ − D)
        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=PRECISION)   # dK += dSᵀ Q
    return dk, dv


@triton.jit
def dkdv_kernel(Q, K, V, DO, LSE, Delta, DK, DV, scale, qk_scale, n_q, n_k, q_heads, group,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    # Program (b * kv_heads + kv_h, key tile): the key tile varies slowest, so the first programs launched
    # are the heaviest ones (under a causal mask the first keys are seen by the most queries).
    bkv, start_n = tl.program_id(0), tl.program_id(1) * BLOCK_N
    keys = start_n + tl.arange(0, BLOCK_N)
    rows0 = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    kv_offsets = (bkv * n_k + keys[:, None]) * HEAD_DIM + dims[None, :]
    k = tl.load(K + kv_offsets, mask=keys[:, None] < n_k, other=0.0)   # read once, used by every query tile
    v = tl.load(V + kv_offsets, mask=keys[:, None] < n_k, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    diag = n_k - n_q
    m_end = tl.cdiv(n_q, BLOCK_M) * BLOCK_M
    if CAUSAL:
        # query tiles before `lo` see none of these keys; from `diag_end` on every row sees all of them
        lo = tl.maximum(start_n - diag, 0) // BLOCK_M * BLOCK_M
        diag_end = tl.minimum(tl.cdiv(tl.maximum(start_n + BLOCK_N - 1 - diag, 0), BLOCK_M) * BLOCK_M, m_end)
    else:
        lo = 0
        diag_end = 0
    for g in range(group):  # the query heads of this KV head: dK and dV are sums over them
        bh = bkv * group + g
        dk, dv = dkdv_tiles(dk, dv, k, v, Q, DO, LSE, Delta, bh, keys, rows0, dims, lo, diag_end, n_q, diag,
                            qk_scale, True, BLOCK_M, HEAD_DIM, PRECISION)
        dk, dv = dkdv_tiles(dk, dv, k, v, Q, DO, LSE, Delta, bh, keys, rows0, dims, diag_end, m_end, n_q, diag,
                            qk_scale, False, BLOCK_M, HEAD_DIM, PRECISION)
    tl.store(DK + kv_offsets, (dk * scale).to(DK.dtype.element_ty), mask=keys[:, None] < n_k)
    tl.store(DV + kv_offsets, dv.to(DV.dtype.element_ty), mask=keys[:, None] < n_k)


# --- dQ: query tiles outside, key/value tiles inside ----------------------------------------------

@triton.jit
def dq_tiles(dq, q, do, lse, delta, K, V, bkv, rows, cols0, dims, lo, hi, n_k, diag, qk_scale,
             MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
             PRECISION: tl.constexpr):
    """Add key tiles [lo, hi) to one query tile's dQ (unscaled)."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + cols0
        offsets = (bkv * n_k + cols[:, None]) * HEAD_DIM + dims[None, :]
        if MASKED:
            k = tl.load(K + offsets, mask=cols[:, None] < n_k, other=0.0)
            v = tl.load(V + offsets, mask=cols[:, None] < n_k, other=0.0)
        else:
            k = tl.load(K + offsets)
            v = tl.load(V + offsets)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)             # S, BLOCK_M x BLOCK_N
        p = tl.math.exp2(s * qk_scale - lse[:, None] * LOG2E)             # P, rebuilt again
        if MASKED:
            visible = cols[None, :] < n_k
            if CAUSAL:
                visible = visible & (cols[None, :] <= rows[:, None] + diag)
            p = tl.where(visible, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)           # dP = dO Vᵀ
        ds = p * (dp - delta[:, None])                                    # dS = P ∘ (dP − D)
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)     # dQ += dS K
    return dq


@triton.jit
def dq_kernel(Q, K, V, DO, LSE, Delta, DQ, scale, qk_scale, n_q, n_k, q_heads, group,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    # Program (b * q_heads + h, query tile), the heaviest query tiles (the last, under a causal mask) first
    bh, tile = tl.program_id(0), tl.program_id(1)
    if CAUSAL:
        tile = tl.cdiv(n_q, BLOCK_M) - 1 - tile
    bkv = bh // group                                                     # = b * kv_heads + h // group
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    cols0 = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    offsets = (bh * n_q + rows[:, None]) * HEAD_DIM + dims[None, :]
    q = tl.load(Q + offsets, mask=rows[:, None] < n_q, other=0.0)
    do = tl.load(DO + offsets, mask=rows[:, None] < n_q, other=0.0)
    lse = tl.load(LSE + bh * n_q + rows, mask=rows < n_q, other=float("inf"))
    delta = tl.load(Delta + bh * n_q + rows, mask=rows < n_q, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    diag = n_k - n_q
    if CAUSAL:  # keys every row of the tile sees, in whole tiles; then the tiles across the diagonal
        full_end = tl.minimum(tile * BLOCK_M + diag + 1, n_k) // BLOCK_N * BLOCK_N
        hi = tl.minimum((tile + 1) * BLOCK_M + diag, n_k)
    else:
        full_end = n_k // BLOCK_N * BLOCK_N
        hi = n_k
    dq = dq_tiles(dq, q, do, lse, delta, K, V, bkv, rows, cols0, dims, 0, full_end, n_k, diag, qk_scale,
                  False, CAUSAL, BLOCK_N, HEAD_DIM, PRECISION)
    dq = dq_tiles(dq, q, do, lse, delta, K, V, bkv, rows, cols0, dims, full_end, hi, n_k, diag, qk_scale,
                  True, CAUSAL, BLOCK_N, HEAD_DIM, PRECISION)
    tl.store(DQ + offsets, (dq * scale).to(DQ.dtype.element_ty), mask=rows[:, None] < n_q)


# --- launches -------------------------------------------------------------------------------------

#: The autotuning spaces, small on purpose (each config is compiled once and timed once per shape key).
#: The key/value-outer kernel keeps two BLOCK_N x d fp32 accumulators (dK, dV) in registers, so it takes
#: wide key tiles and short query tiles; the query-outer kernel keeps one (dQ), the other way round. Every
#: config compiles for sm_90a at d = 64 and 128 with no spill stores or loads in ptxas's report (Triton 3.6;
#: tests/test_backward.py holds them to it; Nsight Compute still counts a few spilling instructions in the
#: dK/dV kernel at 16k, data/h200/backward-counters). FlashAttention 3's 64-query x 128-key tile for dK/dV spills
#: 180 bytes per thread at d = 128 here and is left out (``dkdv_config=`` still runs it).
DKDV_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
                for bm, bn, w, s in [(32, 128, 8, 2), (16, 128, 8, 3), (32, 64, 8, 2), (16, 64, 4, 3)]]
DQ_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
              for bm, bn, w, s in [(128, 64, 8, 2), (128, 64, 8, 3), (128, 32, 8, 3), (64, 64, 4, 2),
                                   (64, 128, 8, 2)]]
_KEY = ["n_q", "n_k", "group", "HEAD_DIM", "CAUSAL", "PRECISION"]
_dkdv_autotuned = triton.autotune(configs=DKDV_CONFIGS, key=_KEY)(dkdv_kernel)
_dq_autotuned = triton.autotune(configs=DQ_CONFIGS, key=_KEY)(dq_kernel)
#: The interpreter's launch (autotuning there would time nothing real).
INTERPRETER_LAUNCH = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
_CHOSEN: dict[tuple, dict] = {}   # (n_q, n_k, group, d, causal, precision) -> {"dkdv": ..., "dq": ...}


def _check(q, k, v, o, lse, do, causal: bool):
    sizes = check_shapes(q.shape, k.shape, v.shape, causal)
    batch, q_heads, _, n_q, _, d = sizes
    if tuple(o.shape) != tuple(q.shape) or tuple(do.shape) != tuple(q.shape):
        raise LabError(f"o and do must have q's shape {tuple(q.shape)}; got {tuple(o.shape)} and {tuple(do.shape)}")
    if tuple(lse.shape) != (batch, q_heads, n_q):
        raise LabError(f"lse must be (batch, q_heads, n_q) = {(batch, q_heads, n_q)}; got {tuple(lse.shape)}")
    dtypes = {t.dtype for t in (q, k, v, o, do)}
    if len(dtypes) != 1 or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise LabError(f"q, k, v, o and do must share one dtype among float16, bfloat16, float32; got "
                       f"{', '.join(str(t.dtype) for t in (q, k, v, o, do))}")
    if d < 16 or d > 256 or d & (d - 1):
        raise LabError(f"head dim must be a power of two from 16 to 256, got {d}")
    if max(t.numel() for t in (q, k)) >= 2**31:
        raise LabError(f"tensors of 2^31 elements or more need 64-bit offsets, which these kernels do not take; "
                       f"got q {tuple(q.shape)}, k {tuple(k.shape)}")
    if interpreting() and q.dtype == torch.bfloat16:
        raise LabError("Triton's interpreter computes bfloat16 products wrongly: use float16 or float32 on the CPU")
    if not interpreting() and not q.is_cuda:
        raise LabError("tensors must be on the GPU (or run without a GPU, where Triton's interpreter is used)")
    return sizes


def _launch(config: dict) -> dict:
    if not all(isinstance(config.get(key), int) and config[key] >= 16 and not config[key] & (config[key] - 1)
               for key in ("BLOCK_M", "BLOCK_N")):
        raise LabError(f"a launch needs BLOCK_M and BLOCK_N, powers of two of at least 16; got {config}")
    return {"BLOCK_M": config["BLOCK_M"], "BLOCK_N": config["BLOCK_N"], "num_warps": config.get("num_warps", 4),
            "num_stages": config.get("num_stages", 1 if interpreting() else 2)}


def attention_backward(q, k, v, o, lse, do, causal: bool = False, scale: float | None = None,
                       dkdv_config: dict | None = None, dq_config: dict | None = None):
    """(dq, dk, dv) of attention from the forward's output ``o`` and row log-sum-exp ``lse`` (natural log,
    [batch, q_heads, n_q]) and the output's gradient ``do``; q [batch, q_heads, n_q, d], k and v
    [batch, kv_heads, n_k, d]. ``dkdv_config`` and ``dq_config`` (BLOCK_M, BLOCK_N, num_warps, num_stages)
    fix the two kernels' launches; without them a GPU autotunes over :data:`DKDV_CONFIGS` and
    :data:`DQ_CONFIGS` once per shape, and the interpreter takes :data:`INTERPRETER_LAUNCH`."""
    batch, q_heads, kv_heads, n_q, n_k, d = _check(q, k, v, o, lse, do, causal)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.to(torch.float32).contiguous()
    scale = softmax_scale(d, scale)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"   # fp32 inputs: exact fp32 products
    group = q_heads // kv_heads
    delta = torch.empty(batch, q_heads, n_q, dtype=torch.float32, device=q.device)
    block = 16 if interpreting() else DELTA_BLOCK
    delta_kernel[(triton.cdiv(n_q, block), batch * q_heads)](o, do, delta, n_q, HEAD_DIM=d, BLOCK_M=block)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    args = (q, k, v, do, lse, delta)
    sizes = (scale, scale * LOG2E.value, n_q, n_k, q_heads, group)
    flags = {"HEAD_DIM": d, "CAUSAL": causal, "PRECISION": precision}
    kv_grid = lambda meta: (batch * kv_heads, triton.cdiv(n_k, meta["BLOCK_N"]))  # noqa: E731
    q_grid = lambda meta: (batch * q_heads, triton.cdiv(n_q, meta["BLOCK_M"]))    # noqa: E731
    if interpreting():
        dkdv_config, dq_config = dkdv_config or INTERPRETER_LAUNCH, dq_config or INTERPRETER_LAUNCH
    if dkdv_config is None:
        _dkdv_autotuned[kv_grid](*args, dk, dv, *sizes, **flags)
        dkdv_config = _as_launch(_dkdv_autotuned.best_config)
    else:
        dkdv_config = _launch(dkdv_config)
        dkdv_kernel[kv_grid(dkdv_config)](*args, dk, dv, *sizes, **flags, **dkdv_config)
    if dq_config is None:
        _dq_autotuned[q_grid](*args, dq, *sizes, **flags)
        dq_config = _as_launch(_dq_autotuned.best_config)
    else:
        dq_config = _launch(dq_config)
        dq_kernel[q_grid(dq_config)](*args, dq, *sizes, **flags, **dq_config)
    _CHOSEN[(n_q, n_k, group, d, causal, precision)] = {"dkdv": dkdv_config, "dq": dq_config}
    return dq, dk, dv


def _as_launch(config) -> dict:
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}


def chosen_launch(n_q: int, n_k: int, group: int, head_dim: int, causal: bool, fp32: bool = False) -> str:
    """The launches the last backward of this shape ran, as 'dkdv BLOCK_M=64 ...; dq BLOCK_M=128 ...' ('' before)."""
    chosen = _CHOSEN.get((n_q, n_k, group, head_dim, causal, "ieee" if fp32 else "tf32"))
    if chosen is None:
        return ""
    return "; ".join(f"{name} " + " ".join(f"{key}={value}" for key, value in launch.items())
                     for name, launch in chosen.items())


def gradient_errors(grads, reference) -> tuple[list[float], float]:
    """([largest absolute error of dq, dk, dv], the worst of them as a share of its reference's largest entry)."""
    errors = [(g.double() - r.double()).abs().max().item() for g, r in zip(grads, reference, strict=True)]
    shares = [e / max(r.abs().max().item(), 1e-30) for e, r in zip(errors, reference, strict=True)]
    return errors, max(shares)


def compile_for_hopper(kernel: str, config: dict, head_dim: int = 128, causal: bool = True) -> dict:
    """Compile ``"dkdv"`` or ``"dq"`` (bf16) with one launch for sm_90a without a GPU, and read what ptxas
    says of it: {"registers": per thread, "spill_bytes": stored + loaded, "shared_bytes", "serialised":
    ptxas serialised the matrix products (advisory C7510-C7515)}. Needs Triton's compiler, not its
    interpreter: a process started with ``TRITON_INTERPRET=0``."""
    if interpreting():
        raise LabError("compile_for_hopper needs Triton's compiler, but its interpreter is on (TRITON_INTERPRET=1, "
                       "which lab sets without a GPU): run it in a process started with TRITON_INTERPRET=0")
    kernels = {"dkdv": dkdv_kernel, "dq": dq_kernel}
    if kernel not in kernels:
        raise LabError(f"kernel must be one of {', '.join(kernels)}; got {kernel!r}")
    fn, launch = kernels[kernel], _launch(config)
    constexprs = {"HEAD_DIM": head_dim, "BLOCK_M": launch["BLOCK_M"], "BLOCK_N": launch["BLOCK_N"], "CAUSAL": causal,
                  "PRECISION": "tf32"}
    pointers = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "DO": "*bf16", "LSE": "*fp32", "Delta": "*fp32",
                "DK": "*bf16", "DV": "*bf16", "DQ": "*bf16"}
    signature = {name: pointers.get(name) or ("constexpr" if name in constexprs else
                                              "fp32" if name in ("scale", "qk_scale") else "i32")
                 for name in fn.arg_names}
    aligned = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names) if name in pointers}
    compiled = triton.compile(ASTSource(fn, signature, constexprs=constexprs, attrs=aligned),
                              target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": launch["num_warps"], "num_stages": launch["num_stages"]})
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "k.ptx").write_text(compiled.asm["ptx"])
        report = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", "k.ptx", "-o", "k.cubin"], cwd=folder,
                                capture_output=True, text=True, check=True).stderr
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    return {"registers": int(re.search(r"Used (\d+) registers", report).group(1)),
            "spill_bytes": int(spills.group(1)) + int(spills.group(2)), "shared_bytes": compiled.metadata.shared,
            "serialised": bool(re.search(r"C751\d", report))}


def backward_flops(batch: int, q_heads: int, n_q: int, n_k: int, head_dim: int, causal: bool) -> float:
    """The backward's matrix FLOPs as every candidate is credited: 2.5 x the forward's, causal halved as
    :func:`lab.measure.attention.reference.attention_flops` counts it."""
    return BACKWARD_FLOP_FACTOR * attention_flops(batch, q_heads, n_q, n_k, head_dim, causal)


# --- autograd -------------------------------------------------------------------------------------

def forward_with_lse(q, k, v, causal: bool):
    """The book's tuned Triton forward, returning (o, lse): the forward :class:`FlashAttention` takes by default."""
    return tuned_forward(q, k, v, causal, return_lse=True)


def reference_forward_with_lse(q, k, v, causal: bool):
    """(o, lse) from torch (the naive reference, fp32 math): a forward for :class:`FlashAttention` anywhere."""
    out, lse = attention_torch(q, k, v, causal, return_lse=True)
    return out, lse.float()


class FlashAttention(torch.autograd.Function):
    """softmax(Q Kᵀ·scale) V whose backward recomputes P from the saved log-sum-exp (the kernels above).

    ``apply(q, k, v, causal, forward)``: ``forward(q, k, v, causal) -> (o, lse)`` computes the output. Only Q,
    K, V, O and the log-sum-exp are saved for the backward: O(n·d) memory, where storing P would take n_q·n_k.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal, forward):
        o, lse = forward(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, o, lse, do, ctx.causal)
        return dq, dk, dv, None, None


def attention(q, k, v, causal: bool = False, forward=None):
    """Attention that autograd can differentiate with the kernels above (``loss.backward()`` works).
    ``forward`` returns (o, lse); default :func:`forward_with_lse`."""
    return FlashAttention.apply(q, k, v, causal, forward or forward_with_lse)
